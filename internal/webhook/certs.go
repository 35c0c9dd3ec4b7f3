package webhook

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the certificate Secret. tls.crt, tls.key and ca.crt are the keys
// cert-manager writes too, so a Secret from either can be mounted the same way.
const (
	KeyCACert  = "ca.crt"
	KeyCAKey   = "ca.key"
	KeyTLSCert = corev1.TLSCertKey
	KeyTLSKey  = corev1.TLSPrivateKeyKey
)

// clockSkew backdates NotBefore so that an API server whose clock runs a
// little behind ours accepts a certificate issued a moment ago.
const clockSkew = time.Hour

// keyPair is a parsed certificate with its private key and PEM encodings.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// newCA creates a self-signed CA that may sign leaf certificates only.
func newCA(commonName string, now time.Time, validity time.Duration) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return createCert(tmpl, nil)
}

// newServingCert creates a server certificate for dnsNames signed by ca. It
// never outlives the CA: a chain with an expired root does not verify.
func newServingCert(ca *keyPair, dnsNames []string, now time.Time, validity time.Duration) (*keyPair, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("a serving certificate needs at least one DNS name")
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: dnsNames[0]},
		DNSNames:              append([]string(nil), dnsNames...),
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	return createCert(tmpl, ca)
}

// createCert signs tmpl with a fresh ECDSA P-256 key, by parent or (nil) by itself.
func createCert(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// parseCertificates decodes every CERTIFICATE block of a PEM bundle.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// parseKeyPair reads the first certificate of certPEM and the private key
// that must belong to it.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	certs, err := parseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	key, err := parsePrivateKey(block)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(certs[0].PublicKey) {
		return nil, errors.New("the private key does not belong to the certificate")
	}
	return &keyPair{
		cert:    certs[0],
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certs[0].Raw}),
		keyPEM:  keyPEM,
	}, nil
}

// parsePrivateKey accepts the encodings found in TLS Secrets: PKCS#8, SEC 1 and PKCS#1.
func parsePrivateKey(block *pem.Block) (crypto.Signer, error) {
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unsupported private key type %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key %T", key)
	}
	return signer, nil
}

// rotationDue reports whether less than a third of the certificate's
// validity remains (or it is not valid yet, or no longer).
func rotationDue(c *x509.Certificate, now time.Time) bool {
	return now.Before(c.NotBefore) || !now.Before(rotationTime(c))
}

// rotationTime is when a third of the certificate's validity remains.
func rotationTime(c *x509.Certificate) time.Time {
	return c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / 3)
}

// rotation says which certificates of the Secret must be issued again, and why.
type rotation struct {
	CA      bool
	Serving bool
	Reason  string
}

func (r rotation) needed() bool { return r.CA || r.Serving }

// planRotation inspects the Secret's data. A new CA always brings a new
// serving certificate; a serving certificate is reissued when it is
// unreadable, not signed by the current CA, missing one of dnsNames, or has
// less than a third of its validity left.
func planRotation(data map[string][]byte, dnsNames []string, now time.Time) rotation {
	ca, err := parseKeyPair(data[KeyCACert], data[KeyCAKey])
	switch {
	case err != nil:
		return rotation{CA: true, Serving: true, Reason: fmt.Sprintf("CA unreadable: %v", err)}
	case !ca.cert.IsCA:
		return rotation{CA: true, Serving: true, Reason: "the CA certificate is not a CA"}
	case rotationDue(ca.cert, now):
		return rotation{CA: true, Serving: true, Reason: fmt.Sprintf("the CA expires at %s", ca.cert.NotAfter.UTC().Format(time.RFC3339))}
	}

	leaf, err := parseKeyPair(data[KeyTLSCert], data[KeyTLSKey])
	if err != nil {
		return rotation{Serving: true, Reason: fmt.Sprintf("serving certificate unreadable: %v", err)}
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := leaf.cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return rotation{Serving: true, Reason: fmt.Sprintf("serving certificate does not verify against the CA: %v", err)}
	}
	for _, name := range dnsNames {
		if err := leaf.cert.VerifyHostname(name); err != nil {
			return rotation{Serving: true, Reason: fmt.Sprintf("serving certificate does not cover %s", name)}
		}
	}
	if rotationDue(leaf.cert, now) {
		return rotation{Serving: true, Reason: fmt.Sprintf("the serving certificate expires at %s", leaf.cert.NotAfter.UTC().Format(time.RFC3339))}
	}
	return rotation{}
}

// issueParams say what to issue.
type issueParams struct {
	caCommonName string
	dnsNames     []string
	caValidity   time.Duration
	certValidity time.Duration
}

// issue returns the Secret data after the planned rotation. A replaced CA
// stays in ca.crt after the new one until it expires, so that a replica
// still serving a certificate the old CA signed keeps being trusted while
// the replicas pick up the new Secret one by one.
func issue(old map[string][]byte, plan rotation, p issueParams, now time.Time) (map[string][]byte, error) {
	var (
		ca       *keyPair
		previous []*x509.Certificate
		err      error
	)
	oldBundle, _ := parseCertificates(old[KeyCACert])
	if plan.CA {
		if ca, err = newCA(p.caCommonName, now, p.caValidity); err != nil {
			return nil, err
		}
		previous = oldBundle
	} else {
		if ca, err = parseKeyPair(old[KeyCACert], old[KeyCAKey]); err != nil {
			return nil, fmt.Errorf("reading the CA: %w", err)
		}
		if len(oldBundle) > 1 {
			previous = oldBundle[1:]
		}
	}

	bundle := bytes.Clone(ca.certPEM)
	for _, c := range previous {
		if c.IsCA && now.Before(c.NotAfter) && !c.Equal(ca.cert) {
			bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
	}

	out := map[string][]byte{
		KeyCACert:  bundle,
		KeyCAKey:   ca.keyPEM,
		KeyTLSCert: old[KeyTLSCert],
		KeyTLSKey:  old[KeyTLSKey],
	}
	if plan.CA || plan.Serving {
		leaf, err := newServingCert(ca, p.dnsNames, now, p.certValidity)
		if err != nil {
			return nil, err
		}
		out[KeyTLSCert], out[KeyTLSKey] = leaf.certPEM, leaf.keyPEM
	}
	return out, nil
}

// nextCheck is when the Secret's certificates next need attention: the
// earlier of the CA's and the serving certificate's rotation times. It is
// the zero time when the data cannot be read (check again at once).
func nextCheck(data map[string][]byte) time.Time {
	ca, err := parseKeyPair(data[KeyCACert], data[KeyCAKey])
	if err != nil {
		return time.Time{}
	}
	leaf, err := parseKeyPair(data[KeyTLSCert], data[KeyTLSKey])
	if err != nil {
		return time.Time{}
	}
	t := rotationTime(ca.cert)
	if lt := rotationTime(leaf.cert); lt.Before(t) {
		t = lt
	}
	return t
}
