// Package journal keeps every session's action stream, append-only and
// sequence-numbered, in one NATS JetStream stream.
//
// It owns the connection to NATS (an embedded server with its store in a
// directory and no network listener, or an existing server or cluster
// named by URL, through the same code path), the stream, the mapping of a
// session to a subject, writing an entry larger than one NATS message as
// several and putting it back together (chunk.go), retention (an age for
// the whole stream and a byte budget per session), following a
// session's entries live as any host appends them (Follow), and keeping
// the embedded server's store from failing on a full disk (space.go). Every entry gets the stream's sequence number:
// one sequence for the whole stream that only grows, also across
// restarts, by which entries are read and paged. (The host numbers its
// actions itself, serverSeq, and carries that number in the entries.)
//
// It knows nothing of sessions, the host or AHP: a session is an opaque
// string (a channel URI) and an entry is opaque bytes. It must not decode
// entries, decide what to append, or assume the server is embedded.
package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for the zero values of Config.
const (
	DefaultStream  = "AHPD_JOURNAL"
	DefaultSubject = "ahpd.journal"
)

// Limits on what callers may pass.
const (
	// MaxSessionBytes bounds a session's name (a channel URI).
	MaxSessionBytes = 512
	// MaxReadLimit bounds the entries one read returns.
	MaxReadLimit = 10000
	// DefaultReadLimit is the page size of a read whose limit is 0.
	DefaultReadLimit = 1000
	// MaxReadSessions bounds the sessions one ReadSessions names.
	MaxReadSessions = 256
	// MaxCountSessions bounds the sessions one Counts names.
	MaxCountSessions = 10000
	// MaxBatch bounds the entries of one Append.
	MaxBatch = 1024
	// DefaultMaxEntryBytes bounds one entry when Config.MaxEntryBytes is 0.
	DefaultMaxEntryBytes = 64 << 20
	// minDuplicates is the least deduplication window a server allows.
	minDuplicates = 100 * time.Millisecond
	// ackTimeout bounds the wait for the server's ack of an append, when
	// the caller's context does not.
	ackTimeout = 30 * time.Second
)

// Errors callers can test with errors.Is. The errors returned wrap them
// with the detail (sizes and limits, never the caller's data).
var (
	ErrClosed          = errors.New("journal: closed")
	ErrBadSession      = errors.New("journal: bad session name")
	ErrEntryTooLarge   = errors.New("journal: entry too large")
	ErrBatchTooLarge   = errors.New("journal: too many entries in one append")
	ErrBadLimit        = errors.New("journal: bad read limit")
	ErrTooManySessions = errors.New("journal: too many sessions in one read")
	ErrReadIncomplete  = errors.New("journal: read could not reach the end")
)

