package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// kind is the Go shape of a schema type.
type kind int

const (
	kString kind = iota // string, or a named string type (enum, alias)
	kBool
	kInt    // int64
	kRound  // int64, read rounded from any number
	kFloat  // float64
	kUint32 // a named uint32 (SessionStatus)
	kRaw    // jsontext.Value: any JSON value
	kObject // Object: an open JSON object
	kArray
	kMap
	kDef // a generated or manual named type (struct, union)
)

// typ is a Go type of a field or element.
type typ struct {
	k    kind
	name string   // Go name of a named scalar (kString, kUint32)
	def  *typeDef // kDef
	elem *typ     // kArray, kMap

	values []string // the fixed values of a kString, when the schema lists them
}

type defKind int

const (
	dStruct defKind = iota
	dUnion
	dEnum
	dManual
	dAlias // a definition that is only a reference to another
)

// typeDef is a named Go type the generator emits (or, for dManual, refers to).
type typeDef struct {
	kind       defKind
	goName     string
	schemaName string // "" for inline types
	named      bool   // an inline type named in config.go
	home       string // schema file the type is emitted for

	// dStruct
	fields     []*field
	consts     []constMember
	actionType string     // the action's type string, for actions
	unions     []*typeDef // unions this struct is a variant of

	// dUnion
	disc     string // discriminating property; "" when variants are told apart by their keys
	variants []*variant

	// dEnum
	values []string

	// dAlias
	target *typeDef
}

type field struct {
	json     string
	goName   string
	t        *typ
	required bool
	// appendable text grows by appends (streamed text): the struct keeps
	// the buffer its strings are views of (config.go).
	appendable bool
}

// constMember is a property with one fixed value; it has no Go field and is
// written on every encode.
type constMember struct {
	json, value string
}

type variant struct {
	values []string // discriminator values; none when told apart by keys
	def    *typeDef
}

func (d *typeDef) isAction() bool { return d.actionType != "" }

// allActions reports whether every variant of a union is an action.
func (d *typeDef) allActions() bool {
	for _, v := range d.variants {
		if !v.def.isAction() {
			return false
		}
	}
	return len(d.variants) > 0
}

func (d *typeDef) requiredKeys() []string {
	var keys []string
	for _, c := range d.consts {
		keys = append(keys, c.json)
	}
	for _, f := range d.fields {
		if f.required {
			keys = append(keys, f.json)
		}
	}
	return keys
}

// builder turns the schema definitions into typeDefs.
type builder struct {
	defs     map[string]*node
	home     map[string]string
	types    map[string]*typeDef // by schema name
	byGoName map[string]*typeDef
	shapes   map[string]*typeDef // inline objects, by canonical schema
	enums    []*typeDef
}

func newBuilder(defs map[string]*node, home map[string]string) *builder {
	return &builder{
		defs:     defs,
		home:     home,
		types:    map[string]*typeDef{},
		byGoName: map[string]*typeDef{},
		shapes:   map[string]*typeDef{},
	}
}

