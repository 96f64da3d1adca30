package cluster

// Shared session records: a bucket where every host keeps the records of
// the sessions it made, so that any host can read any session's record,
// list them all, and learn of sessions made elsewhere as they change. A
// record is opaque bytes (the host's JSON); this file never looks inside.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxRecordBytes bounds a session record: 1 MiB less 1 KiB kept for the
// message's headers, so that a record of the largest size fits the
// server's default maximum payload (1 MiB, headers included). A server
// configured with a smaller maximum lowers it.
const MaxRecordBytes = 1<<20 - recordHeaderRoom

const (
	// recordHeaderRoom is what a record's message may need besides the
	// record: its headers (the writer's host id, the expected stream),
	// a few hundred bytes at most.
	recordHeaderRoom = 1 << 10
	// hostHeader carries the id of the host that wrote a record or
	// removed it.
	hostHeader = "Ahpd-Cluster-Host"
	// recordWatchBuffer is how many changes a watch holds for a reader
	// that is behind before it stops reading the stream.
	recordWatchBuffer = 256
	// recordWatchHeartbeat is how often the server tells an idle watch
	// that its consumer is alive; two missed, the watch recreates its
	// consumer (on another node when its node is gone). The client's
	// default, 5 s, left a watch blind for 10 to 20 s after a node's loss.
	recordWatchHeartbeat = time.Second
	// deleteConsumerTimeout bounds removing a finished watch's consumer
	// from the server (it would otherwise linger until its inactivity
	// threshold, 5 minutes).
	deleteConsumerTimeout = 2 * time.Second
	// watchStopWait bounds the wait for a record watch's iterator to stop.
	watchStopWait = time.Second
)

// RecordChange is one change to the records bucket, as WatchRecords tells
// it.
type RecordChange struct {
	// Session is the session's name.
	Session string
	// Data is the record written (nil when Deleted).
	Data []byte
	// Rev is the change's revision: the stream sequence of its write,
	// increasing with every change to any record.
	Rev uint64
	// Deleted says the record was removed.
	Deleted bool
	// Host is the id of the host that made the change ("" when it was not
	// a host of this package), so that a host can skip its own.
	Host string
}

// records is the records bucket, created (or bound to) on first use so
// that Join does not wait for a bucket only some hosts use. A failure is
// not kept: the next call tries again.
func (m *Member) records(ctx context.Context) (jetstream.KeyValue, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	m.recordsMu.Lock()
	defer m.recordsMu.Unlock()
	if m.recordsKV == nil {
		kv, err := m.bucket(ctx, m.cfg.Prefix+"_sessions", "ahpd session records")
		if err != nil {
			return nil, err
		}
		m.recordsKV = kv
	}
	return m.recordsKV, nil
}

// recordLimit is the largest record this member may write: MaxRecordBytes,
// or less when the server's maximum payload is smaller than 1 MiB.
func (m *Member) recordLimit() int {
	limit := MaxRecordBytes
	if p := int(m.nc.MaxPayload()); p > 0 && p-recordHeaderRoom < limit {
		limit = p - recordHeaderRoom
	}
	return limit
}

// PutRecord writes session's record, replacing any, and returns its
// revision. Records do not expire: a record lasts until DeleteRecord.
func (m *Member) PutRecord(ctx context.Context, session string, data []byte) (uint64, error) {
	if err := checkSession(session); err != nil {
		return 0, err
	}
	if err := m.writable(); err != nil {
		return 0, fmt.Errorf("cluster: writing a session record: %w", err)
	}
	if limit := m.recordLimit(); len(data) > limit {
		return 0, fmt.Errorf("%w: a session record of %d bytes, at most %d", ErrTooLarge, len(data), limit)
	}
	kv, err := m.records(ctx)
	if err != nil {
		return 0, err
	}
	msg := &nats.Msg{Subject: "$KV." + kv.Bucket() + "." + sessionKey(session), Data: data, Header: nats.Header{}}
	msg.Header.Set(hostHeader, m.cfg.HostID)
	ack, err := m.js.PublishMsg(ctx, msg, jetstream.WithExpectStream("KV_"+kv.Bucket()))
	if err != nil {
		return 0, fmt.Errorf("cluster: writing session record: %w", err)
	}
	return ack.Sequence, nil
}

