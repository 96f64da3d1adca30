// Command ahpd is the Agent Host Protocol daemon: it hosts AI coding-agent
// sessions for VS Code and any other AHP client.
//
//	ahpd [serve] [flags]
//	ahpd run|ls|show|send|cancel|status|suspend|resume|rm ...
//	ahpd completion bash|zsh|fish|powershell
//
// With no flags it serves on ws://127.0.0.1:9187, asks clients for the
// connection token it keeps in its state directory, and stores sessions
// there. See docs/HOST.md. The other commands talk to a running ahpd, for
// scripts and CI; see docs/CLI.md.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is ahpd with its arguments, streams and a context that ends on
// SIGINT or SIGTERM. It returns the exit status. The commands are cobra's
// (cli_root.go).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdin, stdout, stderr)
}

const usage = `ahpd hosts AI coding-agent sessions over the Agent Host Protocol.

Usage:
  ahpd [serve] [flags]           serve AHP (the commands below talk to it)
  ahpd COMMAND [arguments]       the commands below; ahpd help COMMAND tells more

Flags (each also as AHPD_<NAME>, e.g. AHPD_STATE_DIR; a flag wins over it, it over the config file):
  --listen ADDR                  address to serve on (default 127.0.0.1:9187; port 0 picks one)
  --connection-token T           the token clients must present
  --connection-token-file F      read the token from F
  --without-connection-token     ask no token (only on loopback addresses you trust)
  --stdio                        serve one connection on stdin/stdout
  --state-dir DIR                where sessions and the token are kept
                                 (default $XDG_STATE_HOME/ahpd, else ~/.local/state/ahpd)
  --sessions file|memory         keep sessions across restarts, or not (default file)
  --config FILE                  YAML config file; flags win over it
  --log-level debug|info|warn|error  (default info)
  --log-format text|json         one logfmt or one JSON object a line, on stderr (default text)
  --users FILE                   the users directory: people connect with their own tokens
  --worktrees-root DIR           make worktree sessions' trees under DIR (default: beside each repository)
  --allowed-roots DIR,...        sessions work only in these directories (all but admins, with --users)
  --shutdown-grace DURATION      how long running turns may go on at shutdown (default 10s)
  --sleep-after-minutes M        let a quiet session's agents go after M minutes (default 30; 0 never)
  --session-residency-limit N    keep at most N sessions resident (default 10; 0 no limit)
  --metrics-listen ADDR          serve /metrics on ADDR without a token (it is always served
                                 beside AHP, behind the token)
  --pprof                        serve net/http/pprof under /debug/pprof/ on the metrics listener
  --nats URL,...                 keep the journal in this NATS cluster (default: NATS embedded,
                                 its store under the state directory, no listener)
  --nats-listen ADDR             run a NATS node in the daemon, taking clients on ADDR (with
                                 the config's nats user and password, or token), instead of --nats
  --nats-cluster ADDR            take the other nodes' routes on ADDR
  --nats-routes URL,...          the other nodes' --nats-cluster addresses (nats://host:port)
  --nats-tls-cert F, --nats-tls-key F, --nats-tls-ca F
                                 TLS to NATS with this host's certificate and key, checked
                                 against the CA; a node in the daemon asks the same of every
                                 client and route (docs/CLUSTER.md)
  --host-id ID                   share sessions with the other hosts on the same NATS as host ID
                                 (docs/CLUSTER.md)
  --labels K=V,...               this host's labels in the registry (repos=/srv/repos,... : the
                                 folders it reaches; default every folder)
  --lease-ttl DURATION           how long a dead host's sessions stay its own (default 15s)
  --push-checkpoints REMOTE      push each session's checkpoints (and its worktree's branch) to
                                 REMOTE of its repository as they are recorded, and fetch them
                                 from it when waking a session that lacks them (a remote's
                                 name, such as origin, or a URL)

A client presents the token as ?tkn=T or as "Authorization: Bearer T".
`
