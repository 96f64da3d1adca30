package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/ahpd/ahpd/automations"
	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// automationURI is the resource of the automation the path's id names.
func automationURI(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !validID.MatchString(id) {
		return "", badRequest("id", "an automation id is 1 to 64 letters, digits, '-' or '_'")
	}
	return automations.Scheme + ":/" + id, nil
}

func runURI(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > 128 || strings.ContainsAny(id, "/?#") || id == "" {
		return "", badRequest("id", "%s is not a run id", protocol.Quote(id))
	}
	return automations.RunScheme + ":/" + id, nil
}

// tail is the id part of a resource URI.
func tail(uri string) string {
	_, id, _ := strings.Cut(uri, ":/")
	return id
}

// catalogue subscribes c to the caller's automations and returns them.
func catalogue(ctx context.Context, c *client.Client) (*protocol.AutomationState, error) {
	if st, ok := c.State(automations.CatalogueURI).(*protocol.AutomationState); ok {
		return st, nil
	}
	st, err := c.Subscribe(ctx, automations.CatalogueURI)
	if err != nil {
		return nil, err
	}
	as, _ := st.(*protocol.AutomationState)
	if as == nil {
		return &protocol.AutomationState{}, nil
	}
	return as, nil
}

// entry finds an automation in the caller's catalogue.
func entry(ctx context.Context, c *client.Client, uri string) (*protocol.AutomationEntry, error) {
	st, err := catalogue(ctx, c)
	if err != nil {
		return nil, err
	}
	for i := range st.Entries {
		if st.Entries[i].Resource == uri {
			return &st.Entries[i], nil
		}
	}
	return nil, notFound("no automation %s", protocol.Quote(tail(uri)))
}

// withClient runs f on a connection for the request, answering its
// error.
func (a *API) withClient(w http.ResponseWriter, r *http.Request, f func(ctx context.Context, c *client.Client) error) {
	c, err := a.connect(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer c.Close()
	if err := f(r.Context(), c); err != nil {
		a.fail(w, r, err)
	}
}

func (a *API) listAutomations(w http.ResponseWriter, r *http.Request) {
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		st, err := catalogue(ctx, c)
		if err != nil {
			return err
		}
		list := st.Entries
		if list == nil {
			list = []protocol.AutomationEntry{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"automations": list})
		return nil
	})
}

// checkTemplate checks a session template's permissions and
// inputTimeout as a strict createSession would: a run's session is made
// without strictness, so a mistake would leave each run's session asking
// for everything (or waiting for ever) rather than be refused now.
func checkTemplate(t protocol.AutomationSessionTemplate) error {
	if v, ok := t.Config[plugins.ConfigPermissions]; ok {
		if _, err := plugins.ParsePermissions(v); err != nil {
			return badRequest("definition.session.config.permissions", "definition.session.config.permissions: %v", err)
		}
	}
	if v, ok := t.Config[plugins.ConfigInputTimeout]; ok {
		if _, ok := plugins.InputTimeoutOf(v); !ok {
			return badRequest("definition.session.config.inputTimeout",
				`definition.session.config.inputTimeout: want a duration from 1s to 720h, such as "10m" or a number of seconds, or "0" for none`)
		}
	}
	return nil
}

// automationBody is POST /v1/automations. The definition is read here,
// not by decode: its type keeps members it does not define (Extra), and
// the host would keep them too.
type automationBody struct {
	ID         *string         `json:"id"`
	Definition json.RawMessage `json:"definition"`
}

// definition reads b's definition, refusing what it does not define.
func (b *automationBody) definition() (*protocol.AutomationDefinition, error) {
	if len(b.Definition) == 0 || string(b.Definition) == "null" {
		return nil, badRequest("definition", "definition is required: the automation's message, session template and triggers")
	}
	var def protocol.AutomationDefinition
	if err := def.UnmarshalJSON(b.Definition); err != nil {
		var de *protocol.DecodeError
		if errors.As(err, &de) && de.Path != "" {
			field := "definition." + de.Path
			return nil, badRequest(clientField(field), "%s: %s", field, clip(de.Err.Error()))
		}
		return nil, badRequest("definition", "definition: %s", clip(err.Error()))
	}
	if err := strictMembers(reflect.ValueOf(def), "definition", false); err != nil {
		return nil, err
	}
	return &def, nil
}

var objectType = reflect.TypeFor[protocol.Object]()

