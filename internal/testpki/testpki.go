// Package testpki makes a throw-away certificate authority for tests: a CA, a server
// certificate for 127.0.0.1 and localhost, and a client certificate, as PEM files in a
// test's temporary directory. It is imported by tests only.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is one CA with its server and client certificates, valid for an hour either side of
// now. The paths are PEM files in Dir; keys are unencrypted PKCS#8.
type PKI struct {
	Dir                   string
	CA                    string // the CA certificate
	ServerCert, ServerKey string // CN=broker, IP SAN 127.0.0.1, DNS SAN localhost
	ClientCert, ClientKey string // CN=ingestd, client authentication
	CAPool                *x509.CertPool
	Server                tls.Certificate // ServerCert and ServerKey, loaded
}

// New writes a fresh PKI into t.TempDir(); any failure fails the test.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ingestd-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: dir, CAPool: x509.NewCertPool()}
	p.CAPool.AddCert(caCert)
	write := func(name, typ string, der []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	p.CA = write("ca.crt", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, eku x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string, tls.Certificate) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{eku}, IPAddresses: ips, DNSNames: dns}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		c := write(name+".crt", "CERTIFICATE", der)
		kf := write(name+".key", "PRIVATE KEY", kder)
		kp, err := tls.LoadX509KeyPair(c, kf)
		if err != nil {
			t.Fatal(err)
		}
		return c, kf, kp
	}
	p.ServerCert, p.ServerKey, p.Server = leaf("broker", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	p.ClientCert, p.ClientKey, _ = leaf("ingestd", 3, x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

// SecretFile writes value and a newline to Dir/name (WriteSecret) and returns its path.
func (p *PKI) SecretFile(t testing.TB, name, value string) string {
	t.Helper()
	return WriteSecret(t, p.Dir, name, value)
}

// WriteSecret writes value and a newline to dir/name (mode 0600), as a password or token
// file is usually written, and returns its path; a failed write fails t.
func WriteSecret(t testing.TB, dir, name, value string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
