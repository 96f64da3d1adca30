package host

// Methods lists the JSON-RPC methods the host serves, for the grants table
// test, which must walk every one.
func Methods() []string { return assigner{}.Names() }
