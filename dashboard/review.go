package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// The review page (/ui/session/review): what a session changed, a turn
// at a time or all of it, file by file with a unified diff for each,
// read from its checkpoints through ahpd/sessionDiff on the person's own
// connection, so the host checks that they may read the session. The
// dashboard names a change by its turn's number and a file by the path
// the host listed (or the absolute path a tool's file edit gave, which
// the host checks is inside the repository): no revision or git option
// is ever taken from the browser.

// The bounds of a review page: the files whose diffs are drawn inline
// (the rest are listed, each a link), and a page of a diff inline and of
// one file shown alone.
const (
	inlineFiles     = 20
	inlinePageBytes = 32 << 10
	inlinePageLines = 400
	filePageBytes   = 256 << 10
	filePageLines   = 3000
	maxReviewPath   = 4096
)

// reviewQuery is what the review page shows, read from its query.
type reviewQuery struct {
	URI    string
	Turn   int    // -1: the session's whole change
	Chat   string // with TurnID: a turn named by its id, as a file edit is
	TurnID string
	Path   string
	Offset int64
}

func readReviewQuery(q url.Values) (reviewQuery, error) {
	rq := reviewQuery{URI: q.Get("uri"), Turn: -1, Chat: q.Get("chat"), TurnID: q.Get("turnId"), Path: q.Get("path")}
	if rq.URI == "" || len(rq.URI) > maxURI {
		return rq, &pageError{Status: http.StatusBadRequest, Message: "Name a session: /ui/session/review?uri=SESSION-URI."}
	}
	if _, err := protocol.ParseSessionURI(rq.URI); err != nil {
		return rq, &pageError{Status: http.StatusBadRequest, Message: "That is not a session's URI."}
	}
	if len(rq.Chat) > maxURI || len(rq.TurnID) > maxURI {
		return rq, &pageError{Status: http.StatusBadRequest, Message: "That chat or turn is too long."}
	}
	if len(rq.Path) > maxReviewPath || strings.ContainsAny(rq.Path, "\x00\n") {
		return rq, &pageError{Status: http.StatusBadRequest, Message: "path is a file's path, at most 4096 bytes."}
	}
	if s := q.Get("turn"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return rq, &pageError{Status: http.StatusBadRequest, Message: "turn is a checkpoint's turn, a whole number from 0."}
		}
		rq.Turn = n
	}
	if s := q.Get("offset"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return rq, &pageError{Status: http.StatusBadRequest, Message: "offset is a place in a diff, a whole number from 0."}
		}
		rq.Offset = n
	}
	return rq, nil
}

// reviewLink is the address of a review page.
func reviewLink(uri string, turn int, path string, offset int64) string {
	v := url.Values{"uri": {uri}}
	if turn >= 0 {
		v.Set("turn", strconv.Itoa(turn))
	}
	if path != "" {
		v.Set("path", path)
	}
	if offset > 0 {
		v.Set("offset", strconv.FormatInt(offset, 10))
	}
	return "/ui/session/review?" + v.Encode()
}

// editLink is the address of the diff of a file a turn's tool edited,
// the turn named by its chat and id: the review page finds its
// checkpoint.
func editLink(uri, chat, turnID, path string) string {
	v := url.Values{"uri": {uri}}
	if turnID != "" {
		v.Set("chat", chat)
		v.Set("turnId", turnID)
	}
	if path != "" {
		v.Set("path", path)
	}
	return "/ui/session/review?" + v.Encode()
}

// reviewBody is the review page's data.
type reviewBody struct {
	URI, Title  string
	SessionLink string
	Turn        int // -1: the whole session
	Heading     string
	Kind        string // sessionDiff's kind
	Changes     []changeChoice
	Files       []reviewFile
	More        bool // more files than one answer lists
	One         bool // one file alone, from Offset
	Note        string
	AllLink     string // the same change's every file, when One
}

// changeChoice is one change the page can show: the session's, or a
// turn's.
type changeChoice struct {
	Label, Link                 string
	Files, Additions, Deletions int
	Current                     bool
}

// reviewFile is one file of the change, with a page of its diff when
// drawn.
type reviewFile struct {
	Anchor, Path, OldPath string
	Additions, Deletions  int
	Binary                bool
	Size                  int64
	Link                  string // the file alone
	Shown                 bool   // its diff is drawn
	Lines                 []diffLine
	Empty                 bool   // no text change (a mode change)
	MoreLink              string // the next page
	Offset                int64
	Total                 int64
}