// strictMembers refuses a member v holds that its type does not define
// (kept in an Extra), or a variant of a union it does not know, naming
// it by its path; variant says v is one of a union's. A misspelt or
// invented member ("owner") would otherwise be kept, and shown back, as
// if it meant something. The protocol's open objects (_meta, a config)
// are taken as they are: a config's keys are its provider's, which this
// does not know (checkTemplate checks the two the API documents).
func strictMembers(v reflect.Value, path string, variant bool) error {
	switch v.Kind() {
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return strictMembers(v.Elem(), path, true)
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		if u, ok := v.Interface().(*protocol.Unknown); ok {
			if u.Kind == "" {
				return badRequest(clientField(path), "%s names no kind (docs/AUTOMATIONS.md)", clip(path))
			}
			return badRequest(clientField(path), "%s: %s is not a kind this API knows (docs/AUTOMATIONS.md)", clip(path), protocol.Quote(u.Kind))
		}
		return strictMembers(v.Elem(), path, variant)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // raw JSON, or bytes
		}
		for i := range v.Len() {
			if err := strictMembers(v.Index(i), fmt.Sprintf("%s[%d]", path, i), false); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type() == objectType {
			return nil
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			if err := strictMembers(v.MapIndex(k), path+"["+protocol.Quote(k.String())+"]", false); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		if all := v.MethodByName("All"); all.IsValid() && t.PkgPath() == objectType.PkgPath() && strings.HasPrefix(t.Name(), "Map[") {
			// A protocol.Map keeps its members unexported, in order.
			for k, e := range all.Call(nil)[0].Seq2() {
				if err := strictMembers(e, path+"["+protocol.Quote(k.String())+"]", false); err != nil {
					return err
				}
			}
			return nil
		}
		var names []string
		for i := range t.NumField() {
			f := t.Field(i)
			if name := jsonName(f); name != "" {
				names = append(names, name)
			}
		}
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case !f.IsExported():
			case f.Name == "Extra" && f.Type == objectType:
				extra := v.Field(i).Interface().(protocol.Object)
				if len(extra) == 0 {
					continue
				}
				name := slices.Sorted(maps.Keys(extra))[0]
				kind := ""
				if variant {
					kind = " (and the one naming its kind)"
				}
				return badRequest(clientField(path+"."+name), "%s is not a member of %s: its members are %s%s",
					protocol.Quote(name), clip(path), strings.Join(names, ", "), kind)
			case jsonName(f) != "":
				if err := strictMembers(v.Field(i), path+"."+jsonName(f), false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jsonName is the member a struct field is, or "" for none.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

func (a *API) createAutomation(w http.ResponseWriter, r *http.Request) {
	var b automationBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	def, err := b.definition()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := checkTemplate(def.Session); err != nil {
		a.fail(w, r, err)
		return
	}
	id := "au_" + randomHex(8)
	if b.ID != nil {
		if !validID.MatchString(*b.ID) {
			a.fail(w, r, badRequest("id", "an automation id is 1 to 64 letters, digits, '-' or '_'"))
			return
		}
		id = *b.ID
	}
	uri := automations.Scheme + ":/" + id
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		if _, err := catalogue(ctx, c); err != nil {
			return err
		}
		if err := c.DispatchWait(ctx, automations.CatalogueURI, &protocol.AutomationCreateRequestedAction{Resource: uri, Definition: *def}); err != nil {
			return err
		}
		e, err := entry(ctx, c, uri)
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/v1/automations/"+url.PathEscape(id))
		writeJSON(w, http.StatusCreated, e)
		return nil
	})
}

func (a *API) getAutomation(w http.ResponseWriter, r *http.Request) {
	uri, err := automationURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		e, err := entry(ctx, c, uri)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, e)
		return nil
	})
}

func (a *API) deleteAutomation(w http.ResponseWriter, r *http.Request) {
	uri, err := automationURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		if _, err := entry(ctx, c, uri); err != nil {
			return err
		}
		if err := c.DispatchWait(ctx, automations.CatalogueURI, &protocol.AutomationRemovedAction{Resource: uri}); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

func (a *API) listRuns(w http.ResponseWriter, r *http.Request) {
	uri, err := automationURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		e, err := entry(ctx, c, uri)
		if err != nil {
			return err
		}
		runs := []map[string]json.RawMessage{}
		for _, run := range e.Runs {
			v, err := withWaiting(ctx, c, run, run.Lifecycle, run.PrimarySession)
			if err != nil {
				return err
			}
			runs = append(runs, v)
		}
		writeJSON(w, http.StatusOK, map[string]any{"runs": runs})
		return nil
	})
}

