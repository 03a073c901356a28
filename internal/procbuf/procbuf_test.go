package procbuf

import (
	"bytes"
	"errors"
	"testing"
)

// collect reads everything from seq on, a maxBytes at a time, checking that every read
// starts where the previous ended.
func collect(t *testing.T, b *Buffer, seq int64, maxBytes int) ([]byte, *Gap) {
	t.Helper()
	var out []byte
	var first *Gap
	for {
		chunks, gap, next, err := b.Read(seq, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if gap != nil {
			if first != nil || len(out) > 0 {
				t.Fatalf("a gap %+v after data", gap)
			}
			first = gap
			seq = gap.To
		}
		for _, c := range chunks {
			if c.Seq != seq {
				t.Fatalf("chunk at %d, want %d", c.Seq, seq)
			}
			out = append(out, c.Data...)
			seq = c.End()
		}
		if next != seq {
			t.Fatalf("next %d, want %d", next, seq)
		}
		if len(chunks) == 0 {
			return out, first
		}
	}
}

func TestReadFromAnySequence(t *testing.T) {
	b := New(1 << 20)
	var all []byte
	for i := range 100 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*7)
		b.Append(Stdout, p)
		all = append(all, p...)
	}
	for _, seq := range []int64{0, 1, 500, int64(len(all)) - 1, int64(len(all))} {
		for _, max := range []int{1, 7, 1000, 1 << 20} {
			got, gap := collect(t, b, seq, max)
			if gap != nil || !bytes.Equal(got, all[seq:]) {
				t.Fatalf("from %d by %d: %d bytes, gap %v; want %d", seq, max, len(got), gap, len(all)-int(seq))
			}
		}
	}
	if _, _, _, err := b.Read(int64(len(all))+1, 10); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("a read past the end: %v", err)
	}
}

// Over its limit the buffer drops its oldest chunks, whole, and a reader from before them is
// told the range it lost.
func TestOverTheLimitTheOldestGoWithAGap(t *testing.T) {
	b := New(100)
	for i := range 10 {
		if dropped := b.Append(Stderr, bytes.Repeat([]byte{byte('0' + i)}, 30)); (i >= 3) != (dropped > 0) {
			t.Fatalf("append %d dropped %d", i, dropped)
		}
	}
	st := b.State()
	if st.End != 300 || st.First != 210 || st.Held != 90 {
		t.Fatalf("state %+v", st)
	}
	got, gap := collect(t, b, 0, 1000)
	if gap == nil || *gap != (Gap{From: 0, To: 210}) || len(got) != 90 || got[0] != '7' {
		t.Fatalf("gap %v, %q", gap, got)
	}
	if _, gap := collect(t, b, 250, 1000); gap != nil {
		t.Fatalf("a read of held output reported a gap %v", gap)
	}
}

// A chunk larger than the limit is still held: the newest output is never dropped.
func TestTheNewestChunkIsKept(t *testing.T) {
	b := New(10)
	b.Append(Stdout, make([]byte, 50))
	b.Append(Stdout, make([]byte, 50))
	if st := b.State(); st.First != 50 || st.Held != 50 {
		t.Fatalf("state %+v", st)
	}
}

func TestReleaseDropsWhatWasStored(t *testing.T) {
	b := New(1 << 20)
	for range 4 {
		b.Append(Stdout, make([]byte, 10))
	}
	b.Release(25) // the chunk 20..30 is not wholly stored: kept
	if st := b.State(); st.First != 20 || st.Held != 20 {
		t.Fatalf("state %+v", st)
	}
}

func TestChangedWakesOnAppendAndClose(t *testing.T) {
	b := New(100)
	ch := b.Changed()
	b.Append(Stdout, []byte("x"))
	<-ch
	ch = b.Changed()
	b.Close()
	<-ch
	if b.Append(Stdout, []byte("y")) != 0 || b.State().End != 1 || !b.State().Closed {
		t.Fatalf("output after Close was kept: %+v", b.State())
	}
}

func TestCompactionKeepsSequences(t *testing.T) {
	b := New(1000)
	for i := range 5000 {
		b.Append(Stdout, []byte{byte(i)})
	}
	got, gap := collect(t, b, 0, 10000)
	if gap == nil || gap.To != 4000 || len(got) != 1000 || got[0] != byte(4000%256) {
		t.Fatalf("gap %v, %d bytes", gap, len(got))
	}
}
