package catalogue

import (
	"io/fs"
	"time"
)

// fileID is what a stat says about a file's identity and content. Two
// stats that give the same fileID saw the same content: writing a file
// moves its change time (ctime), which no program can set back, so even
// a rewrite that keeps the size and restores the modification time is
// told apart. That is what lets a row read at one start be trusted at
// the next without reading the file again.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

// sameFile reports whether a and b are the same file (not necessarily
// with the same content).
func (a fileID) sameFile(b fileID) bool { return a.dev == b.dev && a.ino == b.ino }

// modTime returns the modification time.
func (a fileID) modTime() time.Time { return time.Unix(0, a.mtime) }

// idOf returns fi's fileID.
func idOf(fi fs.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	sysID(fi, &id)
	return id
}
