package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// SnapshotStore keeps snapshots (snapshot.go): each is a layer, the tar archive of what a
// sandbox changed against its image, and a record describing it. A snapshot exists once its
// record does: the layer is written first, the record last, so a writer that dies in between
// leaves a layer without a record, which no reader ever sees as a snapshot and
// [SnapshotStore.Unfinished] lists for removal. Every method takes IDs already checked by
// [sandbox.CheckSnapshotID]. The events package keeps them in JetStream's object store; the
// backend's default, [NewSnapshotDir], in a directory.
type SnapshotStore interface {
	// PutLayer stores the layer of snapshot id, read to its end.
	PutLayer(ctx context.Context, id string, layer io.Reader) error
	// PutRecord makes the snapshot: its record, written after its layer.
	PutRecord(ctx context.Context, rec sandbox.SnapshotInfo) error
	// Record reads one record: [*sandbox.SnapshotNotFoundError] when there is none.
	Record(ctx context.Context, id string) (sandbox.SnapshotInfo, error)
	// Layer opens the layer of a snapshot that has a record.
	Layer(ctx context.Context, id string) (io.ReadCloser, error)
	// Records lists the records of one conversation; an empty scope lists every record.
	Records(ctx context.Context, scope, threadID string) ([]sandbox.SnapshotInfo, error)
	// Unfinished lists the layers with no record whose writing began before cutoff.
	Unfinished(ctx context.Context, cutoff time.Time) ([]string, error)
	// Delete removes the record, then the layer; absent is success.
	Delete(ctx context.Context, id string) error
}

// newSnapshotID is a new snapshot's ID: 128 random bits, in [sandbox.CheckSnapshotID]'s form.
func newSnapshotID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// snapshotDir is a [SnapshotStore] in a directory of the engine's host: <id>.layer and
// <id>.json, each written under a temporary name and renamed into place.
type snapshotDir struct{ dir string }

// NewSnapshotDir keeps snapshots in dir (made 0700 when missing): for one engine process, or
// engines sharing the directory. Snapshots kept here are not seen by engines on other hosts;
// `engine serve` keeps them in JetStream instead.
func NewSnapshotDir(dir string) (SnapshotStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot directory: %w", err)
	}
	return &snapshotDir{dir: dir}, nil
}

func (s *snapshotDir) path(id, ext string) (string, error) {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, id+ext), nil
}

func (s *snapshotDir) PutLayer(ctx context.Context, id string, layer io.Reader) error {
	p, err := s.path(id, ".layer")
	if err != nil {
		return err
	}
	return writeRenamed(ctx, p, layer)
}

func (s *snapshotDir) PutRecord(ctx context.Context, rec sandbox.SnapshotInfo) error {
	p, err := s.path(rec.ID, ".json")
	if err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return writeRenamed(ctx, p, strings.NewReader(string(b)))
}

// writeRenamed writes r to p's temporary name, then renames it into place.
func writeRenamed(ctx context.Context, p string, r io.Reader) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("snapshot store: %w", err)
	}
	_, err = io.Copy(f, ctxReader{ctx, r})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("snapshot store: %w", err)
	}
	return nil
}

// ctxReader ends a copy once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (s *snapshotDir) Record(_ context.Context, id string) (sandbox.SnapshotInfo, error) {
	p, err := s.path(id, ".json")
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return sandbox.SnapshotInfo{}, &sandbox.SnapshotNotFoundError{ID: id}
	}
	if err != nil {
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot store: %w", err)
	}
	var rec sandbox.SnapshotInfo
	if err := json.Unmarshal(b, &rec); err != nil || rec.ID != id {
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot store: the record of %s is unreadable", id)
	}
	return rec, nil
}

func (s *snapshotDir) Layer(ctx context.Context, id string) (io.ReadCloser, error) {
	if _, err := s.Record(ctx, id); err != nil {
		return nil, err
	}
	p, err := s.path(id, ".layer")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: the layer of %s: %w", id, err)
	}
	return f, nil
}

func (s *snapshotDir) Records(ctx context.Context, scope, threadID string) ([]sandbox.SnapshotInfo, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []sandbox.SnapshotInfo
	for _, n := range names {
		rec, err := s.Record(ctx, strings.TrimSuffix(filepath.Base(n), ".json"))
		if err != nil {
			continue
		}
		if scope == "" || (rec.Key.Scope == scope && rec.Key.ThreadID == threadID) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b sandbox.SnapshotInfo) int { return b.Created.Compare(a.Created) })
	return out, nil
}

func (s *snapshotDir) Unfinished(_ context.Context, cutoff time.Time) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.layer*"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		id := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(n), ".tmp"), ".layer")
		if sandbox.CheckSnapshotID(id) != nil || slices.Contains(out, id) {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.dir, id+".json")); err == nil {
			continue
		}
		if fi, err := os.Stat(n); err == nil && fi.ModTime().Before(cutoff) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (s *snapshotDir) Delete(_ context.Context, id string) error {
	for _, ext := range []string{".json", ".layer", ".layer.tmp", ".json.tmp"} {
		p, err := s.path(id, ext)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("snapshot store: %w", err)
		}
	}
	return nil
}
