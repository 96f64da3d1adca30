package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ahpd/ahpd/internal/fulldisk"
	"github.com/ahpd/ahpd/internal/testwait"
)

// TestFullDisk fills a real file system under the embedded server: a
// 16 MiB tmpfs of the test's own (internal/fulldisk), so that nothing of
// it outlives the test or touches the host's disks.
func TestFullDisk(t *testing.T) {
	if !fulldisk.Run(t, "space_test.go") {
		return
	}
	dir := fulldisk.Mount(t, 16<<20)
	t.Run("appends refused before the disk fills", func(t *testing.T) { testFullDiskRefused(t, dir) })
	t.Run("a write the store failed", func(t *testing.T) { testFullDiskWriteFailed(t, dir) })
	t.Run("the reserve", func(t *testing.T) { testFullDiskReserve(t, dir) })
	t.Run("opening on a full disk", func(t *testing.T) { testFullDiskOpen(t, dir) })
	t.Run("a new store on a full disk", func(t *testing.T) { testFullDiskNewStore(t, dir) })
}

// fill fills the file system of dir to the last byte.
func fill(t *testing.T, dir string) func() { return fulldisk.Fill(t, dir) }

// appendRefused appends to a full disk: the append must end with
// ErrNoSpace, not wait for its deadline (a guard against hanging, far
// longer than it takes).
func appendRefused(t *testing.T, j *Journal, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	start := time.Now()
	_, err := j.Append(ctx, s1, data)
	took := time.Since(start)
	if !errors.Is(err, ErrNoSpace) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append on a full disk: %v; want ErrNoSpace", err)
	}
	t.Logf("an append of %d bytes on a full disk ended with ErrNoSpace in %v: %v", len(data), took, err)
}

// The journal's own floor: on a disk filled to under MinFreeBytes, an
// Append is refused before it is sent, reads go on, and once the disk
// has room again appends go on.
func testFullDiskRefused(t *testing.T, root string) {
	j := (&harness{t: t, dir: filepath.Join(root, "refused")}).open(Config{MinFreeBytes: 2 << 20})
	seqs := appendCounted(t, j, s1, 200, 50)
	free := fill(t, root)
	appendRefused(t, j, make([]byte, 10000))
	checkCounted(t, readPaged(t, j, s1, 77), seqs)
	free()
	again, err := j.Append(context.Background(), s1, []byte("00000200"))
	if err != nil {
		t.Fatalf("Append once there is room again: %v", err)
	}
	checkCounted(t, readPaged(t, j, s1, 77), append(seqs, again...))
}

// Another program filled the disk to the last byte: an Append is refused,
// an AppendReserve takes the room the reserve file held, and once there
// is room again the reserve is made again.
func testFullDiskReserve(t *testing.T, root string) {
	dir := filepath.Join(root, "reserve")
	j := (&harness{t: t, dir: dir}).open(Config{MinFreeBytes: 2 << 20})
	reserve := filepath.Join(dir, reserveFile)
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("the reserve file as the journal opens: %v %v", fi, err)
	}
	seqs := appendCounted(t, j, s1, 10, 50)
	free := fill(t, root)
	appendRefused(t, j, make([]byte, 100))
	ending := []byte("00000010")
	seq, err := j.AppendReserve(context.Background(), s1, ending)
	if err != nil {
		t.Fatalf("AppendReserve on a disk another program filled: %v", err)
	}
	checkCounted(t, readPaged(t, j, s1, 100), append(seqs, seq...))
	if _, err := os.Stat(reserve); !os.IsNotExist(err) {
		t.Fatalf("the reserve file is still there: %v", err)
	}
	free()
	if _, err := j.Append(context.Background(), s1, []byte("00000011")); err != nil {
		t.Fatalf("Append once there is room again: %v", err)
	}
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("the reserve file once there is room again: %v %v", fi, err)
	}
}

