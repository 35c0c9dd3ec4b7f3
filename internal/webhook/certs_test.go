package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	testDNSNames = []string{"svc.ns.svc", "svc.ns.svc.cluster.local", "svc.ns", "svc"}
	testParams   = issueParams{caCommonName: "svc-ca", dnsNames: testDNSNames, caValidity: 300 * 24 * time.Hour, certValidity: 90 * 24 * time.Hour}
	t0           = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

func mustIssue(t *testing.T, old map[string][]byte, plan rotation, p issueParams, now time.Time) map[string][]byte {
	t.Helper()
	data, err := issue(old, plan, p, now)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fresh is a complete Secret issued at t0.
func fresh(t *testing.T) map[string][]byte {
	return mustIssue(t, nil, rotation{CA: true, Serving: true}, testParams, t0)
}

func mustParse(t *testing.T, certPEM, keyPEM []byte) *keyPair {
	t.Helper()
	kp, err := parseKeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func TestIssuedCertificates(t *testing.T) {
	data := fresh(t)
	for _, k := range []string{KeyCACert, KeyCAKey, KeyTLSCert, KeyTLSKey} {
		if len(data[k]) == 0 {
			t.Fatalf("%s is empty", k)
		}
	}
	ca := mustParse(t, data[KeyCACert], data[KeyCAKey])
	leaf := mustParse(t, data[KeyTLSCert], data[KeyTLSKey])

	if !ca.cert.IsCA || !ca.cert.MaxPathLenZero || ca.cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA %v, MaxPathLenZero %v, key usage %b", ca.cert.IsCA, ca.cert.MaxPathLenZero, ca.cert.KeyUsage)
	}
	if ca.cert.Subject.CommonName != "svc-ca" {
		t.Errorf("CA common name %q", ca.cert.Subject.CommonName)
	}
	if got, want := ca.cert.NotAfter, t0.Add(testParams.caValidity).Truncate(time.Second); !got.Equal(want) {
		t.Errorf("CA NotAfter %s, want %s", got, want)
	}
	if leaf.cert.IsCA {
		t.Error("the serving certificate must not be a CA")
	}
	if !slices.Equal(leaf.cert.DNSNames, testDNSNames) {
		t.Errorf("SANs %q, want %q", leaf.cert.DNSNames, testDNSNames)
	}
	if leaf.cert.Subject.CommonName != "svc.ns.svc" {
		t.Errorf("serving common name %q", leaf.cert.Subject.CommonName)
	}
	if !slices.Equal(leaf.cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("serving ext key usage %v", leaf.cert.ExtKeyUsage)
	}
	if got, want := leaf.cert.NotAfter, t0.Add(testParams.certValidity).Truncate(time.Second); !got.Equal(want) {
		t.Errorf("serving NotAfter %s, want %s", got, want)
	}
	if !leaf.cert.NotBefore.Before(t0) {
		t.Errorf("NotBefore %s should be backdated before %s for clock skew", leaf.cert.NotBefore, t0)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(data[KeyCACert])
	for _, name := range testDNSNames {
		if _, err := leaf.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: t0}); err != nil {
			t.Errorf("chain does not verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.ns.svc", CurrentTime: t0}); err == nil {
		t.Error("the certificate verifies for a name it should not cover")
	}

	// What the webhook server loads.
	if _, err := tls.X509KeyPair(data[KeyTLSCert], data[KeyTLSKey]); err != nil {
		t.Errorf("tls.X509KeyPair: %v", err)
	}
}

func TestServingCertNeverOutlivesItsCA(t *testing.T) {
	p := testParams
	p.caValidity = 30 * 24 * time.Hour
	data := mustIssue(t, nil, rotation{CA: true, Serving: true}, p, t0)
	ca := mustParse(t, data[KeyCACert], data[KeyCAKey])
	leaf := mustParse(t, data[KeyTLSCert], data[KeyTLSKey])
	if !leaf.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Errorf("serving NotAfter %s, want capped at the CA's %s", leaf.cert.NotAfter, ca.cert.NotAfter)
	}
}

