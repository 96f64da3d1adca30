package host

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// quietAfter is how long the host goes without a change published, a
// connection coming or going, or a session falling asleep before it hands
// back to the system the memory that work left (the turns of sleeping
// sessions among it): the Go runtime would keep it until its next
// collection, which an idle daemon may not have for minutes, and returns
// freed pages only gradually. Waiting for quiet makes a sweep that puts
// many sessions to sleep, or sessions churning through the residency
// limit, cost one collection, not one each.
const quietAfter = 2 * time.Second

// memoryWatch is the watchdog's view of how busy the host is.
type memoryWatch struct {
	seq, opened, closed, unloaded int64
	busyAt                        time.Time
	owed                          bool // a burst of work happened since memory was last given back
}

// giveBackMemory frees the memory a burst left once the host has been
// quiet for quietAfter, once per burst.
func (h *Host) giveBackMemory(now time.Time, w *memoryWatch) {
	seq := h.bus.Current()
	h.mu.Lock()
	opened := h.nextConn
	h.mu.Unlock()
	closed, unloaded := h.metrics.closed.Load(), h.metrics.unloaded.Load()
	if seq != w.seq || opened != w.opened || closed != w.closed || unloaded != w.unloaded {
		w.seq, w.opened, w.closed, w.unloaded, w.busyAt, w.owed = seq, opened, closed, unloaded, now, true
		return
	}
	if w.owed && now.Sub(w.busyAt) >= quietAfter {
		w.owed = false
		// Two collections: what sync.Pools hold outlives one.
		runtime.GC()
		debug.FreeOSMemory()
		h.metrics.liveHeap.Store(liveHeap())
		h.metrics.quietRSS.Store(anonymousRSS())
		h.metrics.released.Add(1)
		h.metrics.returnedAfter.Store(closed)
		if h.opts.memoryReleased != nil {
			h.opts.memoryReleased()
		}
	}
}

// liveHeap is the heap the last collection found reachable, in bytes.
func liveHeap() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// anonymousRSS is the process's resident anonymous memory in bytes (its
// heap, stacks and the runtime's own, not its binary's pages), where the
// system tells it (Linux), else 0.
func anonymousRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
