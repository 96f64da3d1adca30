package journal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An entry larger than the server's maximum payload is written as
// several messages, its chunks, in order, each with the headers below.
// All but the last go on the session's part subject (<subject>.part); the
// last goes on the session's subject, where a whole entry goes, so that
// the session's subject holds one message per entry, each one complete:
// counts, the newest entry and the newest sequence read it as they read
// entries of one message. The entry's Seq is its last chunk's sequence:
// reading on after it never starts inside an entry.
//
// The last chunk names the sequence of the first, so a reader can find
// an entry's chunks from its last alone: Read reads the sessions'
// subjects only and reads each chunked entry back over its span on their
// own (chunkedEntry), and a follower (which takes both subjects) that
// starts inside an entry goes back for the chunks it did not see. The writer learns that
// sequence from the first chunk's ack, which it waits for before it sends
// the rest.
//
// A run of chunks without its last (the writer died midway) is no entry:
// readers skip it, and a later budget trim purges it with the entries
// around it.
const (
	// hdrChunk is "i/n": the message is chunk i, from 0, of n.
	hdrChunk = "Ahpd-Chunk"
	// hdrChunkID is the same random token on every chunk of one entry,
	// so that chunks of two runs are never taken for one.
	hdrChunkID = "Ahpd-Chunk-Id"
	// hdrEntrySize is the whole entry's size in bytes, on every chunk.
	hdrEntrySize = "Ahpd-Entry-Size"
	// hdrChunkFirst is the stream sequence of chunk 0, on the last chunk.
	hdrChunkFirst = "Ahpd-Chunk-First"

	// partSuffix ends the subject of a session's chunks but the last.
	partSuffix = ".part"
	// chunkHeaderRoom is what a chunk keeps of a message for its headers
	// (they take under 200 bytes).
	chunkHeaderRoom = 1024
	// minPayload is the least maximum payload the journal works with.
	minPayload = 8 << 10
)

// partSubject is where the session's chunks but the last go.
func (j *Journal) partSubject(session string) string {
	return j.subject(session) + partSuffix
}

// chunkInfo is what a chunk's headers say.
type chunkInfo struct {
	index, count int
	id           string
	size         int
	first        uint64 // on the last chunk: chunk 0's sequence
}

// chunkOf reads a message's chunk headers; ok is false for a message
// that is a whole entry (no chunk headers).
func chunkOf(h nats.Header) (info chunkInfo, ok bool, err error) {
	v := h.Get(hdrChunk)
	if v == "" {
		return info, false, nil
	}
	i, n, found := strings.Cut(v, "/")
	if !found {
		return info, true, fmt.Errorf("journal: chunk header %.40q", v)
	}
	if info.index, err = strconv.Atoi(i); err != nil {
		return info, true, fmt.Errorf("journal: chunk header: %w", err)
	}
	if info.count, err = strconv.Atoi(n); err != nil {
		return info, true, fmt.Errorf("journal: chunk header: %w", err)
	}
	if info.size, err = strconv.Atoi(h.Get(hdrEntrySize)); err != nil {
		return info, true, fmt.Errorf("journal: chunk size header: %w", err)
	}
	if info.index < 0 || info.count < 2 || info.index >= info.count || info.size < 0 {
		return info, true, fmt.Errorf("journal: chunk %d of %d of an entry of %d bytes", info.index, info.count, info.size)
	}
	info.id = h.Get(hdrChunkID)
	if info.index == info.count-1 {
		if info.first, err = strconv.ParseUint(h.Get(hdrChunkFirst), 10, 64); err != nil {
			return info, true, fmt.Errorf("journal: first chunk header: %w", err)
		}
	}
	return info, true, nil
}

// chunkHeader is the headers of chunk index of count of an entry of size
// bytes; first is chunk 0's sequence, set on the last chunk only.
func chunkHeader(index, count int, id string, size int, first uint64) nats.Header {
	h := nats.Header{}
	h.Set(hdrChunk, strconv.Itoa(index)+"/"+strconv.Itoa(count))
	h.Set(hdrChunkID, id)
	h.Set(hdrEntrySize, strconv.Itoa(size))
	if index == count-1 {
		h.Set(hdrChunkFirst, strconv.FormatUint(first, 10))
	}
	return h
}

// chunkID is a fresh token for one entry's chunks.
func chunkID() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}

// publishChunks sends an entry as chunks of at most j.chunkData bytes:
// the first, waiting for its ack to learn its sequence, then the others,
// without waiting; the last one names the first's sequence. The caller
// holds the session's order. It returns the futures of the chunks after
// the first, the last one's last.
func (j *Journal) publishChunks(ctx context.Context, session string, st *sessionState, e []byte, full <-chan struct{}) ([]jetstream.PubAckFuture, bool, error) {
	count := (len(e) + j.chunkData - 1) / j.chunkData
	id := chunkID()
	part := j.partSubject(session)
	chunk := func(i int) []byte { return e[i*j.chunkData : min((i+1)*j.chunkData, len(e))] }
	first, _ := j.fenced(session, st, &nats.Msg{Subject: part, Header: chunkHeader(0, count, id, len(e), 0), Data: chunk(0)})
	f, err := j.js.PublishMsgAsync(first, jetstream.WithStallWait(ackTimeout))
	if err != nil {
		return nil, false, err
	}
	ack, err := j.await(ctx, f, full)
	if err != nil {
		return nil, false, err
	}
	futures := make([]jetstream.PubAckFuture, 0, count-1)
	for i := 1; i < count; i++ {
		m := &nats.Msg{Subject: part, Header: chunkHeader(i, count, id, len(e), ack.Sequence), Data: chunk(i)}
		if i == count-1 {
			m.Subject = j.subject(session)
		}
		f, more, err := j.send(ctx, session, st, m, full)
		if err != nil {
			return futures, false, err
		}
		futures = append(futures, f)
		if !more {
			return futures, false, nil
		}
	}
	return futures, true, nil
}