// A write the store fails for lack of space (another writer filled the
// disk after the journal's check saw room): the append waiting for its
// ack ends with ErrNoSpace at once, as does the next, and once there is
// room again the journal starts JetStream again and appends go on, with
// every entry acked before still there and a follower following on.
func testFullDiskWriteFailed(t *testing.T, root string) {
	j := (&harness{t: t, dir: filepath.Join(root, "failed")}).open(Config{MinFreeBytes: 2 << 20})
	seqs := appendCounted(t, j, s1, 200, 50)
	f := followOK(t, j, s1, seqs[len(seqs)-1])
	free := fill(t, root)
	j.disk.mu.Lock()
	j.disk.measure = func(string) (int64, error) { return 1 << 40, nil } // a check outrun
	j.disk.mu.Unlock()
	appendRefused(t, j, make([]byte, 100000))
	if failed, _ := j.disk.state(); !failed {
		t.Fatal("the append was refused without the store failing a write: this case proves nothing")
	}
	j.disk.mu.Lock()
	j.disk.measure = statfs
	j.disk.mu.Unlock()
	appendRefused(t, j, make([]byte, 100)) // still full
	checkCounted(t, readPaged(t, j, s1, 1000), seqs)
	free()
	again, err := j.Append(context.Background(), s1, []byte("00000200"))
	if err != nil {
		t.Fatalf("Append once there is room again: %v", err)
	}
	got := readPaged(t, j, s1, 1000)
	checkCounted(t, got, append(seqs, again...))
	// The follower made a new consumer after JetStream started again.
	if e := receive(t, f, 1); e[0].Seq != again[0] {
		t.Fatalf("followed %d after the restart of the store, want %d", e[0].Seq, again[0])
	}
}

// A journal opens on a full disk, even with limits it cannot write
// (which it keeps for later), serves what it holds, refuses appends, and
// takes them once there is room.
func testFullDiskOpen(t *testing.T, root string) {
	h := &harness{t: t, dir: filepath.Join(root, "open")}
	j := h.open(Config{MinFreeBytes: 2 << 20})
	seqs := appendCounted(t, j, s1, 300, 100)
	closeJournal(t, j)
	free := fill(t, root)
	for _, cfg := range []Config{{MinFreeBytes: 2 << 20}, {MinFreeBytes: 2 << 20, MaxAge: time.Hour}} {
		j = h.open(cfg)
		checkCounted(t, readPaged(t, j, s1, 1000), seqs)
		if last, err := j.SessionLastSeq(context.Background(), s1); err != nil || last != seqs[len(seqs)-1] {
			t.Fatalf("SessionLastSeq = %d, %v", last, err)
		}
		appendRefused(t, j, []byte("x"))
		closeJournal(t, j)
	}
	free()
	j = h.open(Config{MinFreeBytes: 2 << 20, MaxAge: time.Hour})
	more := appendCounted(t, j, s2, 10, 10)
	if got := readOK(t, j, []string{s2}, 0, 0); len(got) != len(more) {
		t.Fatalf("read %d entries appended once there was room, want %d", len(got), len(more))
	}
	info, err := j.stream.Info(context.Background())
	if err != nil || info.Config.MaxAge != time.Hour {
		t.Fatalf("the stream's age limit once there was room: %v, %v", info.Config.MaxAge, err)
	}
}

// A store that does not exist yet cannot be made on a full disk: Open
// says so with ErrNoSpace.
func testFullDiskNewStore(t *testing.T, root string) {
	fill(t, root)
	j, err := Open(context.Background(), Config{Dir: filepath.Join(root, "new")})
	if err == nil {
		closeJournal(t, j)
		t.Fatal("Open made a new store on a full disk")
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Open of a new store on a full disk: %v; want ErrNoSpace", err)
	}
}

// TestAppendReserve: below the floor, an Append is refused and an
// AppendReserve, which may use it, is taken; with no room at all both
// are refused.
func TestAppendReserve(t *testing.T) {
	j, err := Open(context.Background(), Config{Dir: t.TempDir(), MinFreeBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close(context.Background())
	for _, tc := range []struct {
		free             int64
		append, reserved bool // taken
	}{
		{1 << 40, true, true},
		{24 << 20, false, true},
		{32 << 10, false, false},
	} {
		j.disk.mu.Lock()
		j.disk.measure = func(string) (int64, error) { return tc.free, nil }
		j.disk.checked = time.Time{}
		j.disk.mu.Unlock()
		_, err := j.Append(context.Background(), "s", []byte("entry"))
		if taken := err == nil; taken != tc.append || (err != nil && !errors.Is(err, ErrNoSpace)) {
			t.Errorf("%d free: Append: %v", tc.free, err)
		}
		_, err = j.AppendReserve(context.Background(), "s", []byte("ending"))
		if taken := err == nil; taken != tc.reserved || (err != nil && !errors.Is(err, ErrNoSpace)) {
			t.Errorf("%d free: AppendReserve: %v", tc.free, err)
		}
	}
}
