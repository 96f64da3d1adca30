package plugins

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/protocol"
)

func TestParseMCPServers(t *testing.T) {
	got, err := ParseMCPServers(jsontext.Value(`{
		"web": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
		"fs": {"command": "npx", "args": ["-y", "server-fs"], "env": {"A": "1"}, "cwd": "/tmp"},
		"api": {"url": "http://127.0.0.1:9/mcp"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name+"="+s.Type)
	}
	if strings.Join(names, " ") != "api=http fs=stdio web=http" {
		t.Errorf("servers %v", names)
	}
	for _, tc := range []struct{ value, want string }{
		{`[]`, "an object of server name to server"},
		{`{"a b": {"command": "x"}}`, `MCP server "a b": a name is`},
		{`{"x": {"type": "sse", "url": "https://a"}}`, `type "sse" is not stdio or http`},
		{`{"x": {"type": "stdio"}}`, "a stdio server has a command"},
		{`{"x": {"type": "http", "url": "file:///etc/passwd"}}`, "an http or https url"},
		{`{"x": {"type": "http", "url": "https://a", "command": "sh"}}`, "no command, args or env"},
		{`{"x": {"command": "sh", "shell": true}}`, "takes type, command"},
		{`{"x": {"command": "sh", "args": "-c"}}`, "takes type, command"},
	} {
		if _, err := ParseMCPServers(jsontext.Value(tc.value)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMCPServers(%s) = %v, want an error saying %q", tc.value, err, tc.want)
		}
	}
	many := "{"
	for i := range maxMCPServers + 1 {
		if i > 0 {
			many += ","
		}
		many += protocol.Quote("s"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+string(rune('a'+i/26))) + `: {"command": "x"}`
	}
	if _, err := ParseMCPServers(jsontext.Value(many + "}")); err == nil {
		t.Errorf("took %d servers", maxMCPServers+1)
	}

	config := protocol.Object{"a": jsontext.Value(`1`)}
	with := WithMCPServers(config, jsontext.Value(`{"fs": {"command": "x"}}`))
	if len(MCPServersOf(with)) != 1 || len(config) != 1 {
		t.Errorf("WithMCPServers: %v (config %v)", with, config)
	}
	if without := WithMCPServers(with, nil); len(MCPServersOf(without)) != 0 || len(without) != 1 {
		t.Errorf("WithMCPServers(nil) kept them: %v", without)
	}
}
