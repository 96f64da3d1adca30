package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// Live updates are Server-Sent Events of HTML the server rendered: the
// page's script puts each fragment in place. A stream watches the host
// through the person's own AHP connection and sends at most one update
// per Throttle, always the state as it is when sent, so a reply streamed
// in ten thousand deltas costs the browser a few redraws and its last
// update holds the whole text.

// sseWriter writes Server-Sent Events, flushing each.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// writeWait bounds one event's write: a browser that stops reading ends
// its stream.
const writeWait = 30 * time.Second

func startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

func (s *sseWriter) send(event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write("event: " + event + "\ndata: " + string(data) + "\n\n")
}

func (s *sseWriter) write(text string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeWait))
	if _, err := s.w.Write([]byte(text)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// follow calls update whenever c's states change, at most once per
// throttle, and every KeepAlive, until the request ends, the host closes
// the connection or update fails. update is called once first, and then a
// "synced" event says the page now shows the host as it is: the first
// update redraws every part the page was drawn with, so the page's script
// says "Live." (and marks the page data-synced) only after it.
func (d *Dashboard) follow(ctx context.Context, c *client.Client, s *sseWriter, throttle time.Duration, update func() error) {
	if update() != nil || s.send("synced", struct{}{}) != nil {
		return
	}
	keep := time.NewTicker(d.opts.KeepAlive)
	defer keep.Stop()
	for {
		changed := c.Changed()
		select {
		case <-ctx.Done():
			return
		case <-c.Disconnected():
			_ = s.send("end", map[string]string{"reason": "the host closed the connection"})
			return
		case <-keep.C:
		case <-changed:
			// Let the changes of the next moment come in: one update
			// carries them all.
			t := time.NewTimer(throttle)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if update() != nil {
			return
		}
	}
}

// streamRetry is the Retry-After of a live page refused: a place frees
// when one of the person's tabs closes, which no clock says, so it is a
// wait short enough for a person who just closed one and long enough
// that a script trying again does not spin.
const streamRetry = "10"

// streamSlot takes one of the login's live streams, and one of its
// person's, answering 429 when either has them all; release gives it
// back.
func (d *Dashboard) streamSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	in := viewerOf(r).login
	if err := d.logins.openStream(in); err != nil {
		msg := "Too many live pages are open: close some tabs."
		if errors.Is(err, errPersonStreams) {
			msg = "You have too many live pages open, in this browser and others you signed in from: close some tabs."
		}
		d.log.Info("refused a dashboard live page", "principal", in.cred.Principal.String(), "remote", r.RemoteAddr, "err", err)
		d.opts.Metrics.refuse(refusedLivePages)
		w.Header().Set("Retry-After", streamRetry)
		http.Error(w, msg, http.StatusTooManyRequests)
		return nil, false
	}
	return func() { d.logins.closeStream(in) }, true
}

// sessionsEvents streams the sessions table's rows, for the filters the
// page was drawn with, each time the host's root channel changes.
func (d *Dashboard) sessionsEvents(w http.ResponseWriter, r *http.Request) {
	lq, err := readListQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	release, ok := d.streamSlot(w, r)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	c, err := d.connect(r)
	if err != nil {
		http.Error(w, pageErrorOf(err).Message, pageErrorOf(err).Status)
		return
	}
	defer c.Close()
	if c.State(protocol.RootURI) == nil {
		if _, err := c.Subscribe(ctx, protocol.RootURI); err != nil {
			http.Error(w, pageErrorOf(err).Message, pageErrorOf(err).Status)
			return
		}
	}
	s := startSSE(w)
	last := ""
	// A busy host changes its root often, and each update lists the
	// sessions again: the table is redrawn less often than a session.
	d.follow(ctx, c, s, 4*d.opts.Throttle, func() error {
		body, err := d.listSessions(ctx, c, lq)
		if err != nil {
			return s.send("error", map[string]string{"message": pageErrorOf(err).Message})
		}
		html, err := d.fragment("rows", body.Rows)
		if err != nil {
			return err
		}
		if html == last {
			return s.write(": unchanged\n\n")
		}
		last = html
		return s.send("rows", map[string]string{"rows": html})
	})
}

// sessionEvents streams a session page's changing parts: the
// conversation, the timeline and the buttons.
func (d *Dashboard) sessionEvents(w http.ResponseWriter, r *http.Request) {
	sq, err := readSessionQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sq.At = -1
	release, ok := d.streamSlot(w, r)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	c, err := d.connect(r)
	if err != nil {
		http.Error(w, pageErrorOf(err).Message, pageErrorOf(err).Status)
		return
	}
	defer c.Close()
	v := viewerOf(r)
	// The first read subscribes c to the session and its chat; each
	// update after reads them as c keeps them.
	if _, err := d.loadSession(ctx, c, v, sq); err != nil {
		http.Error(w, pageErrorOf(err).Message, pageErrorOf(err).Status)
		return
	}
	s := startSSE(w)
	sent := map[string]string{}
	var readAt time.Time
	turns := ""
	d.follow(ctx, c, s, d.opts.Throttle, func() error {
		// The timeline is read from the journal: again when a turn
		// starts or ends, else at most once a second.
		now := turnsKey(c, sq)
		withTimeline := now != turns || time.Since(readAt) >= time.Second
		if withTimeline {
			turns, readAt = now, time.Now()
		}
		b, err := d.liveSession(ctx, c, v, sq, withTimeline)
		if err != nil {
			return s.send("error", map[string]string{"message": pageErrorOf(err).Message})
		}
		parts := []struct {
			name string
			data any
		}{{"conversation", b.Conversation}, {"actions", b.Actions}, {"status", b}}
		if withTimeline {
			parts = append(parts, struct {
				name string
				data any
			}{"timeline", b.Timeline})
		}
		for _, p := range parts {
			name := p.name
			html, err := d.fragment(name, p.data)
			if err != nil {
				return err
			}
			if sent[name] == html {
				continue
			}
			sent[name] = html
			if err := s.send(name, map[string]string{"html": html}); err != nil {
				return err
			}
		}
		return nil
	})
}

// liveSession is loadSession for a stream whose connection already
// follows the session: it reads the states c keeps, and the timeline.
func (d *Dashboard) liveSession(ctx context.Context, c *client.Client, v viewer, sq sessionQuery, withTimeline bool) (*sessionBody, error) {
	ss, _ := c.State(sq.URI).(*protocol.SessionState)
	if ss == nil {
		return nil, &pageError{Status: http.StatusNotFound, Message: "The session is gone."}
	}
	var probe probeResult
	if err := c.Call(ctx, "ahpd/sessionStatus", map[string]string{"channel": sq.URI}, &probe); err != nil {
		return nil, err
	}
	b := &sessionBody{URI: sq.URI, Owner: probe.Owner, Sharing: probe.Sharing, At: -1, Live: true}
	chat := pickChat(ss, sq.Chat)
	if c.State(chat) == nil {
		if _, err := c.Subscribe(ctx, chat); err != nil {
			return nil, err
		}
	}
	cs, _ := c.State(chat).(*protocol.ChatState)
	b.fill(ss, chat, sq)
	b.Status = statusOf(liveStatus(ss, cs), "active")
	b.StatusClass = strings.ReplaceAll(b.Status, " ", "-")
	b.Conversation = conversationOf(cs)
	b.Conversation.linkEdits(sq.URI, chat)
	if withTimeline {
		tl, err := d.timeline(ctx, c, sq, chatTitles(ss))
		if err != nil {
			tl.Note = "No timeline: " + pageErrorOf(err).Message
		}
		b.Timeline = tl
	}
	b.Actions = d.actionsFor(v, b, ss, cs, "active")
	b.Conversation.Forms = d.formsFor(v, b)
	return b, nil
}

// turnsKey names where the session's chat is in its turns: how many have
// ended and which one runs.
func turnsKey(c *client.Client, sq sessionQuery) string {
	ss, _ := c.State(sq.URI).(*protocol.SessionState)
	if ss == nil {
		return ""
	}
	cs, _ := c.State(pickChat(ss, sq.Chat)).(*protocol.ChatState)
	if cs == nil {
		return ""
	}
	key := strconv.Itoa(len(cs.Turns))
	if cs.ActiveTurn != nil {
		key += "/" + cs.ActiveTurn.ID
	}
	return key
}
