package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Event streams: GET .../events answers Server-Sent Events, one
// `event: action` per action on the channels it follows, its `id` the
// action's serverSeq. `?after=SEQ` (or a Last-Event-ID header) replays
// what the channels changed after SEQ first, through AHP reconnect: the
// stream's first connection initializes as a client, and a second one
// reconnects as that client with lastSeenServerSeq SEQ. When the host no
// longer holds those changes it sends the channels' states instead, as
// one `event: snapshot`.

// channelsFunc checks that the caller may watch what a stream follows
// (subscribing c to it) and returns its channels.
type channelsFunc func(ctx context.Context, c *client.Client) ([]string, error)

func (a *API) sessionEvents(w http.ResponseWriter, r *http.Request) {
	uri, err := sessionURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.events(w, r, func(ctx context.Context, c *client.Client) ([]string, error) {
		chat, err := watchSession(ctx, c, uri)
		if err != nil {
			return nil, err
		}
		return []string{uri, chat}, nil
	})
}

// afterOf reads where a stream starts: ?after, else Last-Event-ID; -1
// for live events only.
func afterOf(r *http.Request) (int64, error) {
	s, field := r.URL.Query().Get("after"), "after"
	if s == "" {
		s, field = r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	}
	if s == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(field, "%s is a sequence number: a whole number from 0", field)
	}
	return n, nil
}

// events serves one event stream.
func (a *API) events(w http.ResponseWriter, r *http.Request, channels channelsFunc) {
	after, err := afterOf(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	release, ok := a.streams.take(w, r, credOf(r).Principal.String())
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	id := clientIDOf(credOf(r))
	c, err := a.connectAs(ctx, credOf(r), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	follow, err := channels(ctx, c)
	if err != nil {
		c.Close()
		a.fail(w, r, err)
		return
	}
	replayed := false
	if after >= 0 {
		// The first connection made the host know the client; the second
		// takes its channels over from after.
		c.Close()
		stream, err := a.opts.Host.Connect(credOf(r))
		if err != nil {
			a.fail(w, r, err)
			return
		}
		c, replayed, err = client.Resume(ctx, stream, a.clientOptions(id), after, follow)
		if err != nil {
			_ = stream.Close()
			a.fail(w, r, err)
			return
		}
	}
	defer c.Close()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	ready := map[string]any{"channels": follow, "lastSeq": c.LastSeq()}
	if after >= 0 {
		ready["replayed"] = replayed
	}
	if s.send("ready", "", ready) != nil {
		return
	}
	if after >= 0 && !replayed {
		states := map[string]protocol.ChannelState{}
		for _, ch := range follow {
			if st := c.State(ch); st != nil {
				states[ch] = st
			}
		}
		snap := map[string]any{"states": states}
		if why := c.SnapshotReason(); why != "" {
			snap["reason"] = why
		}
		if s.send("snapshot", "", snap) != nil {
			return
		}
	}
	a.pump(ctx, c, follow, s)
}

// pump sends the actions on follow until the request ends, the host
// closes the connection, or the stream falls behind.
func (a *API) pump(ctx context.Context, c *client.Client, follow []string, s *sseWriter) {
	want := map[string]bool{}
	for _, ch := range follow {
		want[ch] = true
	}
	keep := time.NewTicker(a.opts.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.Disconnected():
			_ = s.send("end", "", map[string]string{"reason": "the host closed the connection"})
			return
		case <-keep.C:
			if s.comment("keep-alive") != nil {
				return
			}
		case ev, ok := <-c.Events():
			if !ok {
				return
			}
			if ev.Dropped > 0 {
				_ = s.send("error", "", map[string]any{"code": "too_far_behind",
					"message": fmt.Sprintf("the stream fell %d events behind: reconnect with Last-Event-ID", ev.Dropped)})
				return
			}
			env := ev.Action
			if env == nil || env.RejectionReason != nil || !want[env.Channel] {
				continue
			}
			if s.send("action", strconv.FormatInt(env.ServerSeq, 10), env) != nil {
				return
			}
		}
	}
}

// sseWriter writes Server-Sent Events, each flushed as it is written
// and bounded in time, so a client that stops reading ends its stream.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// writeWait bounds one event's write.
const writeWait = 30 * time.Second

func (s *sseWriter) send(event, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var b []byte
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	b = append(append(append(b, "event: "...), event...), '\n')
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	return s.write(b)
}

func (s *sseWriter) comment(text string) error { return s.write([]byte(": " + text + "\n\n")) }

func (s *sseWriter) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeWait))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
