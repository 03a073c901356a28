package execwire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	for _, f := range []struct {
		typ byte
		p   string
	}{{Hello, Version}, {Stdout, "out"}, {Kill, ""}} {
		if err := Write(&buf, f.typ, []byte(f.p)); err != nil {
			t.Fatal(err)
		}
		typ, p, err := Read(&buf, 64)
		if err != nil || typ != f.typ || string(p) != f.p {
			t.Fatalf("got %q %q %v, want %q %q", typ, p, err, f.typ, f.p)
		}
	}
}

// A frame announcing more than the reader allows is refused before its payload is read, so
// a peer cannot make the reader allocate what it announces.
func TestFrameOverTheLimitIsRefused(t *testing.T) {
	var buf bytes.Buffer
	_ = Write(&buf, Stdout, make([]byte, 65))
	if _, _, err := Read(&buf, 64); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if err := Write(io.Discard, Run, make([]byte, MaxPayload+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("write: got %v", err)
	}
}

func TestTruncatedFrameIsUnexpectedEOF(t *testing.T) {
	var buf bytes.Buffer
	_ = Write(&buf, Stdout, []byte("abcdef"))
	b := buf.Bytes()[:8]
	if _, _, err := Read(bytes.NewReader(b), 64); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v", err)
	}
}

func TestEncodeRunRefusesWhatNoFrameCarries(t *testing.T) {
	if p, err := EncodeRun(Request{Argv: []string{"true"}, Dir: "/"}); err != nil || string(p) != `{"argv":["true"],"dir":"/"}` {
		t.Fatalf("EncodeRun = %s, %v", p, err)
	}
	_, err := EncodeRun(Request{Argv: []string{"echo", string(bytes.Repeat([]byte("x"), MaxPayload))}, Dir: "/"})
	var big *RequestTooLargeError
	if !errors.As(err, &big) || !errors.Is(err, ErrFrameTooLarge) || big.Size <= MaxPayload {
		t.Fatalf("EncodeRun of an argv over the limit: %v; want a RequestTooLargeError", err)
	}
}
