package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/ahpd/ahpd/cluster"
)

// Cluster hosts with credentials of their own (docs/CLUSTER.md,
// "Credentials"): each host has an nkey, made by `ahpd cluster
// credentials`, whose seed only it holds and whose public key every node
// of the cluster lists under nats.node.hosts. A node lets in those keys
// alone, each with its host's permissions, so that a process holding no
// host's seed reads nothing and sends nothing; with TLS (nats.tls, the
// same CA for every node and host) each client and route also shows a
// certificate the CA signed.

// tlsTimeout is how long a node waits for a TLS handshake, in seconds.
const tlsTimeout = 2

// checkNATSTLS refuses TLS settings that cannot work: a certificate
// without its key or the other way round, and, for a node (which checks
// the certificates of its clients and routes), either without the CA.
func checkNATSTLS(t natsTLSConfig, node bool) error {
	switch {
	case (t.Cert == "") != (t.Key == ""):
		return errors.New("nats.tls: give a certificate and its key (--nats-tls-cert, --nats-tls-key) together")
	case node && t.Cert != "" && t.CA == "":
		return errors.New("nats.tls: a node checks its clients' and routes' certificates: give the CA too (--nats-tls-ca)")
	case node && t.CA != "" && t.Cert == "":
		return errors.New("nats.tls: a node serves TLS with a certificate of its own: give --nats-tls-cert and --nats-tls-key")
	}
	for _, f := range []string{t.CA, t.Cert, t.Key} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("nats.tls: %w", err)
		}
	}
	return nil
}

// nodeTLS is the node's TLS: its certificate, and every peer's checked
// against the CA; nil without a certificate.
func nodeTLS(t natsTLSConfig) (*tls.Config, error) {
	if t.Cert == "" {
		return nil, nil
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.Cert, KeyFile: t.Key, CaFile: t.CA, Verify: true, Timeout: tlsTimeout})
	if err != nil {
		return nil, fmt.Errorf("nats.tls: %w", err)
	}
	// A node dials its routes too: the peer it dials is checked against
	// the same CA as those that dial it.
	tc.RootCAs = tc.ClientCAs
	return tc, nil
}

// checkHostKeys refuses a hosts list the node cannot work with: a key that
// is not a public user nkey, a host id the cluster would refuse, this
// host missing from it or holding another key's seed.
func checkHostKeys(cfg *config) error {
	n := cfg.NATS.Node
	for id, pub := range n.Hosts {
		if !hostIDOK(id) {
			return fmt.Errorf("nats.node.hosts: %q is not a host id (1 to 64 letters, digits, '-' or '_')", limitText(id, 100))
		}
		if !nkeys.IsValidPublicUserKey(pub) {
			return fmt.Errorf("nats.node.hosts.%s: %q is not a public user key (U…, as `ahpd cluster credentials` prints it)", id, limitText(pub, 100))
		}
	}
	id := cfg.Cluster.HostID
	want, ok := n.Hosts[id]
	if id == "" || !ok {
		return fmt.Errorf("nats.node.hosts names no key for this host (--host-id %q): add it, or give the host id its key was made for", id)
	}
	if cfg.NATS.NKeySeedFile == "" {
		return errors.New("nats.node.hosts: this host needs its own key to reach its node: set nats.nkeySeedFile to the seed `ahpd cluster credentials` wrote for it")
	}
	pub, err := seedPublicKey(cfg.NATS.NKeySeedFile)
	if err != nil {
		return err
	}
	if pub != want {
		return fmt.Errorf("nats.nkeySeedFile holds the key %s, but nats.node.hosts.%s is %s: the seed of another host?", pub, id, want)
	}
	if cfg.NATS.User == "" && cfg.NATS.Token == "" && cfg.NATS.TLS.Cert == "" && n.Cluster != "" {
		return errors.New("nats.node.hosts: the routes between nodes need a user and password, a token, or TLS (nats.tls) to let each other in")
	}
	return nil
}

// seedPublicKey reads an nkey seed file and returns its public key.
func seedPublicKey(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("nats.nkeySeedFile: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return "", fmt.Errorf("nats.nkeySeedFile %s: not an nkey seed: %w", path, err)
	}
	defer kp.Wipe()
	return kp.PublicKey()
}

// hostUsers are the node's users: each host's key, with its host's
// permissions.
func hostUsers(hosts map[string]string) []*server.NkeyUser {
	ids := make([]string, 0, len(hosts))
	for id := range hosts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*server.NkeyUser, 0, len(ids))
	for _, id := range ids {
		out = append(out, &server.NkeyUser{Nkey: hosts[id], Permissions: hostPermissions(id, ids)})
	}
	return out
}

// hostPermissions is what host id may not publish: another host's record
// in the registry, and the API requests that would delete a stream or
// wipe the registry's, by which one host could pass for another or make
// the others forget what they hold.
func hostPermissions(id string, ids []string) *server.Permissions {
	hostsBucket := cluster.DefaultPrefix + "_hosts"
	var deny []string
	for _, other := range ids {
		if other != id {
			deny = append(deny, "$KV."+hostsBucket+"."+other)
		}
	}
	deny = append(deny, "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.KV_"+hostsBucket, "$JS.API.STREAM.MSG.DELETE.KV_"+hostsBucket)
	return &server.Permissions{Publish: &server.SubjectPermission{Deny: deny}}
}

// hostIDOK reports whether id is a host id the cluster takes.
func hostIDOK(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