// await waits for one publish's ack. It ends with ErrNoSpace when the
// server says it has no room, or when full closes (a write of the
// embedded server's store failed for lack of space, after which the
// server answers none); an ack already there is taken first.
func (j *Journal) await(ctx context.Context, f jetstream.PubAckFuture, full <-chan struct{}) (*jetstream.PubAck, error) {
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		if isNoSpace(err) && !errors.Is(err, ErrNoSpace) {
			return nil, fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		return nil, fenceError(err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-full:
		select {
		case ack := <-f.Ok():
			return ack, nil
		default:
			return nil, fmt.Errorf("%w: a write of the store failed for lack of space", ErrNoSpace)
		}
	}
}

// publishOne sends one small message of the journal's own (a mark, a
// floor record) and waits for its ack: not held to the free-space floor,
// which keeps room for such writes, but failing as an append does when
// the disk is full.
func (j *Journal) publishOne(ctx context.Context, subject string, data []byte) (*jetstream.PubAck, error) {
	full, err := j.room(ctx, int64(len(data))+messageOverhead, noFloor)
	if err != nil {
		return nil, err
	}
	f, err := j.js.PublishAsync(subject, data, jetstream.WithStallWait(ackTimeout))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	return j.await(ctx, f, full)
}

// assembler puts entries back together from the messages of one or more
// sessions as a reader gets them, in stream order.
type assembler struct {
	max  int             // the largest entry taken
	runs map[string]*run // the open run of chunks, by the session's subject
}

// run is the chunks of one entry taken so far.
type run struct {
	info  chunkInfo // chunk 0's
	first uint64    // chunk 0's sequence
	next  int       // the index of the next chunk
	data  []byte
}

func newAssembler(maxEntry int) *assembler {
	return &assembler{max: maxEntry, runs: map[string]*run{}}
}

// add takes one message (subject, seq, headers, data). It returns the
// data of the entry the message completes, if any. missing is set when
// the message is an entry's last chunk and the chunks before it were not
// all seen: they are before the reader's start, or gone; the caller may
// fetch them (refetch) and add the message again. The subject returned
// is the session's entry subject.
func (a *assembler) add(subject string, seq uint64, h nats.Header, data []byte) (entry []byte, missing *chunkInfo, err error) {
	main, isPart := strings.CutSuffix(subject, partSuffix)
	info, chunked, err := chunkOf(h)
	if err != nil {
		// A message the journal did not write as a chunk: not an entry.
		a.drop(main)
		if isPart {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if !isPart {
		if !chunked {
			// A whole entry; a run still open before it was cut short.
			a.drop(main)
			return data, nil, nil
		}
		r := a.runs[main]
		a.drop(main)
		if r == nil || r.info.id != info.id || r.info.count != info.count || r.next != info.index || r.first != info.first || r.info.size != info.size || len(r.data)+len(data) != info.size {
			return nil, &info, nil
		}
		return append(r.data, data...), nil, nil
	}
	if !chunked {
		a.drop(main)
		return nil, nil, nil
	}
	if info.index == 0 {
		a.drop(main)
		if info.size > a.max {
			return nil, nil, fmt.Errorf("%w: a chunked entry of %d bytes, at most %d read", ErrEntryTooLarge, info.size, a.max)
		}
		r := &run{info: info, first: seq, next: 1, data: make([]byte, 0, info.size)}
		r.data = append(r.data, data...)
		a.runs[main] = r
		return nil, nil, nil
	}
	r := a.runs[main]
	if r == nil || r.info.id != info.id || r.info.count != info.count || r.next != info.index || info.index >= info.count-1 || len(r.data)+len(data) > r.info.size {
		// Not the chunk the open run needs next: neither is an entry.
		a.drop(main)
		return nil, nil, nil
	}
	r.data = append(r.data, data...)
	r.next++
	return nil, nil, nil
}

// drop forgets the session's open run.
func (a *assembler) drop(main string) {
	delete(a.runs, main)
}

// chunkedEntry reads back the entry whose last chunk, on the session's
// subject main at sequence last, says info: both of the session's
// subjects from the entry's first chunk to its last, in stream order,
// through an assembler, as a follower takes them, so that Read and Follow
// agree on what is an entry. It returns nil when the entry is not whole
// (chunks gone, or another run's cutting into it).
func (j *Journal) chunkedEntry(ctx context.Context, main string, info chunkInfo, last uint64) ([]byte, error) {
	if info.size > j.maxEntry {
		return nil, fmt.Errorf("%w: a chunked entry of %d bytes, at most %d read", ErrEntryTooLarge, info.size, j.maxEntry)
	}
	if info.first == 0 || info.first >= last {
		return nil, nil
	}
	a := newAssembler(j.maxEntry)
	var entry []byte
	sp := scanSpec{subjects: []string{main, main + partSuffix}, ends: []string{main}, after: info.first - 1, end: last, want: info.count}
	err := j.scan(ctx, sp, func(d *delivery) (int, error) {
		if d.seq > last {
			return 0, nil
		}
		data, _, err := a.add(d.subject, d.seq, d.header, d.data)
		if err != nil {
			return 0, err
		}
		if d.seq == last {
			entry = data
			return 0, nil
		}
		return info.count, nil
	})
	return entry, err
}
