package retries

import (
	"fmt"
	"testing"
)

func TestClaim(t *testing.T) {
	type step struct {
		op     string // claim, release, mark
		client string
		seq    int64
		action string
		token  int
		want   Verdict
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"a first send is fresh, the same again a repeat", []step{
			{op: "claim", client: "c", seq: 1, action: "a", token: 1, want: Fresh},
			{op: "claim", client: "c", seq: 1, action: "a", token: 2, want: Repeat},
		}},
		{"another action with a taken clientSeq is reused", []step{
			{op: "claim", client: "c", seq: 1, action: "a", token: 1, want: Fresh},
			{op: "claim", client: "c", seq: 1, action: "b", token: 2, want: Reused},
		}},
		{"clientSeq 0 is never kept", []step{
			{op: "claim", client: "c", seq: 0, action: "a", token: 1, want: Fresh},
			{op: "claim", client: "c", seq: 0, action: "a", token: 2, want: Fresh},
		}},
		{"no client id is never kept", []step{
			{op: "claim", client: "", seq: 3, action: "a", token: 1, want: Fresh},
			{op: "claim", client: "", seq: 3, action: "a", token: 2, want: Fresh},
		}},
		{"clients are apart", []step{
			{op: "claim", client: "c", seq: 1, action: "a", token: 1, want: Fresh},
			{op: "claim", client: "d", seq: 1, action: "a", token: 2, want: Fresh},
		}},
		{"a refused claim can be made again", []step{
			{op: "claim", client: "c", seq: 1, action: "a", token: 1, want: Fresh},
			{op: "release", client: "c", seq: 1, token: 1},
			{op: "claim", client: "c", seq: 1, action: "b", token: 2, want: Fresh},
			{op: "claim", client: "c", seq: 1, action: "b", token: 3, want: Repeat},
		}},
		{"only the claim's own dispatch lets it go", []step{
			{op: "claim", client: "c", seq: 1, action: "a", token: 1, want: Fresh},
			{op: "release", client: "c", seq: 1, token: 2},
			{op: "claim", client: "c", seq: 1, action: "a", token: 3, want: Repeat},
		}},
		{"marked from the journal: any send again is a repeat", []step{
			{op: "mark", client: "c", seq: 7},
			{op: "claim", client: "c", seq: 7, action: "x", token: 1, want: Repeat},
			{op: "release", client: "c", seq: 7, token: 1},
			{op: "claim", client: "c", seq: 7, action: "y", token: 2, want: Repeat},
		}},
		{"a mark leaves a claim as it is", []step{
			{op: "claim", client: "c", seq: 7, action: "x", token: 1, want: Fresh},
			{op: "mark", client: "c", seq: 7},
			{op: "claim", client: "c", seq: 7, action: "y", token: 2, want: Reused},
		}},
		{"a mark takes a released claim", []step{
			{op: "claim", client: "c", seq: 7, action: "x", token: 1, want: Fresh},
			{op: "release", client: "c", seq: 7, token: 1},
			{op: "mark", client: "c", seq: 7},
			{op: "claim", client: "c", seq: 7, action: "y", token: 2, want: Repeat},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := New()
			for _, c := range []string{"c", "d"} {
				tb.Begin(c, 1, 0)
			}
			tokens := map[int]*int{}
			tok := func(n int) Token {
				if tokens[n] == nil {
					tokens[n] = new(n)
				}
				return tokens[n]
			}
			for i, s := range tc.steps {
				switch s.op {
				case "claim":
					if got := tb.Claim(s.client, 1, s.seq, tb.Digest("ch", []byte(s.action)), tok(s.token)); got != s.want {
						t.Fatalf("step %d: Claim(%q, %d, %q) = %v, want %v", i, s.client, s.seq, s.action, got, s.want)
					}
				case "release":
					tb.Release(s.client, s.seq, tok(s.token))
				case "mark":
					tb.Mark(s.client, 0, s.seq, 1)
				}
			}
		})
	}
}

func TestDigestSeesTheChannel(t *testing.T) {
	tb := New()
	if tb.Digest("a", []byte("x")) == tb.Digest("b", []byte("x")) {
		t.Fatal("the same action on two channels has one digest")
	}
	first, again := tb.Digest("a", []byte("x")), tb.Digest("a", []byte("x"))
	if first != again {
		t.Fatal("one action has two digests")
	}
}

