package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The version registry comes from the protocol's TypeScript sources, which
// hold what the JSON definitions cannot: the version each action and
// notification arrived in, which actions a client may dispatch, and the
// versions a host negotiates against. The files are plain tables, read
// with patterns that fail loudly when a table is not found whole.
const (
	registryFile = "registry.ts"
	originFile   = "action-origin.generated.ts"
)

type registry struct {
	current      string            // PROTOCOL_VERSION
	supported    []string          // SUPPORTED_PROTOCOL_VERSIONS, most preferred first
	actions      map[string]string // action type -> version introduced
	notes        map[string]string // notification method -> version introduced
	dispatchable map[string]bool   // action type -> a client may dispatch it
}

var (
	reCurrent   = regexp.MustCompile(`PROTOCOL_VERSION\s*=\s*'([0-9.]+)'`)
	reSupported = regexp.MustCompile(`(?s)SUPPORTED_PROTOCOL_VERSIONS[^=]*=\s*Object\.freeze\(\[(.*?)\]\)`)
	reQuoted    = regexp.MustCompile(`'([^']*)'`)
	reActionIn  = regexp.MustCompile(`\[ActionType\.(\w+)\]:\s*'([0-9.]+)'`)
	reNoteIn    = regexp.MustCompile(`'([\w/]+)':\s*'([0-9.]+)'`)
	reDispatch  = regexp.MustCompile(`\[ActionType\.(\w+)\]:\s*(true|false)`)
)

// block returns the text of the object literal assigned to name.
func block(src, name string) (string, error) {
	i := strings.Index(src, "const "+name)
	if i < 0 {
		return "", fmt.Errorf("no %s", name)
	}
	rest := src[i:]
	open := strings.Index(rest, "= {")
	end := strings.Index(rest, "\n};")
	if open < 0 || end < open {
		return "", fmt.Errorf("%s is not an object literal", name)
	}
	return rest[open:end], nil
}

// loadRegistry reads the registry and maps its enum names to action types
// through the definitions: ActionType.X is the type of the XAction
// definition.
func loadRegistry(dir string, b *builder) (*registry, error) {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		return string(data), err
	}
	src, err := read(registryFile)
	if err != nil {
		return nil, err
	}
	origin, err := read(originFile)
	if err != nil {
		return nil, err
	}
	r := &registry{actions: map[string]string{}, notes: map[string]string{}, dispatchable: map[string]bool{}}
	m := reCurrent.FindStringSubmatch(src)
	if m == nil {
		return nil, fmt.Errorf("%s: no PROTOCOL_VERSION", registryFile)
	}
	r.current = m[1]
	m = reSupported.FindStringSubmatch(src)
	if m == nil {
		return nil, fmt.Errorf("%s: no SUPPORTED_PROTOCOL_VERSIONS", registryFile)
	}
	for _, q := range reQuoted.FindAllStringSubmatch(m[1], -1) {
		r.supported = append(r.supported, q[1])
	}

	actionType := func(enum string) (string, error) {
		d, ok := b.types[enum+"Action"]
		if !ok || !d.isAction() {
			return "", fmt.Errorf("ActionType.%s names no action definition", enum)
		}
		return d.actionType, nil
	}
	introduced, err := block(src, "ACTION_INTRODUCED_IN")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", registryFile, err)
	}
	for _, m := range reActionIn.FindAllStringSubmatch(introduced, -1) {
		t, err := actionType(m[1])
		if err != nil {
			return nil, err
		}
		r.actions[t] = m[2]
	}
	notes, err := block(src, "NOTIFICATION_INTRODUCED_IN")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", registryFile, err)
	}
	for _, m := range reNoteIn.FindAllStringSubmatch(notes, -1) {
		r.notes[m[1]] = m[2]
	}
	dispatch, err := block(origin, "IS_CLIENT_DISPATCHABLE")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", originFile, err)
	}
	for _, m := range reDispatch.FindAllStringSubmatch(dispatch, -1) {
		t, err := actionType(m[1])
		if err != nil {
			return nil, err
		}
		r.dispatchable[t] = m[2] == "true"
	}

	// Both tables are exhaustive upstream (a compile error there); hold
	// them to the same here.
	for _, v := range b.byGoName["Action"].variants {
		t := v.def.actionType
		if _, ok := r.actions[t]; !ok {
			return nil, fmt.Errorf("%s: no version for action %s", registryFile, t)
		}
		if _, ok := r.dispatchable[t]; !ok {
			return nil, fmt.Errorf("%s: no origin for action %s", originFile, t)
		}
	}
	if len(r.actions) != len(b.byGoName["Action"].variants) {
		return nil, fmt.Errorf("%s lists %d actions, the definitions %d", registryFile, len(r.actions), len(b.byGoName["Action"].variants))
	}
	for t := range releasedIn {
		if _, ok := r.actions[t]; !ok {
			return nil, fmt.Errorf("config.go corrects the version of %s, which the registry does not list", t)
		}
	}
	if len(r.notes) == 0 || len(r.supported) == 0 {
		return nil, fmt.Errorf("%s: empty notification or version table", registryFile)
	}
	return r, nil
}

// emitRegistry writes the registry as Go tables.
func (b *builder) emitRegistry(r *registry) ([]byte, error) {
	var o out
	o.WriteString(header)
	o.p("// ProtocolVersion is the protocol version the generated types come from.")
	o.p("const ProtocolVersion = %q", r.current)
	o.p("")
	o.p("// supportedVersions are the released baselines a host negotiates")
	o.p("// against, most preferred first.")
	o.p("var supportedVersions = [...]string{")
	for _, v := range r.supported {
		o.p("%q,", v)
	}
	o.p("}")
	o.p("")
	o.p("// actionIntroducedIn is the version that introduced each action type.")
	o.p("var actionIntroducedIn = map[ActionType]string{")
	for _, v := range b.byGoName["Action"].variants {
		t := v.def.actionType
		if fixed, ok := releasedIn[t]; ok {
			o.p("%s: %q, // the registry says %s", actionConst(t), fixed, r.actions[t])
			continue
		}
		o.p("%s: %q,", actionConst(t), r.actions[t])
	}
	o.p("}")
	o.p("")
	o.p("// clientDispatchable holds the action types a client may dispatch.")
	o.p("var clientDispatchable = map[ActionType]bool{")
	for _, v := range b.byGoName["Action"].variants {
		t := v.def.actionType
		if r.dispatchable[t] {
			o.p("%s: true,", actionConst(t))
		}
	}
	o.p("}")
	o.p("")
	methods := make([]string, 0, len(r.notes))
	for m := range r.notes {
		methods = append(methods, m)
	}
	sort.Strings(methods)
	o.p("// notificationIntroducedIn is the version that introduced each")
	o.p("// notification method the host sends (the action envelope aside).")
	o.p("var notificationIntroducedIn = map[string]string{")
	for _, m := range methods {
		o.p("%s: %q,", strconv.Quote(m), r.notes[m])
	}
	o.p("}")
	if !slices.Contains(r.supported, r.current) {
		return nil, fmt.Errorf("%s: PROTOCOL_VERSION %s is not a supported baseline", registryFile, r.current)
	}
	return o.source()
}
