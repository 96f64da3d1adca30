package agentproc_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/ahpd/ahpd/plugins/agentproc"
)

func TestMain(m *testing.M) {
	// Every process a test starts is reaped and every reader stops.
	goleak.VerifyTestMain(m)
}

func TestTail(t *testing.T) {
	b := agentproc.NewTail(10)
	b.Write([]byte("hello"))
	if out, cut := b.Output(); string(out) != "hello" || cut {
		t.Errorf("Output() = %q, %v", out, cut)
	}
	for range 1000 {
		b.Write([]byte("0123456789"))
	}
	b.Write([]byte("abcdéf")) // é is two bytes
	out, cut := b.Output()
	if string(out) != "789abcdéf" || !cut {
		t.Errorf("Output() = %q, %v", out, cut)
	}
	// Cutting through é skips what is left of it.
	if got := string(b.Last(2)); got != "f" {
		t.Errorf("Last(2) = %q, want %q", got, "f")
	}
	if got := string(b.Last(0)); got != "" {
		t.Errorf("Last(0) = %q", got)
	}
}

func TestTailString(t *testing.T) {
	b := agentproc.NewTail(8)
	b.Write([]byte("hello, "))
	b.Write([]byte("wörld"))
	b.Write([]byte{})
	// The last 8 bytes, ö being two.
	if got := b.String(); got != ", wörld" {
		t.Errorf("String() = %q", got)
	}
	// Bytes that are no UTF-8 are dropped wherever they are.
	b = agentproc.NewTail(100)
	b.Write([]byte("a\xffb"))
	if got := b.String(); got != "ab" {
		t.Errorf("String() = %q, want %q", got, "ab")
	}
}

func TestTailZeroLimit(t *testing.T) {
	b := agentproc.NewTail(-1)
	for range 100 {
		b.Write([]byte("0123456789"))
	}
	if out, cut := b.Output(); len(out) != 0 || !cut {
		t.Errorf("Output() = %q, %v; want nothing, cut", out, cut)
	}
}
