package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host"
	"github.com/ahpd/ahpd/protocol"
)

// Starting work from the dashboard: /ui/new is a form for a new session
// (its folder, agent, isolation, permissions and first message), and
// posting it makes the session through the person's own AHP connection
// as the HTTP API's POST /v1/sessions does: createSession, kept at once
// and its config taken as given or refused, then the first message as
// its first turn. The host checks the grants (session:create) and the
// allowed roots; what it refuses is shown on the form, which keeps what
// was typed.

// starter is what a host tells a start form beyond AHP: *host.Host is
// one. Without it the form offers the folders of the person's sessions
// and the agents, and the host's default is left to the host.
type starter interface {
	StartChoices(p grants.Principal) host.StartChoices
}

// newForm is what the form was sent, kept to draw it again.
type newForm struct {
	Folder, Other, Provider, Isolation, Branch, Permissions, Title, Text string
}

// newBody is the new session page's data.
type newBody struct {
	CSRF    string
	Form    newForm
	Error   string
	Recent  []string // the folders of the person's latest sessions
	Roots   []string // the allowed roots they are held to
	Held    bool     // they are held to roots
	Default string   // where a session naming no folder works
	Agents  []agentChoice
	Modes   []choice
	Folders []folderGroup // the folders offered, each once
}

type folderGroup struct {
	Label   string
	Folders []string
}

// folderGroups offers the recent folders, then the roots, then the
// host's default folder, each folder once.
func (b *newBody) folderGroups() []folderGroup {
	var out []folderGroup
	seen := map[string]bool{}
	for _, g := range []folderGroup{{"Your recent folders", b.Recent}, {"Allowed roots", b.Roots}, {"The host's default folder", []string{b.Default}}} {
		var list []string
		for _, f := range g.Folders {
			if f != "" && !seen[f] {
				seen[f] = true
				list = append(list, f)
			}
		}
		if len(list) > 0 {
			out = append(out, folderGroup{g.Label, list})
		}
	}
	return out
}

type agentChoice struct {
	Provider, Label string
	Default         bool
}

type choice struct{ Value, Label string }

// permissionModes are the permissions key's modes (docs/PERMISSIONS.md),
// after the host's default.
var permissionModes = []choice{
	{"", "the host's default"},
	{"ask", "ask: a person confirms every call no rule allows"},
	{"acceptEdits", "acceptEdits: file edits in the session's folders run unasked"},
	{"bypass", "bypass: every call no deny rule matches runs"},
}

// mayCreate says whether the person's grants let them start sessions.
func (d *Dashboard) mayCreate(v viewer) bool {
	if v.login == nil {
		return false
	}
	if d.opts.Auth == nil {
		return true
	}
	need, ok := opOperation("create")
	return ok && d.opts.Auth.Directory().CheckSession(v.login.cred.Principal, need, grants.Target{}) == nil
}

// notStarter is the refusal of somebody who may not start sessions.
var notStarter = &pageError{Status: http.StatusForbidden, Message: "Your grants do not let you start sessions here."}

func (d *Dashboard) newPage(w http.ResponseWriter, r *http.Request) {
	if !d.mayCreate(viewerOf(r)) {
		d.fail(w, r, notStarter)
		return
	}
	d.showNew(w, r, http.StatusOK, newForm{}, "")
}

// showNew draws the form with f's values and, when set, why the host
// refused them.
func (d *Dashboard) showNew(w http.ResponseWriter, r *http.Request, status int, f newForm, refusal string) {
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	v := viewerOf(r)
	b := &newBody{CSRF: v.login.csrf, Form: f, Error: refusal, Modes: permissionModes}
	var sc host.StartChoices
	if s, ok := d.opts.Host.(starter); ok {
		sc = s.StartChoices(v.login.cred.Principal)
	}
	b.Roots, b.Held, b.Default = sc.Roots, len(sc.Roots) > 0, sc.DefaultFolder
	b.Recent = recentFolders(r.Context(), c, 10)
	b.Folders = b.folderGroups()
	if b.Form.Folder == "" && b.Form.Other == "" && len(b.Folders) > 0 {
		b.Form.Folder = b.Folders[0].Folders[0]
	}
	b.Agents, err = agentChoices(r.Context(), c, sc.DefaultProvider)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if b.Form.Provider == "" && len(b.Agents) > 0 {
		b.Form.Provider = b.Agents[0].Provider
	}
	if b.Form.Isolation == "" {
		b.Form.Isolation = "folder"
	}
	d.render(w, r, status, "new", d.pageFor(r, "New session", "new", b))
}