// Config says where the journal lives and how long it keeps entries.
// The zero Config is not enough: Dir or URL must be set.
type Config struct {
	// Dir is the store directory of the embedded server. Used when URL is
	// empty; the server opens no network listener.
	Dir string

	// URL names an existing NATS server or cluster (comma-separated URLs)
	// instead of the embedded one. Credentials, when the server needs them:
	// a credentials file (JWT and NKey seed), a user and password, or a token.
	URL       string
	CredsFile string
	User      string
	Password  string
	Token     string
	// NKeySeedFile is this host's own NATS key (an nkey seed), what a
	// server with a key for each host lets it in by.
	NKeySeedFile string
	// TLSCA, when set, is the CA (PEM file) the server's certificate is
	// checked against, and TLSCert and TLSKey the certificate this host
	// shows the server, which a server checking clients asks for.
	TLSCA, TLSCert, TLSKey string

	// Stream is the JetStream stream's name (default DefaultStream) and
	// Subject the prefix of its subjects (default DefaultSubject); several
	// hosts sharing sessions use the same names, separate deployments on
	// one cluster different ones.
	Stream  string
	Subject string
	// Replicas is the stream's replica count on a cluster (0 means 1).
	Replicas int

	// MaxAge drops entries older than this (0 keeps them until deleted).
	MaxAge time.Duration
	// MaxBytesPerSession is each session's budget of entry data bytes
	// (0 means no budget). When a session goes over it, its oldest entries
	// are purged in the background until the rest fits in three quarters
	// of the budget, so purges are rare and appends never wait for them.
	MaxBytesPerSession int64
	// MaxEntryBytes bounds one entry (0 means DefaultMaxEntryBytes). An
	// entry larger than the server's maximum payload (1 MiB unless the
	// server sets otherwise) is written as several messages and read back
	// whole; a journal reads entries up to its own bound, so hosts sharing
	// a journal set the same one.
	MaxEntryBytes int

	// Uncompressed keeps the stream's blocks as written. By default the
	// server compresses each full block with S2, which shrinks streamed
	// text about threefold and slows reading old entries back (see
	// docs/JOURNAL.md for the figures).
	Uncompressed bool

	// SyncAlways makes the embedded server fsync each append before it
	// acks it, so an append survives a power cut and not only a crash of
	// the process (by default the server writes each append to the file
	// before acking, and fsyncs every two minutes). A server reached by URL
	// keeps its own setting.
	SyncAlways bool

	// MinFreeBytes is what the embedded server's store keeps free of its
	// file system: an Append that would leave less is refused with
	// ErrNoSpace (0 means DefaultMinFreeBytes; negative, no floor). A
	// server reached by URL keeps its own disk.
	MinFreeBytes int64

	// Logger receives what goes wrong in the background, and what the
	// embedded server says (its notices at debug level) (nil:
	// slog.Default).
	Logger *slog.Logger
}

// Journal is an open journal. Its methods are safe for concurrent use.
type Journal struct {
	cfg      Config
	log      *slog.Logger
	srv      *server.Server // nil when connected by URL
	disk     *disk          // the embedded server's file system; nil by URL
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	maxEntry int // the largest entry appended or read
	maxMsg   int // the largest entry written as one message
	// chunkData is the data of each chunk of a larger entry.
	chunkData int

	// fetchFault, set by tests before the journal is used, is asked before
	// each fetch of a read; true makes that fetch come back empty, as one
	// from a lagging consumer can.
	fetchFault func() bool
	// fetchCut, set by tests before the journal is used, is asked after
	// each message a fetch hands over, with how many it has; true makes
	// the read give up on that fetch there, as on one whose answer it
	// stopped waiting for, which the server may go on delivering to.
	fetchCut func(got int) bool

	mu       sync.Mutex
	closed   bool
	sessions map[string]*sessionState
	bg       sync.WaitGroup // background trims and followers
	// restarts is closed (and replaced) when the embedded server's
	// JetStream starts again (space.go), which drops every consumer.
	restartMu sync.Mutex
	restarts  chan struct{}
	bgCtx     context.Context // cancelled by Close
	bgCancel  context.CancelFunc
}

