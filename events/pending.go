package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// PendingBucket is the KV bucket of the windows of prefix drained and not yet known to be in
// the stream: "<prefix with . as _>_egress_pending".
func PendingBucket(prefix string) string {
	return strings.ReplaceAll(prefix, ".", "_") + "_egress_pending"
}

// PendingStore holds, per proxy ID, a window drained before its proxy's removal: a record
// that is not an event (nothing subscribes to it), so nothing is published before the
// removal. It closes the gap between the removal and the stream's acknowledgement: an
// engine dying there leaves the entry, and [PendingStore.Recover] publishes it once it
// confirms the proxy absent. The bucket is created on first use, replicated as the streams.
// No call holds another back: the bucket's creation is asked by each first user (the answers
// are one bucket), and a record is forgotten on the store's own worker ([PendingStore.Forget]),
// so a NATS away delays each proxy's removal by its own bounded wait, never by another's.
type PendingStore struct {
	js     jetstream.JetStream
	bucket string
	daemon string // the key prefix of this daemon's entries ("" for none), see WithPendingDaemon
	kv     atomic.Pointer[jetstream.KeyValue]
	log    *zap.Logger

	forgetOnce sync.Once
	forgets    chan string   // the records to forget, for the worker
	stopForget chan struct{} // closed by Close: the worker ends
	forgotten  chan struct{} // closed when the worker has ended
	closeOnce  sync.Once
}

// PendingOption configures a [PendingStore].
type PendingOption func(*PendingStore)

// WithPendingLogger logs what the store's worker could not forget to l (default: nothing).
func WithPendingLogger(l *zap.Logger) PendingOption {
	return func(s *PendingStore) {
		if l != nil {
			s.log = l
		}
	}
}

// WithPendingDaemon scopes the store to the entries of the Docker daemon with identity id:
// its records are kept under a digest of id, and [PendingStore.List] and
// [PendingStore.Recover] see only those. Engines of several hosts share one bucket, and a
// proxy absent from this daemon may well exist on another's: only the daemon that ran a proxy
// can confirm it gone. Without it the store keeps bare proxy IDs, for one daemon alone.
func WithPendingDaemon(id string) PendingOption {
	return func(s *PendingStore) {
		sum := sha256.Sum256([]byte(id))
		s.daemon = hex.EncodeToString(sum[:8]) + "."
	}
}

// key is proxyID's entry key in this store.
func (s *PendingStore) key(proxyID string) string { return s.daemon + proxyID }

// mine reports whether the entry key k is this store's: under its daemon's prefix, or, for an
// unscoped store, a bare proxy ID.
func (s *PendingStore) mine(k string) bool {
	if s.daemon == "" {
		return !strings.Contains(k, ".")
	}
	return strings.HasPrefix(k, s.daemon)
}

// NewPendingStore keeps pending windows of prefix over nc, which the caller owns. It makes no
// call to the server.
func NewPendingStore(nc *nats.Conn, prefix string, opts ...PendingOption) (*PendingStore, error) {
	if err := CheckSubjectPrefix(prefix); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("events: pending store: %w", err)
	}
	s := &PendingStore{js: js, bucket: PendingBucket(prefix), log: zap.NewNop(),
		forgets: make(chan string, forgetQueue), stopForget: make(chan struct{}), forgotten: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// bucketKV opens the bucket, creating it on first use. No lock is held across the call:
// while NATS is away each caller waits out its own context, never one queued before it.
func (s *PendingStore) bucketKV(ctx context.Context) (jetstream.KeyValue, error) {
	if kv := s.kv.Load(); kv != nil {
		return *kv, nil
	}
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: s.bucket,
		Description: "maf-sandbox egress windows drained, their events not yet known stored", Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("events: pending bucket %s: %w", s.bucket, err)
	}
	s.kv.CompareAndSwap(nil, &kv)
	return *s.kv.Load(), nil
}

// Put records w under its proxy ID (replacing an earlier drain's record of the same proxy).
func (s *PendingStore) Put(ctx context.Context, w sandbox.EgressWindow) error {
	kv, err := s.bucketKV(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("events: pending %s: %w", w.ProxyID, err)
	}
	if _, err := kv.Put(ctx, s.key(w.ProxyID), b); err != nil {
		return fmt.Errorf("events: pending %s: %w", w.ProxyID, err)
	}
	return nil
}

