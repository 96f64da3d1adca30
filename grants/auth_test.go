package grants

import "testing"

func TestAuthenticator(t *testing.T) {
	d := testDirectory(t)
	personal, _ := d.IssueToken("bob", "")
	const conn = "the-deployment-token"
	root := RootPrincipal("build-01")

	type try struct {
		token string
		want  Principal
		ok    bool
	}
	tests := []struct {
		name string
		a    *Authenticator
		try  []try
	}{
		{"connection token and users", &Authenticator{Host: "build-01", ConnectionToken: conn, Users: d}, []try{
			{conn, root, true},
			{personal, UserPrincipal("bob"), true},
			{"", Principal{}, false},
			{conn + "x", Principal{}, false},
			{"wrong", Principal{}, false},
		}},
		{"connection token, no users directory", &Authenticator{Host: "build-01", ConnectionToken: conn}, []try{
			{conn, root, true},
			{personal, Principal{}, false},
			{"", Principal{}, false},
		}},
		{"a nil directory is none", &Authenticator{Host: "build-01", ConnectionToken: conn, Users: (*Directory)(nil)}, []try{
			{conn, root, true},
			{personal, Principal{}, false},
		}},
		{"no token asked, no users directory", &Authenticator{Host: "build-01"}, []try{
			{"", root, true},
			{"anything", root, true},
		}},
		{"no connection token, users", &Authenticator{Host: "build-01", Users: d}, []try{
			{personal, UserPrincipal("bob"), true},
			{"", Principal{}, false},
			{"anything", Principal{}, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, try := range tt.try {
				got, ok := tt.a.Authenticate(try.token)
				if got != try.want || ok != try.ok {
					t.Errorf("Authenticate(%q) = %s, %v; want %s, %v", try.token, got, ok, try.want, try.ok)
				}
			}
		})
	}
	a := &Authenticator{Host: "build-01", Users: d}
	if a.Root() != root || a.Directory() != d {
		t.Error("Root or Directory")
	}
}