// Open starts (or connects to) NATS, creates or updates the stream and
// returns the journal. The caller must Close it.
func Open(ctx context.Context, cfg Config) (*Journal, error) {
	if cfg.Dir == "" && cfg.URL == "" {
		return nil, errors.New("journal: neither a store directory nor a NATS URL given")
	}
	if cfg.MaxAge < 0 || cfg.MaxBytesPerSession < 0 || cfg.MaxEntryBytes < 0 || cfg.Replicas < 0 {
		return nil, errors.New("journal: negative limit in config")
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if err := checkNames(cfg.Stream, cfg.Subject); err != nil {
		return nil, err
	}
	j := &Journal{cfg: cfg, log: cfg.Logger, sessions: map[string]*sessionState{}, restarts: make(chan struct{})}
	if j.log == nil {
		j.log = slog.Default()
	}
	j.bgCtx, j.bgCancel = context.WithCancel(context.Background())
	if err := j.connect(ctx); err != nil {
		j.shutdown()
		return nil, err
	}
	st, err := j.ensureStreamPatiently(ctx)
	if err != nil {
		j.shutdown()
		return nil, err
	}
	j.stream = st
	// The server bounds a message's payload, headers included (the
	// subject is not part of it); a larger entry goes as chunks.
	j.maxMsg = int(j.nc.MaxPayload())
	if j.maxMsg < minPayload {
		j.shutdown()
		return nil, fmt.Errorf("journal: the server's maximum payload is %d bytes, at least %d needed", j.maxMsg, minPayload)
	}
	j.chunkData = j.maxMsg - chunkHeaderRoom
	j.maxEntry = cmp.Or(cfg.MaxEntryBytes, DefaultMaxEntryBytes)
	return j, nil
}

// connect starts the embedded server when there is no URL, then connects.
func (j *Journal) connect(ctx context.Context) error {
	opts := []nats.Option{nats.Name("ahpd journal")}
	url := j.cfg.URL
	if url == "" {
		j.disk = newDisk(j.cfg.Dir, cmp.Or(j.cfg.MinFreeBytes, DefaultMinFreeBytes))
		srv, err := startEmbedded(j.cfg.Dir, j.cfg.SyncAlways, serverLog{j})
		if err != nil {
			return err
		}
		j.disk.prepare() // the store's directory is there now
		j.srv = srv
		opts = append(opts, nats.InProcessServer(srv))
	}
	opts = append(opts, ConnectOptions(j.cfg)...)
	if deadline, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(deadline)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("journal: connecting to NATS: %w", err)
	}
	j.nc = nc
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(16*MaxBatch),
		jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return fmt.Errorf("journal: JetStream: %w", err)
	}
	j.js = js
	return nil
}

// ConnectOptions are the options the journal connects to NATS with, for
// other packages that reach the same NATS for their own ends (package
// cluster): reconnecting for ever, and cfg's credentials (a credentials
// file, a user and password, a token), when it has any. They name no
// server: the caller passes cfg.URL to nats.Connect.
func ConnectOptions(cfg Config) []nats.Option {
	opts := []nats.Option{nats.MaxReconnects(-1)}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			opt = func(*nats.Options) error { return fmt.Errorf("journal: this host's NATS key: %w", err) }
		}
		opts = append(opts, opt)
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	return opts
}

// startEmbedded starts a JetStream server storing under dir, with no
// listener, no signal handlers, and log as its logger. Its store has no
// bound of the server's own (space.go).
func startEmbedded(dir string, syncAlways bool, log server.Logger) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName:        "ahpd-journal",
		JetStream:         true,
		StoreDir:          dir,
		JetStreamMaxStore: maxServerStore,
		DontListen:        true,
		NoSigs:            true,
		NoLog:             true,
		SyncAlways:        syncAlways,
	})
	if err != nil {
		return nil, fmt.Errorf("journal: embedded NATS server: %w", err)
	}
	srv.SetLoggerV2(log, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("journal: embedded NATS server did not become ready in 30s")
	}
	return srv, nil
}

// streamPatience bounds how long Open keeps asking for the stream while
// a NATS cluster cannot answer yet: nodes starting together, a leader
// being elected.
const streamPatience = time.Minute