func TestBoundPerClient(t *testing.T) {
	tb := New()
	for seq := int64(1); seq <= PerClient+100; seq++ {
		if v := tb.Claim("c", 1, seq, tb.Digest("ch", []byte(fmt.Sprint(seq))), new(0)); v != Fresh {
			t.Fatalf("clientSeq %d: %v", seq, v)
		}
	}
	if n := tb.Taken("c", 1); n != PerClient {
		t.Fatalf("kept %d clientSeqs, want %d", n, PerClient)
	}
	// The newest are kept, the oldest forgotten.
	if v := tb.Claim("c", 1, PerClient+100, tb.Digest("ch", []byte(fmt.Sprint(PerClient+100))), new(0)); v != Repeat {
		t.Fatalf("the newest: %v", v)
	}
	if v := tb.Claim("c", 1, 1, tb.Digest("ch", []byte("1")), new(0)); v != Fresh {
		t.Fatalf("the oldest, forgotten: %v", v)
	}
	// A claim let go and made again keeps one place: the bound holds.
	for range 3 * PerClient {
		tok := new(0)
		tb.Claim("d", 1, 5, 9, tok)
		tb.Release("d", 5, tok)
	}
	tb.Claim("d", 1, 6, 9, new(0))
	if v := tb.Claim("d", 1, 6, 9, new(0)); v != Repeat {
		t.Fatalf("after many claims let go, another: %v", v)
	}
	// Numberings past the bound forget the oldest.
	for id := uint64(2); id <= Numberings+2; id++ {
		tb.Begin("c", id, 0)
	}
	if tb.Taken("c", 1) != 0 {
		t.Fatal("the oldest numbering was kept past the bound")
	}
}

func TestForget(t *testing.T) {
	tb := New()
	for _, c := range []string{"keep", "drop"} {
		tb.Begin(c, 1, 0)
		tb.Mark(c, 0, 1, 1)
	}
	tb.Forget(func(id string) bool { return id == "keep" })
	if tb.Taken("keep", 1) != 1 || tb.Taken("drop", 1) != 0 {
		t.Fatalf("kept %d and %d", tb.Taken("keep", 1), tb.Taken("drop", 1))
	}
}

func TestRanges(t *testing.T) {
	tb := New()
	tb.Begin("c", 1, 0)
	for _, seq := range []int64{3, 1, 2, 7, 9, 8, 12} {
		tb.Mark("c", 1, seq, 1)
	}
	tok := new(0)
	tb.Claim("c", 1, 20, 5, tok)
	tb.Release("c", 20, tok) // refused: not taken
	got := tb.Ranges("c", 1)
	want := [][2]int64{{1, 3}, {7, 9}, {12, 12}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Ranges = %v, want %v", got, want)
	}
	again := New()
	again.Resume("c", 1, 0, got)
	if fmt.Sprint(again.Ranges("c", 1)) != fmt.Sprint(want) {
		t.Fatalf("read back: %v, want %v", again.Ranges("c", 1), want)
	}
	// A run longer than the bound keeps its newest.
	big := New()
	big.Resume("c", 1, 0, [][2]int64{{1, 5}, {10, 10 + 2*PerClient}})
	if r := big.Ranges("c", 1); len(r) != 1 || r[0][1] != 10+2*PerClient || r[0][1]-r[0][0]+1 != PerClient {
		t.Fatalf("a long run read back as %v", r)
	}
}

// TestNumberings: each initialize begins a numbering of its own, so a
// client numbering anew, or two connections of one client id side by
// side, take the same clientSeqs apart; the journal's actions read before
// the client's numbering is known wait for it, and those at or below its
// since are another numbering's.
func TestNumberings(t *testing.T) {
	tb := New()
	tb.Begin("c", 1, 0)
	tb.Claim("c", 1, 1, 7, new(0))
	tb.Begin("c", 2, 100) // initialized again
	if v := tb.Claim("c", 2, 1, 8, new(0)); v != Fresh {
		t.Fatalf("clientSeq 1 after initialize: %v, want fresh", v)
	}
	if v := tb.Claim("c", 1, 1, 7, new(0)); v != Repeat {
		t.Fatalf("clientSeq 1 sent again on the first connection: %v, want repeat", v)
	}

	read := New()
	read.Mark("c", 0, 1, 50)  // of the numbering before the one at 100
	read.Mark("c", 0, 2, 150) // of the numbering since 100
	read.Resume("c", 7, 100, [][2]int64{{3, 3}})
	read.Mark("c", 0, 4, 90)  // read after: an older numbering's too
	read.Mark("c", 0, 5, 160) // and one of its own
	for seq, want := range map[int64]Verdict{1: Fresh, 2: Repeat, 3: Repeat, 4: Fresh, 5: Repeat} {
		if v := read.Claim("c", 7, seq, 9, new(0)); v != want {
			t.Errorf("clientSeq %d: %v, want %v", seq, v, want)
		}
	}
	// Marks read before an initialize are of the numberings before it.
	read.Mark("d", 0, 1, 500)
	read.Begin("d", 1, 400)
	if v := read.Claim("d", 1, 1, 9, new(0)); v != Fresh {
		t.Errorf("a mark read before the initialize: %v, want fresh", v)
	}
}

// BenchmarkClaim is what taking an action once costs each client action:
// its digest (a 200-byte action) and its claim, one client numbering on.
func BenchmarkClaim(b *testing.B) {
	tb := New()
	tb.Begin("c", 1, 0)
	action := make([]byte, 200)
	seq := int64(0)
	for b.Loop() {
		seq++
		if tb.Claim("c", 1, seq, tb.Digest("ahp-chat://default/c2Vzc2lvbg", action), seq) != Fresh {
			b.Fatal("not fresh")
		}
	}
}
