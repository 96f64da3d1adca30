// Package webhooks tells receivers over HTTP what happened in ahpd's
// sessions: a turn that waits on a person (needs_input), a turn that
// ended (turn_completed, turn_failed), an automation run that ended
// (automation_run_finished). It is the host's events.Sink in the daemon
// (the config file's webhooks:, docs/WEBHOOKS.md).
//
// It owns the webhooks' config and its checks (Check: https, or plain
// http to this machine only, unless allowed; a secret, or unsigned said
// out loud), the body each event is posted as (Body, its client-written
// strings bounded), signing (Sign, Verify: HMAC-SHA256 of a timestamp and
// the body), delivery (a Dispatcher: retried with capped, jittered
// exponential backoff for an hour by default; in order per session and
// webhook; at most a bound of deliveries waiting per webhook, the oldest
// dropped and counted), keeping the deliveries that wait across restarts
// (an append-only file under the state directory), the log of recent
// deliveries that `ahpd webhooks log` shows, and their metrics.
//
// It must not make the host wait: Event only queues, and everything that
// touches the network or the disk runs on goroutines of its own. It
// must not import the host, follow a redirect (a receiver's 3xx is a
// failed attempt), or show a secret or a URL's path in a log, an error or
// the delivery log. Time comes from a clock.Clock, so tests move a fake
// one through an hour of retries without sleeping.
package webhooks