// recentFolders reads the folders of the person's own latest sessions,
// newest first, each once, leaving out the worktrees the host made.
func recentFolders(ctx context.Context, c *client.Client, n int) []string {
	limit := int64(100)
	var res protocol.ListSessionsResult
	params := protocol.ListSessionsParams{Limit: &limit, Meta: protocol.Object{"ahpd.owner": jsontext.Value(`"me"`)}}
	if err := c.Call(ctx, "listSessions", params, &res); err != nil {
		return nil
	}
	var out []string
	for _, s := range res.Items {
		if len(s.WorkingDirectories) == 0 || isExternal(s.Meta) {
			continue
		}
		dir := folderOf(s.WorkingDirectories[0])
		if !filepath.IsAbs(dir) || strings.HasSuffix(filepath.Dir(dir), ".worktrees") || slices.Contains(out, dir) {
			continue
		}
		if out = append(out, dir); len(out) == n {
			break
		}
	}
	return out
}

// agentChoices is root's agents, the host's default first, each said
// unavailable when the host says so.
func agentChoices(ctx context.Context, c *client.Client, deflt string) ([]agentChoice, error) {
	st, err := c.Subscribe(ctx, protocol.RootURI)
	if err != nil {
		return nil, err
	}
	rs, _ := st.(*protocol.RootState)
	if rs == nil {
		return nil, &pageError{Status: http.StatusBadGateway, Message: "The host did not say which agents it has."}
	}
	var out []agentChoice
	for _, a := range rs.Agents {
		label := a.DisplayName
		if label == "" {
			label = a.Provider
		} else if label != a.Provider {
			label += " (" + a.Provider + ")"
		}
		if why := unavailable(a); why != "" {
			label += ": unavailable, " + why
		}
		ac := agentChoice{Provider: a.Provider, Label: label, Default: a.Provider == deflt}
		if ac.Default {
			ac.Label += ", the default"
			out = slices.Insert(out, 0, ac)
		} else {
			out = append(out, ac)
		}
	}
	return out, nil
}

// unavailable is why the host says an agent cannot run now, or "".
func unavailable(a protocol.AgentInfo) string {
	var meta map[string]string
	if raw, ok := a.Extra["_meta"]; ok && json.Unmarshal(raw, &meta) == nil {
		return meta["ahpd.unavailable"]
	}
	return ""
}

// readNewForm reads and checks the form: what the host would refuse for
// its shape is refused here first, with the field named.
func readNewForm(pf url.Values) (newForm, string) {
	f := newForm{Folder: strings.TrimSpace(pf.Get("folder")), Other: strings.TrimSpace(pf.Get("other")),
		Provider: pf.Get("provider"), Isolation: pf.Get("isolation"), Branch: strings.TrimSpace(pf.Get("branch")),
		Permissions: pf.Get("permissions"), Title: strings.TrimSpace(pf.Get("title")), Text: strings.ReplaceAll(pf.Get("text"), "\r\n", "\n")}
	folder := f.folder()
	switch {
	case folder == "":
		return f, "Choose a folder for the session to work in."
	case len(folder) > 4096 || !filepath.IsAbs(folder):
		return f, "The folder is an absolute path, such as /srv/projects/app."
	case f.Provider == "" || len(f.Provider) > 64:
		return f, "Choose one of the host's agents."
	case f.Isolation != "folder" && f.Isolation != "worktree":
		return f, "Isolation is folder or worktree."
	case len(f.Branch) > 255 || strings.ContainsAny(f.Branch, "\x00\n\r\t ") || strings.HasPrefix(f.Branch, "-"):
		return f, "That is not a branch's name."
	case !slices.ContainsFunc(permissionModes, func(c choice) bool { return c.Value == f.Permissions }):
		return f, "The permission mode is ask, acceptEdits or bypass."
	case utf8.RuneCountInString(f.Title) > 200 || strings.ContainsAny(f.Title, "\n\r"):
		return f, "A title is one line of at most 200 characters."
	case strings.TrimSpace(f.Text) == "":
		return f, "Write the first message: the session's first turn."
	case len(f.Text) > maxMessage:
		return f, "The first message is too long: at most 12 KiB."
	}
	return f, ""
}

