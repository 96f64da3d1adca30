package shared

import (
	"context"
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

// Records keeps session records in the cluster's records bucket, under
// the session's id: the host's record store when it shares sessions.
type Records struct{ m *cluster.Member }

// NewRecords returns the record store of cluster m.
func NewRecords(m *cluster.Member) Records { return Records{m} }

// Load reads every record of this version in the bucket.
func (s Records) Load() ([]*session.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := s.m.Records(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*session.Record, 0, len(all))
	for id, data := range all {
		rec, err := session.DecodeRecord(data)
		if err != nil || idOf(rec.URI) != id {
			continue // not a record of this version, or not this session's
		}
		out = append(out, rec)
	}
	return out, nil
}

// Save writes the record of session id.
func (s Records) Save(id string, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	_, err := s.m.PutRecord(ctx, id, data)
	return err
}

// Remove deletes the record of session id.
func (s Records) Remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	return s.m.DeleteRecord(ctx, id)
}

func idOf(uri string) string {
	su, err := protocol.ParseSessionURI(uri)
	if err != nil {
		return ""
	}
	return su.ID
}

// takeRecords applies the record changes of other hosts until the host
// closes.
func (p *Part) takeRecords(ch <-chan cluster.RecordChange) {
	if held := p.opts.RecordsHeld; held != nil {
		select {
		case <-held:
		case <-p.core.Context().Done():
			return
		}
	}
	for c := range ch {
		if c.Host == p.hostID() {
			continue
		}
		if c.Deleted {
			p.recordRemoved(c.Session)
			continue
		}
		rec, err := session.DecodeRecord(c.Data)
		if err != nil || idOf(rec.URI) != c.Session {
			p.log.Debug("passing over a record another host wrote that this one cannot read", "session", c.Session, "err", err)
			continue
		}
		p.recordChanged(rec, c.Rev)
	}
}

// recordChanged takes a record another host wrote, of revision rev: a
// session it made is added here, one this host has asleep is made again
// from it. A session this host holds, or has a client using, is left
// alone: this host is its writer, or will make it again when it takes it
// (Core.Refresh). So is one made from this revision of the record or a
// later one (learnRecord reads records ahead of the watch).
func (p *Part) recordChanged(rec *session.Record, rev uint64) {
	id := idOf(rec.URI)
	if p.leases.get(id) != nil {
		return
	}
	old := p.core.Session(id)
	if old != nil {
		if !old.TakesRecord(rev) {
			return
		}
	}
	s, err := p.core.Restore(rec)
	if err != nil {
		p.log.Debug("passing over a record another host wrote that this one cannot use", "session", rec.URI, "err", err)
		return
	}
	s.SetRecordRev(rev) // s is not shared yet
	if !p.core.Replace(old, s) {
		return
	}
	sum, external := s.ListedSummary()
	if external {
		return
	}
	bus := p.core.Bus()
	readers := s.Readers()
	if old == nil {
		bus.Notify(protocol.RootURI, "root/sessionAdded", &protocol.SessionAddedParams{Channel: protocol.RootURI, Summary: sum}, readers)
		return
	}
	before := old.CurrentSummary()
	if changes, changed := session.SummaryChanges(before, sum); changed {
		bus.Notify(protocol.RootURI, "root/sessionSummaryChanged", &protocol.SessionSummaryChangedParams{Channel: protocol.RootURI, Session: s.URI(), Changes: changes}, readers)
	}
}

// recordRemoved forgets a session another host disposed of.
func (p *Part) recordRemoved(id string) {
	if p.leases.get(id) != nil {
		return
	}
	s := p.core.Forget(id)
	if s == nil {
		return
	}
	p.dropMirror(id)
	uri, chats := s.MarkRemoved()
	for _, ch := range chats {
		p.core.UnsubscribeAll(ch)
	}
	p.core.UnsubscribeAll(uri)
	p.core.Bus().Notify(protocol.RootURI, "root/sessionRemoved", &protocol.SessionRemovedParams{Channel: protocol.RootURI, Session: uri}, nil)
}
