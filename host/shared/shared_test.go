package shared

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ahpd/ahpd/cluster"
	"github.com/ahpd/ahpd/host/session"
)

// TestLeasesClaimOneAtATime checks the bookkeeping of leases: a second
// claim of a session waits for the first, a lease is taken back only by
// who holds it, and those taken before a time are listed.
func TestLeasesClaimOneAtATime(t *testing.T) {
	t.Parallel()
	l := newLeases()
	done, busy := l.startClaim("s1")
	if done == nil || busy != nil {
		t.Fatal("the first claim of s1 was not the caller's")
	}
	done2, busy2 := l.startClaim("s1")
	if done2 != nil || busy2 == nil {
		t.Fatal("a second claim of s1 did not wait for the first")
	}
	if other, _ := l.startClaim("s2"); other == nil {
		t.Fatal("a claim of s2 waited for one of s1")
	} else {
		other()
	}
	done()
	select {
	case <-busy2:
	default:
		t.Fatal("the first claim ended and the second was not told")
	}

	now := time.Unix(1000, 0)
	a, b := new(cluster.Lease), new(cluster.Lease)
	l.put("s1", a, now)
	l.put("s2", b, now.Add(time.Minute))
	if got := l.takenBefore(now.Add(time.Second)); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("taken before: %v, want [s1]", got)
	}
	if l.take("s1", b) != nil {
		t.Error("s1's lease was taken back for a lease it is not")
	}
	if l.get("s1") != a {
		t.Error("s1's lease went with a take for another lease")
	}
	if l.take("s1", nil) != a || l.get("s1") != nil {
		t.Error("s1's lease was not taken back")
	}
}

// TestDecodeRecord checks that only records of this version, naming a
// session, are read from the bucket.
func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	enc := func(rec session.Record) []byte {
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	rec, err := session.DecodeRecord(enc(session.Record{AHPD: session.RecordVersion, URI: "ahp-session:/abc"}))
	if err != nil || idOf(rec.URI) != "abc" {
		t.Fatalf("a record of this version: %v, %v", rec, err)
	}
	for name, data := range map[string][]byte{
		"another version": enc(session.Record{AHPD: session.RecordVersion + 1, URI: "ahp-session:/abc"}),
		"no session":      enc(session.Record{AHPD: session.RecordVersion, URI: "nothing"}),
		"not JSON":        []byte("{"),
	} {
		if _, err := session.DecodeRecord(data); err == nil {
			t.Errorf("%s was read as a record", name)
		}
	}
}
