// Package extensions holds the protocol definitions ahpd speaks that came
// after the schema files its types are generated from, for the generator
// and for the schema checks of the tests.
package extensions

import (
	_ "embed"
	"encoding/json"
)

//go:embed extensions.json
var raw []byte

// Extensions are definitions to add to the schemas: Defs by name, and the
// members each union gains.
type Extensions struct {
	Defs   map[string]json.RawMessage `json:"$defs"`
	Unions map[string][]string        `json:"unions"`
}

// Load returns the extensions.
func Load() (*Extensions, error) {
	var e Extensions
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
