// Package procbuf holds the output of one process while nobody has stored it: numbered
// chunks in a bounded buffer. A chunk's sequence is the byte offset of its first byte in
// everything the process wrote (stdout and stderr counted together, in the order they were
// read), so a reader that knows how many bytes it has resumes exactly there, and a reader that
// asks for bytes the buffer no longer holds is told where and how many. Chunks are kept as
// they were appended and never merged afterwards: a chunk handed out once keeps its sequence
// and its length, so a consumer that stores chunks by (process, sequence) stores each once
// however often it is handed the same one.
//
// It uses the standard library only, so the sandbox's static supervisor (cmd/execd) can
// import it; the engine keeps the output of processes it runs through docker exec in it too.
package procbuf

import (
	"errors"
	"fmt"
	"sync"
)

// Streams a chunk may come from.
const (
	Stdout byte = 1
	Stderr byte = 2
	PTY    byte = 3 // a terminal's one stream
)

// Chunk is one piece of output: its sequence (the offset of Data[0]), its stream and its bytes.
// Data is never changed once appended; a reader may keep it.
type Chunk struct {
	Seq    int64
	Stream byte
	Data   []byte
}

// End is the sequence after the chunk's last byte.
func (c Chunk) End() int64 { return c.Seq + int64(len(c.Data)) }

// Gap is a range of output the buffer no longer holds: [From, To).
type Gap struct{ From, To int64 }

// ErrBeyondEnd is a read from a sequence past everything written so far.
var ErrBeyondEnd = errors.New("procbuf: the sequence is past the end of the output")

// Buffer is one process's output: everything from First to End that was not dropped, held
// within its limit. Safe for concurrent use.
type Buffer struct {
	mu     sync.Mutex
	limit  int64
	chunks []Chunk
	head   int   // chunks[:head] are dropped, kept until compaction
	first  int64 // the first sequence still held (End when nothing is)
	end    int64
	held   int64
	closed bool
	wake   chan struct{}
}

// New returns an empty buffer that holds at most limit bytes (at least one chunk).
func New(limit int64) *Buffer {
	return &Buffer{limit: max(limit, 1), wake: make(chan struct{})}
}

// Append adds p (copied) as the next chunk and drops the oldest chunks while more than the
// limit is held; it returns how many bytes were dropped. An empty p, or output after Close,
// adds nothing.
func (b *Buffer) Append(stream byte, p []byte) (dropped int64) {
	if len(p) == 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0
	}
	b.chunks = append(b.chunks, Chunk{Seq: b.end, Stream: stream, Data: append([]byte(nil), p...)})
	b.end += int64(len(p))
	b.held += int64(len(p))
	for b.held > b.limit && b.head < len(b.chunks)-1 {
		dropped += b.dropLocked()
	}
	b.signalLocked()
	return dropped
}

// DropOldest drops the oldest chunk held, if any, and returns its size: for a bound shared by
// several buffers.
func (b *Buffer) DropOldest() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.head >= len(b.chunks) {
		return 0
	}
	n := b.dropLocked()
	b.signalLocked()
	return n
}

func (b *Buffer) dropLocked() int64 {
	c := b.chunks[b.head]
	b.chunks[b.head] = Chunk{}
	b.head++
	b.held -= int64(len(c.Data))
	b.first = c.End()
	if b.head > 64 && b.head*2 > len(b.chunks) {
		b.chunks = append([]Chunk(nil), b.chunks[b.head:]...)
		b.head = 0
	}
	return int64(len(c.Data))
}

// Release drops every chunk that ends at or before seq (a consumer stored them) and returns
// how many bytes it dropped.
func (b *Buffer) Release(seq int64) (dropped int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.head < len(b.chunks) && b.chunks[b.head].End() <= seq {
		dropped += b.dropLocked()
	}
	if dropped > 0 {
		b.signalLocked()
	}
	return dropped
}

// Close says the output is complete: nothing more is appended.
func (b *Buffer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		b.signalLocked()
	}
}

func (b *Buffer) signalLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// Changed returns a channel closed at the buffer's next change (an append, a drop, the close).
func (b *Buffer) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wake
}

// State is where the buffer stands.
type State struct {
	First, End int64 // the first sequence held, and the one after the last byte written
	Held       int64 // bytes held
	Closed     bool  // the output is complete
}

// State reports where the buffer stands.
func (b *Buffer) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return State{First: b.first, End: b.end, Held: b.held, Closed: b.closed}
}

// Read returns the output from seq on: a gap first when the buffer no longer holds seq (the
// chunks then start where it holds), then whole chunks, the first trimmed to start at seq and
// the last to keep the total within maxBytes (at least one byte is returned when any is
// held). next is the sequence after what was returned. Reading at End returns nothing; past
// it fails with [ErrBeyondEnd].
func (b *Buffer) Read(seq int64, maxBytes int) (chunks []Chunk, gap *Gap, next int64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq < 0 || seq > b.end {
		return nil, nil, seq, fmt.Errorf("%w: %d, the output ends at %d", ErrBeyondEnd, seq, b.end)
	}
	if seq < b.first {
		gap = &Gap{From: seq, To: b.first}
		seq = b.first
	}
	next = seq
	budget := max(maxBytes, 1)
	i := b.find(seq)
	for ; i < len(b.chunks) && budget > 0; i++ {
		c := b.chunks[i]
		if off := seq - c.Seq; off > 0 {
			c = Chunk{Seq: seq, Stream: c.Stream, Data: c.Data[off:]}
		}
		if len(c.Data) > budget {
			c.Data = c.Data[:budget]
		}
		chunks = append(chunks, c)
		budget -= len(c.Data)
		seq = c.End()
		next = seq
	}
	return chunks, gap, next, nil
}

// find is the index of the held chunk that holds seq (len(chunks) when none does).
func (b *Buffer) find(seq int64) int {
	lo, hi := b.head, len(b.chunks)
	for lo < hi {
		mid := (lo + hi) / 2
		if b.chunks[mid].End() <= seq {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
