package automations

// What changed is reported (Options.OnChange) in the order it happened,
// with no lock of the engine's held: the host publishes it to its clients
// under locks of its own, which must never be taken under the engine's.
// A change is queued under e.mu as it is made; the goroutine letting e.mu
// go reports the queue, unless another is reporting already, in which case
// it waits until that one has reported its changes too. Either way, what a
// call changed has been reported by the time it returns.

// telling is the changes not yet reported (guarded by e.mu).
type telling struct {
	queue    []func()
	reporter chan struct{} // set while a goroutine reports; closed when it is done
}

// unlock lets e.mu go and reports the changes queued under it.
func (e *Engine) unlock() {
	t := &e.told
	if len(t.queue) == 0 {
		e.mu.Unlock()
		return
	}
	if t.reporter != nil {
		done := t.reporter
		e.mu.Unlock()
		<-done // the reporter reports ours too
		return
	}
	done := make(chan struct{})
	t.reporter = done
	for len(t.queue) > 0 {
		batch := t.queue
		t.queue = nil
		e.mu.Unlock()
		for _, report := range batch {
			report()
		}
		e.mu.Lock()
	}
	t.reporter = nil
	e.mu.Unlock()
	close(done)
}
