package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/sandbox"
)

// Snapshots keep the sandboxes' snapshots in JetStream's object store, where every engine of
// the cluster reads them: a snapshot's layer is the object "layer/<id>", its record the object
// "record/<id>" (JSON, with the sandbox's scope and thread in its metadata), written after the
// layer. It implements the actors' snapshot store (actors.WithSnapshotStore); IDs reach it
// checked (sandbox.CheckSnapshotID), and it checks them again before naming an object.
type Snapshots struct {
	os jetstream.ObjectStore
}

// DefaultSnapshotBucket is the object store that holds the snapshots.
const DefaultSnapshotBucket = "MAF_SANDBOX_SNAPSHOTS"

// snapshotChunk is the object store's chunk: under the server's default max payload (1 MiB),
// larger than its default (128 KiB), so a layer takes fewer messages.
const snapshotChunk = 512 << 10

// SnapshotsOption configures [NewSnapshots].
type SnapshotsOption func(*snapshotsOptions) error

type snapshotsOptions struct {
	bucket   string
	replicas int
}

// WithSnapshotBucket names the object store (default [DefaultSnapshotBucket]).
func WithSnapshotBucket(name string) SnapshotsOption {
	return func(o *snapshotsOptions) error {
		if name == "" {
			return fmt.Errorf("%w: empty snapshot bucket", ErrInvalidEvent)
		}
		o.bucket = name
		return nil
	}
}

// WithSnapshotReplicas sets how many servers of a cluster keep each snapshot (default 1).
func WithSnapshotReplicas(n int) SnapshotsOption {
	return func(o *snapshotsOptions) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("%w: snapshot replicas %d, want 1 to 5", ErrInvalidEvent, n)
		}
		o.replicas = n
		return nil
	}
}

// NewSnapshots creates or binds the object store over nc (which the caller owns).
func NewSnapshots(ctx context.Context, nc *nats.Conn, opts ...SnapshotsOption) (*Snapshots, error) {
	o := snapshotsOptions{bucket: DefaultSnapshotBucket, replicas: 1}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("new snapshots: %w", err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("new snapshots: %w", err)
	}
	store, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: o.bucket, Replicas: o.replicas,
		Description: "maf-sandbox snapshots: layer/<id> and record/<id>"})
	if err != nil {
		return nil, fmt.Errorf("new snapshots: object store %s: %w", o.bucket, err)
	}
	return &Snapshots{os: store}, nil
}

func layerObject(id string) (string, error) {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return "", err
	}
	return "layer/" + id, nil
}

func recordObject(id string) (string, error) {
	if err := sandbox.CheckSnapshotID(id); err != nil {
		return "", err
	}
	return "record/" + id, nil
}

// PutLayer stores a snapshot's layer, read to its end.
func (s *Snapshots) PutLayer(ctx context.Context, id string, layer io.Reader) error {
	name, err := layerObject(id)
	if err != nil {
		return err
	}
	meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: snapshotChunk}}
	if _, err := s.os.Put(ctx, meta, layer); err != nil {
		return fmt.Errorf("store the layer of snapshot %s: %w", id, err)
	}
	return nil
}

// PutRecord makes the snapshot: its record, after its layer.
func (s *Snapshots) PutRecord(ctx context.Context, rec sandbox.SnapshotInfo) error {
	name, err := recordObject(rec.ID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	meta := jetstream.ObjectMeta{Name: name, Metadata: map[string]string{"scope": rec.Key.Scope, "thread": rec.Key.ThreadID}}
	if _, err := s.os.Put(ctx, meta, strings.NewReader(string(b))); err != nil {
		return fmt.Errorf("store the record of snapshot %s: %w", rec.ID, err)
	}
	return nil
}

// Record reads one record: [*sandbox.SnapshotNotFoundError] when there is none.
func (s *Snapshots) Record(ctx context.Context, id string) (sandbox.SnapshotInfo, error) {
	name, err := recordObject(id)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	b, err := s.os.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return sandbox.SnapshotInfo{}, &sandbox.SnapshotNotFoundError{ID: id}
	}
	if err != nil {
		return sandbox.SnapshotInfo{}, fmt.Errorf("read the record of snapshot %s: %w", id, err)
	}
	var rec sandbox.SnapshotInfo
	if err := json.Unmarshal(b, &rec); err != nil || rec.ID != id {
		return sandbox.SnapshotInfo{}, fmt.Errorf("read the record of snapshot %s: unreadable", id)
	}
	return rec, nil
}

// Layer opens the layer of a snapshot that has a record.
func (s *Snapshots) Layer(ctx context.Context, id string) (io.ReadCloser, error) {
	if _, err := s.Record(ctx, id); err != nil {
		return nil, err
	}
	name, _ := layerObject(id)
	r, err := s.os.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read the layer of snapshot %s: %w", id, err)
	}
	return r, nil
}

// Records lists the records of one conversation (every record for an empty scope), newest
// first.
func (s *Snapshots) Records(ctx context.Context, scope, threadID string) ([]sandbox.SnapshotInfo, error) {
	infos, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	var out []sandbox.SnapshotInfo
	for _, info := range infos {
		id, ok := strings.CutPrefix(info.Name, "record/")
		if !ok || (scope != "" && (info.Metadata["scope"] != scope || info.Metadata["thread"] != threadID)) {
			continue
		}
		rec, err := s.Record(ctx, id)
		if err != nil {
			continue // deleted meanwhile, or unreadable
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b sandbox.SnapshotInfo) int { return b.Created.Compare(a.Created) })
	return out, nil
}

func (s *Snapshots) objects(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	infos, err := s.os.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return infos, nil
}

// Unfinished lists the layers with no record stored before cutoff: snapshots whose writer
// died before it wrote the record.
func (s *Snapshots) Unfinished(ctx context.Context, cutoff time.Time) ([]string, error) {
	infos, err := s.objects(ctx)
	if err != nil {
		return nil, err
	}
	records := map[string]bool{}
	for _, info := range infos {
		if id, ok := strings.CutPrefix(info.Name, "record/"); ok {
			records[id] = true
		}
	}
	var out []string
	for _, info := range infos {
		id, ok := strings.CutPrefix(info.Name, "layer/")
		if ok && !records[id] && info.ModTime.Before(cutoff) && sandbox.CheckSnapshotID(id) == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// Delete removes the record, then the layer; absent is success.
func (s *Snapshots) Delete(ctx context.Context, id string) error {
	rn, err := recordObject(id)
	if err != nil {
		return err
	}
	ln, _ := layerObject(id)
	for _, name := range []string{rn, ln} {
		if err := s.os.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("delete snapshot %s: %w", id, err)
		}
	}
	return nil
}
