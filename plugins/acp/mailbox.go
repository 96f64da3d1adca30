package acp

import (
	"sync"

	sdk "github.com/coder/acp-go-sdk"
)

// mailbox hands session updates on to their sinks in the order they came,
// on a goroutine of its own, so that the SDK's handler never waits on
// ahpd. The SDK reads an agent's notifications into a queue of 1,024 and
// drops the connection when it fills: an agent streaming thousands of
// chunks a second would lose its connection to any pause of ahpd's (a
// store write, a collection, a busy machine). The mailbox holds what
// comes meanwhile instead; what it holds is what the agent wrote.
type mailbox struct {
	mu    sync.Mutex
	items []delivery
	done  chan struct{} // closed when the delivering goroutine finds nothing left; nil when none runs
}

type delivery struct {
	s    sink
	kind string
	u    sdk.SessionUpdate
}

// post queues an update for s, starting a delivering goroutine if none
// runs.
func (m *mailbox) post(s sink, kind string, u sdk.SessionUpdate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items = append(m.items, delivery{s, kind, u})
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
		for _, d := range batch {
			d.s.update(d.kind, d.u)
		}
	}
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
