package acp

import (
	"encoding/json"
	"log/slog"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// mailboxBudget is how many bytes of session updates a connection's
// mailbox holds before the agent's stdout is read no further: at 20,000
// chunks a second of a few hundred bytes each, several seconds of a
// pause of ahpd's.
const mailboxBudget = 32 << 20

// mailbox hands session updates on to their sinks in the order the agent
// wrote them, on a goroutine of its own, so that reading the agent's
// stdout never waits on ahpd's handling of what it said (a store write, a
// collection, a busy machine).
//
// It holds updates as the agent wrote them, decoding each only when it is
// delivered, and holds at most mailboxBudget bytes of them: past that,
// post waits for room, which stops the reading of the agent's stdout
// (stdoutReader) and so, once the pipe fills, the agent. Nothing is
// dropped and the agent's connection is never at risk: the SDK's own
// bounded queue, which closes the connection when it fills, gets none of
// these updates (see stdoutReader).
type mailbox struct {
	log *slog.Logger

	mu      sync.Mutex
	room    sync.Cond // signalled as deliveries free budget
	items   []delivery
	held    int           // bytes of the updates in items and in the batch being delivered
	done    chan struct{} // closed when the delivering goroutine finds nothing left; nil when none runs
	waiting bool          // a post waits for room, and was logged
}

// delivery is one update on its way: raw, as the params of the agent's
// session/update, or decoded already.
type delivery struct {
	s   sink
	raw json.RawMessage
	u   *sdk.SessionNotification
}

func newMailbox(log *slog.Logger) *mailbox {
	m := &mailbox{log: log}
	m.room.L = &m.mu
	return m
}

// postRaw queues the params of a session/update notification for s,
// waiting while the mailbox is full.
func (m *mailbox) postRaw(s sink, params json.RawMessage) {
	m.post(delivery{s: s, raw: params}, len(params))
}

// postDecoded queues an update the SDK decoded already.
func (m *mailbox) postDecoded(s sink, n sdk.SessionNotification) {
	m.post(delivery{s: s, u: &n}, 0)
}

func (m *mailbox) post(d delivery, size int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// An update bigger than the whole budget still goes, alone.
	for m.held > 0 && m.held+size > mailboxBudget {
		if !m.waiting {
			m.waiting = true
			m.log.Info("the agent streams faster than ahpd takes its updates; reading it waits", "heldBytes", m.held)
		}
		m.room.Wait()
	}
	m.waiting = false
	m.items = append(m.items, d)
	m.held += size
	if m.done == nil {
		m.done = make(chan struct{})
		go m.deliver(m.done)
	}
}

func (m *mailbox) deliver(done chan struct{}) {
	for {
		m.mu.Lock()
		batch := m.items
		m.items = nil
		if len(batch) == 0 {
			m.done = nil
			m.mu.Unlock()
			close(done)
			return
		}
		m.mu.Unlock()
		freed := 0
		for i, d := range batch {
			m.handOn(d)
			freed += len(d.raw)
			batch[i] = delivery{} // what was said is garbage once handed on
		}
		m.mu.Lock()
		m.held -= freed
		m.room.Broadcast()
		m.mu.Unlock()
	}
}

// handOn decodes an update, if it is raw, and gives it to its sink.
func (m *mailbox) handOn(d delivery) {
	n := d.u
	if n == nil {
		decoded, err := decodeUpdate(d.raw)
		if err != nil {
			m.log.Warn("a session update the agent sent could not be read; dropped", "err", err, "bytes", len(d.raw))
			return
		}
		n = &decoded
	}
	d.s.update(updateKind(n.Update), n.Update)
}

// flush waits until every update posted so far has been delivered.
func (m *mailbox) flush() {
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	if done != nil {
		<-done
	}
}
