package cluster

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
)

// LabelRepos is the label listing the folders a host reaches, as
// comma-separated absolute paths: `repos=/srv/repos,/home/ci` reaches any
// folder under either.
const LabelRepos = "repos"

// Reaches reports whether h's LabelRepos covers folder: folder is one of
// its paths or under one. Paths are compared cleaned and as paths (/a
// covers /a/b, not /ab); a relative path, in the label or as folder,
// covers or is covered by nothing.
func (h Host) Reaches(folder string) bool {
	if !path.IsAbs(folder) {
		return false
	}
	folder = path.Clean(folder)
	for _, root := range strings.Split(h.Labels[LabelRepos], ",") {
		root = strings.TrimSpace(root)
		if !path.IsAbs(root) {
			continue
		}
		root = path.Clean(root)
		if folder == root || root == "/" || strings.HasPrefix(folder, root+"/") {
			return true
		}
	}
	return false
}

// Place chooses the host for a session whose folders are folders: among
// hosts that reach every one of them, the least loaded; of equally loaded
// ones, the least id, so that every host choosing from the same list
// chooses the same. A session with no folders may go to any host. It
// returns ErrNoHost when no host reaches the folders. It is a pure
// function: hosts is not changed.
func Place(hosts []Host, folders []string) (Host, error) {
	var fit []Host
	for _, h := range hosts {
		if reachesAll(h, folders) {
			fit = append(fit, h)
		}
	}
	if len(fit) == 0 {
		return Host{}, fmt.Errorf("%w: none of %d live hosts reaches all %d folders", ErrNoHost, len(hosts), len(folders))
	}
	return slices.MinFunc(fit, func(a, b Host) int {
		return cmp.Or(cmp.Compare(a.Load, b.Load), strings.Compare(a.ID, b.ID))
	}), nil
}

func reachesAll(h Host, folders []string) bool {
	for _, f := range folders {
		if !h.Reaches(f) {
			return false
		}
	}
	return true
}
