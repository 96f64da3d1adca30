// Package client is a Go client of the Agent Host Protocol (AHP) for
// programs that talk to an ahpd (or any AHP host): scripts, CI jobs, the
// ahpd command line and HTTP API.
//
// It owns one logical connection to a host: the WebSocket or stream, the JSON-RPC
// requests on it, the protocol version negotiated at initialize, the
// channels it subscribed to and the state of each, kept up to date by
// applying the actions the host sends through the protocol package's
// reducers, exactly as a full client does. It does not decide anything
// about sessions: what to create, what to answer, what to show is the
// caller's.
//
// # Connecting
//
//	ep, err := client.Locate(client.LocateOptions{})  // the local daemon
//	c, err := client.Dial(ctx, ep.URL, &client.Options{Token: ep.Token})
//	defer c.Close()
//
// Dial opens the WebSocket (the token goes as an Authorization: Bearer
// header), sends initialize offering [Versions] (1.0.0, then 0.9.0) and
// returns once the host answered. [Client.Version] is what was agreed.
// [Open] does the same over a stream of JSON-RPC lines instead: the
// standard input and output of `ahpd --stdio`, or a connection a host
// opens to itself.
//
// # Calls, channels and state
//
// [Client.Call] sends any command and decodes its result; a JSON-RPC error
// comes back as an *[Error] carrying the code (errors.As). Subscribing
// ([Client.Subscribe]) returns the channel's snapshot and from then on the
// client applies every action on it, in serverSeq order; [Client.State]
// reads the current state and [Client.WaitState] waits until a condition
// holds. [Client.Dispatch] sends a client action (dispatchAction); the
// returned [Dispatched] waits for the host's echo, which says whether the
// action was taken or refused (an *[RejectedError] with the host's reason).
//
// Every notification is also delivered on [Client.Events], a buffered
// channel: a caller that does not keep up loses events (counted in
// [Event.Dropped]), never state, and never stalls the connection.
//
// # Speaking for itself
//
// [Connect] opens the WebSocket and sends nothing: the caller sends
// initialize, or reconnect, itself with [Client.Call], and the client
// takes the answers to those (and to subscribe) as its own; [Client.Adopt]
// first carries another client's states over, for a reconnect to replay
// onto. [Client.Start] sends a request without waiting for its answer,
// [Client.SendRaw] a message as it is. [Options] Received and Sent are
// shown every message that crosses the wire, to log it or check it: the
// host's tests check each one the host sends against the protocol's
// schemas so.
//
// # Reconnecting
//
// When the connection drops ([Client.Disconnected] is closed),
// [Client.Reconnect] dials again and sends AHP reconnect with the last
// serverSeq seen and the channels watched: the host replays what was
// missed, which is applied to the states, or sends fresh snapshots. A host
// that no longer knows the client (it restarted) refuses with -32008; the
// client then initializes anew and subscribes to each channel again, so
// the states are fresh either way. A client [Open] made cannot reconnect:
// its stream is gone with the connection. [Resume] opens a new stream as
// a client the host already knows, replaying from a given serverSeq: the
// HTTP API's event streams start so.
//
// # Lifetime
//
// Every method is safe for concurrent use. Close ends the connection and
// every goroutine the client started, and closes the events channel.
package client