// Delete forgets proxyID's record; one already gone is no error.
func (s *PendingStore) Delete(ctx context.Context, proxyID string) error {
	kv, err := s.bucketKV(ctx)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, s.key(proxyID)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("events: forget pending %s: %w", proxyID, err)
	}
	return nil
}

// forgetQueue bounds the records waiting for the worker to forget them.
const forgetQueue = 1024

// Forget forgets proxyID's record on the store's own worker and returns at once, so a caller
// that must not wait on the bucket (the outbox's worker, once the stream holds the window's
// event) never does; each deletion waits at most pendingWait. A record not forgotten — the
// queue full, the store closed, the bucket away — is published again by a recovery, as a
// repeat the stream drops.
func (s *PendingStore) Forget(proxyID string) {
	s.forgetOnce.Do(func() { go s.forgetLoop() })
	select {
	case <-s.stopForget:
		return
	default:
	}
	select {
	case s.forgets <- proxyID:
	default:
		s.log.Info("pending egress record not forgotten (the queue is full); the recovery publishes it again as a repeat",
			zap.String("proxy_id", proxyID))
	}
}

func (s *PendingStore) forgetLoop() {
	defer close(s.forgotten)
	for {
		select {
		case id := <-s.forgets:
			s.forgetOne(id)
		case <-s.stopForget:
			for {
				select {
				case id := <-s.forgets:
					s.forgetOne(id)
				default:
					return
				}
			}
		}
	}
}

func (s *PendingStore) forgetOne(proxyID string) {
	ctx, cancel := context.WithTimeout(context.Background(), pendingWait)
	defer cancel()
	if err := s.Delete(ctx, proxyID); err != nil {
		s.log.Info("pending egress record not forgotten; the recovery publishes it again as a repeat",
			zap.String("proxy_id", proxyID), zap.Error(err))
	}
}

// Close stops the worker of [PendingStore.Forget] once the records queued before it are
// forgotten, or when ctx ends (what is left is the recovery's). It does not close the
// connection. A second Close returns at once.
func (s *PendingStore) Close(ctx context.Context) {
	s.closeOnce.Do(func() {
		started := true
		s.forgetOnce.Do(func() { started = false }) // and no Forget starts the worker now
		close(s.stopForget)
		if !started {
			return
		}
		select {
		case <-s.forgotten:
		case <-ctx.Done():
		}
	})
}

// List returns every pending window of this store (see [WithPendingDaemon]).
func (s *PendingStore) List(ctx context.Context) ([]sandbox.EgressWindow, error) {
	kv, err := s.bucketKV(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("events: list pending: %w", err)
	}
	var ws []sandbox.EgressWindow
	for k := range keys.Keys() {
		if !s.mine(k) {
			continue
		}
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // forgotten meanwhile
		}
		if err != nil {
			_ = keys.Stop()
			return nil, fmt.Errorf("events: pending %s: %w", k, err)
		}
		var w sandbox.EgressWindow
		if err := json.Unmarshal(e.Value(), &w); err != nil {
			_ = keys.Stop()
			return nil, fmt.Errorf("events: pending %s: %w", k, err)
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// Recover publishes, once its proxy is confirmed absent, every pending window whose drainer
// did not see it through, and forgets it once the stream acknowledged it: gone answers
// whether the proxy with that ID no longer exists, publish publishes the window and waits for
// the acknowledgement. A window whose proxy still exists is left to the proxy's next drain,
// and one whose check or publication failed to the next recovery. The event carries the same
// ID as the drainer's own, so a window the drainer did publish is a repeat the stream drops.
func (s *PendingStore) Recover(ctx context.Context, gone func(ctx context.Context, proxyID string) (bool, error),
	publish func(ctx context.Context, w sandbox.EgressWindow) error) (published int, err error) {
	ws, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, w := range ws {
		absent, err := gone(ctx, w.ProxyID)
		if err != nil {
			errs = append(errs, fmt.Errorf("events: recover %s: %w", w.ProxyID, err))
			continue
		}
		if !absent {
			continue
		}
		if w.Removal == "" {
			w.Removal = sandbox.RemovalAbsent
		}
		if err := publish(ctx, w); err != nil && !errors.Is(err, ErrInvalidEvent) {
			errs = append(errs, fmt.Errorf("events: recover %s: %w", w.ProxyID, err))
			continue
		} else if err == nil {
			published++
		}
		if err := s.Delete(ctx, w.ProxyID); err != nil {
			errs = append(errs, err)
		}
	}
	return published, errors.Join(errs...)
}