func TestRotationDue(t *testing.T) {
	// Valid for 90 days from t0: a third remains from day 60 on.
	c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(90 * 24 * time.Hour)}
	day := 24 * time.Hour
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"just issued", t0, false},
		{"half way", t0.Add(45 * day), false},
		{"one second before two thirds", t0.Add(60*day - time.Second), false},
		{"two thirds elapsed", t0.Add(60 * day), true},
		{"a day before expiry", t0.Add(89 * day), true},
		{"expired", t0.Add(91 * day), true},
		{"not valid yet", t0.Add(-time.Minute), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rotationDue(c, tt.now); got != tt.want {
				t.Errorf("rotationDue at %s = %v, want %v", tt.now, got, tt.want)
			}
		})
	}
	if got, want := rotationTime(c), t0.Add(60*day); !got.Equal(want) {
		t.Errorf("rotationTime %s, want %s", got, want)
	}
}

func TestPlanRotation(t *testing.T) {
	day := 24 * time.Hour
	base := fresh(t)
	with := func(mutate func(map[string][]byte)) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range base {
			d[k] = v
		}
		mutate(d)
		return d
	}
	other := fresh(t) // another CA and serving certificate
	narrow := mustIssue(t, base, rotation{Serving: true}, issueParams{
		caCommonName: "svc-ca", dnsNames: []string{"svc.ns.svc"}, caValidity: testParams.caValidity, certValidity: testParams.certValidity,
	}, t0)

	tests := []struct {
		name       string
		data       map[string][]byte
		now        time.Time
		want       rotation
		wantReason string
	}{
		{"valid", base, t0.Add(day), rotation{}, ""},
		{"empty secret", map[string][]byte{}, t0, rotation{CA: true, Serving: true}, "CA unreadable"},
		{"CA key of another CA", with(func(d map[string][]byte) { d[KeyCAKey] = other[KeyCAKey] }), t0,
			rotation{CA: true, Serving: true}, "does not belong"},
		{"CA certificate is a leaf", with(func(d map[string][]byte) { d[KeyCACert], d[KeyCAKey] = d[KeyTLSCert], d[KeyTLSKey] }), t0,
			rotation{CA: true, Serving: true}, "not a CA"},
		{"CA two thirds through (day 200 of 300)", base, t0.Add(200 * day), rotation{CA: true, Serving: true}, "the CA expires at"},
		{"serving two thirds through (day 60 of 90)", base, t0.Add(60 * day), rotation{Serving: true}, "the serving certificate expires at"},
		{"serving key missing", with(func(d map[string][]byte) { delete(d, KeyTLSKey) }), t0,
			rotation{Serving: true}, "serving certificate unreadable"},
		{"serving key of another certificate", with(func(d map[string][]byte) { d[KeyTLSKey] = other[KeyTLSKey] }), t0,
			rotation{Serving: true}, "does not belong"},
		{"serving signed by another CA", with(func(d map[string][]byte) { d[KeyTLSCert], d[KeyTLSKey] = other[KeyTLSCert], other[KeyTLSKey] }), t0,
			rotation{Serving: true}, "does not verify against the CA"},
		{"serving misses a DNS name", narrow, t0, rotation{Serving: true}, "does not cover svc.ns.svc.cluster.local"},
		{"serving expired", base, t0.Add(95 * day), rotation{Serving: true}, "certificate has expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planRotation(tt.data, testDNSNames, tt.now)
			if got.CA != tt.want.CA || got.Serving != tt.want.Serving {
				t.Fatalf("plan %+v, want CA=%v Serving=%v", got, tt.want.CA, tt.want.Serving)
			}
			if !strings.Contains(got.Reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", got.Reason, tt.wantReason)
			}
		})
	}
}

