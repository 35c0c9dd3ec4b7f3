//go:build linux

package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// certLifetime covers a cluster kept running for a while (make cluster-up)
// as well as any test run; the CA is made anew for every cluster.
const certLifetime = 90 * 24 * time.Hour

// identity is one client of the API server: the certificate's CN is the user
// name and O the groups, as the API server's x509 authenticator reads them.
type identity struct {
	file   string // base name of the .crt/.key pair and the kubeconfig
	user   string
	groups []string
}

// The identities the components use are the ones the API server's bootstrap
// RBAC policy already knows, so no extra bindings are needed: the kubelet is
// authorised by the Node authorizer, the others by their system: roles.
func clusterIdentities(nodeName string) []identity {
	return []identity{
		{file: "admin", user: "e2e-admin", groups: []string{"system:masters"}},
		{file: "controller-manager", user: "system:kube-controller-manager"},
		{file: "scheduler", user: "system:kube-scheduler"},
		{file: "kube-proxy", user: "system:kube-proxy"},
		{file: "kubelet", user: "system:node:" + nodeName, groups: []string{"system:nodes"}},
	}
}

// writePKI creates the cluster's certificates and keys under dir and one
// kubeconfig per identity, pointing at server:
//
//	ca.crt                      the only CA: serving and client certificates
//	apiserver.crt               serving, SANs the node IP, 127.0.0.1, the
//	                            kubernetes Service IP and its DNS names
//	apiserver-kubelet-client.crt the API server's client certificate for the
//	                            kubelet API (logs, exec)
//	kubelet-serving.crt         the kubelet's serving certificate, so the API
//	                            server verifies the kubelet (no self-signed)
//	front-proxy-ca.crt          requestheader CA, and front-proxy-client.crt
//	                            the API server's client for aggregated APIs
//	sa.key, sa.pub              service account token signing key pair
//	<identity>.crt, <identity>.kubeconfig
func writePKI(dir, server, nodeName string, nodeIP, serviceIP net.IP) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now().Add(-time.Minute) // tolerate a little clock skew
	caKey, err := newKey()
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "contextrouter-e2e-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caCert, err := sign(caTmpl, caTmpl, caKey, caKey)
	if err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	if err := writePair(dir, "ca", caCert, caKey); err != nil {
		return err
	}
	issue := func(name string, tmpl *x509.Certificate) error {
		key, err := newKey()
		if err != nil {
			return err
		}
		tmpl.NotBefore, tmpl.NotAfter = now, now.Add(certLifetime)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		cert, err := sign(tmpl, caCert, key, caKey)
		if err != nil {
			return fmt.Errorf("certificate %s: %w", name, err)
		}
		return writePair(dir, name, cert, key)
	}

	if err := issue("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{nodeIP, net.IPv4(127, 0, 0, 1), serviceIP},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}); err != nil {
		return err
	}
	if err := issue("kubelet-serving", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{nodeIP, net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{nodeName, "localhost"},
	}); err != nil {
		return err
	}
	clients := append(clusterIdentities(nodeName),
		identity{file: "apiserver-kubelet-client", user: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}})
	for _, id := range clients {
		if err := issue(id.file, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return err
		}
	}
	for _, id := range clusterIdentities(nodeName) {
		if err := writeKubeconfig(filepath.Join(dir, id.file+".kubeconfig"), server, dir, id); err != nil {
			return err
		}
	}

	// A CA of its own for the front proxy (requestheader authentication):
	// the API server trusts any certificate of it to assert user names, so
	// it must not be the cluster CA. Configuring it also keeps the
	// components from logging, every few seconds, that it is missing.
	proxyCAKey, err := newKey()
	if err != nil {
		return err
	}
	proxyCATmpl := *caTmpl
	proxyCATmpl.Subject = pkix.Name{CommonName: "contextrouter-e2e-front-proxy-ca"}
	proxyCA, err := sign(&proxyCATmpl, &proxyCATmpl, proxyCAKey, proxyCAKey)
	if err != nil {
		return fmt.Errorf("front proxy CA: %w", err)
	}
	if err := writePair(dir, "front-proxy-ca", proxyCA, proxyCAKey); err != nil {
		return err
	}
	proxyKey, err := newKey()
	if err != nil {
		return err
	}
	proxyCert, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		NotBefore:   now,
		NotAfter:    now.Add(certLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, proxyCA, proxyKey, proxyCAKey)
	if err != nil {
		return fmt.Errorf("front proxy client: %w", err)
	}
	if err := writePair(dir, "front-proxy-client", proxyCert, proxyKey); err != nil {
		return err
	}

	saKey, err := newKey()
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "EC PRIVATE KEY", der, 0o600); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

// ECDSA P-256 keys: every component accepts them, and they take
// microseconds to make where RSA takes a noticeable part of the bring-up.
func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func writePair(dir, name string, cert *x509.Certificate, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", cert.Raw, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// kubeconfig is the part of client-go's file format the components read.
type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	CurrentContext string         `json:"current-context"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
}

type namedCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server string `json:"server"`
		CA     string `json:"certificate-authority"`
	} `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User struct {
		Cert string `json:"client-certificate"`
		Key  string `json:"client-key"`
	} `json:"user"`
}

type namedContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster string `json:"cluster"`
		User    string `json:"user"`
	} `json:"context"`
}

// writeKubeconfig refers to the certificate files by path: the run
// directory keeps them, and a reader of a failed run sees which file each
// component used.
func writeKubeconfig(path, server, dir string, id identity) error {
	var c namedCluster
	c.Name = "e2e"
	c.Cluster.Server = server
	c.Cluster.CA = filepath.Join(dir, "ca.crt")
	var u namedUser
	u.Name = id.user
	u.User.Cert = filepath.Join(dir, id.file+".crt")
	u.User.Key = filepath.Join(dir, id.file+".key")
	var x namedContext
	x.Name = "e2e"
	x.Context.Cluster, x.Context.User = c.Name, u.Name
	b, err := yaml.Marshal(kubeconfig{
		APIVersion: "v1", Kind: "Config", CurrentContext: x.Name,
		Clusters: []namedCluster{c}, Users: []namedUser{u}, Contexts: []namedContext{x},
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
