package host

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Session records in the cluster (docs/CLUSTER.md). A host sharing
// sessions keeps their records in the cluster's records bucket, not in
// its state directory, so that every host lists every session and any
// can wake one. Each host has a copy of every record as a sleeping
// session (the one it holds is its own), and follows the bucket: a
// session made, changed or disposed on another host is added, brought up
// to date or removed here, and this host's clients are told as for its own.

// recordTimeout bounds one read or write of the records bucket.
const recordTimeout = 10 * time.Second

// clusterStore keeps records in the cluster's records bucket, under the
// session's id.
type clusterStore struct{ m *cluster.Member }

func (s clusterStore) load() ([]*session.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := s.m.Records(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*session.Record, 0, len(all))
	for id, data := range all {
		rec, err := decodeRecord(data)
		if err != nil || idOf(rec.URI) != id {
			continue // not a record of this version, or not this session's
		}
		out = append(out, rec)
	}
	return out, nil
}

func (s clusterStore) save(id string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, err := s.m.PutRecord(ctx, id, data)
	return err
}

func (s clusterStore) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	return s.m.DeleteRecord(ctx, id)
}

// decodeRecord reads a record as the store wrote it.
func decodeRecord(data []byte) (*session.Record, error) {
	var rec session.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("not a session record: %w", err)
	}
	if rec.AHPD != session.RecordVersion {
		return nil, fmt.Errorf("not a session record of this version (ahpd=%d)", rec.AHPD)
	}
	if _, err := protocol.ParseSessionURI(rec.URI); err != nil {
		return nil, err
	}
	return &rec, nil
}

// followRecords starts following the records other hosts write. It is
// called before the records are loaded, so that no change between the
// listing and the watch is missed (one seen twice is applied twice, which
// changes nothing).
func (h *Host) followRecords() (<-chan cluster.RecordChange, error) {
	if !h.clustered() {
		return nil, nil
	}
	ch, err := h.opts.Cluster.WatchRecords(h.ctx)
	if err != nil {
		return nil, fmt.Errorf("host: following the cluster's session records: %w", err)
	}
	return ch, nil
}

// takeRecords applies the record changes of other hosts until the host
// closes.
func (h *Host) takeRecords(ch <-chan cluster.RecordChange) {
	defer h.wg.Done()
	if held := h.opts.recordsHeld; held != nil {
		select {
		case <-held:
		case <-h.ctx.Done():
			return
		}
	}
	for c := range ch {
		if c.Host == h.hostID() {
			continue
		}
		if c.Deleted {
			h.recordRemoved(c.Session)
			continue
		}
		rec, err := decodeRecord(c.Data)
		if err != nil || idOf(rec.URI) != c.Session {
			h.log.Debug("passing over a record another host wrote that this one cannot read", "session", c.Session, "err", err)
			continue
		}
		h.recordChanged(rec, c.Rev)
	}
}

// recordChanged takes a record another host wrote, of revision rev: a
// session it made is added here, one this host has asleep is made again
// from it. A session this host holds, or has a client using, is left
// alone: this host is its writer, or will make it again when it takes it
// (fresh). So is one made from this revision of the record or a later one
// (learnRecord reads records ahead of the watch).
func (h *Host) recordChanged(rec *session.Record, rev uint64) {
	id := idOf(rec.URI)
	if h.leases.get(id) != nil {
		return
	}
	old := h.byID(id)
	if old != nil {
		if !old.TakesRecord(rev) {
			return
		}
	}
	s, err := h.restore(rec, nil)
	if err != nil {
		h.log.Debug("passing over a record another host wrote that this one cannot use", "session", rec.URI, "err", err)
		return
	}
	s.SetRecordRev(rev) // s is not shared yet
	if !h.replaceSession(old, s) {
		return
	}
	sum, external := s.ListedSummary()
	if external {
		return
	}
	if old == nil {
		h.bus.Notify(protocol.RootURI, "root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI, Summary: sum}, nil)
		return
	}
	before := old.CurrentSummary()
	if changes, changed := session.SummaryChanges(before, sum); changed {
		h.bus.Notify(protocol.RootURI, "root/sessionSummaryChanged", &protocol.SessionSummaryChangedParams{Channel: protocol.RootURI, Session: s.URI(), Changes: changes}, nil)
	}
}

// recordRemoved forgets a session another host disposed of.
func (h *Host) recordRemoved(id string) {
	if h.leases.get(id) != nil {
		return
	}
	h.mu.Lock()
	s := h.sessions[id]
	if s != nil {
		delete(h.sessions, id)
	}
	h.mu.Unlock()
	if s == nil {
		return
	}
	h.order.Remove(s)
	h.dropMirror(id)
	uri, chats := s.MarkRemoved()
	for _, ch := range chats {
		h.unsubscribeAll(ch)
	}
	h.unsubscribeAll(uri)
	h.bus.Notify(protocol.RootURI, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: uri}, nil)
}
