package catalogue

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openFlags open a transcript without following a symbolic link and
// without waiting for a writer should the name be a FIFO's.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// isLink reports the error of opening a symbolic link with openFlags.
func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) }

// sysID fills in what only the system's stat has: device, inode and
// change time.
func sysID(fi fs.FileInfo, id *fileID) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = st.Dev, st.Ino
		id.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
}

// adviseRandom tells the kernel not to read ahead in f: a scan reads a
// few pages at each end of a file, and the readahead that a first read
// at offset 0 starts (up to the device's read_ahead_kb, megabytes on
// some disks) would be most of the bytes read from disk.
func adviseRandom(f *os.File) {
	const fadvRandom = 1 // POSIX_FADV_RANDOM
	rc, err := f.SyscallConn()
	if err != nil {
		return // only a hint
	}
	_ = rc.Control(func(fd uintptr) {
		_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, fd, 0, 0, fadvRandom, 0, 0)
	})
}
