package cluster

// The key-value writes and reads that the client library's KV API does
// not offer: a compare-and-set with a TTL, a read of a key's newest
// message (markers included) from the bucket's leader, and telling a
// conflict from a busy key.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishTTL writes value under key in bucket with a TTL, expecting the
// key's last revision to be rev when rev is not nil: the key-value Update
// with a TTL that the client library does not offer. A write refused as
// busy is tried again (see retryBusy).
func (m *Member) publishTTL(ctx context.Context, bucket, key string, value []byte, ttl time.Duration, rev *uint64) (uint64, error) {
	opts := []jetstream.PublishOpt{jetstream.WithMsgTTL(ttl), jetstream.WithExpectStream("KV_" + bucket)}
	if rev != nil {
		opts = append(opts, jetstream.WithExpectLastSequencePerSubject(*rev))
	}
	var seq uint64
	err := retryBusy(ctx, func() error {
		ack, err := m.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + bucket + "." + key, Data: value}, opts...)
		if err == nil {
			seq = ack.Sequence
		}
		return err
	})
	return seq, err
}

// retryBusy runs op until it is not refused as busy, waiting 1 ms, then
// twice as long each time, for at most about a second in all. A
// replicated stream's leader refuses a compare-and-set on a key while
// another write to that key is in flight (accepted, not yet applied), even
// one whose ack its writer already has; that refusal says nothing about
// the key's revision, so it is not a conflict.
func retryBusy(ctx context.Context, op func() error) error {
	wait := time.Millisecond
	for {
		err := op()
		if !busy(err) || wait > 512*time.Millisecond {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait *= 2
	}
}

// settleWait bounds how long a stream that should exist may be reported
// missing before that is believed.
const settleWait = 30 * time.Second

// whileSettling runs op until it does not fail as a cluster still settling
// does (see settling), waiting 50 ms, then twice as long each time up to a
// second, for at most settleWait in all. A replicated stream another host
// made, or one whose group is electing a leader (a loaded machine misses
// heartbeats), can be reported missing for a while: a member of its group
// answers while the group has no leader, before it has made the stream
// itself. A stream that is really gone is reported so once the wait is out.
func whileSettling(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(settleWait)
	wait := 50 * time.Millisecond
	for {
		err := op()
		if !settling(ctx, err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// settling tells whether err is what a cluster still forming or electing
// answers: a stream or bucket reported missing, or no answer in time from
// the JetStream API (its own timeout, not ctx's: a cluster of nodes just
// started on a loaded machine can take longer than that to elect the
// meta leader), or nobody to answer yet.
func settling(ctx context.Context, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return true
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return ctx.Err() == nil
	}
	return false
}

// newest is a key's newest message: its value and revision, and whether
// it is a value (live) or the marker a removal or an expiry left.
type newest struct {
	value []byte
	rev   uint64
	live  bool
}

// last reads key's newest message in bucket (rev 0 when there is none)
// from the bucket's stream leader. The key-value Get will not do: it hides
// removal markers and their revisions, and on a cluster any replica may
// answer it, maybe one that has not yet applied the write that just made
// a compare-and-set fail, which would send Acquire round again with the
// same stale revision.
func (m *Member) last(ctx context.Context, bucket, key string) (newest, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": "$KV." + bucket + "." + key})
	if err != nil {
		return newest{}, err
	}
	msg, err := m.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+bucket, req)
	if err != nil {
		return newest{}, fmt.Errorf("cluster: reading %s: %w", bucket, err)
	}
	var resp struct {
		Message *struct {
			Seq     uint64 `json:"seq"`
			Headers []byte `json:"hdrs"`
			Data    []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return newest{}, fmt.Errorf("cluster: reading %s: bad reply: %w", bucket, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return newest{}, nil
	case resp.Error != nil:
		return newest{}, fmt.Errorf("cluster: reading %s: %w", bucket, resp.Error)
	case resp.Message == nil:
		return newest{}, fmt.Errorf("cluster: reading %s: empty reply", bucket)
	}
	live := true
	if len(resp.Message.Headers) > 0 {
		hdr, err := nats.DecodeHeadersMsg(resp.Message.Headers)
		if err != nil {
			return newest{}, fmt.Errorf("cluster: reading %s: bad headers: %w", bucket, err)
		}
		live = hdr.Get("KV-Operation") == "" && hdr.Get(jetstream.MarkerReasonHeader) == ""
	}
	return newest{value: resp.Message.Data, rev: resp.Message.Seq, live: live}, nil
}

// leaderWait bounds the wait for a bucket's leader to answer a read that
// a replica can answer too (Holder): a leader that died with its node
// answers nothing, and its bucket takes seconds to elect another.
const leaderWait = time.Second

// noLeader reports whether a read of the leader failed as one does while
// the bucket has none: no answer in time, nobody listening, or JetStream
// saying it is not available.
func noLeader(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.As(err, &apiErr) && apiErr.Code == 503
}

// lastOfAnyReplica is last read from whichever of the bucket's replicas
// answers first (a direct get; the buckets allow them): one that has not
// applied the newest writes may answer, so it is for when the leader
// cannot.
func (m *Member) lastOfAnyReplica(ctx context.Context, bucket, key string) (newest, error) {
	msg, err := m.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+bucket+".$KV."+bucket+"."+key, nil)
	if err != nil {
		return newest{}, fmt.Errorf("cluster: reading %s from a replica: %w", bucket, err)
	}
	if len(msg.Data) == 0 {
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "404":
			return newest{}, nil
		default:
			return newest{}, fmt.Errorf("cluster: reading %s from a replica: status %s %s", bucket, status, msg.Header.Get("Description"))
		}
	}
	rev, err := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return newest{}, fmt.Errorf("cluster: reading %s from a replica: bad sequence: %w", bucket, err)
	}
	live := msg.Header.Get("KV-Operation") == "" && msg.Header.Get(jetstream.MarkerReasonHeader) == ""
	return newest{value: msg.Data, rev: rev, live: live}, nil
}

// conflict reports whether err is the server refusing a compare-and-set
// because the key is at another revision than the one expected.
func conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// busy reports whether err is a replicated stream's leader refusing a
// compare-and-set because another write to the key is in flight.
func busy(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