// ensureStreamPatiently is ensureStream asked again, every second, while
// the cluster does not answer in time or has too few nodes up for the
// stream's replicas, for up to streamPatience.
func (j *Journal) ensureStreamPatiently(ctx context.Context) (jetstream.Stream, error) {
	deadline := time.Now().Add(streamPatience)
	for told := false; ; {
		// Nodes asking at once for the stream on a new cluster: one is
		// answered, and the others' requests lapse; a short wait each
		// time keeps that lapse short.
		ask, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := j.ensureStream(ask)
		cancel()
		if err == nil || !clusterNotReady(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return st, err
		}
		if !told {
			j.log.Info("journal: NATS cannot make the stream yet; asking again", "err", err)
			told = true
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// clusterNotReady reports whether err is a NATS cluster not ready to
// answer a stream request yet (rather than a request it refuses).
func clusterNotReady(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10005, // no suitable peers (yet) for the replicas
			10008, // JetStream system temporarily unavailable
			10023: // insufficient resources: too few nodes up
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// ensureStream creates the stream, or updates its limits to the
// config's. A stream that already has them is not written to, so that a
// journal opens on a full disk (the server writes a stream's settings to
// a file of its own on every update); one whose update finds no room
// keeps its old limits until the journal opens again with room.
func (j *Journal) ensureStream(ctx context.Context) (jetstream.Stream, error) {
	want := j.streamConfig()
	st, err := j.js.Stream(ctx, want.Name)
	switch {
	case err == nil && sameStream(st.CachedInfo().Config, want):
		return st, nil
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("journal: looking up stream %s: %w", want.Name, err)
	}
	made, uerr := j.js.CreateOrUpdateStream(ctx, want)
	switch {
	case uerr == nil:
		return made, nil
	case err == nil && streamNoSpace(uerr):
		j.log.Warn("journal: no room to update the stream's limits; it keeps the ones it has until the journal opens with room", "stream", want.Name, "err", uerr)
		return st, nil
	case streamNoSpace(uerr) || j.disk.failedWrite():
		// The server's answer to a create may not say why; its log did.
		return nil, fmt.Errorf("journal: creating stream %s: %w: %w", want.Name, ErrNoSpace, uerr)
	}
	return nil, fmt.Errorf("journal: creating stream %s: %w", want.Name, uerr)
}

// streamConfig is the stream the config asks for.
func (j *Journal) streamConfig() jetstream.StreamConfig {
	compression := jetstream.S2Compression
	if j.cfg.Uncompressed {
		compression = jetstream.NoCompression
	}
	return jetstream.StreamConfig{
		Name:        j.cfg.Stream,
		Description: "ahpd session journal",
		Subjects:    []string{j.cfg.Subject + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		MaxAge:      j.cfg.MaxAge,
		Replicas:    j.cfg.Replicas,
		// No direct gets: on a cluster any replica answers them, maybe one
		// behind the leader; the journal reads what was acked.
		AllowDirect: false,
		Compression: compression,
		// The journal sets no message ids, so it needs no deduplication;
		// but a server that starts reads back every entry of the window
		// to rebuild it (the default window, two minutes of appends, can
		// be hundreds of thousands of entries). The server's least.
		Duplicates: minDuplicates,
	}
}

// sameStream reports whether a stream has every setting the journal
// asks for.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Description == want.Description &&
		have.Retention == want.Retention && have.Discard == want.Discard && have.Storage == want.Storage &&
		have.MaxAge == want.MaxAge && have.Replicas == want.Replicas && have.AllowDirect == want.AllowDirect &&
		have.Compression == want.Compression && have.Duplicates == want.Duplicates
}

// Close waits for background purges, drains the connection and stops the
// embedded server. It is safe to call more than once.
func (j *Journal) Close(ctx context.Context) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	j.bgCancel()
	j.bg.Wait()
	err := j.drain(ctx)
	j.shutdown()
	return err
}

// drain flushes what is in flight and waits for the connection to close.
func (j *Journal) drain(ctx context.Context) error {
	closed := make(chan struct{})
	j.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := j.nc.Drain(); err != nil {
		return fmt.Errorf("journal: draining: %w", err)
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("journal: draining: %w", ctx.Err())
	}
}

// shutdown closes the connection and stops the embedded server, waiting
// for both to be gone.
func (j *Journal) shutdown() {
	j.bgCancel()
	if j.js != nil {
		j.js.CleanupPublisher()
	}
	if j.nc != nil {
		j.nc.Close()
	}
	if j.srv != nil {
		j.srv.Shutdown()
		j.srv.WaitForShutdown()
	}
}

// LastSeq is the newest sequence the journal has handed out (0 when it
// never has): the next append gets a greater one.
func (j *Journal) LastSeq(ctx context.Context) (uint64, error) {
	if err := j.check(); err != nil {
		return 0, err
	}
	info, err := j.stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("journal: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// check refuses calls after Close.
func (j *Journal) check() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return ErrClosed
	}
	return nil
}
