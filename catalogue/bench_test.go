//go:build linux

package catalogue

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahpd/ahpd/catalogue/corpus"
	"github.com/ahpd/ahpd/plugins/claude"
)

// The benchmark corpus: 10,000 transcripts in 200 project folders, 2 KB
// to 50 MB each, about 3.5 GB in all. Writing it takes a while, so it is
// kept between runs under os.TempDir(); a new version makes a new one.
// AHPD_CORPUS_FILES=N makes a smaller one (a folder per 50 transcripts),
// cached beside it, for trying a change quickly; the figures in the docs
// are the full corpus's.
const (
	corpusVersion = "6"
	corpusFiles   = 10000
	corpusFolders = 200
)

// benchCorpus returns the projects folder of the benchmark corpus,
// writing it first if no complete copy is cached.
func benchCorpus(b *testing.B) (projects string, size int64) {
	b.Helper()
	files, folders, dir := corpusFiles, corpusFolders, "ahpd-corpus-"+corpusVersion
	if s := os.Getenv("AHPD_CORPUS_FILES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("AHPD_CORPUS_FILES=%q", s)
		}
		files, folders, dir = n, max(1, n/50), dir+"-"+s
	}
	start := time.Now()
	projects, size, wrote, err := corpus.Cached(filepath.Join(os.TempDir(), dir), corpus.Spec{
		Files: files, Folders: folders, Seed: 1,
		Now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		b.Fatal(err)
	}
	if wrote {
		b.Logf("wrote the corpus (%.2f GB) in %v", float64(size)/1e9, time.Since(start))
	}
	return projects, size
}

// BenchmarkCatalogue measures, on the corpus above: the first scan with
// the transcripts in the page cache (scan-s) and with them evicted
// (scan-uncached-s); the resident memory the scan added at its peak; a
// naive scan that reads every file whole and makes the same rows from
// the bytes in memory (naive-s, and naive/scan); and how long an append
// takes to reach OnChange, with the bytes read for it.
//
// It runs only on demand:
//
//	go test ./catalogue -run XXX -bench . -benchtime 1x
func BenchmarkCatalogue(b *testing.B) {
	projects, size := benchCorpus(b)
	paths := corpusPaths(b, projects)
	b.ReportMetric(float64(size)/1e9, "corpus-GB")
	b.ReportMetric(float64(len(paths)), "files")

	for b.Loop() {
		// Uncached: the kernel drops the corpus's pages first, so the
		// scan reads from the disk, as after a reboot.
		must(b, corpus.Evict(paths))
		c, d := timedScan(b, projects, nil)
		c.Close()
		b.ReportMetric(d.Seconds(), "scan-uncached-s")

		// The figure the target is for: a process's first scan, with
		// the pages it needs cached; memory measured around it.
		runtime.GC()
		debug.FreeOSMemory()
		if err := corpus.ResetPeakRSS(); err != nil {
			b.Logf("cannot reset the peak RSS (%v): the figure includes earlier peaks", err)
		}
		rss0 := procStat(b, "VmRSS")
		var ms0 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		ch := newChanges()
		c, d = timedScan(b, projects, ch.on)
		peak := procStat(b, "VmHWM")
		runtime.GC()
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		st := c.Stats()
		if st.Rows != len(paths) {
			b.Errorf("%d rows for %d transcripts", st.Rows, len(paths))
		}
		b.ReportMetric(d.Seconds(), "scan-s")
		b.ReportMetric(float64(st.BytesRead)/1e6, "scan-read-MB")
		b.ReportMetric(float64(peak-rss0)/(1<<20), "peak-RSS-growth-MB")
		// What stays: the rows, the file records, the reported changes.
		b.ReportMetric(float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/(1<<20), "live-heap-MB")

		naive := naiveScan(b, paths) // fills the page cache with all of it
		naive = min(naive, naiveScan(b, paths))
		b.ReportMetric(naive.Seconds(), "naive-s")
		b.ReportMetric(naive.Seconds()/d.Seconds(), "naive/scan")

		lat, read := appendLatency(b, c, ch, paths)
		b.ReportMetric(float64(lat.Microseconds())/1e3, "append-ms")
		b.ReportMetric(float64(read), "append-read-B")
	}
}

func corpusPaths(b *testing.B, projects string) []string {
	var paths []string
	err := filepath.WalkDir(projects, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return paths
}

// timedScan opens a catalogue on projects and times its first scan.
func timedScan(b *testing.B, projects string, on func([]Change)) (*Catalogue, time.Duration) {
	start := time.Now()
	c := Open(Config{Roots: claudeAt(projects), RescanInterval: -1, OnChange: on})
	<-c.Ready()
	return c, time.Since(start)
}

// naiveScan reads every transcript whole, with as many workers as a
// catalogue uses, and makes each row from the bytes in memory.
func naiveScan(b *testing.B, paths []string) time.Duration {
	start := time.Now()
	var next, rows, n atomic.Int64
	var wg sync.WaitGroup
	p := newFormat(claude.TranscriptRoot("").Format)
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(paths) {
					return
				}
				data, err := os.ReadFile(paths[i])
				if err != nil {
					b.Error(err)
					return
				}
				r := &fileReader{f: bytes.NewReader(data), size: int64(len(data)), read: &n}
				if res, err := scanWhole(r, p); err == nil && res.info.conversation {
					rows.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if int(rows.Load()) != len(paths) {
		b.Errorf("naive scan made %d rows", rows.Load())
	}
	return time.Since(start)
}

// appendLatency appends a prompt line to the largest transcripts, one at
// a time, and returns the median time until OnChange reports it and the
// most bytes read for one. The files are cut back to their size after,
// so the cached corpus stays as it was written.
func appendLatency(b *testing.B, c *Catalogue, ch *changes, paths []string) (time.Duration, int64) {
	type file struct {
		path string
		size int64
	}
	var files []file
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, file{p, fi.Size()})
	}
	slices.SortFunc(files, func(x, y file) int { return int(y.size - x.size) })
	var lats []time.Duration
	var worst int64
	pos := ch.len()
	defer func() {
		c.Close() // first, so it does not read the cuts
		for _, f := range files[:5] {
			if err := os.Truncate(f.path, f.size); err != nil {
				b.Error(err)
			}
		}
	}()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i, f := range files[:5] {
		id := strings.TrimSuffix(filepath.Base(f.path), ".jsonl")
		at := now.Add(time.Duration(i) * time.Second)
		read0 := c.Stats().BytesRead
		start := time.Now()
		appendTo(b, f.path, userLine(id, "/src/x", "main", "one more", at))
		deadline := time.Now().Add(10 * time.Second)
		for {
			var found bool
			func() {
				ch.mu.Lock()
				defer ch.mu.Unlock()
				for _, x := range ch.all[pos:] {
					if x.Row.ID == id && x.Row.ModifiedAt.Equal(at) {
						found = true
					}
				}
			}()
			if found {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("append to %s not reported", id)
			}
			select {
			case <-ch.sig:
			case <-time.After(time.Millisecond):
			}
		}
		lats = append(lats, time.Since(start))
		worst = max(worst, c.Stats().BytesRead-read0)
		pos = ch.len()
	}
	slices.Sort(lats)
	b.Logf("append latencies %v", lats)
	return lats[len(lats)/2], worst
}

func appendTo(b *testing.B, path, data string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		b.Fatal(err)
	}
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// procStat returns a /proc/self/status figure in bytes.
func procStat(b *testing.B, key string) int64 {
	n, err := corpus.ProcStatus(key)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
