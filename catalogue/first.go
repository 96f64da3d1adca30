package catalogue

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// The first scan answers the first page before it has read everything.
// A listing shows the newest rows first (Compare), and a transcript's row
// is dated by its last line, which its writer wrote last: no row is newer
// than its file's modification time. So readAll reads files newest first
// by that time, which the listing's stat gave, and once Config.FirstPage
// of the rows read are newer than every file still to read, no file still
// to read can come before them: they are published, FirstPage is closed,
// and the rest is read and published after. The first page then costs the
// stats and its own rows' reads, not the whole corpus's.
//
// A file whose lines are dated after its modification time (a clock set
// wrong, a copy whose times were set back) can be missed by the first
// page; it is added with the rest, which is reported like any change.

// defaultFirstPage is listSessions' largest page.
const defaultFirstPage = 500

// firstPage follows the first scan's reads toward its first page.
type firstPage struct {
	want int          // rows the page needs
	todo []*fileState // newest first
	done []bool       // todo[i] was applied
	next int          // todo[:next] are all applied
	// sure counts the rows newer than every file still to read; early
	// holds the times of the others, newest on top.
	sure  int
	early timeHeap
}

// newFirstPage starts following reads of todo, sorted newest first,
// toward a page of want rows, counting the rows c has already (restored
// from the index).
func newFirstPage(c *Catalogue, want int, todo []*fileState) *firstPage {
	p := &firstPage{want: want, todo: todo, done: make([]bool, len(todo))}
	for _, st := range c.files {
		if st.row != nil {
			heap.Push(&p.early, st.row.ModifiedAt.UnixNano())
		}
	}
	p.settle()
	return p
}

// applied notes that todo[i] was applied and reports whether the rows
// read make the first page.
func (p *firstPage) applied(i int) bool {
	p.done[i] = true
	if st := p.todo[i]; st.row != nil {
		heap.Push(&p.early, st.row.ModifiedAt.UnixNano())
	}
	for p.next < len(p.todo) && p.done[p.next] {
		p.next++
	}
	if p.next == len(p.todo) {
		// Every file is read: the scan's own publish follows.
		return false
	}
	p.settle()
	return p.sure >= p.want
}

// settle moves the rows newer than the newest file still to read into
// sure: no file still to read can sort before them.
func (p *firstPage) settle() {
	if p.next == len(p.todo) {
		return
	}
	bound := p.todo[p.next].listed
	for len(p.early) > 0 && p.early[0] > bound {
		heap.Pop(&p.early)
		p.sure++
	}
}

// timeHeap is a max-heap of times in nanoseconds.
type timeHeap []int64

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pagePublished publishes the first page, once: early, from readAll, or
// with the whole first scan.
func (c *Catalogue) pagePublished() {
	c.publish()
	if !c.pageDue {
		return
	}
	c.pageDue = false
	c.st.firstPageReads.Store(int64(c.pageReads))
	close(c.firstPage)
}

// readAll rereads files, newest first by their listing's stat and in
// parallel when there are several, and applies each read as it ends. A
// file's read runs on a copy of its record, so the records stay the
// loop's alone. In the first scan, it publishes the first page as soon as
// its rows are read (see the top of this file).
func (c *Catalogue) readAll(ctx context.Context, todo []*fileState) {
	if len(todo) == 0 {
		return
	}
	slices.SortStableFunc(todo, func(a, b *fileState) int { return cmp.Compare(b.listed, a.listed) })
	var page *firstPage
	if c.pageDue {
		page = newFirstPage(c, c.cfg.FirstPage, todo)
	}
	type result struct {
		st  fileState
		err error
		ok  bool
	}
	results := make([]result, len(todo))
	finished := make(chan int, len(todo))
	workers := min(c.cfg.Workers, len(todo))
	one := func(i int) {
		defer func() { finished <- i }()
		if ctx.Err() != nil {
			return
		}
		if c.cfg.readHook != nil {
			if err := c.cfg.readHook(todo[i].path); err != nil {
				results[i] = result{st: *todo[i], err: err, ok: true}
				return
			}
		}
		st, err := refresh(*todo[i], &c.st.bytesRead, &c.st.linesSkipped)
		results[i] = result{st: st, err: err, ok: true}
	}
	applied := func(i int) {
		if r := results[i]; r.ok {
			c.apply(todo[i], r.st, r.err)
		}
		if page != nil {
			c.pageReads++
			if page.applied(i) {
				c.pagePublished()
				page = nil
			}
		}
	}
	if workers <= 1 {
		// One file (an event's), or one worker: no goroutine to start.
		for i := range todo {
			one(i)
			<-finished
			applied(i)
		}
		return
	}
	// A worker reads a file only with a credit, which the loop gives
	// back once it has applied a read. Reads from the page cache never
	// block, so without them the workers would keep both cores and the
	// loop would apply their reads (and see the first page complete)
	// only when the scheduler preempts one, tens of milliseconds and
	// hundreds of files late.
	credits := make(chan struct{}, 2*workers)
	for range cap(credits) {
		credits <- struct{}{}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				<-credits
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				one(i)
			}
		})
	}
	for range len(todo) {
		i := <-finished
		credits <- struct{}{}
		applied(i)
	}
	wg.Wait()
}