func TestIssueServingOnlyKeepsTheCA(t *testing.T) {
	old := fresh(t)
	now := t0.Add(61 * 24 * time.Hour)
	data := mustIssue(t, old, rotation{Serving: true}, testParams, now)
	if string(data[KeyCACert]) != string(old[KeyCACert]) || string(data[KeyCAKey]) != string(old[KeyCAKey]) {
		t.Error("a serving rotation must keep the CA (the caBundle stays valid)")
	}
	if string(data[KeyTLSCert]) == string(old[KeyTLSCert]) {
		t.Error("the serving certificate was not reissued")
	}
	leaf := mustParse(t, data[KeyTLSCert], data[KeyTLSKey])
	if got, want := leaf.cert.NotAfter, now.Add(testParams.certValidity).Truncate(time.Second); !got.Equal(want) {
		t.Errorf("new NotAfter %s, want %s", got, want)
	}
	if p := planRotation(data, testDNSNames, now); p.needed() {
		t.Errorf("after rotation the plan is %+v, want nothing", p)
	}
}

func TestIssueNewCAKeepsTheOldOneTrusted(t *testing.T) {
	day := 24 * time.Hour
	old := fresh(t)
	oldCA := mustParse(t, old[KeyCACert], old[KeyCAKey])
	oldLeaf := mustParse(t, old[KeyTLSCert], old[KeyTLSKey])

	now := t0.Add(210 * day) // past two thirds of the CA's 300 days
	data := mustIssue(t, old, planRotation(old, testDNSNames, now), testParams, now)
	bundle, err := parseCertificates(data[KeyCACert])
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 {
		t.Fatalf("bundle holds %d certificates, want the new CA and the old one", len(bundle))
	}
	newCA := mustParse(t, data[KeyCACert], data[KeyCAKey])
	if newCA.cert.Equal(oldCA.cert) || !bundle[0].Equal(newCA.cert) || !bundle[1].Equal(oldCA.cert) {
		t.Error("want the new CA first, then the old one")
	}
	newLeaf := mustParse(t, data[KeyTLSCert], data[KeyTLSKey])
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(data[KeyCACert])
	// A replica that has not picked up the new Secret serves the old leaf:
	// the bundle must still trust it. (It expired at day 90 in this
	// compressed timeline, so check at a time both are valid.)
	if _, err := oldLeaf.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "svc.ns.svc", CurrentTime: t0.Add(day)}); err != nil {
		t.Errorf("old leaf not trusted by the new bundle: %v", err)
	}
	if _, err := newLeaf.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "svc.ns.svc", CurrentTime: now}); err != nil {
		t.Errorf("new leaf not trusted by the new bundle: %v", err)
	}

	// A later serving rotation, after the old CA expired, drops it.
	later := t0.Add(301 * day)
	data2 := mustIssue(t, data, rotation{Serving: true}, testParams, later)
	if b, _ := parseCertificates(data2[KeyCACert]); len(b) != 1 || !b[0].Equal(newCA.cert) {
		t.Errorf("after the old CA expired the bundle holds %d certificates, want only the new CA", len(b))
	}
}

func TestNextCheck(t *testing.T) {
	data := fresh(t)
	leaf := mustParse(t, data[KeyTLSCert], data[KeyTLSKey])
	if got, want := nextCheck(data), rotationTime(leaf.cert); !got.Equal(want) {
		t.Errorf("nextCheck %s, want the serving certificate's rotation time %s", got, want)
	}
	if got := nextCheck(map[string][]byte{}); !got.IsZero() {
		t.Errorf("unreadable data: nextCheck %s, want zero (check at once)", got)
	}
}

func TestParseKeyPairEncodings(t *testing.T) {
	ca, err := newCA("x", t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := ca.key.(*ecdsa.PrivateKey)
	sec1, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherEC, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherDER, _ := x509.MarshalPKCS8PrivateKey(otherEC)

	tests := []struct {
		name    string
		keyPEM  []byte
		wantErr string
	}{
		{"PKCS#8", ca.keyPEM, ""},
		{"SEC 1", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), ""},
		{"PKCS#1 of another key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), "does not belong"},
		{"another EC key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: otherDER}), "does not belong"},
		{"not PEM", []byte("garbage"), "no PEM private key"},
		{"unknown block", pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: []byte{1}}), "unsupported private key type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseKeyPair(ca.certPEM, tt.keyPEM)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("want ok, got %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("want error containing %q, got %v", tt.wantErr, err)
			}
		})
	}
}
