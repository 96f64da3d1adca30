package acp

import (
	"maps"
	"slices"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// mcpServers are the host's MCP servers (plugins.ConfigMCPServers) as an
// ACP session takes them: every stdio one, and the http ones when the
// agent says it takes http servers (ACP's mcpCapabilities); never nil,
// since the field is required.
func mcpServers(config protocol.Object, caps sdk.AgentCapabilities) []sdk.McpServer {
	out := []sdk.McpServer{}
	for _, s := range plugins.MCPServersOf(config) {
		switch s.Type {
		case "stdio":
			env := []sdk.EnvVariable{}
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				env = append(env, sdk.EnvVariable{Name: k, Value: s.Env[k]})
			}
			args := s.Args
			if args == nil {
				args = []string{}
			}
			out = append(out, sdk.McpServer{Stdio: &sdk.McpServerStdio{Name: s.Name, Command: s.Command, Args: args, Env: env}})
		case "http":
			if !caps.McpCapabilities.Http {
				continue
			}
			headers := []sdk.HttpHeader{}
			for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
				headers = append(headers, sdk.HttpHeader{Name: k, Value: s.Headers[k]})
			}
			out = append(out, sdk.McpServer{Http: &sdk.McpServerHttpInline{Name: s.Name, Type: "http", Url: s.URL, Headers: headers}})
		}
	}
	return out
}
