package plugins

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/ahpd/ahpd/protocol"
)

// File edits: what a backend's tool call did to a file, told as the
// fileEdit content of its result, which VS Code shows as the "Created
// a.txt +1 -0" chip with a link to the diff, and which the host counts a
// chat's edits by. A backend reads the file before the tool writes it and
// after, and FileEdit makes the content of the two.

// MaxEditRead bounds what is read of a file to describe an edit: a
// bigger file's edit names the file with no diff stats (counting lines
// of many megabytes is no work for a tool call's end).
const MaxEditRead = 1 << 20

// MaxEditCarried bounds the content of a file before an edit that the
// edit carries, as a data: URI: the file itself no longer holds it, and
// nothing else keeps it. A bigger file's before side names the file
// itself, as the after side does: the stats are right, the diff shows
// none.
const MaxEditCarried = 32 << 10

// maxDiffCost bounds the work of counting the changed lines of two
// versions, in steps of the diff (its edit distance): past it, every line
// between the common start and end counts as removed and added, which
// overcounts but never misses a change.
const maxDiffCost = 4096

// FileVersion is a file as a tool call found it or left it.
type FileVersion struct {
	Exists bool
	Size   int64
	// Data is the file's content when it was read whole (Size at most
	// MaxEditRead), nil otherwise.
	Data []byte
}

// whole reports whether the version's content is known: it was read, or
// there is no file.
func (v FileVersion) whole() bool { return !v.Exists || v.Data != nil }

// ReadFileVersion reads the file at path as a FileVersion: missing, too
// big to read (Data nil), or read whole. A file that cannot be read is
// taken as one too big to read, so that it is named with no content.
func ReadFileVersion(path string) FileVersion {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return FileVersion{}
	}
	if err != nil {
		return FileVersion{Exists: true}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return FileVersion{Exists: true}
	}
	v := FileVersion{Exists: true, Size: info.Size()}
	if v.Size > MaxEditRead {
		return v
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxEditRead+1))
	if err != nil || len(data) > MaxEditRead {
		return v // it grew, or failed, while read
	}
	v.Size, v.Data = int64(len(data)), data
	return v
}

// VersionOf returns the version of a file that holds data, as
// ReadFileVersion would read it.
func VersionOf(data []byte) FileVersion {
	v := FileVersion{Exists: true, Size: int64(len(data))}
	if len(data) <= MaxEditRead {
		v.Data = data
		if v.Data == nil {
			v.Data = []byte{}
		}
	}
	return v
}

// FileURI returns the file: URI of an absolute path.
func FileURI(path string) protocol.URI {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

// FileEdit returns the fileEdit content of a change of the file at path,
// absolute, from before to after: no before side for a file created, no
// after side for one deleted. The after side refers to the file as it is,
// the before side to its old content carried in a data: URI (up to
// MaxEditCarried). The diff stats count the lines added and removed when
// both versions were read whole.
func FileEdit(path string, before, after FileVersion) *protocol.ToolResultFileEditContent {
	uri := FileURI(path)
	fe := &protocol.ToolResultFileEditContent{}
	if before.Exists {
		content := protocol.ContentRef{URI: uri, SizeHint: new(before.Size)}
		if before.Data != nil && len(before.Data) <= MaxEditCarried {
			media := "application/octet-stream"
			if utf8.Valid(before.Data) {
				media = "text/plain;charset=utf-8"
			}
			content.URI = "data:" + media + ";base64," + base64.StdEncoding.EncodeToString(before.Data)
		}
		fe.Before = &protocol.FileEditSide{URI: uri, Content: content}
	}
	if after.Exists {
		fe.After = &protocol.FileEditSide{URI: uri, Content: protocol.ContentRef{URI: uri, SizeHint: new(after.Size)}}
	}
	if before.whole() && after.whole() {
		added, removed := LineChanges(before.Data, after.Data)
		fe.Diff = &protocol.FileEditDiffStats{Added: &added, Removed: &removed}
	}
	return fe
}

// LineChanges counts the lines a minimal line diff from a to b adds and
// removes, as git counts them: a last line without a newline is a line,
// and a newline added to it changes it. Past maxDiffCost steps the lines
// between the common start and end all count.
func LineChanges(a, b []byte) (added, removed int64) {
	x, y := splitLines(a), splitLines(b)
	for len(x) > 0 && len(y) > 0 && bytes.Equal(x[0], y[0]) {
		x, y = x[1:], y[1:]
	}
	for len(x) > 0 && len(y) > 0 && bytes.Equal(x[len(x)-1], y[len(y)-1]) {
		x, y = x[:len(x)-1], y[:len(y)-1]
	}
	common, ok := commonLines(x, y, maxDiffCost)
	if !ok {
		common = 0
	}
	return int64(len(y) - common), int64(len(x) - common)
}

// splitLines cuts data into lines, each with its newline.
func splitLines(data []byte) [][]byte {
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i+1])
		data = data[i+1:]
	}
	return lines
}

// commonLines returns the length of a longest common subsequence of x
// and y by Myers' greedy search for the shortest edit script, which
// takes O((len(x)+len(y))·D) for an edit distance D; false when D passes
// maxCost.
func commonLines(x, y [][]byte, maxCost int) (int, bool) {
	n, m := len(x), len(y)
	if n == 0 || m == 0 {
		return 0, true
	}
	// Lines as numbers, so that a step compares two ints.
	ids := map[string]int{}
	id := func(l []byte) int {
		if v, ok := ids[string(l)]; ok {
			return v
		}
		ids[string(l)] = len(ids)
		return len(ids) - 1
	}
	xi, yi := make([]int, n), make([]int, m)
	for i, l := range x {
		xi[i] = id(l)
	}
	for i, l := range y {
		yi[i] = id(l)
	}
	limit := min(n+m, maxCost)
	off := limit + 1
	v := make([]int, 2*limit+3)
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var i int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				i = v[off+k+1]
			} else {
				i = v[off+k-1] + 1
			}
			j := i - k
			for i < n && j < m && xi[i] == yi[j] {
				i, j = i+1, j+1
			}
			v[off+k] = i
			if i >= n && j >= m {
				return (n + m - d) / 2, true
			}
		}
	}
	return 0, false
}