// DeleteRecord removes session's record. Removing a record that does not
// exist is not an error (watchers are told of a removal all the same).
// The removal's marker lasts markerTTL, so that removed sessions do not
// pile up in the bucket.
func (m *Member) DeleteRecord(ctx context.Context, session string) error {
	if err := checkSession(session); err != nil {
		return err
	}
	if err := m.writable(); err != nil {
		return fmt.Errorf("cluster: removing a session record: %w", err)
	}
	kv, err := m.records(ctx)
	if err != nil {
		return err
	}
	// The KV Purge, with the writer's id: the client's own takes no
	// headers.
	msg := &nats.Msg{Subject: "$KV." + kv.Bucket() + "." + sessionKey(session), Header: nats.Header{}}
	msg.Header.Set("KV-Operation", "PURGE")
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Header.Set(hostHeader, m.cfg.HostID)
	_, err = m.js.PublishMsg(ctx, msg, jetstream.WithExpectStream("KV_"+kv.Bucket()), jetstream.WithMsgTTL(markerTTL))
	if err != nil {
		return fmt.Errorf("cluster: removing session record: %w", err)
	}
	return nil
}

// Record reads session's record and its revision; ok is false when it
// has none. It is read from the bucket's leader, so it follows every
// write acknowledged before it, whichever host made it.
func (m *Member) Record(ctx context.Context, session string) (data []byte, rev uint64, ok bool, err error) {
	if err := checkSession(session); err != nil {
		return nil, 0, false, err
	}
	kv, err := m.records(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	cur, err := m.last(ctx, kv.Bucket(), sessionKey(session))
	if err != nil || !cur.live {
		return nil, 0, false, err
	}
	return cur.value, cur.rev, true, nil
}

// Records lists every session's record, by session name: a watcher's
// initial values, one request whatever the count (the records then
// stream in). A listing is a snapshot; WatchRecords follows the changes.
func (m *Member) Records(ctx context.Context) (map[string][]byte, error) {
	kv, err := m.records(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("cluster: listing session records: %w", err)
	}
	defer func() { _ = w.Stop() }()
	out := map[string][]byte{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: listing session records: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("cluster: listing session records: watcher closed")
			}
			if e == nil { // every live record has been delivered
				return out, nil
			}
			name, err := base64.RawURLEncoding.DecodeString(e.Key())
			if err != nil {
				m.log.Warn("cluster: skipping a record under a key this package did not write", "key", e.Key())
				continue
			}
			out[string(name)] = e.Value()
		}
	}
}

// WatchRecords tells the changes to the records made after it is called,
// by any host (this one included), in the order the bucket took them. The
// channel is closed when ctx ends or the member closes. It is buffered; a
// reader that does not keep up holds back its own watch, not other hosts.
//
// The bucket keeps one revision a record, so a value overwritten before
// the watch read it is skipped: a watch tells every record's newest
// change (a removal while its marker lasts, 30 s), and the ones before it
// only if it read them in time. A host that needs the exact state lists
// with Records, then watches.
//
// It reads the bucket's stream itself, not through the client's KV watch,
// because only the stream's messages carry the writer's id.
func (m *Member) WatchRecords(ctx context.Context) (<-chan RecordChange, error) {
	kv, err := m.records(ctx)
	if err != nil {
		return nil, err
	}
	stream := "KV_" + kv.Bucket()
	// Started after the stream's last message as of now, not "deliver
	// new": the ordered consumer recreates itself after a gap from where
	// it was, and one that had delivered nothing yet would otherwise skip
	// what was written in between.
	// The bucket was just made or bound, by this host or another: its
	// stream exists, though a member of its group may say otherwise for a
	// while (whileSettling).
	var cons jetstream.Consumer
	err = whileSettling(ctx, func() error {
		st, err := m.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		cons, err = m.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:   st.CachedInfo().State.LastSeq + 1,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: watching session records: %w", err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(recordWatchHeartbeat))
	if err != nil {
		return nil, fmt.Errorf("cluster: watching session records: %w", err)
	}
	w := &recordWatch{m: m, stream: stream, prefix: "$KV." + kv.Bucket() + ".", cons: cons, it: it,
		out: make(chan RecordChange, recordWatchBuffer), ended: make(chan struct{}), stopped: make(chan struct{})}
	// Counted under the lock Close sets closed with, so that Close's wait
	// for the watches misses none.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		w.stop()
		return nil, ErrClosed
	}
	m.watches.Add(2)
	m.mu.Unlock()
	go w.read(ctx)
	go w.stopWhenDone(ctx)
	return w.out, nil
}

// recordWatch is one WatchRecords: an ordered consumer on the records'
// stream and the goroutines that read it and stop it.
type recordWatch struct {
	m       *Member
	stream  string
	prefix  string // what the records' subjects have before the key
	cons    jetstream.Consumer
	it      jetstream.MessagesContext
	out     chan RecordChange
	ended   chan struct{} // closed when read's loop ends
	stopped chan struct{} // closed when the consumer is stopped and deleted
}

// read delivers the stream's messages as changes until the iterator stops
// (stopWhenDone stops it) or ctx ends or the member closes.
func (w *recordWatch) read(ctx context.Context) {
	defer w.m.watches.Done()
	defer close(w.out) // last: the consumer is gone when a reader sees it
	defer func() { <-w.stopped }()
	defer close(w.ended)
	// Next has a goroutine of its own, which read does not wait for: it
	// cannot be interrupted, and while the library re-creates a consumer
	// that the cluster cannot make (no quorum: the last NATS node of a
	// cluster stopping) it blocks, and holds Stop back, for seconds.
	msgs, failed, quit := make(chan jetstream.Msg), make(chan error, 1), make(chan struct{})
	defer close(quit)
	go func() {
		for {
			msg, err := w.it.Next()
			if err != nil {
				failed <- err
				return
			}
			select {
			case msgs <- msg:
			case <-quit:
				return
			}
		}
	}()
	for {
		var msg jetstream.Msg
		select {
		case msg = <-msgs:
		case err := <-failed:
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				w.m.log.Warn("cluster: watch of session records ended", "host", w.m.cfg.HostID, "err", err)
			}
			return
		case <-ctx.Done():
			return
		case <-w.m.stop:
			return
		}
		ch, ok := w.change(msg)
		if !ok {
			continue
		}
		select {
		case w.out <- ch:
		case <-ctx.Done():
			return
		case <-w.m.stop:
			return
		}
	}
}

