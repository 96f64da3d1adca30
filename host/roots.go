package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ahpd/ahpd/grants"
	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/session"
	"github.com/ahpd/ahpd/protocol"
)

// Allowed roots (Options.AllowedRoots): the directories sessions may work
// in. Every working directory a client names is checked against them once
// its symlinks are resolved: the ones createSession is given, the ones
// session/workingDirectorySet, session/workingDirectoryReplaced and
// chat/workingDirectorySet add, and the folder resolveSessionConfig and
// sessionConfigCompletions are asked about. A turn, or a message queued
// for one, is refused in a session whose folder lies outside them: that
// covers sessions made before the roots were set, by somebody not held to
// them, or found in an agent's own transcripts. A refusal is -32009 (the
// code the protocol gives a refused filesystem resource) and names the
// roots.
//
// Who is held to them: on a host without users, everybody (the one person
// whose daemon it is chose the roots); on a host with users, everybody
// but administrators and root (the connection token, stdio), whose
// business is the whole host. With no roots nobody is held.
//
// The worktrees the host makes for worktree sessions are not checked:
// the host picks their place (beside the repository, or under
// --worktrees-root), and the session's folder, which is checked, stays
// the repository they were made from.
//
// Roots say where sessions work; they are no sandbox. An agent's tools
// can reach whatever the daemon's user can.

// ResolveRoots checks allowed roots as a host is given them: each must be
// the absolute path of an existing directory. It returns them with their
// symlinks resolved, in the order given, without repeats.
func ResolveRoots(dirs []string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("allowed root %q is not an absolute path", d)
		}
		real, err := filepath.EvalSymlinks(d)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("allowed root %q does not exist", d)
		}
		if err != nil {
			return nil, fmt.Errorf("allowed root %q: %w", d, err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("allowed root %q: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("allowed root %q is not a directory", d)
		}
		if !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out, nil
}

// resolvePath returns the absolute path with its symlinks resolved as the
// system resolves them when it follows the path (a ".." after a symlink
// goes up from the symlink's target, not from the symlink). A path that
// does not exist yet is resolved as far as it exists, its nearest
// existing parent, and the rest is taken as written. A symlink whose
// target does not exist is an error: where it leads may be made later.
// Errors do not repeat the path.
func resolvePath(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errors.New("not an absolute path")
	}
	var rest []string
	for p := path; ; {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", bareError(err)
		}
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return "", errors.New("a symlink to a place that does not exist")
		}
		// Split off the last element as written: filepath.Dir would clean
		// the parent, taking "link/.." lexically, which the system does not.
		i := strings.LastIndexByte(p, filepath.Separator)
		if i < 0 || p == string(filepath.Separator) {
			return "", bareError(err)
		}
		parent := p[:i]
		if parent == "" {
			parent = string(filepath.Separator)
		}
		rest = append([]string{p[i+1:]}, rest...)
		p = parent
	}
}

// bareError is err without the path an *fs.PathError carries, which may be
// a client's string.
func bareError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// within reports whether path (resolved) is root (resolved) or under it.
func within(root, path string) bool {
	if path == root {
		return true
	}
	if !strings.HasSuffix(root, string(filepath.Separator)) {
		root += string(filepath.Separator)
	}
	return strings.HasPrefix(path, root)
}

// inRoots says whether path, once resolved, lies within one of roots, and
// what it resolved to.
func inRoots(roots []string, path string) (real string, ok bool, err error) {
	real, err = resolvePath(path)
	if err != nil {
		return "", false, err
	}
	for _, r := range roots {
		if within(r, real) {
			return real, true, nil
		}
	}
	return real, false, nil
}

// heldToRoots reports whether p may work only within the allowed roots.
func (h *Host) heldToRoots(p grants.Principal) bool {
	if len(h.roots) == 0 {
		return false
	}
	d := h.directory()
	if d == nil {
		return true // one person's daemon: they chose the roots for themselves
	}
	switch p.Kind {
	case grants.KindRoot:
		return false
	case grants.KindUser:
		u, ok := d.Lookup(p.ID)
		return !ok || u.Role != grants.Admin // the role as it is now
	}
	return true
}

// rootsRefusal says why p may not work in dir, a path a client named, or
// "" if p may.
func (h *Host) rootsRefusal(p grants.Principal, dir string) string {
	if !h.heldToRoots(p) {
		return ""
	}
	real, ok, err := inRoots(h.roots, dir)
	switch {
	case err != nil:
		return fmt.Sprintf("working directory %s cannot be checked against the allowed roots: %v", protocol.Quote(dir), err)
	case ok:
		return ""
	case real != filepath.Clean(dir):
		return fmt.Sprintf("working directory %s (which is %s) is outside the allowed roots: %s", protocol.Quote(dir), protocol.Quote(real), h.rootList())
	}
	return fmt.Sprintf("working directory %s is outside the allowed roots: %s", protocol.Quote(dir), h.rootList())
}

func (h *Host) rootList() string { return strings.Join(h.roots, ", ") }

// checkRoots is rootsRefusal as the error a command answers.
func (h *Host) checkRoots(method string, p grants.Principal, dir string) error {
	if why := h.rootsRefusal(p, dir); why != "" {
		return protocol.Errorf(protocol.CodePermissionDenied, "%s: %s", method, why)
	}
	return nil
}

// actionRootsRefusal says why a client's action may not add the
// working directory it names, or "". A directory that is not a file URI
// is refused too, since it cannot be checked.
func (h *Host) actionRootsRefusal(c *conn.Conn, a protocol.Action) string {
	var uri string
	switch a := a.(type) {
	case *protocol.SessionWorkingDirectorySetAction:
		uri = a.Directory
	case *protocol.SessionWorkingDirectoryReplacedAction:
		uri = a.Replacement
	case *protocol.ChatWorkingDirectorySetAction:
		uri = a.Directory
	default:
		return ""
	}
	if !h.heldToRoots(c.Principal()) {
		return ""
	}
	dir, err := session.DirOf(uri)
	if err != nil {
		return err.Error()
	}
	return h.rootsRefusal(c.Principal(), dir)
}

// workRefusal says why c may not set s's agents to work, or "": the
// session's folder is outside the roots c is held to.
func (h *Host) workRefusal(c *conn.Conn, s *session.Session) string {
	if !h.heldToRoots(c.Principal()) {
		return ""
	}
	folder := s.Folder()
	_, ok, err := inRoots(h.roots, folder)
	switch {
	case err != nil:
		return fmt.Sprintf("this session's folder %s cannot be checked against the allowed roots: %v", protocol.Quote(folder), err)
	case !ok:
		return fmt.Sprintf("this session works in %s, outside the allowed roots: %s", protocol.Quote(folder), h.rootList())
	}
	return ""
}

// defaultInRoots returns the directory a session works in when its client
// names none: dir, or the first root when dir is outside the roots, so
// that the default is one anybody may use.
func defaultInRoots(roots []string, dir string) string {
	if len(roots) == 0 {
		return dir
	}
	if _, ok, err := inRoots(roots, dir); err == nil && ok {
		return dir
	}
	return roots[0]
}
