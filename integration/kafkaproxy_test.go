package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaProxy is a Kafka-protocol-aware TLS proxy in front of one broker listener, for
// TestSecuredSpuriousCommitAuthError: it terminates TLS with a certificate of its own CA
// (ca), opens TLS to the broker, passes every frame through (SASL handshakes and
// re-authentications included), rewrites the broker addresses in Metadata and
// FindCoordinator responses to itself, and counts re-authentications (a second
// SaslHandshake on one connection). Once armed, the first OffsetCommit after a
// re-authentication is sent to the broker for the group name + spoilSuffix, which the
// principal may not read: the real broker answers it with GROUP_AUTHORIZATION_FAILED and
// commits nothing, the response keeps its place in the connection's order.
type kafkaProxy struct {
	addr, ca string
	upstream string
	upTLS    *tls.Config
	ln       net.Listener

	armed    atomic.Bool
	reauths  atomic.Int64
	spoiled  atomic.Int64 // OffsetCommits sent to the wrong group
	commits  atomic.Int64 // OffsetCommits seen
	spoilAt  atomic.Int64 // unix nanos of the spoiled commit
	pendReau atomic.Bool  // a re-authentication happened since the last spoiled commit
}

const spoilSuffix = "-proxy-spoiled"

// startKafkaProxy listens on loopback in front of upstream (a TLS listener signed by
// upstreamCA).
func startKafkaProxy(t *testing.T, dir, upstream, upstreamCA string) *kafkaProxy {
	t.Helper()
	caFile, cert := proxyPKI(t, dir)
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(upstreamCA)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("read the broker CA %s: %v", upstreamCA, err)
	}
	host, _, _ := net.SplitHostPort(upstream)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	p := &kafkaProxy{addr: ln.Addr().String(), ca: caFile, upstream: upstream, ln: ln,
		upTLS: &tls.Config{RootCAs: pool, ServerName: host}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// inflight is one request the proxy forwarded, for reading its response.
type inflight struct {
	key, version int16
	flexible     bool
}

func (p *kafkaProxy) serve(client net.Conn) {
	defer client.Close()
	up, err := tls.Dial("tcp", p.upstream, p.upTLS)
	if err != nil {
		return
	}
	defer up.Close()
	queue := make(chan inflight, 1024)
	done := make(chan struct{})
	go func() { // broker → client
		defer close(done)
		defer client.Close()
		for {
			frame, err := readFrame(up)
			if err != nil {
				return
			}
			in := <-queue
			if frame, err = p.response(in, frame); err != nil {
				return
			}
			if _, err := client.Write(frame); err != nil {
				return
			}
		}
	}()
	handshakes := 0
	for { // client → broker
		frame, err := readFrame(client)
		if err != nil {
			break
		}
		in, hdrLen, err := requestHeader(frame)
		if err != nil {
			break
		}
		switch in.key {
		case 17: // SaslHandshake: a second one on this connection is a re-authentication
			if handshakes++; handshakes > 1 {
				p.reauths.Add(1)
				p.pendReau.Store(true)
			}
		case 8: // OffsetCommit
			p.commits.Add(1)
			if p.armed.Load() && p.pendReau.Load() && p.spoiled.Load() == 0 {
				if frame, err = spoilCommit(frame, hdrLen, in.version); err != nil {
					return
				}
				p.pendReau.Store(false)
				p.spoiled.Add(1)
				p.spoilAt.Store(time.Now().UnixNano())
			}
		}
		if in.key != 0 || !noAcks(frame, hdrLen, in.version) { // acks=0 produce has no response
			queue <- in
		}
		if _, err := up.Write(frame); err != nil {
			break
		}
	}
	up.Close()
	<-done
}

// readFrame reads one size-prefixed Kafka frame, the size included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 256<<20 {
		return nil, errors.New("frame too large")
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// requestHeader parses a request frame's header: key, version, whether it is flexible,
// and the header's length (size prefix included).
func requestHeader(frame []byte) (inflight, int, error) {
	if len(frame) < 14 {
		return inflight{}, 0, errors.New("short request")
	}
	in := inflight{key: int16(binary.BigEndian.Uint16(frame[4:])), version: int16(binary.BigEndian.Uint16(frame[6:]))}
	req := kmsg.RequestForKey(in.key)
	if req == nil {
		return inflight{}, 0, fmt.Errorf("unknown request key %d", in.key)
	}
	req.SetVersion(in.version)
	in.flexible = req.IsFlexible()
	off := 12                                                    // after size, key, version, correlation id
	if l := int16(binary.BigEndian.Uint16(frame[off:])); l > 0 { // client id, -1: null
		off += int(l)
	}
	off += 2
	if in.flexible {
		var err error
		if off, err = skipTags(frame, off); err != nil {
			return inflight{}, 0, err
		}
	}
	if off > len(frame) {
		return inflight{}, 0, errors.New("short request header")
	}
	return in, off, nil
}

// skipTags skips a tagged-field section (KIP-482) at off and returns the offset after it.
func skipTags(b []byte, off int) (int, error) {
	uv := func() (uint64, error) {
		if off >= len(b) {
			return 0, errors.New("short tagged fields")
		}
		v, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, errors.New("bad uvarint")
		}
		off += n
		return v, nil
	}
	count, err := uv()
	for ; err == nil && count > 0; count-- {
		if _, err = uv(); err == nil { // tag
			var size uint64
			if size, err = uv(); err == nil {
				off += int(size)
			}
		}
	}
	return off, err
}

