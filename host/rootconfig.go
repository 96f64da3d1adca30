package host

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ahpd/ahpd/catalogue"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Root config: the host's own settings, which clients see and admins
// change with root/configChanged. A client sends its whole set of settings
// there (VS Code sends about 38 keys right after initialize: proxies,
// telemetry, terminal rules...). As VS Code's own host does, ahpd applies
// the keys it knows, keeps the others as they are for every client to see,
// and never refuses a change for a key it does not know.

// Bounds of what a client may keep in root config.
const (
	maxRootConfigKeys  = 512
	maxRootConfigBytes = 256 << 10
)

// emptyRootConfig is the root config of a host with nothing to configure
// yet: no schema, no values.
func emptyRootConfig() *protocol.RootConfigState {
	props := protocol.NewMap[protocol.ConfigPropertySchema]()
	declareHostRules(&props)
	return &protocol.RootConfigState{
		Schema: protocol.ConfigSchema{Properties: props},
		Values: protocol.Object{},
	}
}

// rootConfigChange checks a root/configChanged and returns the change to
// apply: a known key with a value it cannot take is left out (and
// logged), unknown keys go through. The action is refused only when it would keep too much or
// leaves nothing to apply. The caller holds rootMu.
func (h *Host) rootConfigChange(a *protocol.RootConfigChangedAction) (*protocol.RootConfigChangedAction, string) {
	size := 0
	for k, v := range a.Config {
		size += len(k) + len(v)
	}
	keys := len(a.Config)
	if a.Replace == nil || !*a.Replace {
		for k, v := range h.root.Config.Values {
			if _, ok := a.Config[k]; !ok {
				size += len(k) + len(v)
				keys++
			}
		}
	}
	if keys > maxRootConfigKeys || size > maxRootConfigBytes {
		return nil, fmt.Sprintf("root config would hold %d keys in %d bytes; the limit is %d keys in %d bytes", keys, size, maxRootConfigKeys, maxRootConfigBytes)
	}
	changed := *a
	var dropped []string
	why := map[string]string{}
	for k, v := range a.Config {
		reason := checkHostRule(k, v)
		if k == catalogue.ConfigKey && h.ext.Has() {
			if _, ok := catalogue.ParseMode(session.StringValue(v)); !ok {
				reason = k + " takes one of none, recent, last24Hours, last7Days and last30Days"
			}
		}
		if reason != "" {
			dropped = append(dropped, k)
			why[k] = reason
		}
	}
	if len(dropped) == 0 {
		return a, ""
	}
	slices.Sort(dropped)
	h.log.Warn("root/configChanged: left out values that cannot be taken", "keys", dropped, "first", why[dropped[0]])
	changed.Config = maps.Clone(a.Config)
	for _, k := range dropped {
		delete(changed.Config, k)
	}
	if len(changed.Config) == 0 && (a.Replace == nil || !*a.Replace) {
		return nil, boundedMessage(why[dropped[0]])
	}
	return &changed, ""
}
