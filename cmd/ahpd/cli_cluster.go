package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

const clusterUsage = `Usage:
  ahpd cluster credentials [--out DIR] HOST...

Makes a NATS key for each host of a cluster: its seed in DIR/HOST.nk
(mode 0600; give it to that host alone as nats.nkeySeedFile), and prints
the nats.node.hosts block, the public keys, that every node's config
lists. A seed file that exists is left as it is and refused.
`

// clusterCommand is "ahpd cluster".
func clusterCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, clusterUsage)
		return 0
	}
	if args[0] != "credentials" {
		fmt.Fprintf(stderr, "ahpd cluster: no command %q\n%s", limitText(args[0], 40), clusterUsage)
		return 2
	}
	fs := flag.NewFlagSet("ahpd cluster credentials", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", ".", "")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() == 0 {
		fmt.Fprint(stderr, "ahpd cluster credentials: name the hosts\n", clusterUsage)
		return 2
	}
	hosts := fs.Args()
	for _, id := range hosts {
		if !hostIDOK(id) {
			fmt.Fprintf(stderr, "ahpd cluster credentials: %q is not a host id (1 to 64 letters, digits, '-' or '_')\n", limitText(id, 100))
			return 2
		}
	}
	pubs := make([]string, len(hosts))
	for i, id := range hosts {
		pub, err := writeHostSeed(filepath.Join(*out, id+".nk"))
		if err != nil {
			fmt.Fprintln(stderr, "ahpd cluster credentials:", err)
			return 1
		}
		pubs[i] = pub
	}
	fmt.Fprintln(stdout, "nats:\n  node:\n    hosts:")
	for i, id := range hosts {
		fmt.Fprintf(stdout, "      %s: %s\n", id, pubs[i])
	}
	return 0
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
