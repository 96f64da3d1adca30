package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func init() {
	register(func() *cobra.Command {
		return newGroup("cluster credentials [--out DIR] HOST...", "a NATS key for each cluster host (docs/CLUSTER.md)",
			"Commands for a cluster of hosts sharing sessions (docs/CLUSTER.md).", clusterCredentials())
	})
}

// clusterCredentials is "ahpd cluster credentials".
func clusterCredentials() *cobra.Command {
	var out string
	c := newCommand("credentials [--out DIR] HOST...", "make a NATS key for each host of a cluster", nil, func(fs *pflag.FlagSet) {
		fs.StringVar(&out, "out", ".", "write the seeds into `DIR`")
	}, func(_ context.Context, hosts []string, io cliIO) int {
		return writeCredentials(io, out, hosts)
	})
	c.Long = `credentials makes a NATS key for each host of a cluster: its seed in
DIR/HOST.nk (mode 0600; give it to that host alone as nats.nkeySeedFile),
and prints the nats.node.hosts block, the public keys, that every node's
config lists. A seed file that exists is left as it is and refused.`
	return c
}

func writeCredentials(io cliIO, out string, hosts []string) int {
	const name = "cluster credentials"
	if len(hosts) == 0 {
		return cmdUsageError(io, name, errors.New("name the hosts"))
	}
	for _, id := range hosts {
		if !hostIDOK(id) {
			fmt.Fprintf(io.stderr, "ahpd cluster credentials: %q is not a host id (1 to 64 letters, digits, '-' or '_')\n", limitText(id, 100))
			return exitUsage
		}
	}
	pubs := make([]string, len(hosts))
	for i, id := range hosts {
		pub, err := writeHostSeed(filepath.Join(out, id+".nk"))
		if err != nil {
			fmt.Fprintln(io.stderr, "ahpd cluster credentials:", err)
			return exitFailed
		}
		pubs[i] = pub
	}
	fmt.Fprintln(io.stdout, "nats:\n  node:\n    hosts:")
	for i, id := range hosts {
		fmt.Fprintf(io.stdout, "      %s: %s\n", id, pubs[i])
	}
	return exitOK
}

// writeHostSeed makes a user nkey, writes its seed to path (a new file,
// 0600, whole or not at all) and returns its public key.
func writeHostSeed(path string) (string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", err
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("%s exists: a host's key is made once (remove it to make another, and update every node's nats.node.hosts)", path)
	}
	if err != nil {
		return "", err
	}
	_, err = f.Write(append(seed, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return pub, nil
}
