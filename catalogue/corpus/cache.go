package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cached returns the projects folder of a corpus kept under root, writing
// it first when root holds no complete copy (a marker file records that
// the last write finished, and the corpus's size). An incomplete copy is
// removed and written again. wrote reports whether it was written now.
func Cached(root string, spec Spec) (projects string, size int64, wrote bool, err error) {
	projects = filepath.Join(root, "projects")
	marker := filepath.Join(root, "complete")
	if data, err := os.ReadFile(marker); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			return projects, n, false, nil
		}
	}
	if err := os.RemoveAll(root); err != nil {
		return "", 0, false, fmt.Errorf("corpus: clearing %s: %w", root, err)
	}
	if size, err = Generate(projects, spec); err != nil {
		return "", 0, false, err
	}
	if err := os.WriteFile(marker, []byte(strconv.FormatInt(size, 10)), 0o644); err != nil {
		return "", 0, false, fmt.Errorf("corpus: marking %s complete: %w", root, err)
	}
	return projects, size, true, nil
}
