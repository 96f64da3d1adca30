package plugins

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

// ConfigMCPServers is the config key the host hands agents the MCP
// servers of every session under (root config's mcpServers, which an
// administrator sets): like ConfigHostRules, never a session's own key.
// Each backend gives them to its agent its own way, beside the servers
// the agent finds in its folder.
const ConfigMCPServers = "ahpd.mcpServers"

// MCPServer is one MCP server the host offers every session's agents.
type MCPServer struct {
	// Name is the server's name, the key it was given under.
	Name string
	// Type is "stdio" (a command the agent starts) or "http" (a URL).
	Type string
	// Command, Args and Env start a stdio server.
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach an http server.
	URL     string
	Headers map[string]string
}

// Bounds on the servers a host offers.
const (
	maxMCPServers     = 32
	maxMCPServerBytes = 16 << 10
)

var mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParseMCPServers reads a map of server name to server, VS Code's shape
// (mcp.json's "servers"): {"type": "stdio", "command", "args", "env"} or
// {"type": "http", "url", "headers"}; "cwd" is taken and left unused (a
// server starts in the session's folder). Anything else is an error
// naming the server and member, and the servers come back sorted by name.
func ParseMCPServers(v jsontext.Value) ([]MCPServer, error) {
	var raw map[string]jsontext.Value
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, errors.New("MCP servers are an object of server name to server")
	}
	if len(raw) > maxMCPServers {
		return nil, fmt.Errorf("%d MCP servers; at most %d are taken", len(raw), maxMCPServers)
	}
	out := make([]MCPServer, 0, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		s, err := parseMCPServer(name, raw[name])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func parseMCPServer(name string, v jsontext.Value) (MCPServer, error) {
	if !mcpName.MatchString(name) {
		return MCPServer{}, fmt.Errorf("MCP server %s: a name is 1 to 64 letters, digits, _ and -", protocol.Quote(truncate(name, 64)))
	}
	where := "MCP server " + name
	if len(v) > maxMCPServerBytes {
		return MCPServer{}, fmt.Errorf("%s: more than %d bytes", where, maxMCPServerBytes)
	}
	var in struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		Cwd     string            `json:"cwd"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(v, &in, json.RejectUnknownMembers(true)); err != nil {
		return MCPServer{}, fmt.Errorf("%s: takes type, command, args, env and cwd (stdio) or type, url and headers (http)", where)
	}
	s := MCPServer{Name: name, Type: in.Type, Command: in.Command, Args: in.Args, Env: in.Env, URL: in.URL, Headers: in.Headers}
	if s.Type == "" {
		// VS Code's mcp.json leaves the type out of a command's server.
		s.Type = "stdio"
		if in.URL != "" {
			s.Type = "http"
		}
	}
	switch s.Type {
	case "stdio":
		if s.Command == "" || in.URL != "" || in.Headers != nil {
			return MCPServer{}, fmt.Errorf("%s: a stdio server has a command, and no url or headers", where)
		}
	case "http":
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return MCPServer{}, fmt.Errorf("%s: an http server has an http or https url", where)
		}
		if s.Command != "" || in.Args != nil || in.Env != nil {
			return MCPServer{}, fmt.Errorf("%s: an http server has a url, and no command, args or env", where)
		}
	default:
		return MCPServer{}, fmt.Errorf("%s: type %s is not stdio or http", where, protocol.Quote(truncate(s.Type, 32)))
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// WithMCPServers returns config with the host's MCP servers v (VS Code's
// map, checked) in it, none for an empty v, leaving config itself as it
// was.
func WithMCPServers(config protocol.Object, v jsontext.Value) protocol.Object {
	_, had := config[ConfigMCPServers]
	if len(v) == 0 {
		if !had {
			return config
		}
		out := maps.Clone(config)
		delete(out, ConfigMCPServers)
		return out
	}
	out := make(protocol.Object, len(config)+1)
	maps.Copy(out, config)
	out[ConfigMCPServers] = v
	return out
}

// MCPServersOf reads the host's MCP servers from an agent's config
// values; none when there are none or they cannot be read.
func MCPServersOf(config protocol.Object) []MCPServer {
	v, ok := config[ConfigMCPServers]
	if !ok {
		return nil
	}
	s, err := ParseMCPServers(v)
	if err != nil {
		return nil
	}
	return s
}
