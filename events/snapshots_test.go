package events

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/sandbox"
)

// The object store keeps a snapshot as its layer and, after it, its record: a layer alone is
// no snapshot (unfinished), a record lists under its conversation, and names that are not
// snapshot IDs are refused before an object is named.
func TestSnapshotsStore(t *testing.T) {
	srv := runNATS(t, -1, t.TempDir())
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	s, err := NewSnapshots(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	id, other := strings.Repeat("a1", 16), strings.Repeat("b2", 16)
	layer := bytes.Repeat([]byte("layer"), 300_000) // more than one chunk
	if err := s.PutLayer(ctx, id, bytes.NewReader(layer)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLayer(ctx, other, strings.NewReader("half made")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, id); !errors.As(err, new(*sandbox.SnapshotNotFoundError)) {
		t.Fatalf("a layer without its record = %v, want no snapshot", err)
	}
	rec := sandbox.SnapshotInfo{ID: id, Key: sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}, Kind: "k", Bytes: int64(len(layer)),
		Created: time.Now().UTC().Truncate(time.Millisecond)}
	if err := s.PutRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Record(ctx, id)
	if err != nil || got != rec {
		t.Fatalf("record = %+v, %v", got, err)
	}
	r, err := s.Layer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(body, layer) {
		t.Fatalf("layer read back %d bytes, %v", len(body), err)
	}
	for _, c := range []struct {
		scope, thread string
		n             int
	}{{"s", "t", 1}, {"s", "other", 0}, {"", "", 1}} {
		if list, err := s.Records(ctx, c.scope, c.thread); err != nil || len(list) != c.n {
			t.Fatalf("records of %q/%q = %v, %v; want %d", c.scope, c.thread, list, err, c.n)
		}
	}
	if left, err := s.Unfinished(ctx, time.Now().Add(time.Minute)); err != nil || len(left) != 1 || left[0] != other {
		t.Fatalf("unfinished = %v, %v; want only %s", left, err, other)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Layer(ctx, id); !errors.As(err, new(*sandbox.SnapshotNotFoundError)) {
		t.Fatalf("after delete = %v", err)
	}
	for _, bad := range []string{"../" + id, "layer/" + id, strings.ToUpper(id), ""} {
		if _, err := s.Record(ctx, bad); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("record %q = %v, want invalid", bad, err)
		}
	}
}
