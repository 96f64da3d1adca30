package grants_test

import (
	"fmt"
	"log"

	"github.com/ahpd/ahpd/grants"
)

// Check answers for one principal, one operation and the owner of the
// session it is about. The directory is what ahpd reads from --users
// FILE (grants.LoadFile; Decode reads the same contents from memory).
func ExampleDirectory_Check() {
	dir, err := grants.Decode([]byte(`
version: 1
users:
  - id: alice
    role: member
  - id: bob
    role: member
  - id: gus
    role: guest
`))
	if err != nil {
		log.Fatal(err)
	}

	// The session is alice's: she made it.
	owner := grants.UserPrincipal("alice")
	for _, id := range []string{"alice", "bob", "gus"} {
		p := grants.UserPrincipal(id)
		for _, op := range []grants.Operation{grants.SessionState, grants.ChatSend, grants.SessionDispose} {
			// A refusal is a *grants.Denied, whose message is what the
			// client is told.
			if err := dir.Check(p, op, owner); err != nil {
				fmt.Printf("%-10s %-15s no: %v\n", p, op, err)
			} else {
				fmt.Printf("%-10s %-15s yes\n", p, op)
			}
		}
	}

	// Output:
	// user:alice session:state   yes
	// user:alice chat:send       yes
	// user:alice session:dispose yes
	// user:bob   session:state   yes
	// user:bob   chat:send       yes
	// user:bob   session:dispose no: Only the session's owner can delete it.
	// user:gus   session:state   yes
	// user:gus   chat:send       no: user:gus may not chat:send: the guest role does not grant it
	// user:gus   session:dispose no: user:gus may not session:dispose: the guest role does not grant it
}

// A directory can also be built in code, as the "ahpd user" commands do
// before they Save it. Without one (a nil *Directory, a host started
// without --users) nobody is refused anything.
func ExampleNewDirectory() {
	dir := grants.NewDirectory()
	if err := dir.Add("gus", "Gus Guest", grants.Guest); err != nil {
		log.Fatal(err)
	}
	gus := grants.UserPrincipal("gus")
	fmt.Println(dir.Check(gus, grants.ChatSend, grants.Principal{}))

	var none *grants.Directory
	fmt.Println(none.Check(gus, grants.ChatSend, grants.Principal{}))

	// Output:
	// user:gus may not chat:send: the guest role does not grant it
	// <nil>
}
