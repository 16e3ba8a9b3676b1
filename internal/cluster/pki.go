package cluster

import (
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
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the cluster's certificates last: a cluster on a
// development machine lives for days; a year leaves room.
const certValidity = 365 * 24 * time.Hour

// Identity is a certificate to issue from the cluster's CA.
type Identity struct {
	// File is the base name: File.crt and File.key in the PKI directory.
	File string
	// CommonName and Organizations are the Kubernetes user and groups.
	CommonName    string
	Organizations []string
	// Server certificates carry these names and addresses.
	DNSNames []string
	IPs      []net.IP
	Server   bool
}

// Identities are the certificates a one-node cluster needs.
func (c Config) Identities() []Identity {
	node := c.NodeIP()
	return []Identity{
		{File: "apiserver", CommonName: "kube-apiserver", Server: true,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), node, c.ServiceIP()}},
		{File: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organizations: []string{"system:masters"}},
		{File: "admin", CommonName: "nearnative-admin", Organizations: []string{"system:masters"}},
		{File: "controller-manager", CommonName: "system:kube-controller-manager"},
		{File: "scheduler", CommonName: "system:kube-scheduler"},
		{File: "kube-proxy", CommonName: "system:kube-proxy", Organizations: []string{"system:node-proxier"}},
		{File: "kubelet-client", CommonName: "system:node:" + c.NodeName, Organizations: []string{"system:nodes"}},
		// etcd serves its clients and its peer port with client-certificate
		// TLS: any local user could otherwise write cluster state, which is
		// root on the node. One certificate serves both (server and client
		// use); the apiserver has its own client certificate.
		{File: "etcd", CommonName: "etcd", Server: true,
			DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
		{File: "apiserver-etcd-client", CommonName: "kube-apiserver-etcd-client"},
		{File: "kubelet", CommonName: c.NodeName, Server: true,
			DNSNames: []string{c.NodeName, "localhost"}, IPs: []net.IP{node, net.IPv4(127, 0, 0, 1)}},
	}
}

// PKI is a CA and the certificates it issued, as files in Dir.
type PKI struct {
	Dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
}

// NewPKI makes a CA in dir, the certificates of ids and a service-account
// signing key (sa.key, sa.pub).
func NewPKI(dir string, ids []Identity) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster: CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "nearnative-cluster-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("cluster: CA certificate: %w", err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &PKI{Dir: dir, caCert: ca, caKey: key}
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	if err := writeKey(p.path("ca.key"), key); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if err := p.Issue(id); err != nil {
			return nil, err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster: service-account key: %w", err)
	}
	if err := writeKey(p.path("sa.key"), sa); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return nil, fmt.Errorf("cluster: service-account key: %w", err)
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *PKI) path(name string) string { return filepath.Join(p.Dir, name) }

// Issue writes id.File.crt and .key signed by the CA.
func (p *PKI) Issue(id Identity) error {
	if id.File == "" || id.CommonName == "" {
		return errors.New("cluster: a certificate needs a file name and a common name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("cluster: key of %s: %w", id.File, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: id.CommonName, Organization: id.Organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     id.DNSNames,
		IPAddresses:  id.IPs,
	}
	if id.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return fmt.Errorf("cluster: certificate of %s: %w", id.File, err)
	}
	if err := writePEM(p.path(id.File+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path(id.File+".key"), key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Errorf("cluster: reading random bytes: %w", err))
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("cluster: encoding %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("cluster: writing %s: %w", path, err)
	}
	return nil
}