// diffLine is a line of a unified diff, with how it is drawn.
type diffLine struct {
	Class string // meta, hunk, add, del, ctx, note
	Text  string
}

// diffWire is ahpd/sessionDiff's answer.
type diffWire struct {
	Kind  string         `json:"kind"`
	Files []diffFileWire `json:"files"`
	More  bool           `json:"more"`
	File  *diffFileWire  `json:"file"`
	Size  *int64         `json:"size"`
	Patch string         `json:"patch"`
	Off   int64          `json:"offset"`
	Next  int64          `json:"next"`
	Total int64          `json:"total"`
}

type diffFileWire struct {
	Path      string `json:"path"`
	OldPath   string `json:"oldPath"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary"`
}

func (d *Dashboard) reviewPage(w http.ResponseWriter, r *http.Request) {
	rq, err := readReviewQuery(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	body, err := d.loadReview(r.Context(), c, rq)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "review", d.pageFor(r, "Review · "+body.Title, "sessions", body))
}

func (d *Dashboard) loadReview(ctx context.Context, c *client.Client, rq reviewQuery) (*reviewBody, error) {
	var probe probeResult
	if err := c.Call(ctx, "ahpd/sessionStatus", map[string]string{"channel": rq.URI}, &probe); err != nil {
		return nil, err
	}
	b := &reviewBody{URI: rq.URI, Title: rq.URI, SessionLink: sessionLink(rq.URI, nil), Turn: rq.Turn}
	// The title, from the journal: reading it wakes nothing.
	var rs replayResult
	if err := c.Call(ctx, "ahpd/replaySession", map[string]any{"channel": rq.URI}, &rs); err == nil && rs.Session != nil && rs.Session.Title != "" {
		b.Title = rs.Session.Title
	}
	idx := readTurnIndex(ctx, c, rq.URI)
	if rq.TurnID != "" && rq.Turn < 0 {
		if n, ok := idx.byTurn[turnKey(rq.Chat, rq.TurnID)]; ok {
			b.Turn = n
		} else {
			b.Note = "That turn's checkpoint is not known (it was cancelled, is still being recorded, or the journal no longer holds its end): shown is the session's whole change."
		}
	}
	cps := checkpoints(ctx, c, rq.URI)
	b.Changes = append(b.Changes, changeChoice{Label: "The whole session", Link: reviewLink(rq.URI, -1, "", 0), Current: b.Turn < 0})
	for _, cp := range cps.List {
		if cp.Turn == 0 {
			continue
		}
		label := "turn " + strconv.Itoa(cp.Turn)
		if m := idx.message(cp.Turn); m != "" {
			label += ": " + shorten(m, 60)
		}
		b.Changes = append(b.Changes, changeChoice{Label: label, Link: reviewLink(rq.URI, cp.Turn, "", 0),
			Files: cp.Files, Additions: cp.Additions, Deletions: cp.Deletions, Current: cp.Turn == b.Turn})
	}
	params := map[string]any{"channel": rq.URI}
	if b.Turn >= 0 {
		params["turn"] = b.Turn
		b.Heading = "What turn " + strconv.Itoa(b.Turn) + " changed"
		if m := idx.message(b.Turn); m != "" {
			b.Heading += ": " + shorten(m, 80)
		}
	} else {
		b.Heading = "What the session changed"
	}
	if rq.Path != "" {
		return b, d.reviewOne(ctx, c, b, rq, params)
	}
	var res diffWire
	if err := c.Call(ctx, "ahpd/sessionDiff", params, &res); err != nil {
		return nil, err
	}
	b.Kind, b.More = res.Kind, res.More
	switch {
	case res.Kind == "branch":
		b.Heading += " on its branch, from where it was cut"
	case res.Kind == "none" && b.Note == "":
		b.Note = "The session has no checkpoints: it works in no git repository, or has not started a turn."
	}
	for i, f := range res.Files {
		rf := fileOfWire(f, i)
		rf.Link = reviewLink(rq.URI, b.Turn, f.Path, 0)
		if i < inlineFiles {
			if err := d.drawFile(ctx, c, &rf, params, 0, inlinePageBytes, inlinePageLines, b); err != nil {
				return nil, err
			}
		}
		b.Files = append(b.Files, rf)
	}
	return b, nil
}

