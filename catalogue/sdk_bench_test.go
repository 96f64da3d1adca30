//go:build linux

package catalogue

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkVersusSDK lists the benchmark corpus (10,000 transcripts) with
// the catalogue and with the Claude Agent SDK's listSessions(), in one
// run, interleaved, with the page cache dropped before each cold run, and
// prints for each: time (min/median/max), bytes read (rchar, and
// read_bytes: what came from the disk), rows, and the titles found. The
// catalogue is timed with no index to its first page (Open to FirstPage:
// a daemon's first page of 500, the newest rows) and to the whole scan
// (Open to Ready), and with an index saved by an earlier start to its
// first page; the SDK as a person would run it, in node, listing
// everything (listSessions(), which the figures compare with), and its
// first page alone (listSessions({limit: 500}), which stats every file
// and reads the newest first, as the catalogue's first page does).
//
// It needs node and npm (the SDK is installed at run time into
// $AHPD_SDK_CACHE, by default the user cache folder, never into the
// repository) and root (to drop the page cache), and it writes the corpus
// first if it is not cached (~3.5 GB under the temp folder). It runs only
// when asked:
//
//	AHPD_SDK_BENCH=1 go test ./catalogue -run XXX -bench VersusSDK -benchtime 1x
//
// AHPD_SDK_ROUNDS sets the rounds (default 3), AHPD_SDK_VERSION the SDK
// version (default 0.3.332).
func BenchmarkVersusSDK(b *testing.B) {
	if os.Getenv("AHPD_SDK_BENCH") == "" {
		b.Skip("set AHPD_SDK_BENCH=1 to compare with the Agent SDK (minutes, needs node, npm and root)")
	}
	rounds := 3
	if s := os.Getenv("AHPD_SDK_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("AHPD_SDK_ROUNDS=%q", s)
		}
		rounds = n
	}
	projects, size := benchCorpus(b)
	sdk := installSDK(b)
	index := filepath.Join(b.TempDir(), "catalogue-index.json")
	rowsOut := filepath.Join(b.TempDir(), "sdk-rows.jsonl")

	// The index a daemon would have saved at its last start.
	c := Open(Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
	<-c.Ready()
	must(b, c.Close())

	var ahpdRows []Row
	runs := map[string][]run{}
	for b.Loop() {
		for range rounds {
			for _, cold := range []bool{true, false} {
				temp := "warm"
				if cold {
					temp = "cold"
				}
				if cold {
					dropCaches(b)
				} else {
					// The cold runs dropped each other's pages: bring the
					// windows all of them read back in, untimed.
					ahpdRun(b, Config{Roots: claudeAt(projects), RescanInterval: -1})
				}
				page, whole, rows := ahpdRun(b, Config{Roots: claudeAt(projects), RescanInterval: -1})
				runs["page "+temp] = append(runs["page "+temp], page)
				runs["scan "+temp] = append(runs["scan "+temp], whole)
				ahpdRows = rows
				if cold {
					dropCaches(b)
				}
				runs["SDK "+temp] = append(runs["SDK "+temp], sdkRun(b, sdk, filepath.Dir(projects), rowsOut, 0))
				if cold {
					dropCaches(b)
				}
				page, _, _ = ahpdRun(b, Config{Roots: claudeAt(projects), RescanInterval: -1, IndexPath: index})
				runs["start "+temp] = append(runs["start "+temp], page)
				if cold {
					dropCaches(b)
				}
				runs["SDK page "+temp] = append(runs["SDK page "+temp], sdkRun(b, sdk, filepath.Dir(projects), "", defaultFirstPage))
			}
		}
	}

	fmt.Printf("\n%d transcripts, %.2f GB; %d rounds, each: cold page and scan, cold SDK, cold start, cold SDK page, then warm; load %s\n",
		len(ahpdRows), float64(size)/1e9, rounds, loadAvg())
	fmt.Printf("%-14s %28s %10s %10s %6s %7s\n", "", "time min/median/max", "rchar", "read_bytes", "rows", "titles")
	for _, temp := range []string{"cold", "warm"} {
		for _, what := range []string{"page", "scan", "start", "SDK", "SDK page"} {
			rs := runs[what+" "+temp]
			fmt.Printf("%-14s %28s %8.0fMB %8.0fMB %6d %7d\n", what+" "+temp, spread(rs),
				float64(median(rs, func(r run) float64 { return float64(r.rchar) }))/1e6,
				float64(median(rs, func(r run) float64 { return float64(r.readBytes) }))/1e6,
				rs[len(rs)-1].rows, rs[len(rs)-1].titles)
		}
	}
	for _, temp := range []string{"cold", "warm"} {
		sdkT := median(runs["SDK "+temp], runTime)
		for _, what := range []string{"page", "scan", "start"} {
			ratio := sdkT / median(runs[what+" "+temp], runTime)
			fmt.Printf("SDK / %s %s: %.1fx\n", what, temp, ratio)
			b.ReportMetric(ratio, "x-"+what+"-"+temp)
		}
		ratio := median(runs["SDK page "+temp], runTime) / median(runs["page "+temp], runTime)
		fmt.Printf("SDK page / page %s: %.1fx\n", temp, ratio)
		b.ReportMetric(ratio, "x-sdkpage-"+temp)
	}
	compareTitles(b, ahpdRows, rowsOut)
}

// run is one timed listing.
type run struct {
	d                time.Duration
	rchar, readBytes int64
	rows, titles     int
}

func runTime(r run) float64 { return r.d.Seconds() }

