// Package conn is one client connection of the host: the transport it
// reads and writes (WebSocket text frames or lines), the admission of each
// message before it is decoded (sizes, ids, batches), the line that takes
// a connection's requests one at a time in the order they came, the queue
// of frames it is sent (merged when the client is behind, cut when it is
// too far behind), the delivery delays and read-only marks of its
// subscriptions, and its deadlines.
//
// A Conn is a fanout.Subscriber. The host makes one with New, gives it a
// Dispatch that returns each method's handler, and hears of it only
// through its Config: the clock, the limits, OnCut and OnClosed. It must
// not know what a method does, what a session is, or who may do what: a
// handler is the host's, and so are the grants.
package conn
