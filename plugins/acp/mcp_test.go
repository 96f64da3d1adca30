package acp

import (
	"testing"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
)

// TestMCPServers: the host's MCP servers go to an ACP session as ACP
// names them, the http ones only to an agent that takes them.
func TestMCPServers(t *testing.T) {
	config := plugins.WithMCPServers(nil, jsontext.Value(`{"web": {"url": "https://mcp.example.com", "headers": {"H": "v"}},
		"fs": {"command": "npx", "args": ["server"], "env": {"B": "2", "A": "1"}}}`))
	got := mcpServers(config, sdk.AgentCapabilities{})
	if len(got) != 1 || got[0].Stdio == nil || got[0].Stdio.Name != "fs" || got[0].Stdio.Command != "npx" ||
		len(got[0].Stdio.Env) != 2 || got[0].Stdio.Env[0].Name != "A" {
		t.Fatalf("without http: %+v", got)
	}
	got = mcpServers(config, sdk.AgentCapabilities{McpCapabilities: sdk.McpCapabilities{Http: true}})
	if len(got) != 2 || got[0].Stdio == nil || got[1].Http == nil || got[1].Http.Url != "https://mcp.example.com" || got[1].Http.Headers[0].Name != "H" {
		t.Fatalf("with http: %+v", got)
	}
	if got := mcpServers(nil, sdk.AgentCapabilities{}); got == nil || len(got) != 0 {
		t.Errorf("none: %#v, want an empty list", got)
	}
}
