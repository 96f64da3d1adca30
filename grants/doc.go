// Package grants decides who is asking and what they may do.
//
// It owns the principals (user:<id>, root:<host>, plugin:<name>, and the
// zero principal, nobody), the users directory and its personal tokens,
// the roles, and the operation table that names, for every command of the
// protocol surface and every action a client may dispatch, the one
// Operation it needs. The host calls Check before every handler and for
// every dispatched action.
//
// # Who is asking
//
// An Authenticator turns the token a connection presents into a
// Principal: the deployment's connection token is root:<host>, a personal
// token is user:<id>. A host started without a users directory has nobody
// to name: its connections are root, its sessions are owned by nobody, and
// Check refuses nobody. In this package that host is a nil *Directory.
//
// A connection stays open after its handshake, so Login keeps what it
// presented as a Credential, and Recheck says whether the directory as it
// is now still accepts it: a token revoked, or its user removed, is not.
// The host rechecks its connections each time a Notifier (*Live) says the
// directory changed, and cuts those refused. A lowered role needs no
// recheck: Check reads the role afresh for every operation.
//
// # What they may do
//
// Operations fall into two groups. Read is session:list, session:state and
// chat:turns; write is every other session and chat operation. A chat lives
// in a session, so the session's groups carry every chat operation. The
// roles are
//
//	admin   everything, including the host's own configuration
//	member  the read and write groups
//	guest   the read group
//
// Root may do everything. A plugin acts as a member. Deleting a session
// (session:dispose) and changing who it is shared with (session:share)
// are further restricted to its owner and administrators, and a person
// other than those does to a session only what its sharing leaves them
// (sharing.go: private, read, team).
//
// # The users file
//
// The directory is a YAML file (ahpd --users FILE), written by the
// "ahpd user" commands or by hand, and re-read by Live when it changes:
//
//	version: 1
//	users:
//	  - id: alice                 # 1-64 of a-z 0-9 . _ -
//	    name: Alice Liddell       # display name, optional
//	    role: admin               # admin | member | guest
//	    memberships:              # what her work may be charged to
//	      - team: platform
//	        project: ahpd
//	        primary: true         # the one used when a session names none
//	      - team: platform
//	        project: website
//	    tokens:                   # personal tokens, as hashes only
//	      - sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
//	        created: 2025-06-01T09:30:00Z
//	        label: laptop         # optional
//
// Unknown keys are errors, so a misspelt key is not silently ignored. A
// token is "ahpu_" followed by 32 random bytes in unpadded base64url; the
// file keeps the lower-case hex SHA-256 of the whole token, never the token,
// and a user may have several. A missing file is an empty directory. Save
// writes the file atomically with mode 0600 and drops comments.
//
// No token appears in a log line or an error of this package: errors about
// the file never quote its values, and names that look like a token are
// elided.
package grants
