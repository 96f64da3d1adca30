module github.com/ahpd/ahpd

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	github.com/creachadair/jrpc2 v1.3.6
	github.com/go-json-experiment/json v1.27.2
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/creachadair/mds v0.31.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
