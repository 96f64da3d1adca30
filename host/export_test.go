package host

// Methods lists the JSON-RPC methods the host serves, for the grants table
// test, which must walk every one.
func Methods() []string { return assigner{}.Names() }

// Held reports whether the host holds the session uri names, for tests
// that check a read opened nothing.
func (h *Host) Held(uri string) bool { return h.held(uri) != nil }

// Balance runs a residency check now: quiet sessions sleep, clients away
// too long are forgotten.
func (h *Host) Balance() { h.balance() }
