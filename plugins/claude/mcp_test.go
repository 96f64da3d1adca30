package claude_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/plugins/pluginstest"
	"github.com/ahpd/ahpd/protocol"
)

// probeServer is a stdio MCP server of one tool, echo, for the CLI to
// start: newline-delimited JSON-RPC, as MCP's stdio transport is.
const probeServer = `
const rl = require('readline').createInterface({input: process.stdin});
const send = m => process.stdout.write(JSON.stringify(m) + '\n');
rl.on('line', line => {
  let m; try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined) return;
  switch (m.method) {
  case 'initialize':
    send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: m.params.protocolVersion,
      capabilities: {tools: {}}, serverInfo: {name: 'probe', version: '1'}}});
    break;
  case 'tools/list':
    send({jsonrpc: '2.0', id: m.id, result: {tools: [{name: 'echo', description: 'Says its text back.',
      inputSchema: {type: 'object', properties: {text: {type: 'string'}}}}]}});
    break;
  default:
    send({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'no such method'}});
  }
});
`

// TestHostMCPServers: the MCP servers the host hands an agent (root
// config's mcpServers) reach the CLI, which starts them and offers their
// tools to the model; an agent without them offers none.
func TestHostMCPServers(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node, which the Claude CLI needs too, is not on PATH")
	}
	script := filepath.Join(t.TempDir(), "probe.js")
	if err := os.WriteFile(script, []byte(probeServer), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := jsontext.Value(`{"probe": {"type": "stdio", "command": ` + protocol.Quote(node) + `, "args": [` + protocol.Quote(script) + `], "env": {"PROBE_TOKEN": "secret"}}}`)
	if _, err := plugins.ParseMCPServers(servers); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	offered := func(config protocol.Object) bool {
		t.Helper()
		a := f.start(t, f.backend, newID(), false, config)
		before := len(f.mock.Requests())
		if err := prompt(t, a, pluginstest.NewTurn("t1"), "which tools?"); err != nil {
			t.Fatal(err)
		}
		reqs := f.mock.Requests()
		if len(reqs) <= before {
			t.Fatal("the CLI asked the model nothing")
		}
		return strings.Contains(string(reqs[len(reqs)-1].Body), `"mcp__probe__echo"`)
	}
	if !offered(plugins.WithMCPServers(nil, servers)) {
		t.Error("the host's MCP server's tool was not offered to the model")
	}
	if offered(nil) {
		t.Error("an agent the host gave no MCP servers offered the probe's tool")
	}
}
