package checkpoints

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A session's own changes.
//
// Several sessions may work in one folder (every chat of a VS Code
// workspace does), so the difference between a session's first checkpoint
// and its latest holds whatever the others, and the user, did in between.
// What a session did is what changed during its turns: turn N's checkpoint
// has as its parent the tree the turn started from (the start checkpoint
// of turn N when the folder had changed since the session's last
// checkpoint, else that checkpoint itself), so the diff of a turn's commit
// against its parent is the turn's own.
//
// The turns' diffs combine file by file: a file any turn changed counts
// once, as the change from its state in the start tree of the first turn
// that changed it to its state in the end tree of the last turn that
// changed it. Formally, with B holding each such file as the first turn's
// start found it and A each as the last turn's end left it (a file that
// did not exist on that side left out), the session's counts are the diff
// of B against A, renames detected as everywhere else. A file changed and
// changed back counts nothing; one changed in two turns counts its net
// change, not the two added up.

// Entry is a file as a tree holds it. The zero Entry is a file the tree
// does not have.
type Entry struct {
	Mode   string // git's octal mode: 100644, 100755, 120000, 160000
	Object string // the blob's id (the commit's, for a submodule)
}

// FileChange is one file a turn changed.
type FileChange struct {
	Path          string // slash-separated, from the top of the working tree
	Before, After Entry  // in the tree the turn started from, and in its end
}

// TurnChanges lists, for each commit, the files it changed against its
// parent: for a session's turn checkpoint, what changed during the turn.
// A commit without a parent (turn 0) changed nothing. One git process
// answers for all of them, so reading a hundred turns after a restart
// costs about what reading one does.
func (r *Repo) TurnChanges(ctx context.Context, commits []string) ([][]FileChange, error) {
	if len(commits) == 0 {
		return nil, nil
	}
	var in strings.Builder
	index := make(map[string][]int, len(commits))
	for i, c := range commits {
		if !isObjectID(c) {
			return nil, fmt.Errorf("checkpoints: turn changes: %q is not a commit id", c)
		}
		index[c] = append(index[c], i)
		in.WriteString(c)
		in.WriteByte('\n')
	}
	// diff-tree --stdin compares each commit with its parent and names the
	// commit before its records. Plumbing, so the user's diff settings do
	// not change what it says; --no-renames, so each record is one path
	// and a rename reaches the combination as the deletion and the
	// addition it is made of (the final count finds it again).
	out, err := gitCmd{dir: r.root, yield: r.yielding, stdin: strings.NewReader(in.String()),
		args: []string{"diff-tree", "--stdin", "-r", "-z", "--raw", "--no-renames"}}.run(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: turn changes: %w", err)
	}
	res := make([][]FileChange, len(commits))
	var cur []int // the positions of the commit whose records follow
	for len(out) > 0 {
		field, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("checkpoints: turn changes: unterminated output %q", out)
		}
		out = rest
		if len(field) == 0 {
			continue
		}
		if field[0] != ':' {
			// A commit's header. It may end in a newline when the
			// commit has no records.
			c := strings.TrimSpace(string(field))
			pos, ok := index[c]
			if !ok {
				return nil, fmt.Errorf("checkpoints: turn changes: unexpected header %q", field)
			}
			cur = pos
			continue
		}
		path, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("checkpoints: turn changes: record %q without a path", field)
		}
		out = rest
		fc, err := parseRaw(field, path)
		if err != nil {
			return nil, fmt.Errorf("checkpoints: turn changes: %w", err)
		}
		if cur == nil {
			return nil, fmt.Errorf("checkpoints: turn changes: record %q before any commit", field)
		}
		for _, i := range cur {
			res[i] = append(res[i], fc)
		}
	}
	return res, nil
}

// parseRaw parses one --raw record, ":<old mode> <new mode> <old id> <new
// id> <status>", and its path.
func parseRaw(rec, path []byte) (FileChange, error) {
	f := strings.Fields(string(rec[1:]))
	if len(f) != 5 || !isObjectID(f[2]) || !isObjectID(f[3]) {
		return FileChange{}, fmt.Errorf("malformed raw record %q", rec)
	}
	entry := func(mode, id string) Entry {
		if strings.Trim(mode, "0") == "" {
			return Entry{}
		}
		return Entry{Mode: mode, Object: id}
	}
	return FileChange{Path: string(path), Before: entry(f[0], f[2]), After: entry(f[1], f[3])}, nil
}

