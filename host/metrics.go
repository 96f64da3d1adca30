package host

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/protocol"
)

// metrics are the host's counters. Gauges are not kept here: the collector
// reads them off the host when it is scraped, so they cost nothing between
// scrapes.
type metrics struct {
	closed        atomic.Int64                   // connections done
	unloaded      atomic.Int64                   // sessions that fell asleep and let their turns go
	journalErrors atomic.Int64                   // appends to the journal that failed, each tried again (journal.go)
	journalWaits  atomic.Int64                   // times an agent or a client waited for its session's journal writes (outbox.go)
	appendSeconds prometheus.Histogram           // how long each append to the journal took
	turnSeconds   *prometheus.HistogramVec       // how long turns ran, by provider and outcome
	firstSeconds  *prometheus.HistogramVec       // how long agents took to a turn's first output, by provider
	commandSecs   *prometheus.HistogramVec       // how long commands took, by method
	commands      map[string]prometheus.Observer // commandSecs by method, made at start
	pushErrors    atomic.Int64                   // pushes of checkpoints that failed (pushes.go)
	budgetRefused atomic.Int64                   // connections refused past their person's budget (budgets.go)
	repeats       atomic.Int64                   // client actions and create requests sent again after they were taken, answered as taken (rpc_dispatch.go, requests.go)
	released      atomic.Int64                   // times memory was given back to the system (memory.go)
	returnedAfter atomic.Int64                   // how many connections were done when it last was
	liveHeap      atomic.Int64                   // the live heap then, in bytes
	quietRSS      atomic.Int64                   // the resident anonymous memory then, in bytes
	cut           map[string]*atomic.Int64       // by reason; fixed at start
	turns         map[protocol.TurnState]*atomic.Int64
	once          sync.Once
	http          http.Handler
}

func newMetrics() *metrics {
	m := &metrics{cut: map[string]*atomic.Int64{}, turns: map[protocol.TurnState]*atomic.Int64{}}
	m.appendSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ahpd_journal_append_seconds",
		Help:    "How long an append of a run of actions to the journal took, failed ones included.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10), // 50 µs to 13 s
	})
	m.turnSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ahpd_turn_duration_seconds",
		Help:    "How long turns ran, from the person's message to their end, by provider and outcome.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2.5, 12), // 100 ms to 40 min
	}, []string{"provider", "outcome"})
	m.firstSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ahpd_turn_first_output_seconds",
		Help:    "How long agents took from a turn's message to their first output in it (text, reasoning, a tool call, a question, or the end), by provider.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 3, 12), // 1 ms to 3 min
	}, []string{"provider"})
	m.commandSecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ahpd_command_seconds",
		Help:    "How long AHP commands took to answer, by method (those of the method table; the checks before each included).",
		Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10), // 100 µs to 26 s
	}, []string{"method"})
	m.commands = make(map[string]prometheus.Observer, len(methods))
	for name := range methods {
		m.commands[name] = m.commandSecs.WithLabelValues(name)
	}
	for _, r := range conn.CutReasons {
		m.cut[r] = new(atomic.Int64)
	}
	for _, s := range []protocol.TurnState{protocol.TurnStateComplete, protocol.TurnStateCancelled, protocol.TurnStateError} {
		m.turns[s] = new(atomic.Int64)
	}
	return m
}

// cutFor counts a connection cut, by one of conn.CutReasons: the reason
// label of ahpd_connections_cut_total.
func (m *metrics) cutFor(reason string) {
	if n := m.cut[reason]; n != nil {
		n.Add(1)
	}
}

// turnEnded counts a turn's end by the action that ended it.
func (m *metrics) turnEnded(a protocol.Action) {
	var s protocol.TurnState
	switch a.(type) {
	case *protocol.ChatTurnCompleteAction:
		s = protocol.TurnStateComplete
	case *protocol.ChatTurnCancelledAction:
		s = protocol.TurnStateCancelled
	case *protocol.ChatErrorAction:
		s = protocol.TurnStateError
	default:
		return
	}
	m.turns[s].Add(1)
}

// commandTook observes how long a command of the method table took.
func (m *metrics) commandTook(method string, since time.Time) {
	if o := m.commands[method]; o != nil {
		o.Observe(time.Since(since).Seconds())
	}
}

