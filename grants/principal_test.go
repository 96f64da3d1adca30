package grants

import (
	"encoding/json"
	"testing"
)

func TestPrincipal(t *testing.T) {
	tests := []struct {
		s    string
		want Principal
		str  string
	}{
		{"user:bob", UserPrincipal("bob"), "user:bob"},
		{"root:build-01.example.com", RootPrincipal("build-01.example.com"), "root:build-01.example.com"},
		{"plugin:Nightly_Review", PluginPrincipal("Nightly_Review"), "plugin:Nightly_Review"},
		{"", Principal{}, "nobody"},
		{"nobody", Principal{}, "nobody"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.s)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.s, got, err, tt.want)
		}
		if got.String() != tt.str {
			t.Errorf("%#v.String() = %q, want %q", got, got.String(), tt.str)
		}
		if got.IsZero() != (tt.str == "nobody") {
			t.Errorf("%s.IsZero() = %v", got, got.IsZero())
		}
	}
	for _, s := range []string{"bob", "user:", "user:Bob", "root:", "root:a b", "plugin:", "admin:bob", ":bob", "user:bob:x"} {
		if p, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", s, p)
		}
	}
}

func TestPrincipalJSON(t *testing.T) {
	type rec struct{ Owner Principal }
	for _, p := range []Principal{UserPrincipal("bob"), RootPrincipal("h"), {}} {
		b, err := json.Marshal(rec{p})
		if err != nil {
			t.Fatal(err)
		}
		var back rec
		if err := json.Unmarshal(b, &back); err != nil || back.Owner != p {
			t.Errorf("%s: round trip through %s gave %v, %v", p, b, back.Owner, err)
		}
	}
	var r rec
	if err := json.Unmarshal([]byte(`{"Owner":"boss:bob"}`), &r); err == nil {
		t.Error("an unknown kind unmarshalled")
	}
}

func TestOwns(t *testing.T) {
	bob := UserPrincipal("bob")
	tests := []struct {
		p     Principal
		owner string
		want  bool
	}{
		{bob, "user:bob", true},
		{bob, "user:carol", false},
		{bob, "root:bob", false},
		{bob, "", false},
		{RootPrincipal("h"), "root:h", true},
		{Principal{}, "", false},
		{Principal{}, "nobody", false},
		{bob, "garbage", false},
	}
	for _, tt := range tests {
		if got := tt.p.Owns(tt.owner); got != tt.want {
			t.Errorf("%s.Owns(%q) = %v, want %v", tt.p, tt.owner, got, tt.want)
		}
	}
}
