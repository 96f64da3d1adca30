package cluster

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/cluster/clustertest"
	"github.com/ahpd/ahpd/internal/testwait"
)

var recordCount = flag.Int("cluster-records", 1000, "records written and listed in TestRecordsListsEveryRecord")

// A record written on one host is read on another, follows its
// overwrites, and is gone on both after its removal.
func TestRecordWrittenOnOneHostIsReadOnAnother(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", true, Config{})
	b := join(t, c, 2, "b", true, Config{})
	session := "ahp-session://" + strings.Repeat("x", 40)

	if data, rev, ok, err := b.Record(ctx(t), session); err != nil || ok || data != nil || rev != 0 {
		t.Fatalf("Record of a session never written = %q, %d, %v, %v", data, rev, ok, err)
	}
	rev1, err := a.PutRecord(ctx(t), session, []byte(`{"title":"one"}`))
	if err != nil {
		t.Fatal(err)
	}
	readIs(t, b, session, `{"title":"one"}`, rev1)
	rev2, err := a.PutRecord(ctx(t), session, []byte(`{"title":"two"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev1 {
		t.Fatalf("overwrite's revision %d, not after %d", rev2, rev1)
	}
	readIs(t, b, session, `{"title":"two"}`, rev2)
	readIs(t, a, session, `{"title":"two"}`, rev2)

	// Either host may remove it; removing it again, or removing one that
	// never was, is no error.
	if err := b.DeleteRecord(ctx(t), session); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*joined{a, b} {
		if data, _, ok, err := h.Record(ctx(t), session); err != nil || ok {
			t.Fatalf("%s: Record after removal = %q, %v, %v", h.HostID(), data, ok, err)
		}
	}
	if err := a.DeleteRecord(ctx(t), session); err != nil {
		t.Errorf("removing a removed record: %v", err)
	}
	if err := a.DeleteRecord(ctx(t), "never-written"); err != nil {
		t.Errorf("removing a record never written: %v", err)
	}
	all, err := a.Records(ctx(t))
	if err != nil || len(all) != 0 {
		t.Fatalf("Records after removal = %d records, %v", len(all), err)
	}
	// Written again after its removal: a new record.
	rev3, err := b.PutRecord(ctx(t), session, []byte(`{"title":"three"}`))
	if err != nil {
		t.Fatal(err)
	}
	readIs(t, a, session, `{"title":"three"}`, rev3)
}

// readIs fails the test unless h reads want at rev for session.
func readIs(t *testing.T, h *joined, session, want string, rev uint64) {
	t.Helper()
	data, got, ok, err := h.Record(ctx(t), session)
	if err != nil || !ok || string(data) != want || got != rev {
		t.Fatalf("%s: Record = %q, rev %d, %v, %v; want %q at rev %d", h.HostID(), data, got, ok, err, want, rev)
	}
}

// Records lists every live record with its contents, whoever wrote it, and
// none that was removed.
func TestRecordsListsEveryRecord(t *testing.T) {
	c := clustertest.Start(t, 3)
	hosts := []*joined{join(t, c, 0, "a", true, Config{}), join(t, c, 1, "b", true, Config{}), join(t, c, 2, "c", true, Config{})}
	n := *recordCount
	want := map[string][]byte{}
	for i := range n {
		// Names as channel URIs are, with one of any bytes now and then.
		name := fmt.Sprintf("ahp-session://%036d", i)
		if i%100 == 7 {
			name += "/a b.c*>é\x00"
		}
		want[name] = fmt.Appendf(nil, `{"uri":%q,"n":%d}`, name, i)
	}
	putAll(t, []*Member{hosts[0].Member, hosts[1].Member, hosts[2].Member}, want)
	removed := 0
	for name := range want {
		if removed == n/10 {
			break
		}
		if err := hosts[removed%3].DeleteRecord(ctx(t), name); err != nil {
			t.Fatal(err)
		}
		delete(want, name)
		removed++
	}
	for _, h := range hosts {
		got, err := h.Records(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: Records has %d records, want %d", h.HostID(), len(got), len(want))
		}
		for name, data := range want {
			if !bytes.Equal(got[name], data) {
				t.Fatalf("%s: Records[%q] = %q, want %q", h.HostID(), name, got[name], data)
			}
		}
	}
}

// putAll writes records from hosts, 8 at a time, each from the next host.
func putAll(t testing.TB, hosts []*Member, records map[string][]byte) {
	t.Helper()
	type job struct {
		name string
		data []byte
		h    *Member
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				if _, err := j.h.PutRecord(context.Background(), j.name, j.data); err != nil {
					t.Error(err)
				}
			}
		})
	}
	i := 0
	for name, data := range records {
		jobs <- job{name, data, hosts[i%len(hosts)]}
		i++
	}
	close(jobs)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// A watch on host b tells the writes and removals made after it began, by
// a and by b itself, each with its writer's id and revision: every one, in
// order, when each is told before the next is made; and, from a burst, a
// subset in order that ends with every record's newest change (the bucket
// keeps one revision a key, so a value overwritten before the watch read
// it is gone).
func TestWatchRecordsTellsChanges(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", true, Config{})
	b := join(t, c, 2, "b", true, Config{})
	if _, err := a.PutRecord(ctx(t), "before", []byte("old")); err != nil {
		t.Fatal(err)
	}
	changes, err := b.WatchRecords(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// write makes one change and returns what the watch should tell.
	write := func(h *joined, s, data string, del bool) RecordChange {
		t.Helper()
		if del {
			if err := h.DeleteRecord(ctx(t), s); err != nil {
				t.Fatal(err)
			}
			return RecordChange{Session: s, Deleted: true, Host: h.HostID()}
		}
		rev, err := h.PutRecord(ctx(t), s, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return RecordChange{Session: s, Data: []byte(data), Rev: rev, Host: h.HostID()}
	}
	// is reports whether got is the change w (any revision after last,
	// for a removal, whose revision the writer is not told).
	is := func(got, w RecordChange, last uint64) bool {
		return got.Session == w.Session && bytes.Equal(got.Data, w.Data) && got.Deleted == w.Deleted &&
			got.Host == w.Host && got.Rev > last && (w.Rev == 0 || got.Rev == w.Rev)
	}

	var last uint64
	for i, step := range []struct {
		h       *joined
		session string
		data    string
		del     bool
	}{
		{a, "s1", `{"n":1}`, false},
		{a, "s2", `{"n":2}`, false},
		{a, "s1", `{"n":3}`, false},
		{a, "s2", "", true},
		{b, "s3", `{"n":4}`, false},
		{a, "before", "", true},
		{b, "never-written", "", true},
	} {
		w := write(step.h, step.session, step.data, step.del)
		got := nextChange(t, changes)
		if !is(got, w, last) {
			t.Fatalf("change %d = %+v, want %+v (after rev %d)", i, got, w, last)
		}
		last = got.Rev
	}

	// A burst: 5 records rewritten 10 times each, one then removed, from
	// both hosts, without waiting for the watch.
	var made []RecordChange
	newest := map[string]int{} // session → index in made of its newest change
	for i := range 50 {
		h := []*joined{a, b}[i%2]
		s := fmt.Sprintf("burst-%d", i%5)
		made = append(made, write(h, s, fmt.Sprintf(`{"n":%d}`, i), false))
		newest[s] = len(made) - 1
	}
	made = append(made, write(b, "burst-0", "", true))
	newest["burst-0"] = len(made) - 1
	next, told := 0, 0 // the changes before made[next] can no longer be told
	for len(newest) > 0 {
		got := nextChange(t, changes)
		k := next
		for k < len(made) && !is(got, made[k], last) {
			k++
		}
		if k == len(made) {
			t.Fatalf("change %+v is none of those made since the last told (rev %d)", got, last)
		}
		if newest[got.Session] == k {
			delete(newest, got.Session)
		}
		last, next = got.Rev, k+1
		told++
	}
	t.Logf("the watch told %d of the burst's %d changes", told, len(made))
	select {
	case ch := <-changes:
		t.Fatalf("a change nobody made: %+v", ch)
	default:
	}
}

// nextChange is the watch's next change, failing the test after
// testwait.Hang.
func nextChange(t *testing.T, changes <-chan RecordChange) RecordChange {
	t.Helper()
	timeout := time.NewTimer(testwait.Hang)
	defer timeout.Stop()
	select {
	case ch, ok := <-changes:
		if !ok {
			t.Fatal("the watch ended")
		}
		return ch
	case <-timeout.C:
		t.Fatal("no change to the records")
	}
	return RecordChange{}
}

// waitClosed fails the test unless changes is closed (after draining what
// it holds).
func waitClosed(t *testing.T, changes <-chan RecordChange) {
	t.Helper()
	timeout := time.NewTimer(testwait.Hang)
	defer timeout.Stop()
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-timeout.C:
			t.Fatal("the watch did not end")
		}
	}
}

// A watch ends when its context ends and when its member closes, leaving
// no goroutine behind and no consumer on the server.
func TestWatchRecordsEnds(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", true, Config{})
	b := join(t, c, 1, "b", true, Config{})
	if _, err := a.PutRecord(ctx(t), "s", []byte("x")); err != nil { // makes the bucket
		t.Fatal(err)
	}
	consumers := watchConsumers(t, a.nc, "KV_"+a.recordsKV.Bucket())
	base := goleak.IgnoreCurrent()

	wctx, cancel := context.WithCancel(ctx(t))
	changes, err := a.WatchRecords(wctx)
	if err != nil {
		t.Fatal(err)
	}
	consumers.waitCreated(t)
	if _, err := b.PutRecord(ctx(t), "s", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if ch := nextChange(t, changes); ch.Session != "s" || string(ch.Data) != "y" || ch.Host != "b" {
		t.Fatalf("change = %+v", ch)
	}
	cancel()
	waitClosed(t, changes)
	consumers.waitNone(t)
	goleak.VerifyNone(t, base)

	// A watch nobody reads, on a member that closes: Close ends it.
	changes, err = b.WatchRecords(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	consumers.waitCreated(t)
	for i := range recordWatchBuffer + 10 {
		if _, err := a.PutRecord(ctx(t), fmt.Sprintf("s%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, changes)
	consumers.waitNone(t)
	if _, err := b.WatchRecords(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("WatchRecords after Close = %v, want ErrClosed", err)
	}
}

// consumerAdvisories follows the consumers of a stream by the server's
// advisories of their creation and deletion: the server's own events, as
// its listings of consumers may answer a moment behind either.
type consumerAdvisories struct {
	events chan *nats.Msg
	live   map[string]bool
}

func watchConsumers(t *testing.T, nc *nats.Conn, stream string) *consumerAdvisories {
	t.Helper()
	c := &consumerAdvisories{events: make(chan *nats.Msg, 64), live: map[string]bool{}}
	sub, err := nc.ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.*."+stream+".*", c.events)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// next applies the next advisory, failing the test after testwait.Hang.
func (c *consumerAdvisories) next(t *testing.T) {
	t.Helper()
	timeout := time.NewTimer(testwait.Hang)
	defer timeout.Stop()
	select {
	case m := <-c.events:
		tok := strings.Split(m.Subject, ".")
		switch tok[4] {
		case "CREATED":
			c.live[tok[6]] = true
		case "DELETED":
			delete(c.live, tok[6])
		}
	case <-timeout.C:
		t.Fatalf("consumers %v still on the stream after 20 s", c.live)
	}
}

// waitCreated waits until a consumer exists.
func (c *consumerAdvisories) waitCreated(t *testing.T) {
	t.Helper()
	for len(c.live) == 0 {
		c.next(t)
	}
}

// waitNone waits until every consumer created has been deleted.
func (c *consumerAdvisories) waitNone(t *testing.T) {
	t.Helper()
	for len(c.live) > 0 {
		c.next(t)
	}
}

// Bad names and records too large are refused before anything is sent,
// with a short error; the largest record and any name's bytes are fine.
func TestRecordsRefuseBadInput(t *testing.T) {
	c := clustertest.Start(t, 3)
	a := join(t, c, 0, "a", true, Config{})
	b := join(t, c, 1, "b", true, Config{})
	long := strings.Repeat("s", MaxSessionBytes+1)
	for _, tc := range []struct {
		name string
		op   func() error
		want error
	}{
		{"put, empty name", func() error { _, err := a.PutRecord(ctx(t), "", []byte("x")); return err }, ErrBadName},
		{"put, long name", func() error { _, err := a.PutRecord(ctx(t), long, []byte("x")); return err }, ErrBadName},
		{"put, record too large", func() error {
			_, err := a.PutRecord(ctx(t), "s", make([]byte, MaxRecordBytes+1))
			return err
		}, ErrTooLarge},
		{"delete, empty name", func() error { return a.DeleteRecord(ctx(t), "") }, ErrBadName},
		{"delete, long name", func() error { return a.DeleteRecord(ctx(t), long) }, ErrBadName},
		{"read, empty name", func() error { _, _, _, err := a.Record(ctx(t), ""); return err }, ErrBadName},
		{"read, long name", func() error { _, _, _, err := a.Record(ctx(t), long); return err }, ErrBadName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.want) || len(err.Error()) > 200 {
				t.Fatalf("err = %v, want a short %v", err, tc.want)
			}
		})
	}
	if a.recordsKV != nil {
		t.Error("a refused call made the records bucket")
	}

	big := bytes.Repeat([]byte("r"), MaxRecordBytes)
	for _, s := range []string{strings.Repeat("s", MaxSessionBytes), "a b/c.d*>é\x00"} {
		rev, err := a.PutRecord(ctx(t), s, big)
		if err != nil {
			t.Fatalf("PutRecord(%q..., %d bytes) = %v", s[:min(10, len(s))], len(big), err)
		}
		data, got, ok, err := b.Record(ctx(t), s)
		if err != nil || !ok || got != rev || !bytes.Equal(data, big) {
			t.Fatalf("Record(%q...) = %d bytes at rev %d, %v, %v; want %d bytes at rev %d", s[:min(10, len(s))], len(data), got, ok, err, len(big), rev)
		}
	}

	if err := a.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutRecord(ctx(t), "s", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("PutRecord after Close = %v, want ErrClosed", err)
	}
	if _, err := a.Records(ctx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("Records after Close = %v, want ErrClosed", err)
	}
}

// BenchmarkRecordPutRead measures a 2 KiB record written by a host on node
// 0 and read back by a host on node 2, through a 3-node cluster (R3).
func BenchmarkRecordPutRead(b *testing.B) {
	c := clustertest.Start(b, 3)
	writer := benchJoin(b, c, 0, "writer")
	reader := benchJoin(b, c, 2, "reader")
	record := bytes.Repeat([]byte("r"), 2048)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		s := fmt.Sprintf("ahp-session://%036d", i%1000)
		rev, err := writer.PutRecord(ctx, s, record)
		if err != nil {
			b.Fatal(err)
		}
		if _, got, ok, err := reader.Record(ctx, s); err != nil || !ok || got != rev {
			b.Fatalf("Record = rev %d, %v, %v; want rev %d", got, ok, err, rev)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/put+read")
}

// BenchmarkRecordsList measures listing 10,000 records of 2 KiB (names of
// 50 bytes, as channel URIs are) from a host on node 2 through a 3-node
// cluster (R3), and what they take in the bucket, per replica.
func BenchmarkRecordsList(b *testing.B) {
	const n = 10000
	c := clustertest.Start(b, 3)
	writer := benchJoin(b, c, 0, "writer")
	reader := benchJoin(b, c, 2, "reader")
	records := map[string][]byte{}
	for i := range n {
		records[fmt.Sprintf("ahp-session://%036d", i)] = bytes.Repeat([]byte{byte('a' + i%26)}, 2048)
	}
	putAll(b, []*Member{writer}, records)
	ctx := context.Background()
	for b.Loop() {
		got, err := reader.Records(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != n {
			b.Fatalf("Records listed %d, want %d", len(got), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/Records(10k)")
	st, err := writer.js.Stream(ctx, "KV_"+writer.recordsKV.Bucket())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.CachedInfo().State.Bytes)/1e6, "MB/10k-records")
}

// A watch whose consumer's NATS node stops recreates its consumer on
// another node and goes on from where it was: the next change is told,
// within about two heartbeats.
func TestWatchRecordsSurvivesItsConsumersNodeStopping(t *testing.T) {
	c := clustertest.Start(t, 3)
	b := join(t, c, 0, "b", true, Config{})
	if _, err := b.PutRecord(ctx(t), "s0", []byte("0")); err != nil { // makes the bucket
		t.Fatal(err)
	}
	// A watch whose consumer is not on JetStream's meta leader: stopping
	// that would also stop consumers being made until a new leader is
	// elected (13 s once), which is the meta group's matter, not the
	// watch's.
	meta := metaNode(t, c)
	var changes <-chan RecordChange
	node := meta
	for node == meta {
		wctx, cancel := context.WithCancel(ctx(t))
		t.Cleanup(cancel)
		var err error
		if changes, err = b.WatchRecords(wctx); err != nil {
			t.Fatal(err)
		}
		node = consumerNode(t, b.Member)
		if node == meta {
			cancel()
			waitClosed(t, changes)
		}
	}
	a := join(t, c, (node+1)%3, "a", true, Config{})
	if _, err := a.PutRecord(ctx(t), "s1", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if ch := nextChange(t, changes); ch.Session != "s1" {
		t.Fatalf("change = %+v, want s1's", ch)
	}
	c.Stop(node)
	start := time.Now()
	rev, err := a.PutRecord(ctx(t), "s2", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	if ch := nextChange(t, changes); ch.Session != "s2" || ch.Rev != rev || ch.Host != "a" {
		t.Fatalf("change = %+v, want s2's at rev %d", ch, rev)
	}
	t.Logf("the watch told the change %v after its consumer's node n%d stopped (the watcher on n0, meta leader n%d)", time.Since(start), node, meta)
}

// consumerNode is the node of the one consumer on m's records' stream.
func consumerNode(t *testing.T, m *Member) int {
	t.Helper()
	st, err := m.js.Stream(ctx(t), "KV_"+m.recordsKV.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	lister := st.ListConsumers(ctx(t))
	var leaders []string
	for ci := range lister.Info() {
		if ci.Cluster != nil {
			leaders = append(leaders, ci.Cluster.Leader)
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	if len(leaders) != 1 || len(leaders[0]) < 2 {
		t.Fatalf("the records' stream has consumers on %v, want one", leaders)
	}
	n, err := strconv.Atoi(leaders[0][1:])
	if err != nil {
		t.Fatalf("consumer on %q, not a clustertest node", leaders[0])
	}
	return n
}