// Own combines the files a session's turns changed into the session's
// counts (see the comment at the top of this file). Turns are added in
// the order they ran; counting writes two small trees of only the files
// the turns changed and diffs them, so its cost grows with the files the
// session touched, not with its turns or the size of the repository.
//
// An Own is not safe for concurrent use.
type Own struct {
	files   map[string]*ownFile
	before  string // B's tree, once written; "" when a file was added to it since
	counted bool   // stats holds the counts of what was added so far
	stats   Stats
}

type ownFile struct{ before, after Entry }

// Add adds one turn's changes, in the order the turns ran.
func (o *Own) Add(turn []FileChange) {
	for _, fc := range turn {
		o.counted = false
		if f, ok := o.files[fc.Path]; ok {
			f.after = fc.After
			continue
		}
		if o.files == nil {
			o.files = map[string]*ownFile{}
		}
		o.files[fc.Path] = &ownFile{before: fc.Before, after: fc.After}
		o.before = ""
	}
}

// Files is how many files the turns added so far changed, changed back
// or not.
func (o *Own) Files() int { return len(o.files) }

// Count returns the session's counts from the turns added so far.
func (r *Repo) Count(ctx context.Context, o *Own) (Stats, error) {
	if o.counted {
		return o.stats, nil
	}
	if len(o.files) == 0 {
		return Stats{}, nil
	}
	if o.before == "" {
		t, err := r.writeTree(ctx, o.entries(func(f *ownFile) Entry { return f.before }))
		if err != nil {
			return Stats{}, err
		}
		o.before = t
	}
	after, err := r.writeTree(ctx, o.entries(func(f *ownFile) Entry { return f.after }))
	if err != nil {
		return Stats{}, err
	}
	st, err := r.Diff(ctx, o.before, after)
	if err != nil {
		return Stats{}, err
	}
	o.stats, o.counted = st, true
	return st, nil
}

// entries lists one side of the combination, sorted by path; files absent
// on that side are left out.
func (o *Own) entries(side func(*ownFile) Entry) []FileChange {
	out := make([]FileChange, 0, len(o.files))
	for p, f := range o.files {
		if e := side(f); e.Mode != "" {
			out = append(out, FileChange{Path: p, After: e})
		}
	}
	slices.SortFunc(out, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// writeTree writes a tree holding exactly the given files (their After
// entries) through an index of its own, and returns its id. Should one
// side hold a file and a folder of the same name (a file made a folder
// between two turns that changed each), the later in path order wins:
// the count is then off by that file, which is better than none.
func (r *Repo) writeTree(ctx context.Context, files []FileChange) (string, error) {
	tmp, err := os.MkdirTemp("", "ahpd-counts-")
	if err != nil {
		return "", fmt.Errorf("checkpoints: count: %w", err)
	}
	defer os.RemoveAll(tmp)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	var in bytes.Buffer
	for _, f := range files {
		fmt.Fprintf(&in, "%s %s\t%s\x00", f.After.Mode, f.After.Object, f.Path)
	}
	if _, err := (gitCmd{dir: r.root, env: env, yield: r.yielding, stdin: &in,
		args: []string{"-c", "core.splitIndex=false", "update-index", "-z", "--index-info"}}).run(ctx); err != nil {
		return "", fmt.Errorf("checkpoints: count: %w", err)
	}
	out, err := gitCmd{dir: r.root, env: env, yield: r.yielding, args: []string{"write-tree"}}.run(ctx)
	if err != nil {
		return "", fmt.Errorf("checkpoints: count: %w", err)
	}
	tree := strings.TrimSpace(string(out))
	if !isObjectID(tree) {
		return "", fmt.Errorf("checkpoints: count: unexpected output from git write-tree: %q", out)
	}
	return tree, nil
}

// OwnChanges reads a session's own changes from its checkpoints: each
// turn's diff against the tree it started from, combined. It costs two
// git processes however many turns there are; a caller that counts after
// every turn keeps the Own and adds each new turn to it instead.
func (r *Repo) OwnChanges(ctx context.Context, sessionID string) (*Own, error) {
	cps, err := r.Checkpoints(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var commits []string
	for _, cp := range cps {
		if cp.Turn > 0 {
			commits = append(commits, cp.Commit)
		}
	}
	turns, err := r.TurnChanges(ctx, commits)
	if err != nil {
		return nil, err
	}
	o := &Own{}
	for _, t := range turns {
		o.Add(t)
	}
	return o, nil
}
