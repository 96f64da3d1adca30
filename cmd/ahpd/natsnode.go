package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A NATS node in the daemon (docs/CLUSTER.md): with --nats-listen, the
// daemon runs a NATS server that listens, routes to the nodes at
// --nats-routes on --nats-cluster, and keeps its JetStream store under the
// state directory; the daemon's own journal and cluster membership then
// use it. Three daemons so started form a NATS cluster of their own, with
// nothing else to install.

// natsNodeConfig is the daemon's NATS node.
type natsNodeConfig struct {
	// Listen is where the node takes clients (other daemons may use it);
	// "" runs no node.
	Listen string `yaml:"listen"`
	// Cluster is where it takes the other nodes' routes; "" for a node
	// of its own.
	Cluster string `yaml:"cluster"`
	// Routes are the other nodes' cluster addresses (nats://host:port).
	Routes []string `yaml:"routes"`
	// Name names the NATS cluster (default "ahpd"); every node of it has
	// the same.
	Name string `yaml:"name"`
	// Hosts are the public NATS keys of the cluster's hosts, by host id
	// (`ahpd cluster credentials` makes them): given, the node lets in
	// only those keys, each with the permissions of its host
	// (natscreds.go), and no user, password or token of clients.
	Hosts map[string]string `yaml:"hosts"`
}

// natsReadyTimeout bounds the wait for the node's JetStream: a node of a
// cluster waits for enough of the others to start.
const natsReadyTimeout = 2 * time.Minute

// checkNATSNode refuses node settings that cannot work.
func checkNATSNode(cfg *config) error {
	n := &cfg.NATS.Node
	if n.Listen == "" {
		if n.Cluster != "" || len(n.Routes) > 0 {
			return errors.New("--nats-cluster and --nats-routes need --nats-listen")
		}
		return nil
	}
	if cfg.NATS.URL != "" {
		return errors.New("--nats-listen runs a NATS node in the daemon: give it or --nats, not both")
	}
	if cfg.NATS.CredsFile != "" {
		return errors.New("config file: nats: a credentials file is for an existing NATS; a node in the daemon takes a user and password, or a token")
	}
	if err := checkNATSTLS(cfg.NATS.TLS, true); err != nil {
		return err
	}
	if len(n.Hosts) > 0 {
		if err := checkHostKeys(cfg); err != nil {
			return err
		}
	} else if cfg.NATS.NKeySeedFile != "" {
		return errors.New("nats.nkeySeedFile: the node lets hosts in by their keys only with nats.node.hosts: list every host's public key there")
	} else if cfg.NATS.User == "" && cfg.NATS.Token == "" {
		return errors.New("--nats-listen: the node would take anyone: set nats: {user, password} or nats: {token}, or nats.node.hosts (`ahpd cluster credentials`), in the config file")
	}
	for _, a := range []string{n.Listen, n.Cluster} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--nats-listen / --nats-cluster: %q is not host:port", limitText(a, 100))
		}
	}
	if len(n.Routes) > 0 && n.Cluster == "" {
		return errors.New("--nats-routes needs --nats-cluster: the address the other nodes route to")
	}
	for _, r := range n.Routes {
		if u, err := url.Parse(r); err != nil || u.Host == "" {
			return fmt.Errorf("--nats-routes: %q is not a route URL (nats://host:port)", limitText(r, 100))
		}
	}
	return nil
}

// startNATSNode starts the daemon's NATS node, when the config asks for
// one, waits until its JetStream answers, and points the daemon's NATS at
// it. It returns how to stop it, after everything using it closed.
func startNATSNode(cfg *config, log *slog.Logger) (stop func(), err error) {
	n := cfg.NATS.Node
	if n.Listen == "" {
		return func() {}, nil
	}
	host, port, err := splitPort(n.Listen)
	if err != nil {
		return nil, err
	}
	name := cfg.Cluster.HostID
	if name == "" {
		name = "ahpd-" + strings.ReplaceAll(n.Listen, ":", "-")
	}
	opts := &server.Options{
		ServerName: name,
		Host:       host,
		Port:       port,
		Username:   cfg.NATS.User,
		Password:   cfg.NATS.Password,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.StateDir, "nats"),
		NoSigs:     true,
		NoLog:      true,
	}
	if cfg.NATS.Token != "" {
		opts.Username, opts.Password, opts.Authorization = "", "", cfg.NATS.Token
	}
	if len(n.Hosts) > 0 {
		// Each host by its own key, with what its host may do; a user,
		// password or token is then the routes' alone.
		opts.Username, opts.Password, opts.Authorization = "", "", ""
		opts.Nkeys = hostUsers(n.Hosts)
	}
	tc, err := nodeTLS(cfg.NATS.TLS)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, true, tlsTimeout
	}
	if n.Cluster != "" {
		ch, cp, err := splitPort(n.Cluster)
		if err != nil {
			return nil, err
		}
		opts.Cluster = server.ClusterOpts{
			Name: cmp.Or(n.Name, "ahpd"), Host: ch, Port: cp,
			// The nodes route to each other with the clients' credentials,
			// and with TLS, by their certificates.
			Username: cfg.NATS.User, Password: cfg.NATS.Password,
		}
		if cfg.NATS.Token != "" {
			opts.Cluster.Username, opts.Cluster.Password = "ahpd", cfg.NATS.Token
		}
		if tc != nil {
			if opts.Cluster.TLSConfig, err = nodeTLS(cfg.NATS.TLS); err != nil {
				return nil, err
			}
			opts.Cluster.TLSTimeout = tlsTimeout
		}
		for _, r := range n.Routes {
			u, _ := url.Parse(r)
			if opts.Cluster.Username != "" {
				u.User = url.UserPassword(opts.Cluster.Username, opts.Cluster.Password)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("the NATS node: %w", err)
	}
	srv.Start()
	stop = func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	if !srv.ReadyForConnections(30 * time.Second) {
		stop()
		return nil, fmt.Errorf("the NATS node did not listen on %s in 30s", n.Listen)
	}
	if err := awaitJetStream(srv, len(n.Routes)+1, log); err != nil {
		stop()
		return nil, err
	}
	cfg.NATS.URL = srv.ClientURL()
	log.Info("running a NATS node", "listen", n.Listen, "cluster", n.Cluster, "routes", len(n.Routes), "name", name)
	return stop, nil
}

// awaitJetStream waits until the node's JetStream can take requests: at
// once for a node of its own, and once a majority of a cluster's nodes
// route to each other and have chosen a leader, for one of several.
func awaitJetStream(srv *server.Server, nodes int, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), natsReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	told := false
	for {
		if srv.JetStreamEnabled() && (nodes == 1 || (srv.JetStreamIsCurrent() && srv.NumRoutes() >= nodes/2)) {
			return nil
		}
		if !told && nodes > 1 {
			log.Info("waiting for the other NATS nodes", "nodes", nodes)
			told = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the NATS node's JetStream was not ready in %v: are the other nodes (--nats-routes) running?", natsReadyTimeout)
		case <-tick.C:
		}
	}
}

// splitPort splits host:port, the port a number.
func splitPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port", limitText(addr, 100))
	}
	var p int
	if _, err := fmt.Sscan(port, &p); err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("%q: the port is not a number", limitText(addr, 100))
	}
	return host, p, nil
}
