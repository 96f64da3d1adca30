package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ahpd/ahpd/grants"
)

const userUsage = `Manage the users directory: who may connect, and with which role.

Usage:
  ahpd user add ID --role admin|member|guest [--name NAME] [--scope TEAM/PROJECT]... --users FILE
  ahpd user role ID --role admin|member|guest --users FILE
  ahpd user scopes ID --scope TEAM/PROJECT... --users FILE   the first is the primary
  ahpd user token ID [--label LABEL] --users FILE   prints a new personal token, once
  ahpd user tokens ID --users FILE                  lists the user's tokens by id
  ahpd user revoke ID TOKEN-ID|LABEL|--all --users FILE
  ahpd user rm ID --users FILE
  ahpd user list --users FILE

A person connects with their token as ?tkn= or "Authorization: Bearer".
Only a hash of each token is kept. A running ahpd --users FILE sees the
changes at once: a revoked token is refused at its next connection.
`

// userArgs are the words and flags of one `ahpd user` command.
type userArgs struct {
	verb, id, ref            string
	users, role, name, label string
	all                      bool
	scopes                   []string
}

// userCommand runs `ahpd user ...`. It returns the exit status.
func userCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, userUsage)
		return 0
	}
	ua, err := parseUserArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "ahpd user %s: %v (see ahpd user --help)\n", args[0], err)
		return 2
	}
	if err := runUser(ua, stdout); err != nil {
		fmt.Fprintf(stderr, "ahpd user %s: %v\n", ua.verb, err)
		var usage usageError
		if errors.As(err, &usage) {
			return 2
		}
		return 1
	}
	return 0
}

// parseUserArgs reads the verb, then words and flags in any order.
func parseUserArgs(args []string) (userArgs, error) {
	ua := userArgs{verb: args[0]}
	fs := flag.NewFlagSet("ahpd user "+ua.verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&ua.users, "users", "", "")
	fs.StringVar(&ua.role, "role", "", "")
	fs.StringVar(&ua.name, "name", "", "")
	fs.StringVar(&ua.label, "label", "", "")
	fs.BoolVar(&ua.all, "all", false, "")
	fs.Func("scope", "", func(v string) error { ua.scopes = append(ua.scopes, v); return nil })
	var words []string
	for rest := args[1:]; len(rest) > 0; {
		if !strings.HasPrefix(rest[0], "-") {
			words, rest = append(words, rest[0]), rest[1:]
			continue
		}
		if err := fs.Parse(rest); err != nil {
			return ua, err
		}
		rest = fs.Args()
	}
	want := map[string]int{"list": 0, "revoke": 2}[ua.verb]
	if _, known := map[string]bool{"add": true, "role": true, "scopes": true, "token": true, "tokens": true,
		"revoke": true, "rm": true, "list": true}[ua.verb]; !known {
		return ua, fmt.Errorf("unknown command %q", ua.verb)
	}
	if ua.verb != "list" && want == 0 {
		want = 1
	}
	if ua.verb == "revoke" && ua.all {
		want = 1
	}
	switch {
	case ua.users == "":
		return ua, errors.New("--users FILE is required")
	case len(words) < want && len(words) == 0:
		return ua, errors.New("name the user")
	case len(words) < want:
		return ua, errors.New("name the token: its id (see ahpd user tokens), its label, or --all")
	case len(words) > want:
		return ua, fmt.Errorf("unexpected %q", words[want])
	}
	if len(words) > 0 {
		ua.id = words[0]
	}
	if len(words) > 1 {
		ua.ref = words[1]
	}
	return ua, nil
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
