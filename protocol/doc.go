// Package protocol holds the Agent Host Protocol (AHP) as Go: the wire types
// generated from the official JSON schemas, their JSON encoding, URIs, error
// codes, version negotiation and the reducers that are the only way state
// changes.
//
// Every wire type encodes and decodes itself without reflection. Optional
// members are pointers, slices, maps or interfaces, nil when absent; a
// member or union variant this version does not define is kept (Extra,
// Unknown) and written back unchanged, so newer peers lose nothing passing
// through ahpd.
package protocol

//go:generate go run ./internal/gen