// folder is the folder chosen: the one typed, else the one picked.
func (f newForm) folder() string {
	if f.Other != "" {
		return f.Other
	}
	return f.Folder
}

// config is the session config the form asks for.
func (f newForm) config() protocol.Object {
	config := protocol.Object{}
	if f.Isolation == "worktree" {
		config["isolation"] = jsontext.Value(`"worktree"`)
	}
	if f.Branch != "" {
		data, _ := json.Marshal(f.Branch)
		config["branch"] = jsontext.Value(data)
	}
	if f.Permissions != "" {
		data, _ := json.Marshal(map[string]string{"mode": f.Permissions})
		config["permissions"] = jsontext.Value(data)
	}
	if len(config) == 0 {
		return nil
	}
	return config
}

// newAction takes the form: POST /ui/new.
func (d *Dashboard) newAction(w http.ResponseWriter, r *http.Request) {
	if !d.formOK(w, r) {
		return
	}
	v := viewerOf(r)
	if !d.mayCreate(v) {
		d.fail(w, r, notStarter)
		return
	}
	f, bad := readNewForm(r.PostForm)
	if bad != "" {
		d.showNew(w, r, http.StatusBadRequest, f, bad)
		return
	}
	c, err := d.connect(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	defer c.Close()
	uri, err := startSession(r.Context(), c, f)
	if err != nil {
		pe := pageErrorOf(err)
		d.showNew(w, r, pe.Status, f, pe.Message)
		return
	}
	http.Redirect(w, r, sessionLink(uri, nil), http.StatusSeeOther)
}

// startSession makes the session f asks for and sends its first turn.
// A session whose first message is refused is disposed of again, so
// that sending the form once more makes no second one.
func startSession(ctx context.Context, c *client.Client, f newForm) (string, error) {
	provider := f.Provider
	folder := (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Clean(f.folder()))}).String()
	params := protocol.CreateSessionParams{Channel: protocol.SessionScheme + ":/ui_" + randomHex(8), Provider: &provider,
		WorkingDirectories: []string{folder}, Config: f.config(),
		Meta: protocol.Object{"ahpd.keep": jsontext.Value("true"), "ahpd.strictConfig": jsontext.Value("true")}}
	if err := c.Call(ctx, "createSession", params, nil); err != nil {
		return "", err
	}
	err := setTitle(ctx, c, params.Channel, f.Title)
	if err == nil {
		err = sendMessage(ctx, c, params.Channel, "", f.Text, false)
	}
	if err != nil {
		_ = c.Call(ctx, "disposeSession", protocol.DisposeSessionParams{Channel: params.Channel}, nil)
		return "", err
	}
	return params.Channel, nil
}

// setTitle gives the session the title the form was sent, if any: one a
// client sets stays (docs/SESSIONS.md).
func setTitle(ctx context.Context, c *client.Client, uri, title string) error {
	if title == "" {
		return nil
	}
	if _, err := c.Subscribe(ctx, uri); err != nil {
		return err
	}
	return c.DispatchWait(ctx, uri, &protocol.SessionTitleChangedAction{Title: title})
}
