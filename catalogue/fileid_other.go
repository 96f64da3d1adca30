//go:build !linux

package catalogue

import (
	"io/fs"
	"os"
)

// openFlags: off Linux a FIFO or a link named like a transcript is opened
// as it is; the fstat after tells a FIFO.
const openFlags = os.O_RDONLY

func isLink(error) bool { return false }

// sysID has nothing to add off Linux: a file is then told by its size
// and modification time alone, and a replaced file by a size that shrank.
func sysID(fs.FileInfo, *fileID) {}

// adviseRandom is a Linux hint only.
func adviseRandom(*os.File) {}
