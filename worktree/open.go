package worktree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// ErrNotRepository is returned by the reads for a folder that is not inside
// a git repository's work tree.
var ErrNotRepository = errors.New("not a git repository")

// openRepo opens, with go-git, the repository whose work tree holds dir.
//
// It does what git.PlainOpenWithOptions does with DetectDotGit and
// EnableDotGitCommonDir (walk up to the nearest .git, follow a .git file to
// a linked worktree's git dir, and read refs and objects from the common
// dir), but over a storage of our own: go-git v5 refuses any repository whose
// config has an extension it does not know, and extensions.worktreeConfig is
// left behind by git sparse-checkout and by other agent tools. PlainOpen
// offers no way in between, so the discovery is repeated here.
func openRepo(dir string) (*git.Repository, error) {
	top, gitDir, err := findDotGit(dir)
	if err != nil {
		return nil, err
	}
	dot := osfs.New(gitDir)
	var fs billy.Filesystem = dot
	common, err := commonDir(gitDir)
	if err != nil {
		return nil, err
	}
	if common != "" {
		fs = dotgit.NewRepositoryFilesystem(dot, osfs.New(common))
	}
	st := readOnlyConfig{filesystem.NewStorage(fs, cache.NewObjectLRUDefault())}
	r, err := git.Open(st, osfs.New(top))
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%w: %s", ErrNotRepository, dir)
	}
	return r, err
}

// findDotGit walks up from dir to the nearest folder holding .git and
// returns that folder (the work tree's top) and the git dir it names.
// Bare repositories are not found: a session needs a work tree.
func findDotGit(dir string) (top, gitDir string, err error) {
	p, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if fi, err := os.Stat(p); err != nil {
		return "", "", err
	} else if !fi.IsDir() {
		p = filepath.Dir(p)
	}
	for {
		dotGit := filepath.Join(p, ".git")
		fi, err := os.Stat(dotGit)
		switch {
		case err == nil && fi.IsDir():
			return p, dotGit, nil
		case err == nil:
			gd, err := readGitFile(dotGit)
			return p, gd, err
		case !errors.Is(err, os.ErrNotExist):
			return "", "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", "", fmt.Errorf("%w: %s", ErrNotRepository, dir)
		}
		p = parent
	}
}

// readGitFile reads a ".git" file ("gitdir: <path>"), which is how a linked
// worktree or a submodule points at its git dir.
func readGitFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	gd, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s: no gitdir line", name)
	}
	gd = strings.TrimSpace(gd)
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(filepath.Dir(name), gd)
	}
	return gd, nil
}

// commonDir returns the common git dir a linked worktree's git dir names in
// its "commondir" file, or "" when gitDir is a repository's own.
func commonDir(gitDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	c := strings.TrimSpace(string(b))
	if c == "" {
		return "", nil
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitDir, c)
	}
	if _, err := os.Stat(c); err != nil {
		return "", fmt.Errorf("common git dir of %s: %w", gitDir, err)
	}
	return c, nil
}

// harmlessExtensions are the repository extensions that change nothing about
// how refs and objects are read, so go-git may read a repository that sets
// them. Extensions that do (objectFormat, refStorage) stay visible, and
// go-git goes on refusing those repositories rather than misreading them.
var harmlessExtensions = map[string]bool{
	"worktreeconfig":  true,
	"preciousobjects": true,
	"partialclone":    true,
	"noop":            true,
	"noop-v1":         true,
}

// readOnlyConfig is the storage the reads open repositories through. Its
// Config hides the harmless extensions from go-git, so what it returns is not
// the repository's real config: writing it back would drop those settings,
// so SetConfig refuses.
type readOnlyConfig struct {
	*filesystem.Storage
}

func (s readOnlyConfig) Config() (*config.Config, error) {
	cfg, err := s.Storage.Config()
	if err != nil || cfg.Raw == nil || !cfg.Raw.HasSection("extensions") {
		return cfg, err
	}
	// The config is parsed afresh on every call, so editing it here
	// changes no one else's copy. git allows the section more than once.
	kept := cfg.Raw.Sections[:0]
	for _, sec := range cfg.Raw.Sections {
		if sec.IsName("extensions") {
			opts := sec.Options[:0]
			for _, o := range sec.Options {
				if !harmlessExtensions[strings.ToLower(o.Key)] {
					opts = append(opts, o)
				}
			}
			sec.Options = opts
			if len(opts) == 0 && len(sec.Subsections) == 0 {
				continue
			}
		}
		kept = append(kept, sec)
	}
	cfg.Raw.Sections = kept
	return cfg, nil
}

func (readOnlyConfig) SetConfig(*config.Config) error {
	return errors.New("worktree: repository opened for reading; config is not written through go-git")
}
