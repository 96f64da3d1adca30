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

// journalCachesAfter is how long after a burst the host gives back memory
// a second time when it keeps a journal: the embedded NATS server keeps
// the blocks of its store a burst read or wrote (each up to 8 MB, sessions
// falling asleep read them to purge their older restart points) for 10 s
// after their last use (nats-server's defaultCacheBufferExpiration, which
// a stream's config cannot set), and hands their buffers to a sync.Pool
// then, which the next two collections empty. Measured: of 1,000 sessions
// that ran a turn and fell asleep, 40 MB of heap were those blocks at the
// first release, none at the second.
const journalCachesAfter = quietAfter + 11*time.Second

// memoryWatch is the watchdog's view of how busy the host is.
type memoryWatch struct {
	seq, opened, closed, unloaded int64
	busyAt                        time.Time
	owed                          bool // a burst of work happened since memory was last given back
	lateOwed                      bool // the journal's caches of that burst are still to be given back
}

// giveBackMemory frees the memory a burst left once the host has been
// quiet for quietAfter, once per burst, and with a journal once more when
// the quiet reaches journalCachesAfter.
func (h *Host) giveBackMemory(now time.Time, w *memoryWatch) {
	seq := h.bus.Current()
	h.mu.Lock()
	opened := h.nextConn
	h.mu.Unlock()
	closed, unloaded := h.metrics.closed.Load(), h.metrics.unloaded.Load()
	if seq != w.seq || opened != w.opened || closed != w.closed || unloaded != w.unloaded {
		w.seq, w.opened, w.closed, w.unloaded, w.busyAt, w.owed = seq, opened, closed, unloaded, now, true
		w.lateOwed = h.opts.Journal != nil
		return
	}
	quiet := now.Sub(w.busyAt)
	switch {
	case w.owed && quiet >= quietAfter:
		w.owed = false
		h.releaseMemory(closed)
	case w.lateOwed && quiet >= journalCachesAfter:
		w.lateOwed = false
		h.releaseMemory(closed)
	}
}

// releaseMemory collects the heap and hands back to the system what is
// free, and counts it; closed is how many connections had ended by then.
func (h *Host) releaseMemory(closed int64) {
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
