package host

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
	"github.com/ahpd/ahpd/worktree"
)

// Isolation: the host's own config keys that decide where a session works
// (its folder, or a worktree of its own made on its first send) and how the
// tree is made. They are offered for the folder a session is made in, are
// fixed once it has started, and take the place of any key of the same
// name a backend offers.

const (
	isolationDir = "folder"

	maxCompletions = 100
)

// isolationProperties returns the keys a session made in folder is offered:
// isolation (read-only "folder" outside a git repository) and, in one, the
// branch and the worktree keys. given decides the branch's default, which
// differs by isolation.
func isolationProperties(folder string, given protocol.Object) (first plugins.Property, rest []plugins.Property) {
	fixed := new(false)
	repo := folder != "" && worktree.IsRepository(folder)
	iso := protocol.SessionConfigPropertySchema{
		Type:             "string",
		Title:            "Isolation",
		Description:      new("Whether the agent works in the folder itself or in a git worktree of its own, made on the first message."),
		Enum:             []jsontext.Value{session.QuoteJSON(isolationDir), session.QuoteJSON(session.IsolationTree)},
		EnumLabels:       []string{"Folder", "Worktree"},
		EnumDescriptions: []string{"Work in the folder itself", "Work in a new git worktree beside the repository"},
		Default:          session.QuoteJSON(isolationDir),
		SessionMutable:   fixed,
	}
	if !repo {
		iso.Enum, iso.EnumLabels, iso.EnumDescriptions = iso.Enum[:1], iso.EnumLabels[:1], iso.EnumDescriptions[:1]
		iso.ReadOnly = new(true)
		return plugins.Property{Key: session.KeyIsolation, Schema: iso}, nil
	}
	first = plugins.Property{Key: session.KeyIsolation, Schema: iso}

	var seed string
	if session.StringValue(given[session.KeyIsolation]) == session.IsolationTree {
		seed, _ = worktree.DefaultBranch(folder)
	}
	if seed == "" {
		seed, _ = worktree.CurrentBranch(folder)
	}
	branch := protocol.SessionConfigPropertySchema{
		Type:           "string",
		Title:          "Branch",
		Description:    new("The branch to work from. For a worktree, the branch it is cut from."),
		EnumDynamic:    new(true),
		SessionMutable: fixed,
	}
	if seed != "" {
		branch.Enum, branch.EnumLabels, branch.Default = []jsontext.Value{session.QuoteJSON(seed)}, []string{seed}, session.QuoteJSON(seed)
	}
	patterns := func(title, desc string) protocol.SessionConfigPropertySchema {
		return protocol.SessionConfigPropertySchema{
			Type: "array", Title: title, Description: new(desc),
			Items:   &protocol.ConfigPropertySchema{Type: "string", Title: "Pattern"},
			Default: jsontext.Value(`[]`), SessionMutable: fixed,
		}
	}
	boolean := func(title, desc string, def bool) protocol.SessionConfigPropertySchema {
		d := jsontext.Value("false")
		if def {
			d = jsontext.Value("true")
		}
		return protocol.SessionConfigPropertySchema{Type: "boolean", Title: title, Description: new(desc), Default: d, SessionMutable: fixed}
	}
	rest = []plugins.Property{
		{Key: worktree.KeyBranch, Schema: branch},
		{Key: worktree.KeyBranchPrefix, Schema: protocol.SessionConfigPropertySchema{
			Type: "string", Title: "Branch prefix", Description: new("Put before the name of the branch a worktree makes."),
			Default: session.QuoteJSON(""), SessionMutable: fixed,
		}},
		{Key: worktree.KeyIncludeFiles, Schema: patterns("Files to copy", "Git-ignored files to copy into a worktree, as .gitignore patterns (such as .env).")},
		{Key: worktree.KeySymlinkFolders, Schema: patterns("Folders to link", "Git-ignored folders to link into a worktree, as .gitignore patterns (such as node_modules).")},
		{Key: worktree.KeyCreateNewBranch, Schema: boolean("New branch", "Make a branch for the worktree, or check the chosen branch out as it is.", true)},
		{Key: worktree.KeyBranchTrack, Schema: boolean("Track upstream", "Make the new branch track the upstream of the one it starts from.", false)},
	}
	return first, rest
}

// branchCompletions answers sessionConfigCompletions for the branch key:
// the repository's branches containing query.
func branchCompletions(folder, query string) []protocol.SessionConfigValueItem {
	names, err := worktree.Complete(folder, query, maxCompletions)
	if err != nil {
		return []protocol.SessionConfigValueItem{}
	}
	items := make([]protocol.SessionConfigValueItem, 0, len(names))
	for _, n := range names {
		items = append(items, protocol.SessionConfigValueItem{Value: n, Label: n})
	}
	return items
}
