// Package claude is the backend that runs Anthropic's Claude Code CLI (npm
// @anthropic-ai/claude-code, written against 2.1.197) for the provider
// "claude".
//
// Each started chat is one long-lived CLI process, started in the chat's
// working directory as
//
//	claude [config flags] [--model M] -p --input-format stream-json
//	    --output-format stream-json --verbose --include-partial-messages
//	    --permission-prompt-tool stdio (--session-id ID | --resume ID)
//
// A turn is one user line written to its stdin; the CLI answers with JSON
// lines on stdout until the turn's "result" line. Text and reasoning reach
// the host delta by delta from the model's stream events; tool calls start
// with their content block, are put to the user when the CLI asks
// (control_request can_use_tool, answered with a control_response), and
// complete with the tool result the CLI prints as a "user" line, and a
// file write or edit with its fileEdit content (edits.go).
// Cancelling a turn sends the CLI a control_request of subtype interrupt:
// it keeps the partial reply and ends the turn with an
// error_during_execution result.
//
// The session id is the conversation id, or a UUID derived from it when it
// is not one (the CLI requires UUIDs). The host's turn id goes with each
// prompt as the message's uuid, which the CLI records: Turns, which
// rebuilds turns from the CLI's transcript
// ($CLAUDE_CONFIG_DIR or $HOME/.claude, then projects/<working directory
// with every character but ASCII letters and digits made '-'>/<id>.jsonl),
// reads the same ids back. The CLI writes its transcript every 100 ms and
// when it exits, so a turn just finished by a running agent may be missing
// from it for that long.
//
// A turn runs on the model its message picks (message.model, from the
// models Info lists), else the session's: a running CLI is switched to it
// with a set_model control request before the turn (model.go).
//
// A chat made from another (a fork or a side chat) starts on a copy of the
// source's transcript up to the end of the turn it is made from, written
// under the new session's id beside it (fork.go), which it resumes.
//
// Config changes (permission mode, allowed and disallowed tools, permissions)
// take effect by restarting the CLI with --resume before the next turn.
package claude
