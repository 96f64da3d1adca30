package catalogue

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// backNL hands out the newlines bytes.LastIndexByte would find, walking
// a window backward as the tail does, the window growing down midway.
func TestBackNL(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		buf := make([]byte, r.IntN(3*nlBlock))
		for i := range buf {
			if r.IntN([]int{3, 80, 5000}[round%3]) == 0 {
				buf[i] = '\n'
			} else {
				buf[i] = 'x'
			}
		}
		var found [4]int
		nl := backNL{buf: buf, lo: len(buf), nls: found[:0]}
		from := len(buf) / 2 // the first read's window
		end := len(buf)
	walk:
		for {
			want := bytes.LastIndexByte(buf[from:end], '\n')
			if want >= 0 {
				want += from
			}
			got := nl.last(from, end)
			if got != want {
				t.Fatalf("round %d: last(%d, %d) = %d, want %d", round, from, end, got, want)
			}
			switch {
			case got >= 0:
				end = got
			case from > 0:
				from = 0 // the window grows to the file's start
			default:
				break walk
			}
		}
	}
}
