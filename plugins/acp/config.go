package acp

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// modeKey is the config key of the session mode, offered for agents that
// have modes but no config options (which supersede modes in ACP).
const modeKey = "mode"

// configTimeout bounds the config changes one SetConfig sends.
const configTimeout = 10 * time.Second

// sessionOptions are the settings a session reported: its models, modes
// and config options, each with its current value. The values are
// replaced, never changed in place, so copies may be shared.
type sessionOptions struct {
	models *sdk.SessionModelState
	modes  *sdk.SessionModeState
	config []sdk.SessionConfigOption
}

// modelInfos lists the models as AgentInfo does.
func (o sessionOptions) modelInfos(provider string) []protocol.SessionModelInfo {
	if o.models == nil {
		return nil
	}
	var out []protocol.SessionModelInfo
	for _, m := range o.models.AvailableModels {
		out = append(out, protocol.SessionModelInfo{ID: string(m.ModelId), Provider: provider, Name: m.Name})
	}
	return out
}

// offersModel reports whether m lists the model id.
func offersModel(m *sdk.SessionModelState, id string) bool {
	for _, info := range m.AvailableModels {
		if string(info.ModelId) == id {
			return true
		}
	}
	return false
}

// properties offers the config options as session config properties,
// keyed by their ACP ids, or the mode when there are no options.
func (o sessionOptions) properties() []plugins.Property {
	var props []plugins.Property
	for _, opt := range o.config {
		switch {
		case opt.Select != nil:
			s := opt.Select
			schema := protocol.SessionConfigPropertySchema{
				Type:           "string",
				Title:          s.Name,
				Description:    s.Description,
				Default:        jsonValue(string(s.CurrentValue)),
				SessionMutable: new(true),
			}
			var described bool
			var descriptions []string
			for _, v := range selectValues(s.Options) {
				schema.Enum = append(schema.Enum, jsonValue(string(v.Value)))
				schema.EnumLabels = append(schema.EnumLabels, v.Name)
				desc := ""
				if v.Description != nil {
					desc, described = *v.Description, true
				}
				descriptions = append(descriptions, desc)
			}
			if described {
				schema.EnumDescriptions = descriptions
			}
			props = append(props, plugins.Property{Key: string(s.Id), Schema: schema})
		case opt.Boolean != nil:
			bo := opt.Boolean
			props = append(props, plugins.Property{Key: string(bo.Id), Schema: protocol.SessionConfigPropertySchema{
				Type:           "boolean",
				Title:          bo.Name,
				Description:    bo.Description,
				Default:        jsonValue(bo.CurrentValue),
				SessionMutable: new(true),
			}})
		}
	}
	if len(o.config) == 0 && o.modes != nil && len(o.modes.AvailableModes) > 1 {
		schema := protocol.SessionConfigPropertySchema{
			Type:           "string",
			Title:          "Mode",
			Default:        jsonValue(string(o.modes.CurrentModeId)),
			SessionMutable: new(true),
		}
		for _, m := range o.modes.AvailableModes {
			schema.Enum = append(schema.Enum, jsonValue(string(m.Id)))
			schema.EnumLabels = append(schema.EnumLabels, m.Name)
		}
		props = append(props, plugins.Property{Key: modeKey, Schema: schema})
	}
	return props
}

// selectValues lists a select option's values, groups flattened.
func selectValues(o sdk.SessionConfigSelectOptions) []sdk.SessionConfigSelectOption {
	switch {
	case o.Ungrouped != nil:
		return *o.Ungrouped
	case o.Grouped != nil:
		var out []sdk.SessionConfigSelectOption
		for _, g := range *o.Grouped {
			out = append(out, g.Options...)
		}
		return out
	}
	return nil
}

func jsonValue(v any) jsontext.Value {
	b, _ := json.Marshal(v) // strings and booleans always encode
	return jsontext.Value(b)
}

// SetConfig sends the config values that changed to the agent
// (plugins.Reconfigurer). It returns at once; the changes are sent in
// order, and values set while one is being sent replace those still
// waiting.
func (a *Agent) SetConfig(values protocol.Object) {
	// The permissions are ahpd's, not the agent's: they apply from the
	// next permission request on, even mid-turn.
	a.in.client.policy.Store(plugins.PolicyOf(values, a.dir))
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.pendingConfig = maps.Clone(values)
	if a.pendingConfig == nil {
		a.pendingConfig = protocol.Object{}
	}
	if a.configuring {
		return
	}
	a.configuring = true
	a.wg.Add(1)
	go a.configLoop()
}

// configLoop sends pending config values until none are left.
func (a *Agent) configLoop() {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		values := a.pendingConfig
		a.pendingConfig = nil
		if values == nil {
			a.configuring = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		ctx, cancel := context.WithTimeout(a.life, configTimeout)
		a.applyConfig(ctx, values)
		cancel()
	}
}

// applyConfig sends the values that differ from the session's: config
// options by set_config_option, the mode by set_mode. A value the agent
// refuses is logged; the session keeps its own.
func (a *Agent) applyConfig(ctx context.Context, values protocol.Object) {
	if len(values) == 0 {
		return
	}
	a.mu.Lock()
	opts := a.options
	a.mu.Unlock()

	for _, opt := range opts.config {
		var req sdk.SetSessionConfigOptionRequest
		switch {
		case opt.Select != nil:
			var v string
			if !decodeValue(values, string(opt.Select.Id), &v) || v == string(opt.Select.CurrentValue) {
				continue
			}
			req.ValueId = &sdk.SetSessionConfigOptionValueId{SessionId: a.session, ConfigId: opt.Select.Id, Value: sdk.SessionConfigValueId(v)}
		case opt.Boolean != nil:
			var v bool
			if !decodeValue(values, string(opt.Boolean.Id), &v) || v == opt.Boolean.CurrentValue {
				continue
			}
			req.Boolean = &sdk.SetSessionConfigOptionBoolean{SessionId: a.session, ConfigId: opt.Boolean.Id, Type: "boolean", Value: v}
		default:
			continue
		}
		resp, err := a.in.conn.SetSessionConfigOption(ctx, req)
		if err != nil {
			a.log.Warn("the agent refused a config value", "err", err)
			continue
		}
		a.mu.Lock()
		a.options.config = resp.ConfigOptions
		a.mu.Unlock()
	}

	if len(opts.config) > 0 || opts.modes == nil {
		return
	}
	var mode string
	if !decodeValue(values, modeKey, &mode) || mode == string(opts.modes.CurrentModeId) {
		return
	}
	if _, err := a.in.conn.SetSessionMode(ctx, sdk.SetSessionModeRequest{SessionId: a.session, ModeId: sdk.SessionModeId(mode)}); err != nil {
		a.log.Warn("the agent refused a mode", "mode", mode, "err", err)
		return
	}
	modes := *opts.modes
	modes.CurrentModeId = sdk.SessionModeId(mode)
	a.mu.Lock()
	a.options.modes = &modes
	a.mu.Unlock()
}

// decodeValue decodes values[key] into v, reporting whether it was there
// and had v's type.
func decodeValue(values protocol.Object, key string, v any) bool {
	raw, ok := values[key]
	return ok && json.Unmarshal(raw, v) == nil
}
