package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/client"
	"github.com/ahpd/ahpd/protocol"
)

// BenchmarkSessionsFind measures the server's time to draw the sessions
// list's first page (50 rows) among 10,000 sessions: as the host lists
// them (most recently active first), searched, sorted by title, grouped
// by repository and both, all done by the host before it pages (one
// listing of 50), and filtered by a status, which the dashboard does
// itself (every session read, in the host's pages of 500).
func BenchmarkSessionsFind(b *testing.B) {
	const n = 10_000
	e := newEnv(b, envOptions{})
	root := e.conn("root")
	makeKeptSessions(b, root, n, 20)
	br := e.signIn("root")
	cookies := br.hc.Jar.Cookies(mustURLb(b, e.srv.URL+"/ui/"))
	for _, bc := range []struct{ name, query string }{
		{"first", ""},
		{"search", "?q=folder-07"},
		{"title", "?sort=title"},
		{"grouped", "?group=repo"},
		{"title-grouped", "?sort=title&group=repo"},
		{"status", "?status=idle&sort=title"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/ui/"+bc.query, nil)
			req.Host = strings.TrimPrefix(e.srv.URL, "http://")
			for _, c := range cookies {
				req.AddCookie(c)
			}
			serve := func() *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				e.ui.ServeHTTP(rec, req)
				return rec
			}
			if rec := serve(); rec.Code != http.StatusOK || strings.Count(rec.Body.String(), "<tr data-session=") != 50 {
				b.Fatalf("the page: %d with %d rows", rec.Code, strings.Count(rec.Body.String(), "<tr data-session="))
			}
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				serve()
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// makeKeptSessions makes n script sessions with no turn, kept as they
// are made (as the HTTP API makes them), spread over the given number of
// folders (folder-00, folder-01, …), several at a time.
func makeKeptSessions(b testing.TB, c *client.Client, n, folders int) {
	b.Helper()
	base := b.TempDir()
	dirs := make([]string, folders)
	for i := range dirs {
		dirs[i] = filepath.Join(base, fmt.Sprintf("folder-%02d", i))
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	provider := "script"
	work := make(chan int)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				params := protocol.CreateSessionParams{Channel: fmt.Sprintf("%s:/find-%05d", protocol.SessionScheme, i), Provider: &provider,
					WorkingDirectories: []string{(&url.URL{Scheme: "file", Path: dirs[i%folders]}).String()},
					Meta:               protocol.Object{"ahpd.keep": jsontext.Value("true")}}
				if err := c.Call(ctx, "createSession", params, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
