// Package dashboard serves ahpd's web dashboard under /ui/: plain HTML
// rendered on the server (html/template), one small style sheet and one
// small script, all embedded in the binary, for people who want to look
// at their sessions rather than read JSON.
//
// It owns the pages (the sessions table, a session with its
// conversation, timeline and replay, the automations), the live updates
// they get over Server-Sent Events, and the browser side of signing in: a
// token posted once opens an opaque, random, server-side login behind an
// HttpOnly, SameSite=Strict cookie scoped to /ui/, every form that writes
// carries that login's CSRF token, and every answer carries a
// Content-Security-Policy that allows no inline script or style and no
// asset from elsewhere.
//
// It must not decide anything a session's grants decide. As in package
// httpapi, each request is served by an AHP connection the host opens to
// itself (host.Connect) for the person whose login it is, spoken through
// the project's client package, so the host checks every grant and what
// it refuses is refused here. The dashboard reads the grants only to
// leave out the buttons of writes the host would refuse. It keeps no
// state but the logins table, bounded in size, per person and in time,
// so that nobody's sign-ins or live pages cost another person theirs.
package dashboard