// stopWhenDone stops the watch when ctx ends, the member closes or read
// returned, and removes its consumer from the server.
func (w *recordWatch) stopWhenDone(ctx context.Context) {
	defer w.m.watches.Done()
	select {
	case <-ctx.Done():
	case <-w.m.stop:
	case <-w.ended:
	}
	w.stop()
	close(w.stopped)
}

// stop stops the iterator and deletes the consumer it reads (best effort:
// the server drops an idle one by itself after 5 minutes).
func (w *recordWatch) stop() {
	// Stop waits for the library's re-creation of a consumer in flight,
	// which on a cluster without quorum goes on for seconds: not waited
	// for past watchStopWait (the consumer then is not deleted either).
	stopped := make(chan struct{})
	go func() {
		w.it.Stop()
		close(stopped)
	}()
	wait := watchStopWait
	if w.m.quorumLost() {
		wait = 0 // it would not stop in time
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		w.m.log.Debug("cluster: a record watch's consumer does not stop; leaving it to the server", "host", w.m.cfg.HostID)
		return
	}
	info := w.cons.CachedInfo()
	if info == nil || w.m.quorumLost() {
		// Without a quorum the deletion would wait its whole timeout for
		// nothing; the server drops the consumer itself.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteConsumerTimeout)
	defer cancel()
	if err := w.m.js.DeleteConsumer(ctx, w.stream, info.Name); err != nil &&
		!errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, nats.ErrConnectionClosed) {
		w.m.log.Debug("cluster: removing a record watch's consumer", "err", err)
	}
}

// change is the change msg makes, false when it is not a record's (a
// subject this package did not write).
func (w *recordWatch) change(msg jetstream.Msg) (RecordChange, bool) {
	key, ok := strings.CutPrefix(msg.Subject(), w.prefix)
	if !ok {
		return RecordChange{}, false
	}
	name, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return RecordChange{}, false
	}
	meta, err := msg.Metadata()
	if err != nil {
		return RecordChange{}, false
	}
	ch := RecordChange{Session: string(name), Rev: meta.Sequence.Stream}
	hdr := msg.Headers()
	ch.Host = hdr.Get(hostHeader)
	if hdr.Get("KV-Operation") != "" || hdr.Get(jetstream.MarkerReasonHeader) != "" {
		ch.Deleted = true
		w.m.seen.forget(ch.Session)
	} else {
		ch.Data = msg.Data()
		// A record is written by the host running its session.
		w.m.seen.note(ch.Session, ch.Host)
	}
	return ch, true
}