// firstOutput observes the wait for a turn's first output.
func (m *metrics) firstOutput(provider string, took time.Duration) {
	m.firstSeconds.WithLabelValues(provider).Observe(took.Seconds())
}

// turnTook observes a turn's run; one of no known length (negative) is
// not counted.
func (m *metrics) turnTook(provider string, state protocol.TurnState, took time.Duration) {
	if took >= 0 {
		m.turnSeconds.WithLabelValues(provider, string(state)).Observe(took.Seconds())
	}
}

// MetricsHandler serves the host's metrics in the Prometheus text format,
// with the Go runtime's and the process's.
func (h *Host) MetricsHandler() http.Handler {
	h.metrics.once.Do(func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), hostCollector{h}, h.metrics.appendSeconds,
			h.metrics.turnSeconds, h.metrics.firstSeconds, h.metrics.commandSecs)
		reg.MustRegister(h.eventCollectors()...) // events.go: the sink's own
		reg.MustRegister(h.opts.Collectors...)
		h.metrics.http = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	})
	return h.metrics.http
}

// gaugeValues are the numbers the metrics' gauges show.
type gaugeValues struct {
	Connections, Subscriptions, QueuedMessages, QueuedBytes, MaxQueuedBytes int
	Sessions, Resident                                                      int
}

// gauges reads the host's gauges.
func (h *Host) gauges() gaugeValues {
	var g gaugeValues
	conns, sessions := h.connList(), h.sessionList()
	g.Connections, g.Sessions = len(conns), len(sessions)
	for _, c := range conns {
		st := c.Stats()
		g.Subscriptions += st.Subscriptions
		g.QueuedMessages += st.QueuedMessages
		g.QueuedBytes += st.QueuedBytes
		g.MaxQueuedBytes = max(g.MaxQueuedBytes, st.QueuedBytes)
	}
	for _, s := range sessions {
		if s.Awake() {
			g.Resident++
		}
	}
	return g
}

var (
	descConnections   = prometheus.NewDesc("ahpd_connections", "Client connections open.", nil, nil)
	descSubscriptions = prometheus.NewDesc("ahpd_subscriptions", "Channels watched, summed over connections.", nil, nil)
	descQueued        = prometheus.NewDesc("ahpd_outbound_queue_messages", "Messages waiting to be written, summed over connections.", nil, nil)
	descQueuedBytes   = prometheus.NewDesc("ahpd_outbound_queue_bytes", "Bytes waiting to be written, summed over connections.", nil, nil)
	descMaxQueued     = prometheus.NewDesc("ahpd_outbound_queue_bytes_max", "Bytes waiting to be written to the connection furthest behind.", nil, nil)
	descSessions      = prometheus.NewDesc("ahpd_sessions", "Sessions the host holds.", nil, nil)
	descResident      = prometheus.NewDesc("ahpd_sessions_resident", "Sessions awake, their turns in memory.", nil, nil)
	descCut           = prometheus.NewDesc("ahpd_connections_cut_total", "Connections ahpd ended, by why.", []string{"reason"}, nil)
	descTurns         = prometheus.NewDesc("ahpd_turns_total", "Turns ended, by outcome.", []string{"outcome"}, nil)
	descStoreErrors   = prometheus.NewDesc("ahpd_store_write_errors_total", "Session records and settings the store failed to write or remove.", nil, nil)
	descJournalErrors = prometheus.NewDesc("ahpd_journal_write_errors_total", "Appends to the journal that failed; each is tried again, and what it held is sent only once the journal has it.", nil, nil)
	descJournalDown   = prometheus.NewDesc("ahpd_journal_down", "1 while appends to the journal fail: sessions wait and new work is refused.", nil, nil)
	descJournalWaits  = prometheus.NewDesc("ahpd_journal_waits_total", "Times an agent or a client waited for its session's actions to be written to the journal (backpressure).", nil, nil)
	descJournalWait   = prometheus.NewDesc("ahpd_journal_waiting", "Agents and clients waiting now for their session's actions to be written to the journal.", nil, nil)
	descBudget        = prometheus.NewDesc("ahpd_connections_refused_total", "WebSocket connections refused because their person held as many as one may (budgets.connections).", nil, nil)
	descRepeats       = prometheus.NewDesc("ahpd_action_repeats_total", "Client actions (the same client and clientSeq) and createSession/createChat requests sent again after the host took them: answered as the first, not applied twice.", nil, nil)
	descPushErrors    = prometheus.NewDesc("ahpd_checkpoint_push_errors_total", "Pushes of sessions' checkpoints to --push-checkpoints that failed; the turns went on.", nil, nil)
	descMemory        = prometheus.NewDesc("ahpd_memory_released_total", "Times the host, quiet after work, gave the memory it left back to the system.", nil, nil)
	descClosed        = prometheus.NewDesc("ahpd_connections_closed_total", "Connections ended and done.", nil, nil)
	descReturnedAfter = prometheus.NewDesc("ahpd_memory_released_after_connections", "How many connections had ended when memory was last given back.", nil, nil)
	descLiveHeap      = prometheus.NewDesc("ahpd_memory_live_heap_bytes", "The live heap when memory was last given back.", nil, nil)
	descQuietRSS      = prometheus.NewDesc("ahpd_memory_resident_bytes", "Resident anonymous memory right after it was last given back (Linux).", nil, nil)
	descAgents        = prometheus.NewDesc("ahpd_agent_processes", "Agent processes running (Claude Code CLI, ACP agents).", nil, nil)
)