// reviewOne draws one file of the change alone, a page from the offset.
func (d *Dashboard) reviewOne(ctx context.Context, c *client.Client, b *reviewBody, rq reviewQuery, params map[string]any) error {
	b.One = true
	b.AllLink = reviewLink(rq.URI, b.Turn, "", 0)
	rf := reviewFile{Anchor: "f0", Path: rq.Path}
	if err := d.drawFile(ctx, c, &rf, params, rq.Offset, filePageBytes, filePageLines, b); err != nil {
		return err
	}
	b.Files = []reviewFile{rf}
	return nil
}

// drawFile reads a page of a file's diff from the offset into rf.
func (d *Dashboard) drawFile(ctx context.Context, c *client.Client, rf *reviewFile, change map[string]any, offset int64, size, lines int, b *reviewBody) error {
	params := map[string]any{"path": rf.Path, "limit": size, "lines": lines}
	if offset > 0 {
		params["offset"] = offset
	}
	for k, v := range change {
		params[k] = v
	}
	var res diffWire
	if err := c.Call(ctx, "ahpd/sessionDiff", params, &res); err != nil {
		return err
	}
	if res.File != nil {
		link, shown := rf.Link, rf.Anchor
		*rf = fileOfWire(*res.File, 0)
		rf.Anchor, rf.Link = shown, link
	}
	b.Kind = res.Kind
	rf.Shown, rf.Offset, rf.Total = true, res.Off, res.Total
	if res.Size != nil {
		rf.Size = *res.Size
	}
	rf.Lines = diffLines(res.Patch, offset == 0)
	rf.Empty = !rf.Binary && res.Total > 0 && !strings.Contains(res.Patch, "\n@@ ") && offset == 0
	if res.Next > 0 {
		rf.MoreLink = reviewLink(b.URI, b.Turn, rf.Path, res.Next)
	}
	return nil
}

func fileOfWire(f diffFileWire, i int) reviewFile {
	return reviewFile{Anchor: "f" + strconv.Itoa(i+1), Path: f.Path, OldPath: f.OldPath,
		Additions: f.Additions, Deletions: f.Deletions, Binary: f.Binary}
}