func median(rs []run, f func(run) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func spread(rs []run) string {
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = r.d
	}
	slices.Sort(v)
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return r(v[0]) + " / " + r(v[len(v)/2]) + " / " + r(v[len(v)-1])
}

// ahpdRun opens a catalogue and times it to its first page and to its
// whole first scan; it checks that the first page is the whole scan's.
func ahpdRun(b *testing.B, cfg Config) (page, whole run, rows []Row) {
	io0 := procIO(b, "self")
	start := time.Now()
	c := Open(cfg)
	<-c.FirstPage()
	page.d = time.Since(start)
	io1 := procIO(b, "self")
	first := c.Rows()
	<-c.Ready()
	whole.d = time.Since(start)
	io2 := procIO(b, "self")
	rows = c.Rows()
	must(b, c.Close())
	titled := func(rows []Row) int {
		n := 0
		for i := range rows {
			if rows[i].Title != "" {
				n++
			}
		}
		return n
	}
	n := min(defaultFirstPage, len(rows))
	if len(first) < n || !slices.Equal(first[:n], rows[:n]) {
		b.Errorf("the first page (%d rows) is not the whole scan's first %d", len(first), n)
	}
	page = run{d: page.d, rchar: io1["rchar"] - io0["rchar"], readBytes: io1["read_bytes"] - io0["read_bytes"],
		rows: len(first), titles: titled(first)}
	whole = run{d: whole.d, rchar: io2["rchar"] - io0["rchar"], readBytes: io2["read_bytes"] - io0["read_bytes"],
		rows: len(rows), titles: titled(rows)}
	return page, whole, rows
}

// sdkRun runs testdata/sdklist.mjs on the corpus, listing limit rows (0:
// all of them), their rows written to rowsOut unless it is "".
func sdkRun(b *testing.B, sdk, configDir, rowsOut string, limit int) run {
	script, err := filepath.Abs(filepath.Join("testdata", "sdklist.mjs"))
	must(b, err)
	cmd := exec.Command("node", script, sdk, rowsOut, strconv.Itoa(limit))
	cmd.Env = append(os.Environ(), "CLAUDE_CONFIG_DIR="+configDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("node sdklist.mjs: %v: %s", err, stderr.String())
	}
	var res struct {
		Ms               float64
		Rows, Titles     int
		Rchar, ReadBytes int64
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("node sdklist.mjs printed %q: %v", out, err)
	}
	return run{d: time.Duration(res.Ms * float64(time.Millisecond)), rchar: res.Rchar, readBytes: res.ReadBytes,
		rows: res.Rows, titles: res.Titles}
}

// compareTitles prints how many of the titles the SDK found the catalogue
// found too, the same, and how many display titles agree.
func compareTitles(b *testing.B, rows []Row, sdkRows string) {
	f, err := os.Open(sdkRows)
	must(b, err)
	defer f.Close()
	mine := map[string]*Row{}
	for i := range rows {
		mine[rows[i].ID] = &rows[i]
	}
	var sdkTitles, same, display, missing, sdkN int
	var differ []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ ID, Title, Display string }
		must(b, json.Unmarshal(sc.Bytes(), &r))
		sdkN++
		m := mine[r.ID]
		if m == nil {
			missing++
			continue
		}
		if m.DisplayTitle() == r.Display {
			display++
		}
		if r.Title == "" {
			continue
		}
		sdkTitles++
		if m.Title == r.Title {
			same++
		} else if len(differ) < 5 {
			differ = append(differ, fmt.Sprintf("%s: SDK %q, ahpd %q", r.ID, r.Title, m.Title))
		}
	}
	must(b, sc.Err())
	fmt.Printf("titles: the SDK found %d; ahpd found the same %d (%d missed); display titles agree on %d of %d rows; %d SDK rows have no ahpd row\n",
		sdkTitles, same, sdkTitles-same, display, sdkN, missing)
	for _, d := range differ {
		fmt.Println("  differs:", d)
	}
	if same != sdkTitles {
		b.Errorf("ahpd missed %d of the SDK's %d titles", sdkTitles-same, sdkTitles)
	}
}

// installSDK installs the Agent SDK into a cache folder, once, and returns
// its sdk.mjs.
func installSDK(b *testing.B) string {
	version := os.Getenv("AHPD_SDK_VERSION")
	if version == "" {
		version = "0.3.332"
	}
	cache := os.Getenv("AHPD_SDK_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		must(b, err)
		cache = filepath.Join(dir, "ahpd-bench")
	}
	prefix := filepath.Join(cache, "agent-sdk-"+version)
	sdk := filepath.Join(prefix, "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.mjs")
	if _, err := os.Stat(sdk); err == nil {
		return sdk
	}
	// The native CLI binaries are optional dependencies listSessions()
	// does not use.
	cmd := exec.Command("npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--ignore-scripts",
		"--omit=optional", "--no-save", "@anthropic-ai/claude-agent-sdk@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("npm install: %v: %s", err, out)
	}
	if _, err := os.Stat(sdk); err != nil {
		b.Fatalf("the SDK installed without sdk.mjs: %v", err)
	}
	return sdk
}

// dropCaches empties the page cache, as after a reboot.
func dropCaches(b *testing.B) {
	if err := exec.Command("sync").Run(); err != nil {
		b.Fatalf("sync: %v", err)
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		b.Fatalf("dropping the page cache (needs root): %v", err)
	}
}

// procIO returns /proc/<pid>/io's counters.
func procIO(b *testing.B, pid string) map[string]int64 {
	data, err := os.ReadFile("/proc/" + pid + "/io")
	must(b, err)
	out := map[string]int64{}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}
