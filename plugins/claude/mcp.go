package claude

import (
	"slices"

	"github.com/go-json-experiment/json"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// mcpArgs gives the CLI the host's MCP servers (plugins.ConfigMCPServers)
// as --mcp-config, one JSON string of its .mcp.json shape, which the CLI
// adds to the servers the folder's own .mcp.json names. None when the
// host offers none.
func mcpArgs(config protocol.Object) []string {
	servers := plugins.MCPServersOf(config)
	if len(servers) == 0 {
		return nil
	}
	type server struct {
		Type    string            `json:"type"`
		Command string            `json:"command,omitempty"`
		Args    []string          `json:"args,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		URL     string            `json:"url,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
	}
	all := map[string]server{}
	for _, s := range servers {
		all[s.Name] = server{Type: s.Type, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers}
	}
	data, err := json.Marshal(map[string]any{"mcpServers": all}, json.Deterministic(true))
	if err != nil {
		return nil
	}
	return []string{"--mcp-config", string(data)}
}

// redactMCP returns args with the --mcp-config value left out, for a log:
// a server's env and headers hold its tokens.
func redactMCP(args []string) []string {
	for i, a := range args {
		if a == "--mcp-config" && i+1 < len(args) {
			out := slices.Clone(args)
			out[i+1] = "(the host's MCP servers)"
			return out
		}
	}
	return args
}
