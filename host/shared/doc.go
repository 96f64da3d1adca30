// Package shared is the host's side of sharing sessions between hosts
// (docs/CLUSTER.md): with host.Options.Cluster, a session runs on one host
// at a time, the one holding its lease, and every other host routes the
// requests about it there, watches it from its journal, and keeps a copy
// of its record.
//
// It owns the cluster feature's state and logic: the leases this host
// holds and those being taken (leases.go), the automation scheduler's
// lease, routing a request to the host holding its session and the route
// table (route.go), the relays serving the requests other hosts forward
// here (forwarded.go), the mirrors of sessions held elsewhere (mirror.go),
// and the records kept in the cluster's bucket (records.go).
//
// A Part plugs into the hooks package host defines (a router, a record
// store, a periodic task, its start and stop, and per-session hooks), and
// reaches the host only through Core, which the host implements. It must
// not reach into a session but through its methods, nor into the host's
// registry, bus or journal but through Core; and it must not take one of
// its locks under another, or under a lock of the host's, but for the
// pairs lockcheck.Allow names (mirror.go).
package shared