// runBody is POST /v1/automations/{id}/runs.
type runBody struct {
	// RequestID makes a retry start no second run.
	RequestID *string `json:"requestId"`
}

func (a *API) startRun(w http.ResponseWriter, r *http.Request) {
	uri, err := automationURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var b runBody
	if err := decode(r, &b); err != nil {
		a.fail(w, r, err)
		return
	}
	req := "http-" + randomHex(8)
	if b.RequestID != nil {
		if !validID.MatchString(*b.RequestID) {
			a.fail(w, r, badRequest("requestId", "a request id is 1 to 64 letters, digits, '-' or '_'"))
			return
		}
		req = *b.RequestID
	}
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		var res protocol.RunAutomationResult
		err := c.Call(ctx, "runAutomation", protocol.RunAutomationParams{Automation: uri, RequestID: req}, &res)
		if err != nil {
			return err
		}
		w.Header().Set("Location", "/v1/runs/"+url.PathEscape(tail(res.Resource)))
		writeJSON(w, http.StatusAccepted, map[string]any{"id": tail(res.Resource), "uri": res.Resource})
		return nil
	})
}

func (a *API) listTriggers(w http.ResponseWriter, r *http.Request) {
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		var res protocol.ListAutomationTriggerDefinitionsResult
		if err := c.Call(ctx, "listAutomationTriggerDefinitions", map[string]string{"channel": protocol.RootURI}, &res); err != nil {
			return err
		}
		items := res.Items
		if items == nil {
			items = []protocol.AutomationTriggerDefinition{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"triggers": items})
		return nil
	})
}

func (a *API) getRun(w http.ResponseWriter, r *http.Request) {
	uri, err := runURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		st, err := c.Subscribe(ctx, uri)
		if err != nil {
			return err
		}
		rs, ok := st.(*protocol.AutomationRunState)
		if !ok {
			return notFound("no run %s", protocol.Quote(tail(uri)))
		}
		v, err := withWaiting(ctx, c, rs, rs.Lifecycle, rs.PrimarySession)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, v)
		return nil
	})
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) {
	uri, err := runURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.withClient(w, r, func(ctx context.Context, c *client.Client) error {
		if _, err := c.Subscribe(ctx, uri); err != nil {
			return err
		}
		if err := c.DispatchWait(ctx, uri, &protocol.AutomationRunCancelRequestedAction{}); err != nil {
			return err
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"id": tail(uri)})
		return nil
	})
}

func (a *API) runEvents(w http.ResponseWriter, r *http.Request) {
	uri, err := runURI(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.events(w, r, func(ctx context.Context, c *client.Client) ([]string, error) {
		if _, err := c.Subscribe(ctx, uri); err != nil {
			return nil, err
		}
		return []string{uri}, nil
	})
}

func (a *API) automationEvents(w http.ResponseWriter, r *http.Request) {
	a.events(w, r, func(ctx context.Context, c *client.Client) ([]string, error) {
		if _, err := catalogue(ctx, c); err != nil {
			return nil, err
		}
		return []string{automations.CatalogueURI}, nil
	})
}

// waitView is what a run's session waits on a person for.
type waitView struct {
	Session string `json:"session"`
	ID      string `json:"id"`
	Kind    string `json:"kind"` // input, confirmation: answered at questions/{id}, tool-calls/{id}
	Text    string `json:"text"`
}

// withWaiting is a run (its AHP object) with, while it runs, waitingFor:
// the questions and tool calls its session waits on somebody for, so a
// run stuck on a person says so and on what.
func withWaiting(ctx context.Context, c *client.Client, run any, l protocol.AutomationRunLifecycle, session *protocol.URI) (map[string]json.RawMessage, error) {
	data, err := json.Marshal(run)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	waits := []waitView{}
	if _, running := l.(*protocol.AutomationRunningRunLifecycle); running && session != nil {
		ws, err := c.SessionWaiting(ctx, *session)
		if err != nil && client.ErrorCode(err) != protocol.CodeSessionNotFound {
			return nil, err
		}
		for _, w := range ws {
			kind := "input"
			if w.Tool != nil {
				kind = "confirmation"
			}
			waits = append(waits, waitView{Session: idOf(*session), ID: w.ID, Kind: kind, Text: w.Text()})
		}
	}
	if out["waitingFor"], err = json.Marshal(waits); err != nil {
		return nil, err
	}
	return out, nil
}
