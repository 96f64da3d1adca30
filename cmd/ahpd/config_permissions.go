package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.yaml.in/yaml/v3"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// The config file's permissions and inputTimeout are the defaults of the
// session config keys of the same names (docs/PERMISSIONS.md): what a
// session whose config sets none gets (host.Options.Permissions,
// host.Options.InputTimeout). They are read as the protocol reads the
// keys, by plugins' parsers, so that the file and a client are told the
// same thing about the same mistake.

// checkPermissions reads the file's permissions and inputTimeout; an
// error names the key and says what is wrong, as a client is told.
func checkPermissions(cfg *config) error {
	if given(cfg.Permissions) {
		v, err := yamlJSON(cfg.Permissions)
		if err != nil {
			return fmt.Errorf("permissions: %w", err)
		}
		p, err := plugins.ParsePermissions(v)
		if err != nil {
			return fmt.Errorf("permissions: %w", err)
		}
		cfg.defaultPermissions = p
	}
	if given(cfg.InputTimeout) {
		d, err := inputTimeoutOf(cfg.InputTimeout)
		if err != nil {
			return fmt.Errorf("inputTimeout: %w", err)
		}
		cfg.defaultInputTimeout = d
	}
	return nil
}

// given reports whether the file set a key: a key left out, or left
// empty (`inputTimeout:`), is not set.
func given(n yaml.Node) bool {
	return n.Kind != 0 && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// yamlJSON is a YAML value as JSON.
func yamlJSON(n yaml.Node) (jsontext.Value, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		// A mapping with keys that are not strings.
		return nil, errors.New(`want an object {mode: ..., allow: [...], deny: [...]}`)
	}
	return b, nil
}

// inputTimeoutOf reads an inputTimeout as a session's config value is
// read: a duration ("30m", "1h30m") or a number of seconds, 1s to 720h,
// or 0 for none.
func inputTimeoutOf(n yaml.Node) (time.Duration, error) {
	var v jsontext.Value
	switch {
	case n.Kind != yaml.ScalarNode:
		v = nil // neither: refused below
	case n.Tag == "!!int" || n.Tag == "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err == nil {
			v = jsontext.Value(strconv.FormatFloat(f, 'f', -1, 64))
		}
	default:
		v = jsontext.Value(strconv.Quote(n.Value))
	}
	d, ok := plugins.InputTimeoutOf(v)
	if !ok {
		what := "that"
		if n.Kind == yaml.ScalarNode {
			what = protocol.Quote(n.Value)
		}
		return 0, fmt.Errorf(`%s: want a duration from 1s to 720h, such as 30m or a number of seconds, or 0 for none`, what)
	}
	return d, nil
}