// diffLines splits a page of a unified diff into lines drawn by what
// they are. fromStart says the page begins the patch: its lines before
// the first hunk are the headers (whose "---" and "+++" are no lines
// removed or added).
func diffLines(patch string, fromStart bool) []diffLine {
	var out []diffLine
	header := fromStart
	for line := range strings.Lines(patch) {
		line = strings.TrimSuffix(line, "\n")
		cl := "ctx"
		switch {
		case strings.HasPrefix(line, "diff --git "):
			header, cl = true, "meta"
		case strings.HasPrefix(line, "@@"):
			header, cl = false, "hunk"
		case header:
			cl = "meta"
		case strings.HasPrefix(line, "+"):
			cl = "add"
		case strings.HasPrefix(line, "-"):
			cl = "del"
		case strings.HasPrefix(line, `\`):
			cl = "note"
		}
		out = append(out, diffLine{Class: cl, Text: line})
	}
	return out
}

// shorten cuts a text to its first line and about n characters.
func shorten(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// The turns of a session and their checkpoints. The host numbers a
// session's checkpoints in the order its turns end: each turn that
// completes or fails (a cancelled one gets none, nor one a stop cut
// short) takes the next, turn/1 the first (docs/SESSIONS.md). The
// session's timeline has those ends in the same order, so the Nth of
// them is turn N's: that is how a turn named by its id (a file edit's)
// finds its checkpoint, and a replay at an event the checkpoints there
// were then.

// turnIndex is the session's turns' ends, from its timeline.
type turnIndex struct {
	ends     []turnEnd      // in order: ends[i] is checkpoint i+1's
	byTurn   map[string]int // chat and turn id: its checkpoint
	messages map[string]string
	// turnNo numbers the session's turns in the order they started,
	// from 1: what a person calls "turn 3".
	turnNo     map[string]int
	firstStart int64 // the first turn's start; -1 for none
}

type turnEnd struct {
	Seq          int64
	Chat, TurnID string
}

func turnKey(chat, turnID string) string { return chat + "\x00" + turnID }

// message is the message that started checkpoint n's turn, if known.
func (ix turnIndex) message(n int) string {
	if n < 1 || n > len(ix.ends) {
		return ""
	}
	e := ix.ends[n-1]
	return ix.messages[turnKey(e.Chat, e.TurnID)]
}

// checkpointsAt is how many turn checkpoints the session had right
// after the event numbered seq: the turns that had ended by then.
func (ix turnIndex) checkpointsAt(seq int64) int {
	n := 0
	for _, e := range ix.ends {
		if e.Seq <= seq {
			n++
		}
	}
	return n
}

// indexPages bounds the timeline pages read for the index (1,000
// events each).
const indexPages = 20

// readTurnIndex reads the session's turns' starts and ends from its
// timeline, oldest first. A timeline it cannot read gives an empty
// index: then no turn is named by its checkpoint.
func readTurnIndex(ctx context.Context, c *client.Client, uri string) turnIndex {
	ix := turnIndex{byTurn: map[string]int{}, messages: map[string]string{}, turnNo: map[string]int{}, firstStart: -1}
	type event struct {
		Seq     int64  `json:"seq"`
		Kind    string `json:"kind"`
		Channel string `json:"channel"`
		TurnID  string `json:"turnId"`
		Text    string `json:"text"`
	}
	var events []event
	after := int64(0)
	for range indexPages {
		var res struct {
			Events []event `json:"events"`
			More   bool    `json:"more"`
		}
		params := map[string]any{"channel": uri, "after": after, "limit": 1000,
			"kinds": []string{"turn_started", "turn_completed", "turn_failed", "error"}}
		if err := c.Call(ctx, "ahpd/sessionEvents", params, &res); err != nil {
			return ix
		}
		events = append(events, res.Events...)
		if !res.More || len(res.Events) == 0 {
			break
		}
		after = res.Events[len(res.Events)-1].Seq
	}
	// A turn a stop cut short fails with hostStopped, and gets no
	// checkpoint.
	stopped := map[int64]bool{}
	for _, e := range events {
		if e.Kind == "error" && strings.HasPrefix(e.Text, "hostStopped:") {
			stopped[e.Seq] = true
		}
	}
	for _, e := range events {
		switch {
		case e.Kind == "turn_started":
			k := turnKey(e.Channel, e.TurnID)
			if _, ok := ix.turnNo[k]; !ok {
				ix.turnNo[k] = len(ix.turnNo) + 1
				if e.Text != "resumed" {
					ix.messages[k] = e.Text
				}
			}
			if ix.firstStart < 0 {
				ix.firstStart = e.Seq
			}
		case (e.Kind == "turn_completed" || e.Kind == "turn_failed") && !stopped[e.Seq]:
			ix.ends = append(ix.ends, turnEnd{Seq: e.Seq, Chat: e.Channel, TurnID: e.TurnID})
			ix.byTurn[turnKey(e.Channel, e.TurnID)] = len(ix.ends)
		}
	}
	return ix
}

// linkEdits gives each file a tool call edited its diff's address.
func (v *convView) linkEdits(uri, chat string) {
	for i := range v.Turns {
		t := &v.Turns[i]
		for j := range t.Parts {
			if tv := t.Parts[j].Tool; tv != nil {
				for k := range tv.Edits {
					tv.Edits[k].Link = editLink(uri, chat, t.ID, tv.Edits[k].Path)
				}
			}
		}
	}
}

// editView is a file a tool call edited.
type editView struct {
	Path string // its absolute path
	Name string // what the page calls it
	Link string // its diff
}

// editsOf reads the files a tool call's file edits name.
func editsOf(content []json.RawMessage) []editView {
	var out []editView
	for _, raw := range content {
		var c fileEditWire
		if json.Unmarshal(raw, &c) != nil || c.Type != "fileEdit" {
			continue
		}
		side := c.After
		if side == nil {
			side = c.Before
		}
		if side == nil {
			continue
		}
		u, err := url.Parse(side.URI)
		if err != nil || u.Scheme != "file" || u.Path == "" {
			continue
		}
		name := u.Path
		if i := strings.LastIndexByte(name, '/'); i >= 0 && i < len(name)-1 {
			name = name[i+1:]
		}
		out = append(out, editView{Path: u.Path, Name: name})
	}
	return out
}

// fileEditWire is a tool result's content, as far as a file edit goes.
type fileEditWire struct {
	Type   string `json:"type"`
	Before *struct {
		URI string `json:"uri"`
	} `json:"before"`
	After *struct {
		URI string `json:"uri"`
	} `json:"after"`
}

// SizeText says a binary file's size.
func (f reviewFile) SizeText() string {
	if f.Size == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", f.Size)
}
