package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ahpd/ahpd/grants"
)

func init() {
	register(userCommand)
}

// userVerbs are the `ahpd user` commands: each one's arguments, what it
// does, and its flags beside --users.
var userVerbs = []struct {
	use, short string
	flags      []string
}{
	{"add ID --role admin|member|guest [--name NAME] [--scope TEAM/PROJECT]... --users FILE", "add a user", []string{"role", "name", "scope"}},
	{"role ID --role admin|member|guest --users FILE", "change a user's role", []string{"role"}},
	{"scopes ID --scope TEAM/PROJECT... --users FILE", "set a user's teams and projects: the first is the primary", []string{"scope"}},
	{"token ID [--label LABEL] --users FILE", "print a new personal token, once", []string{"label"}},
	{"tokens ID --users FILE", "list the user's tokens by id", nil},
	{"revoke ID TOKEN-ID|LABEL|--all --users FILE", "revoke a user's token, or all of them", []string{"all"}},
	{"rm ID --users FILE", "remove a user", nil},
	{"list --users FILE", "list the users", nil},
}

// userCommand is `ahpd user ...`.
func userCommand() *cobra.Command {
	var subs []*cobra.Command
	for _, v := range userVerbs {
		subs = append(subs, userVerb(v.use, v.short, v.flags))
	}
	c := newGroup("user add|role|scopes|token|tokens|revoke|rm|list ...", "manage the users directory (see ahpd user --help)",
		`Manage the users directory: who may connect, and with which role.

A person connects with their token as ?tkn= or "Authorization: Bearer".
Only a hash of each token is kept. A running ahpd --users FILE sees the
changes at once: a revoked token is refused at its next connection.`, subs...)
	c.SuggestFor = []string{"users"}
	return c
}

// userVerb is one `ahpd user` command, taking the flags named.
func userVerb(use, short string, flags []string) *cobra.Command {
	ua := userArgs{verb: strings.Fields(use)[0]}
	c := newCommand(use, short, nil, func(fs *pflag.FlagSet) {
		fs.StringVar(&ua.users, "users", "", "the users directory, `FILE` (required)")
		for _, f := range flags {
			switch f {
			case "role":
				fs.StringVar(&ua.role, "role", "", "the user's `ROLE`: admin, member or guest")
			case "name":
				fs.StringVar(&ua.name, "name", "", "the user's `NAME`, for people")
			case "label":
				fs.StringVar(&ua.label, "label", "", "the token's `LABEL`, to revoke it by")
			case "all":
				fs.BoolVar(&ua.all, "all", false, "revoke all the user's tokens")
			case "scope":
				fs.StringArrayVar(&ua.scopes, "scope", nil, "a team and project, `TEAM/PROJECT` (repeatable; the first is the primary)")
			}
		}
	}, func(_ context.Context, pos []string, io cliIO) int {
		ua := ua
		if err := checkUserArgs(&ua, pos); err != nil {
			fmt.Fprintf(io.stderr, "ahpd user %s: %v (usage: %s)\n", ua.verb, err, io.cmd.UseLine())
			return exitUsage
		}
		if err := runUser(ua, io.stdout); err != nil {
			fmt.Fprintf(io.stderr, "ahpd user %s: %v\n", ua.verb, err)
			var usage usageError
			if errors.As(err, &usage) {
				return exitUsage
			}
			return exitFailed
		}
		return exitOK
	})
	return c
}

// userArgs are the words and flags of one `ahpd user` command.
type userArgs struct {
	verb, id, ref            string
	users, role, name, label string
	all                      bool
	scopes                   []string
}

// checkUserArgs checks the flags and takes the words: the user's id, and
// for revoke the token's.
func checkUserArgs(ua *userArgs, words []string) error {
	want := map[string]int{"list": 0, "revoke": 2}[ua.verb]
	if ua.verb != "list" && want == 0 {
		want = 1
	}
	if ua.verb == "revoke" && ua.all {
		want = 1
	}
	switch {
	case ua.users == "":
		return errors.New("--users FILE is required")
	case len(words) < want && len(words) == 0:
		return errors.New("name the user")
	case len(words) < want:
		return errors.New("name the token: its id (see ahpd user tokens), its label, or --all")
	case len(words) > want:
		return fmt.Errorf("unexpected %q", words[want])
	}
	if len(words) > 0 {
		ua.id = words[0]
	}
	if len(words) > 1 {
		ua.ref = words[1]
	}
	return nil
}

type usageError struct{ error }

func runUser(ua userArgs, stdout io.Writer) error {
	dir, err := grants.LoadFile(ua.users)
	if err != nil {
		return err
	}
	switch ua.verb {
	case "add":
		r, err := role(ua.role)
		if err != nil {
			return err
		}
		ms, err := memberships(ua.scopes)
		if err != nil {
			return err
		}
		if err := dir.Add(ua.id, ua.name, r); err != nil {
			return err
		}
		if err := dir.SetMemberships(ua.id, ms); err != nil {
			return err
		}
	case "role":
		r, err := role(ua.role)
		if err != nil {
			return err
		}
		if err := dir.SetRole(ua.id, r); err != nil {
			return err
		}
	case "scopes":
		ms, err := memberships(ua.scopes)
		if err != nil {
			return err
		}
		if err := dir.SetMemberships(ua.id, ms); err != nil {
			return err
		}
	case "token":
		token, err := dir.IssueToken(ua.id, ua.label)
		if err != nil {
			return err
		}
		if err := dir.Save(ua.users); err != nil {
			return err
		}
		// The token is shown this once; only its hash is kept.
		fmt.Fprintln(stdout, token)
		return nil
	case "tokens":
		return listTokens(dir, ua.id, stdout)
	case "revoke":
		if ua.all {
			err = dir.RevokeAll(ua.id)
		} else {
			err = dir.Revoke(ua.id, ua.ref)
		}
		if err != nil {
			return err
		}
	case "rm":
		if err := dir.Remove(ua.id); err != nil {
			return err
		}
	case "list":
		return listUsers(dir, stdout)
	}
	return dir.Save(ua.users)
}

func role(s string) (grants.Role, error) {
	r, err := grants.ParseRole(s)
	if err != nil {
		return "", usageError{fmt.Errorf("--role: %w", err)}
	}
	return r, nil
}

// memberships reads --scope values; the first is the primary.
func memberships(scopes []string) ([]grants.Membership, error) {
	var ms []grants.Membership
	for i, s := range scopes {
		sc, err := grants.ParseScope(s)
		if err != nil || sc.IsZero() {
			return nil, usageError{fmt.Errorf("--scope %q: want TEAM/PROJECT", s)}
		}
		ms = append(ms, grants.Membership{Team: sc.Team, Project: sc.Project, Primary: i == 0})
	}
	return ms, nil
}

func listUsers(dir *grants.Directory, stdout io.Writer) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tNAME\tTOKENS\tSCOPES")
	for _, u := range dir.Users() {
		var scopes []string
		for _, m := range u.Memberships {
			sc := m.Team + "/" + m.Project
			if m.Primary {
				sc += " (primary)"
			}
			scopes = append(scopes, sc)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", u.ID, u.Role, u.Name, len(u.Tokens), strings.Join(scopes, ", "))
	}
	return w.Flush()
}

func listTokens(dir *grants.Directory, id string, stdout io.Writer) error {
	u, ok := dir.Lookup(id)
	if !ok {
		return fmt.Errorf("no user %q", id)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tLABEL\tCREATED")
	for _, t := range u.Tokens {
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.ID, t.Label, t.Created.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}