// hostCollector reads the host's metrics when scraped.
type hostCollector struct{ h *Host }

func (hc hostCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnections, descSubscriptions, descQueued, descQueuedBytes, descMaxQueued, descSessions, descResident, descCut, descTurns, descStoreErrors, descJournalErrors, descJournalDown, descJournalWaits, descJournalWait, descPushErrors, descRepeats, descBudget, descAgents, descMemory, descClosed, descReturnedAfter, descLiveHeap, descQuietRSS} {
		ch <- d
	}
}

func (hc hostCollector) Collect(ch chan<- prometheus.Metric) {
	g := hc.h.gauges()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(descConnections, g.Connections)
	gauge(descSubscriptions, g.Subscriptions)
	gauge(descQueued, g.QueuedMessages)
	gauge(descQueuedBytes, g.QueuedBytes)
	gauge(descMaxQueued, g.MaxQueuedBytes)
	gauge(descSessions, g.Sessions)
	gauge(descResident, g.Resident)
	if n := hc.h.opts.AgentProcesses; n != nil {
		gauge(descAgents, int(n()))
	}
	ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(hc.h.StoreWriteErrors()))
	ch <- prometheus.MustNewConstMetric(descJournalErrors, prometheus.CounterValue, float64(hc.h.metrics.journalErrors.Load()))
	m := hc.h.metrics
	down := 0
	if hc.h.health.trouble.Load() != nil {
		down = 1
	}
	gauge(descJournalDown, down)
	gauge(descJournalWait, int(hc.h.health.waiting.Load()))
	ch <- prometheus.MustNewConstMetric(descJournalWaits, prometheus.CounterValue, float64(m.journalWaits.Load()))
	ch <- prometheus.MustNewConstMetric(descPushErrors, prometheus.CounterValue, float64(m.pushErrors.Load()))
	ch <- prometheus.MustNewConstMetric(descRepeats, prometheus.CounterValue, float64(m.repeats.Load()))
	ch <- prometheus.MustNewConstMetric(descBudget, prometheus.CounterValue, float64(m.budgetRefused.Load()))
	ch <- prometheus.MustNewConstMetric(descMemory, prometheus.CounterValue, float64(m.released.Load()))
	ch <- prometheus.MustNewConstMetric(descClosed, prometheus.CounterValue, float64(m.closed.Load()))
	ch <- prometheus.MustNewConstMetric(descReturnedAfter, prometheus.GaugeValue, float64(m.returnedAfter.Load()))
	ch <- prometheus.MustNewConstMetric(descLiveHeap, prometheus.GaugeValue, float64(m.liveHeap.Load()))
	ch <- prometheus.MustNewConstMetric(descQuietRSS, prometheus.GaugeValue, float64(m.quietRSS.Load()))
	for _, r := range conn.CutReasons {
		ch <- prometheus.MustNewConstMetric(descCut, prometheus.CounterValue, float64(m.cut[r].Load()), r)
	}
	for s, n := range m.turns {
		ch <- prometheus.MustNewConstMetric(descTurns, prometheus.CounterValue, float64(n.Load()), string(s))
	}
}
