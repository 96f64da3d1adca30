package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/ahpd/ahpd/host/hosttest"
	"github.com/ahpd/ahpd/protocol"
)

// testPKI writes a CA and one certificate it signed for 127.0.0.1, good
// for serving and for showing as a client, and returns their files.
func testPKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ahpd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	nodeTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ahpd node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, caTmpl, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(nodeKey)
	return write("ca.pem", "CERTIFICATE", caDER), write("node.pem", "CERTIFICATE", nodeDER), write("node-key.pem", "EC PRIVATE KEY", keyDER)
}

// clusterCommand runs `ahpd cluster args...` and returns its exit status.
func clusterCommand(args []string, stdout, stderr io.Writer) int {
	return run(context.Background(), append([]string{"cluster"}, args...), strings.NewReader(""), stdout, stderr)
}

var hostKeyLine = regexp.MustCompile(`(?m)^      ([a-z]+): (U[A-Z0-9]+)$`)

// TestClusterCredentials: `ahpd cluster credentials` writes a seed for
// each host, private to its owner, prints the public keys as the config's
// hosts block, and refuses to write over a seed or to take a bad host id.
func TestClusterCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := clusterCommand([]string{"credentials", "--out", dir, "a", "b"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	keys := hostKeyLine.FindAllStringSubmatch(out.String(), -1)
	if len(keys) != 2 || !strings.HasPrefix(out.String(), "nats:\n  node:\n    hosts:\n") {
		t.Fatalf("printed %q", out.String())
	}
	for _, k := range keys {
		seedFile := filepath.Join(dir, k[1]+".nk")
		fi, err := os.Stat(seedFile)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", seedFile, fi, err)
		}
		if pub, err := seedPublicKey(seedFile); err != nil || pub != k[2] || !nkeys.IsValidPublicUserKey(pub) {
			t.Errorf("%s's seed is of %s (%v), printed %s", k[1], pub, err, k[2])
		}
	}
	errb.Reset()
	if code := clusterCommand([]string{"credentials", "--out", dir, "a"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "exists") {
		t.Errorf("a second key for a: exit %d %q", code, errb.String())
	}
	if code := clusterCommand([]string{"credentials", "--out", dir, "a b"}, &out, &errb); code != 2 {
		t.Errorf("a bad host id: exit %d", code)
	}
}

// TestOwnNATSHostsWithKeysAndTLS: three daemons whose nodes let in each
// host by its own key, over TLS with certificates the cluster's CA
// signed, share sessions as with a password; a NATS client without a
// certificate, with none of the hosts' keys, or with another key is not
// let in; and a host's key cannot write another host's record.
func TestOwnNATSHostsWithKeysAndTLS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testPKI(t, dir)
	var out, errb bytes.Buffer
	if code := clusterCommand([]string{"credentials", "--out", dir, "a", "b", "c"}, &out, &errb); code != 0 {
		t.Fatalf("ahpd cluster credentials: %d %s", code, errb.String())
	}
	hosts := out.String()[len("nats:\n  node:\n"):]
	tlsBlock := fmt.Sprintf("  tls: {ca: %s, cert: %s, key: %s}\n", ca, cert, key)
	envs, procs, clients := startOwnNATSHostsWith(t, func(id string) string {
		return "nats:\n  nkeySeedFile: " + filepath.Join(dir, id+".nk") + "\n" + tlsBlock + "  node:\n" + hosts + "cluster: {replicas: 3}\n"
	})

	ca1 := connect(t, procs["a"], envs["a"].token(t), "ca")
	session := "ahp-session:/keyed"
	ca1.MustCall("createSession", map[string]any{"channel": session, "provider": "script", "workingDirectories": []string{"file://" + envs["a"].work}})
	ca1.Subscribe(session)
	chat := protocol.DefaultChatURI(session)
	ca1.Subscribe(chat)
	send(t, ca1, chat, "t1", "say one")
	cb := connect(t, procs["b"], envs["b"].token(t), "cb")
	if st, on := statusOf(t, cb, session); st != "active" || on != "a" {
		t.Fatalf("status through b = %s on %q, want active on a", st, on)
	}

	url := "nats://" + clients["a"]
	stranger, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	strangerSeed, _ := stranger.Seed()
	strangerFile := filepath.Join(dir, "stranger.nk")
	if err := os.WriteFile(strangerFile, strangerSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	bSeed, err := nats.NkeyOptionFromSeed(filepath.Join(dir, "b.nk"))
	if err != nil {
		t.Fatal(err)
	}
	strangerKey, err := nats.NkeyOptionFromSeed(strangerFile)
	if err != nil {
		t.Fatal(err)
	}
	withTLS := []nats.Option{nats.RootCAs(ca), nats.ClientCert(cert, key)}
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"no credentials", nil},
		{"a host's key, no certificate", []nats.Option{bSeed, nats.RootCAs(ca)}},
		{"a certificate, no key", withTLS},
		{"a certificate and a key of nobody's", append([]nats.Option{strangerKey}, withTLS...)},
		{"the routes' password", append([]nats.Option{nats.UserInfo("ahpd", "node-test-pass")}, withTLS...)},
	} {
		opts := append([]nats.Option{nats.Timeout(5 * time.Second), nats.NoReconnect()}, tc.opts...)
		if nc, err := nats.Connect(url, opts...); err == nil {
			nc.Close()
			t.Errorf("%s: let in", tc.name)
		}
	}

	// b's own key is let in, and refused another's record.
	violations := make(chan error, 4)
	nc, err := nats.Connect(url, append([]nats.Option{bSeed, nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err })}, withTLS...)...)
	if err != nil {
		t.Fatalf("b's key: %v", err)
	}
	defer nc.Close()
	if err := nc.Publish("$KV.ahpd_hosts.a", []byte(`{"id":"a","forged":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("b writing a's record: %v, want a permissions violation", err)
		}
	case <-time.After(hosttest.Timeout):
		t.Error("b wrote a's record: no permissions violation")
	}
}
