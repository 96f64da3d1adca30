package grants

import (
	"errors"
	"strings"
	"testing"

	"github.com/ahpd/ahpd/protocol"
)

// testDirectory has an admin, two members and a guest.
func testDirectory(t *testing.T) *Directory {
	t.Helper()
	d := NewDirectory()
	for _, u := range []struct {
		id   string
		role Role
	}{{"ada", Admin}, {"bob", Member}, {"carol", Member}, {"gina", Guest}} {
		if err := d.Add(u.id, "", u.role); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestCheck(t *testing.T) {
	d := testDirectory(t)
	var (
		ada   = UserPrincipal("ada")
		bob   = UserPrincipal("bob")
		carol = UserPrincipal("carol")
		gina  = UserPrincipal("gina")
		root  = RootPrincipal("build-01")
	)
	// The session in question is bob's. Each row says, for ada (admin),
	// bob (member, owner), carol (member, not owner) and gina (guest, not
	// owner): y allowed, n refused by role, o refused as not the owner,
	// s refused as not the owner who shares.
	table := []struct {
		op   Operation
		want string
	}{
		{SessionList, "yyyy"},
		{SessionState, "yyyy"},
		{SessionCreate, "yyyn"},
		{SessionDispose, "yyon"},
		{SessionRename, "yyyn"},
		{SessionConfigure, "yyyn"},
		{SessionFolders, "yyyn"},
		{SessionMark, "yyyn"},
		{SessionWorktree, "yyyn"},
		{SessionArtifacts, "yyyn"},
		{SessionShare, "yysn"},
		{ChatTurns, "yyyy"},
		{ChatCreate, "yyyn"},
		{ChatDispose, "yyyn"},
		{ChatSend, "yyyn"},
		{ChatCancel, "yyyn"},
		{ChatAnswer, "yyyn"},
		{ChatTool, "yyyn"},
		{ChatDraft, "yyyn"},
		{ChatTruncate, "yyyn"},
		{ChatMove, "yyyn"},
		{None, "yyyy"},
		{HostConfigure, "ynnn"},
	}
	if len(table) != len(Operations())+2 {
		t.Fatalf("the table has %d rows for %d operations and 2 markers", len(table), len(Operations()))
	}
	for _, row := range table {
		for i, p := range []Principal{ada, bob, carol, gina} {
			err := d.Check(p, row.op, bob)
			want := row.want[i]
			switch {
			case want == 'y':
				if err != nil {
					t.Errorf("Check(%s, %s) = %v, want allowed", p, row.op, err)
				}
				continue
			case err == nil:
				t.Errorf("Check(%s, %s) allowed, want refused", p, row.op)
				continue
			}
			var denied *Denied
			if !errors.As(err, &denied) || denied.Principal != p || denied.Operation != row.op {
				t.Errorf("Check(%s, %s) = %#v, want a *Denied naming both", p, row.op, err)
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodePermissionDenied || pe.Message != err.Error() {
				t.Errorf("Check(%s, %s): protocol error %+v, want -32009 with the message %q", p, row.op, pe, err)
			}
			switch want {
			case 'o':
				if err.Error() != OnlyOwnerMessage {
					t.Errorf("Check(%s, %s) = %q, want %q", p, row.op, err, OnlyOwnerMessage)
				}
			case 's':
				if err.Error() != OnlyOwnerShares {
					t.Errorf("Check(%s, %s) = %q, want %q", p, row.op, err, OnlyOwnerShares)
				}
			case 'n':
				if prefix := p.String() + " may not " + string(row.op); !strings.HasPrefix(err.Error(), prefix) {
					t.Errorf("Check(%s, %s) = %q, want it to start %q", p, row.op, err, prefix)
				}
			}
		}
		// Root may do everything; a host with no users directory refuses
		// nobody, whoever they are.
		if err := d.Check(root, row.op, bob); err != nil {
			t.Errorf("Check(%s, %s) = %v, want allowed", root, row.op, err)
		}
		var none *Directory
		for _, p := range []Principal{root, {}, gina} {
			if err := none.Check(p, row.op, Principal{}); err != nil {
				t.Errorf("no directory: Check(%s, %s) = %v, want allowed", p, row.op, err)
			}
		}
	}
}

// TestCheckSharing: who else may do what in bob's session, by its
// sharing: carol (member), gina (guest), ada (admin), root and a plugin.
// y allowed, n refused.
func TestCheckSharing(t *testing.T) {
	d := testDirectory(t)
	bob := UserPrincipal("bob")
	who := []Principal{UserPrincipal("carol"), UserPrincipal("gina"), UserPrincipal("ada"), RootPrincipal("h"), PluginPrincipal("cron")}
	table := []struct {
		sharing string
		op      Operation
		want    string
		reason  string // what carol is told when refused
	}{
		{"private", SessionState, "nnyyy", "the session is user:bob's and not shared"},
		{"private", ChatTurns, "nnyyy", "the session is user:bob's and not shared"},
		{"private", ChatSend, "nnyyy", "the session is user:bob's and not shared"},
		{"private", SessionRename, "nnyyy", "the session is user:bob's and not shared"},
		{"private", SessionConfigure, "nnyyy", "the session is user:bob's and not shared"},
		{"private", ChatCancel, "nnyyy", "the session is user:bob's and not shared"},
		{"read", SessionState, "yyyyy", ""},
		{"read", ChatTurns, "yyyy" + "y", ""},
		{"read", ChatSend, "nnyyy", "the session is user:bob's, shared for reading only"},
		{"read", SessionRename, "nnyyy", "the session is user:bob's, shared for reading only"},
		{"team", SessionState, "yyyyy", ""},
		{"team", ChatSend, "ynyyy", ""},
		{"", ChatSend, "ynyyy", ""},
		{"garbled", SessionState, "nnyyy", "the session is user:bob's and not shared"},
		// Sharing does not give what only the owner does.
		{"team", SessionDispose, "nnyyn", OnlyOwnerMessage},
		{"team", SessionShare, "nnyyn", OnlyOwnerShares},
	}
	for _, row := range table {
		target := Session(bob, row.sharing)
		for i, p := range who {
			err := d.CheckSession(p, row.op, target)
			if (err == nil) != (row.want[i] == 'y') {
				t.Errorf("sharing %q: CheckSession(%s, %s) = %v, want %c", row.sharing, p, row.op, err, row.want[i])
			}
			if i == 0 && err != nil && row.reason != "" && !strings.Contains(err.Error(), row.reason) {
				t.Errorf("sharing %q: %s is told %q, want it to say %q", row.sharing, p, err, row.reason)
			}
		}
		if err := d.CheckSession(bob, row.op, target); err != nil && row.op != SessionDispose && row.op != SessionShare {
			t.Errorf("sharing %q: the owner is refused %s: %v", row.sharing, row.op, err)
		}
	}
	// Nobody's session is nobody's to keep.
	if err := d.CheckSession(UserPrincipal("carol"), ChatSend, Session(Principal{}, "private")); err != nil {
		t.Errorf("a session nobody owns, private: %v", err)
	}
}

func TestCheckSpecialCases(t *testing.T) {
	d := testDirectory(t)
	bob, gina := UserPrincipal("bob"), UserPrincipal("gina")
	tests := []struct {
		name    string
		p       Principal
		op      Operation
		owner   Principal
		wantErr string
	}{
		{"owner disposes", bob, SessionDispose, bob, ""},
		{"member disposes root's session", bob, SessionDispose, RootPrincipal("h"), OnlyOwnerMessage},
		{"member disposes an unowned session", bob, SessionDispose, Principal{}, OnlyOwnerMessage},
		{"guest owner disposes", gina, SessionDispose, gina, "user:gina may not session:dispose: the guest role does not grant it"},
		{"admin disposes an unowned session", UserPrincipal("ada"), SessionDispose, Principal{}, ""},
		{"root disposes", RootPrincipal("h"), SessionDispose, bob, ""},
		{"plugin sends", PluginPrincipal("cron"), ChatSend, bob, ""},
		{"plugin disposes its own", PluginPrincipal("cron"), SessionDispose, PluginPrincipal("cron"), ""},
		{"plugin disposes bob's", PluginPrincipal("cron"), SessionDispose, bob, OnlyOwnerMessage},
		{"plugin configures the host", PluginPrincipal("cron"), HostConfigure, Principal{}, "plugin:cron may not host:configure: the member role does not grant it"},
		{"nobody lists", Principal{}, SessionList, Principal{}, "nobody may not session:list: not signed in"},
		{"nobody pings", Principal{}, None, Principal{}, "nobody may not none: not signed in"},
		{"removed user lists", UserPrincipal("zed"), SessionList, Principal{}, "user:zed may not session:list: not in the users directory"},
		{"removed user pings", UserPrincipal("zed"), None, Principal{}, ""},
		{"zero operation", RootPrincipal("h"), "", Principal{}, `root:h may not "": not an operation`},
		{"made-up operation", UserPrincipal("ada"), "session:everything", Principal{}, `user:ada may not "session:everything": not an operation`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Check(tt.p, tt.op, tt.owner)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("Check(%s, %q, %s) = %q, want %q", tt.p, tt.op, tt.owner, got, tt.wantErr)
			}
		})
	}
	var none *Directory
	if err := none.Check(Principal{}, "", Principal{}); err == nil {
		t.Error("no directory: the zero operation was allowed")
	}
}

func TestCheckFollowsTheDirectory(t *testing.T) {
	d := testDirectory(t)
	bob := UserPrincipal("bob")
	if err := d.Check(bob, ChatSend, Principal{}); err != nil {
		t.Fatal(err)
	}
	if err := d.SetRole("bob", Guest); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(bob, ChatSend, Principal{}); err == nil {
		t.Error("bob, now a guest, may still send")
	}
	if err := d.Remove("bob"); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(bob, ChatTurns, Principal{}); err == nil {
		t.Error("bob, now removed, may still read")
	}
}

func TestOwner(t *testing.T) {
	var none *Directory
	if got := none.Owner(RootPrincipal("h")); !got.IsZero() {
		t.Errorf("no directory: Owner = %s, want nobody", got)
	}
	d := NewDirectory()
	if got := d.Owner(UserPrincipal("bob")); got != UserPrincipal("bob") {
		t.Errorf("Owner = %s, want user:bob", got)
	}
}
