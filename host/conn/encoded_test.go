package conn

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/creachadair/jrpc2"
)

// TestEncodedResults checks that a result a handler encoded itself is
// sent as it is, alone and in a batch, and that a client's string that
// looks like the token standing in for one is sent back unchanged.
func TestEncodedResults(t *testing.T) {
	t.Parallel()
	const big = `{"items":[{"title":"<a & b>"},{"n":1}],"nextCursor":"c"}`
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := New(context.Background(), Config{Transport: Lines(inR, outW, 1<<20), Stdio: true})
	t.Cleanup(func() {
		_ = inW.Close()
		c.Finish("the test ended")
		<-c.Done()
	})
	c.Start(func(_ *Conn, method string) jrpc2.Handler {
		return func(_ context.Context, req *jrpc2.Request) (any, error) {
			if method == "echo" {
				var s []string
				if err := req.UnmarshalParams(&s); err != nil {
					return nil, err
				}
				return s[0], nil
			}
			return Encoded(big), nil
		}
	})
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	ask := func(req string) string {
		t.Helper()
		if _, err := io.WriteString(inW, req+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to %s: %v", req, lines.Err())
		}
		return lines.Text()
	}
	if got, want := ask(`{"jsonrpc":"2.0","id":1,"method":"list"}`), `{"jsonrpc":"2.0","id":1,"result":`+big+`}`; got != want {
		t.Errorf("the answer is\n%s\nwant\n%s", got, want)
	}
	var batch []struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(ask(`[{"jsonrpc":"2.0","id":2,"method":"list"},{"jsonrpc":"2.0","id":3,"method":"list"}]`)), &batch); err != nil {
		t.Fatal(err)
	}
	if len(batch) != 2 || string(batch[0].Result) != big || string(batch[1].Result) != big {
		t.Errorf("the batch's answers are %+v: want both %s", batch, big)
	}
	fake := "\x00ahpd-encoded:0123:1"
	var echoed struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(ask(`{"jsonrpc":"2.0","id":4,"method":"echo","params":["\u0000ahpd-encoded:0123:1"]}`)), &echoed); err != nil || echoed.Result != fake {
		t.Errorf("a client's look-alike came back as %q (%v)", echoed.Result, err)
	}
}