func (b *builder) build() error {
	names := make([]string, 0, len(b.defs))
	for name := range b.defs {
		names = append(names, name)
	}
	sort.Strings(names)
	// Enums first, so inline string sets can be matched to them.
	for _, name := range names {
		n := b.defs[name]
		if skipped[name] || manual[name] || rawDefs[name] || scalars[name] != "" {
			continue
		}
		if vals, ok := n.stringValues(); ok && n.Properties == nil {
			d := &typeDef{kind: dEnum, goName: goName(rename(name)), schemaName: name, home: b.home[name], values: vals}
			if err := b.register(name, d); err != nil {
				return err
			}
			b.enums = append(b.enums, d)
		}
	}
	for _, name := range names {
		if _, err := b.resolve(name); err != nil {
			return fmt.Errorf("$defs.%s: %w", name, err)
		}
	}
	extra := make([]string, 0, len(extraUnions))
	for name := range extraUnions {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		u := &typeDef{kind: dUnion, goName: name, home: "commands"}
		if err := b.registerGo(u); err != nil {
			return err
		}
		var vs []*typeDef
		for _, vn := range extraUnions[name] {
			v, err := b.resolve(vn)
			if err != nil {
				return err
			}
			vs = append(vs, v)
		}
		if err := b.fillUnion(u, vs); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func rename(name string) string {
	if r, ok := renames[name]; ok {
		return r
	}
	return name
}

func (b *builder) register(schemaName string, d *typeDef) error {
	if schemaName != "" {
		b.types[schemaName] = d
	}
	return b.registerGo(d)
}

func (b *builder) registerGo(d *typeDef) error {
	if prev, ok := b.byGoName[d.goName]; ok && prev != d {
		return fmt.Errorf("two types are named %s", d.goName)
	}
	b.byGoName[d.goName] = d
	return nil
}

// resolve returns the typeDef of a schema definition, building it on first use.
func (b *builder) resolve(name string) (*typeDef, error) {
	if d, ok := b.types[name]; ok {
		return d, nil
	}
	n, ok := b.defs[name]
	if !ok {
		return nil, fmt.Errorf("unknown definition %q", name)
	}
	switch {
	case skipped[name]:
		return nil, nil
	case manual[name]:
		d := &typeDef{kind: dManual, goName: goName(name), schemaName: name, home: b.home[name]}
		return d, b.register(name, d)
	case rawDefs[name] || scalars[name] != "":
		return nil, nil
	}
	home := b.home[name]
	if n.Ref != "" && n.Type == "" && n.Properties == nil && n.OneOf == nil {
		// An alias: references to it are references to its target, and a
		// Go alias keeps the name.
		target, err := b.resolve(n.refName())
		if err != nil || target == nil {
			return nil, fmt.Errorf("alias of %s: %v", n.refName(), err)
		}
		b.types[name] = target
		return target, b.registerGo(&typeDef{kind: dAlias, goName: goName(rename(name)), schemaName: name, home: home, target: target})
	}
	d := &typeDef{goName: goName(rename(name)), schemaName: name, home: home}
	if err := b.register(name, d); err != nil {
		return nil, err
	}
	switch {
	case merged[name]:
		d.kind = dStruct
		return d, b.fillMerged(d, n)
	case len(n.OneOf) > 0:
		d.kind = dUnion
		var vs []*typeDef
		for i, o := range n.OneOf {
			if o.Ref == "#/$defs/" {
				continue // the generator quirk noted in SOURCE.md
			}
			v, err := b.variantDef(d, o, name, home)
			if err != nil {
				return nil, fmt.Errorf("oneOf[%d]: %w", i, err)
			}
			vs = append(vs, v)
		}
		return d, b.fillUnion(d, vs)
	case n.Type == "object" && n.Properties != nil:
		d.kind = dStruct
		return d, b.fillStruct(d, n, name, home)
	case n.Type == "string" && len(n.Enum) == 0:
		// A plain alias such as URI: written as a Go alias of string.
		d.kind = dEnum
		return d, nil
	}
	return nil, fmt.Errorf("unsupported definition shape")
}

// variantDef resolves one member of a oneOf to a struct.
func (b *builder) variantDef(u *typeDef, o *node, ctx, home string) (*typeDef, error) {
	if o.Ref != "" {
		v, err := b.resolve(o.refName())
		if err != nil {
			return nil, err
		}
		if v == nil || v.kind != dStruct {
			return nil, fmt.Errorf("variant %s is not an object", o.refName())
		}
		return v, nil
	}
	if o.Type != "object" {
		return nil, fmt.Errorf("inline variant of type %q (make the union manual)", o.Type)
	}
	// An inline variant is named after the union and its discriminator value.
	var tag string
	for _, p := range o.propOrder {
		if s, ok := o.Properties[p].constString(); ok {
			tag = s
			break
		}
	}
	if tag == "" {
		return nil, fmt.Errorf("inline variant without a constant")
	}
	d := &typeDef{kind: dStruct, goName: u.goName + goName(tag), home: home}
	if err := b.registerGo(d); err != nil {
		return nil, err
	}
	return d, b.fillStruct(d, o, ctx, home)
}

// fillStruct builds a struct's fields from an object schema. ctx is the
// definition name used to look up per-property decisions.
func (b *builder) fillStruct(d *typeDef, n *node, ctx, home string) error {
	for _, p := range n.propOrder {
		pn := n.Properties[p]
		if vals, ok := pn.stringValues(); ok && len(vals) == 1 && (pn.Const != nil || pn.Type == "string" || len(pn.OneOf) > 0) {
			d.consts = append(d.consts, constMember{json: p, value: vals[0]})
			if p == "type" && strings.Contains(vals[0], "/") && strings.HasSuffix(ctx, "Action") {
				d.actionType = vals[0]
			}
			continue
		}
		t, err := b.typeOf(pn, ctx+"."+p, home)
		if err != nil {
			return fmt.Errorf("property %s: %w", p, err)
		}
		f := &field{json: p, goName: goName(p), t: t, required: n.isRequired(p), appendable: appendable[ctx+"."+p]}
		if f.appendable && (t.k != kString || !f.required) {
			return fmt.Errorf("property %s: only a required string can be appendable", p)
		}
		if f.goName == "Extra" {
			return fmt.Errorf("property %s collides with the Extra field", p)
		}
		d.fields = append(d.fields, f)
	}
	return nil
}

// fillMerged builds one struct from a oneOf of objects that share a
// discriminator value: a field required by every variant stays required.
func (b *builder) fillMerged(d *typeDef, n *node) error {
	seen := map[string]*field{}
	count := map[string]int{}
	for _, o := range n.OneOf {
		vname := o.refName()
		vn := b.defs[vname]
		var part typeDef
		if err := b.fillStruct(&part, vn, vname, b.home[vname]); err != nil {
			return err
		}
		if len(d.consts) == 0 {
			d.consts = part.consts
			d.actionType = part.actionType
		}
		for _, f := range part.fields {
			count[f.json]++
			if prev, ok := seen[f.json]; ok {
				prev.required = prev.required && f.required
				continue
			}
			seen[f.json] = f
			d.fields = append(d.fields, f)
		}
	}
	for _, f := range d.fields {
		if count[f.json] < len(n.OneOf) {
			f.required = false
		}
	}
	return nil
}

// fillUnion finds how a union's variants are told apart and records it.
func (b *builder) fillUnion(u *typeDef, vs []*typeDef) error {
	u.kind = dUnion
	disc := findDiscriminator(vs)
	u.disc = disc
	taken := map[string]bool{}
	for _, v := range vs {
		var values []string
		if disc != "" {
			values = discValues(v, disc)
			for _, val := range values {
				if taken[val] {
					return fmt.Errorf("discriminator value %q names two variants", val)
				}
				taken[val] = true
			}
		}
		u.variants = append(u.variants, &variant{values: values, def: v})
		if !slices.Contains(v.unions, u) {
			v.unions = append(v.unions, u)
		}
	}
	if disc == "" {
		// Told apart by keys: most specific first.
		sort.SliceStable(u.variants, func(i, j int) bool {
			return len(u.variants[i].def.requiredKeys()) > len(u.variants[j].def.requiredKeys())
		})
	}
	return nil
}

// findDiscriminator returns a property every variant fixes to values no
// other variant takes.
func findDiscriminator(vs []*typeDef) string {
	for _, cand := range []string{"type", "kind", "status", "state"} {
		ok := true
		taken := map[string]bool{}
		for _, v := range vs {
			vals := discValues(v, cand)
			if len(vals) == 0 {
				ok = false
			}
			for _, val := range vals {
				ok = ok && !taken[val]
				taken[val] = true
			}
		}
		if ok {
			return cand
		}
	}
	return ""
}

func discValues(v *typeDef, prop string) []string {
	for _, c := range v.consts {
		if c.json == prop {
			return []string{c.value}
		}
	}
	for _, f := range v.fields {
		if f.json == prop && f.t.k == kString {
			if f.t.values != nil {
				return f.t.values
			}
		}
	}
	return nil
}

// typeOf maps a property or element schema to a Go type. ctx names the
// place ("Definition.property") for the decisions in config.go.
func (b *builder) typeOf(n *node, ctx, home string) (*typ, error) {
	if t, ok := untyped[ctx]; ok {
		n = &node{Type: t}
	}
	if n.Ref != "" {
		name := n.refName()
		switch {
		case rawDefs[name]:
			return &typ{k: kRaw}, nil
		case scalars[name] != "":
			return &typ{k: kUint32, name: goName(name)}, nil
		}
		d, err := b.resolve(name)
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, fmt.Errorf("reference to skipped definition %s", name)
		}
		if d.kind == dEnum {
			return &typ{k: kString, name: d.goName, values: d.values}, nil
		}
		return &typ{k: kDef, def: d}, nil
	}
	if vals, ok := n.stringValues(); ok {
		return &typ{k: kString, name: b.enumFor(vals), values: vals}, nil
	}
	if len(n.OneOf) > 0 {
		u := &typeDef{kind: dUnion, goName: goName(rename(ctx)), home: home}
		if _, ok := renames[ctx]; !ok {
			u.goName = goName(strings.ReplaceAll(ctx, ".", " "))
		}
		if err := b.registerGo(u); err != nil {
			return nil, err
		}
		var vs []*typeDef
		for _, o := range n.OneOf {
			v, err := b.variantDef(u, o, ctx, home)
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		}
		return &typ{k: kDef, def: u}, b.fillUnion(u, vs)
	}
	switch n.Type {
	case "string":
		return &typ{k: kString}, nil
	case "boolean":
		return &typ{k: kBool}, nil
	case "integer":
		return &typ{k: kInt}, nil
	case "number":
		if floats[ctx] {
			return &typ{k: kFloat}, nil
		}
		if rounded[ctx] {
			return &typ{k: kRound}, nil
		}
		return &typ{k: kInt}, nil
	case "array":
		if n.Items == nil {
			return nil, fmt.Errorf("array without items")
		}
		elem, err := b.typeOf(n.Items, ctx+"[]", home)
		if err != nil {
			return nil, err
		}
		return &typ{k: kArray, elem: elem}, nil
	case "object":
		if n.Properties != nil {
			d, err := b.inlineStruct(n, ctx, home)
			if err != nil {
				return nil, err
			}
			return &typ{k: kDef, def: d}, nil
		}
		if n.AddlProps != nil && (n.AddlProps.Type != "" || n.AddlProps.Ref != "") {
			elem, err := b.typeOf(n.AddlProps, ctx+"{}", home)
			if err != nil {
				return nil, err
			}
			if elem.k == kObject || elem.k == kRaw {
				return &typ{k: kObject}, nil
			}
			return &typ{k: kMap, elem: elem}, nil
		}
		return &typ{k: kObject}, nil
	case "":
		return &typ{k: kRaw}, nil
	}
	return nil, fmt.Errorf("unsupported type %q", n.Type)
}

// inlineStruct returns the struct for an inline object schema. Inline
// objects with the same schema share one Go type.
func (b *builder) inlineStruct(n *node, ctx, home string) (*typeDef, error) {
	key := canonical(n)
	name, named := renames[ctx]
	if d, ok := b.shapes[key]; ok {
		// The shape was met first elsewhere; a chosen name wins over a
		// derived one whichever place is met first.
		if named && !d.named {
			delete(b.byGoName, d.goName)
			d.goName, d.named = name, true
			return d, b.registerGo(d)
		}
		return d, nil
	}
	if !named {
		name = goName(strings.ReplaceAll(ctx, ".", " "))
	}
	d := &typeDef{kind: dStruct, goName: name, home: home, named: named}
	if err := b.registerGo(d); err != nil {
		return nil, err
	}
	b.shapes[key] = d
	return d, b.fillStruct(d, n, ctx, home)
}

// canonical is a schema's JSON without descriptions, for comparing shapes.
func canonical(n *node) string {
	// Descriptions are dropped, except where "description" names a property.
	var strip func(v any, inProperties bool) any
	strip = func(v any, inProperties bool) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				if k != "description" || inProperties {
					out[k] = strip(e, k == "properties" && !inProperties)
				}
			}
			return out
		case []any:
			for i := range x {
				x[i] = strip(x[i], false)
			}
			return x
		}
		return v
	}
	raw, _ := json.Marshal(n)
	var v any
	_ = json.Unmarshal(raw, &v)
	out, _ := json.Marshal(strip(v, false))
	return string(out)
}

// enumFor names the enum definition holding every value of an inline set,
// or "" (plain string) when none does.
func (b *builder) enumFor(vals []string) string {
	for _, e := range b.enums {
		all := true
		for _, v := range vals {
			if !slices.Contains(e.values, v) {
				all = false
				break
			}
		}
		if all {
			return e.goName
		}
	}
	return ""
}