// noAcks tells an acks=0 Produce request (no response).
func noAcks(frame []byte, hdrLen int, version int16) bool {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	return req.ReadFrom(frame[hdrLen:]) == nil && req.Acks == 0
}

// spoilCommit rewrites an OffsetCommit request for the group name + spoilSuffix.
func spoilCommit(frame []byte, hdrLen int, version int16) ([]byte, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	if err := req.ReadFrom(frame[hdrLen:]); err != nil {
		return nil, fmt.Errorf("read OffsetCommit: %w", err)
	}
	req.Group += spoilSuffix
	out := append([]byte{}, frame[:hdrLen]...)
	out = req.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// response rewrites Metadata and FindCoordinator responses to point at the proxy.
func (p *kafkaProxy) response(in inflight, frame []byte) ([]byte, error) {
	if in.key != 3 && in.key != 10 {
		return frame, nil
	}
	hdrLen := 8      // size, correlation id
	if in.flexible { // response header v1 (ApiVersions, key 18, is never rewritten here)
		var err error
		if hdrLen, err = skipTags(frame, hdrLen); err != nil {
			return nil, err
		}
	}
	host, portStr, _ := net.SplitHostPort(p.addr)
	port, _ := strconv.Atoi(portStr)
	var resp kmsg.Response
	switch in.key {
	case 3:
		r := kmsg.NewPtrMetadataResponse()
		r.Version = in.version
		if err := r.ReadFrom(frame[hdrLen:]); err != nil {
			return nil, err
		}
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = host, int32(port)
		}
		resp = r
	case 10:
		r := kmsg.NewPtrFindCoordinatorResponse()
		r.Version = in.version
		if err := r.ReadFrom(frame[hdrLen:]); err != nil {
			return nil, err
		}
		if r.Host != "" {
			r.Host, r.Port = host, int32(port)
		}
		for i := range r.Coordinators {
			if r.Coordinators[i].Host != "" {
				r.Coordinators[i].Host, r.Coordinators[i].Port = host, int32(port)
			}
		}
		resp = r
	}
	out := append([]byte{}, frame[:hdrLen]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// proxyPKI writes a CA of the proxy's own (the file ingestd's kafka.tls.ca_file names)
// and returns it with a server certificate for 127.0.0.1 signed by it.
func proxyPKI(t *testing.T, dir string) (string, tls.Certificate) {
	t.Helper()
	caDER, der, k := testPKI(t, "proxy-ca", "proxy", x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1"))
	ca := filepath.Join(dir, "proxy-ca.crt")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	return ca, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
}

// testPKI makes a fresh P-256 CA named caName and a leaf certificate named leafName for
// usage (and the IP addresses ips) signed by it, both valid from an hour ago to an hour
// from now; it returns the DER of both and the leaf's key.
func testPKI(t *testing.T, caName, leafName string, usage x509.ExtKeyUsage, ips ...net.IP) (caDER, leafDER []byte, leafKey *ecdsa.PrivateKey) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: caName}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: leafName}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: ips}
	leafDER, err = x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return caDER, leafDER, leafKey
}
