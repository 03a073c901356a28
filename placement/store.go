package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Record is one bucket entry: who owns the sandbox and until when.
type Record struct {
	Engine string `json:"engine"`
	Daemon string `json:"daemon,omitempty"`
	// Instance is the instance the owner handed out (the container ID), once its acquire
	// returned: what a taker on the same daemon may adopt.
	Instance string    `json:"instance,omitempty"`
	Expires  time.Time `json:"expires"`
	// Revision is the entry's KV revision (not stored in the value): the fencing token.
	Revision uint64 `json:"-"`
}

// Lease is an engine's hold on one entry, as its last successful claim or renewal left it.
type Lease struct {
	Entry    string
	Engine   string
	Revision uint64
	Expires  time.Time
	Instance string // written with every renewal: set it and Renew to record a new one
}

// Valid reports whether the owner may still serve under l at now: before its expiry.
func (l Lease) Valid(now time.Time) bool { return now.Before(l.Expires) }

// Store is one engine's access to the placement bucket. Build it with [New]; [Store.Close]
// stops its watch. Its methods are safe for concurrent use.
type Store struct {
	kv     jetstream.KeyValue
	engine string
	o      options
	log    *zap.Logger
	now    func() time.Time

	watch    jetstream.KeyWatcher
	loopDone chan struct{}
	mu       sync.RWMutex
	cache    map[string]Record
	closeErr sync.Once
}

// New opens (creating it when absent) the placement bucket on js for the engine named engine,
// and starts the watch that keeps [Store.Lookup]'s copy current; it returns once that copy
// holds the whole bucket. It fails with a [*sandbox.InvalidArgumentError] for an empty engine
// or a bad option and with JetStream's error when the bucket cannot be opened or watched.
func New(ctx context.Context, js jetstream.JetStream, engine string, opts ...Option) (*Store, error) {
	if js == nil || engine == "" {
		return nil, errOption("a JetStream context and an engine ID are required")
	}
	o, err := buildOptions(DefaultBucket, opts)
	if err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, js, jetstream.KeyValueConfig{Bucket: o.bucket, History: 1, Replicas: o.replicas,
		Storage: jetstream.FileStorage, Description: "maf-sandbox placement: (key, kind) → owning engine and lease"})
	if err != nil {
		return nil, err
	}
	s := &Store{kv: kv, engine: engine, o: o, log: o.logger.With(zap.String("engine", engine)), now: time.Now,
		cache: map[string]Record{}, loopDone: make(chan struct{})}
	// The watch outlives ctx, which bounds only New.
	w, err := kv.WatchAll(context.Background())
	if err != nil {
		return nil, fmt.Errorf("placement: watch bucket %s: %w", o.bucket, err)
	}
	s.watch = w
	ready := make(chan struct{})
	go s.follow(ready)
	select {
	case <-ready:
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("placement: read bucket %s: %w", o.bucket, ctx.Err())
	}
	return s, nil
}

// openBucket binds to the bucket, creating it when absent (a bucket made by another engine
// keeps its configuration).
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = js.KeyValue(ctx, cfg.Bucket) // another engine created it first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("placement: open bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// follow applies the watch's updates to the copy; ready is closed once the initial values are in.
func (s *Store) follow(ready chan struct{}) {
	defer close(s.loopDone)
	for e := range s.watch.Updates() {
		if e == nil { // the end of the initial values
			if ready != nil {
				close(ready)
				ready = nil
			}
			continue
		}
		s.apply(e)
	}
}

// apply records one entry (or its deletion) in the copy, unless the copy already has a later
// revision of it (Claim writes its own results in too).
func (s *Store) apply(e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.cache[e.Key()]; ok && cur.Revision > e.Revision() {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		delete(s.cache, e.Key())
		return
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		s.log.Warn("placement entry is not a record; ignored", zap.String("entry", e.Key()), zap.Error(err))
		delete(s.cache, e.Key())
		return
	}
	r.Revision = e.Revision()
	s.cache[e.Key()] = r
}

// Close stops the watch. The bucket and its entries stay.
func (s *Store) Close() {
	s.closeErr.Do(func() {
		if err := s.watch.Stop(); err != nil {
			s.log.Debug("stop the placement watch", zap.Error(err))
		}
		<-s.loopDone
	})
}

// Engine is the engine this store claims for.
func (s *Store) Engine() string { return s.engine }

// Daemon is the Docker daemon identity this store records in its entries ([WithDaemon]), empty
// when none was given.
func (s *Store) Daemon() string { return s.o.daemon }

// Lease is how long a claim or renewal holds.
func (s *Store) Lease() time.Duration { return s.o.lease }

// Owner returns the engine that owns (key, kind) by the watched copy, while its lease (plus the
// grace) has not lapsed: where a call on the sandbox should go. It makes no round trip.
func (s *Store) Owner(key sandbox.Key, kind string) (string, bool) {
	r, ok := s.Lookup(key, kind)
	if !ok || s.Lapsed(r) {
		return "", false
	}
	return r.Engine, true
}

// Lookup returns the record of (key, kind) from the watched copy, and whether there is one. It
// makes no round trip; see the package doc for how current it is.
func (s *Store) Lookup(key sandbox.Key, kind string) (Record, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.cache[EntryKey(key, kind)]
	return r, ok
}

// Lapsed reports whether r's lease ended more than the grace ago by this store's clock: a
// claim would take it over.
func (s *Store) Lapsed(r Record) bool { return !s.now().Before(r.Expires.Add(s.o.grace)) }

// Entry is a record with the sandbox it is the entry of.
type Entry struct {
	Key    sandbox.Key
	Kind   string
	Record Record
}

// KeyEntries reads from the bucket the entries of key's sandboxes: of kind alone when it is
// not nil, else of every kind. An entry that holds no record is skipped, as the watch skips it.
func (s *Store) KeyEntries(ctx context.Context, key sandbox.Key, kind *string) ([]Entry, error) {
	if kind == nil {
		return s.entries(ctx, keyFilter(key))
	}
	return s.read(ctx, nil, EntryKey(key, *kind))
}

// ScopeEntries reads from the bucket the entries of every sandbox of (scope, thread), as
// KeyEntries does.
func (s *Store) ScopeEntries(ctx context.Context, scope, thread string) ([]Entry, error) {
	return s.entries(ctx, scopeFilter(scope, thread))
}

// entries reads the entries filter matches, each as it is when read. It reads on past an
// entry it cannot get, and returns those errors joined with what it read.
func (s *Store) entries(ctx context.Context, filter string) ([]Entry, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("placement: list %s: %w", filter, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	if err := lister.Stop(); err != nil {
		s.log.Debug("stop the listing", zap.String("filter", filter), zap.Error(err))
	}
	var out []Entry
	var errs []error
	for _, k := range keys {
		var err error
		if out, err = s.read(ctx, out, k); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// read appends the entry k to out when it holds a record.
func (s *Store) read(ctx context.Context, out []Entry, k string) ([]Entry, error) {
	key, kind, err := ParseEntryKey(k)
	if err != nil {
		return out, nil // not an entry of this package's
	}
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("placement: get %s: %w", k, err)
	}
	r, err := decodeRecord(e)
	if err != nil {
		s.log.Warn("placement entry is not a record; ignored", zap.String("entry", k), zap.Error(err))
		return out, nil
	}
	return append(out, Entry{Key: key, Kind: kind, Record: r}), nil
}

// staleReadWait bounds how long [Store.GetSince] asks again while the replicas it reaches have
// not applied a write it knows was made.
const staleReadWait = time.Second

// GetSince reads the record of (key, kind) as [Store.Get] does, at revision since or later. A
// KV read is a direct get, which any of the bucket's replicas answers, and a replica that has
// not yet applied the stream's last writes answers with an older record; since is a revision
// the caller knows was written (its own), so an older record is such a replica's and is asked
// for again, for up to staleReadWait. It may still return an older record when none newer came.
func (s *Store) GetSince(ctx context.Context, key sandbox.Key, kind string, since uint64) (Record, bool, error) {
	deadline := time.Now().Add(staleReadWait)
	for {
		r, ok, err := s.Get(ctx, key, kind)
		if err != nil || !ok || r.Revision >= since || !time.Now().Before(deadline) {
			return r, ok, err
		}
		select {
		case <-ctx.Done():
			return r, ok, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Get reads the record of (key, kind) from the bucket itself: from any of its replicas, which
// may be behind the stream's last writes ([Store.GetSince]).
func (s *Store) Get(ctx context.Context, key sandbox.Key, kind string) (Record, bool, error) {
	k := EntryKey(key, kind)
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("placement: get %s: %w", k, err)
	}
	r, err := decodeRecord(e)
	return r, err == nil, err
}

func decodeRecord(e jetstream.KeyValueEntry) (Record, error) {
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, fmt.Errorf("placement: entry %s is not a record: %w", e.Key(), err)
	}
	r.Revision = e.Revision()
	return r, nil
}

// record is what this engine writes for a lease on instance starting at now.
func (s *Store) record(now time.Time, instance string) (Record, []byte) {
	r := Record{Engine: s.engine, Daemon: s.o.daemon, Instance: instance, Expires: now.Add(s.o.lease)}
	b, _ := json.Marshal(r) // a struct of strings and a time always encodes
	return r, b
}

// Claim makes this engine the owner of (key, kind), for a cold acquire before it creates
// anything: it creates the entry when there is none; renews it when this engine already owns
// it; and takes it over when the owner's lease lapsed more than the grace ago. It returns the
// lease, or a [*HeldError] naming the live owner (also when another engine won a race for the
// same entry), or JetStream's error. taken is the lapsed record a takeover replaced (nil
// otherwise): the previous owner's container may still exist, on taken.Daemon, as
// taken.Instance.
func (s *Store) Claim(ctx context.Context, key sandbox.Key, kind string) (l Lease, taken *Record, err error) {
	k := EntryKey(key, kind)
	for {
		now := s.now()
		r, b := s.record(now, "")
		rev, err := s.kv.Create(ctx, k, b)
		if err == nil {
			return s.hold(k, r, rev), nil, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return Lease{}, nil, fmt.Errorf("placement: claim %s: %w", k, err)
		}
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // released between the two calls: try to create again
		}
		if err != nil {
			return Lease{}, nil, fmt.Errorf("placement: claim %s: read the owner: %w", k, err)
		}
		cur, err := decodeRecord(e)
		if err != nil {
			return Lease{}, nil, err
		}
		switch {
		case cur.Engine == s.engine:
			// Ours already (a warm acquire, or a restart under the same ID): extend it.
			r, b = s.record(now, cur.Instance)
		case now.Before(cur.Expires.Add(s.o.grace)):
			return Lease{}, nil, &HeldError{Entry: k, Owner: cur.Engine, Expires: cur.Expires}
		default:
			taken = &cur
		}
		rev, err = s.kv.Update(ctx, k, b, cur.Revision)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue // someone wrote it since we read it: look again
		}
		if err != nil {
			return Lease{}, nil, fmt.Errorf("placement: claim %s: %w", k, err)
		}
		if taken != nil {
			s.log.Info("took over a lapsed placement", zap.String("entry", k), zap.String("from", taken.Engine),
				zap.Time("expired", taken.Expires))
		}
		return s.hold(k, r, rev), taken, nil
	}
}

// hold records a successful write of r at rev in the copy and returns its lease.
func (s *Store) hold(k string, r Record, rev uint64) Lease {
	r.Revision = rev
	s.mu.Lock()
	if cur, ok := s.cache[k]; !ok || cur.Revision < rev {
		s.cache[k] = r
	}
	s.mu.Unlock()
	return Lease{Entry: k, Engine: s.engine, Revision: rev, Expires: r.Expires, Instance: r.Instance}
}

// Renew extends l, on its revision, recording l.Instance. It fails with a [*LostError] when the
// entry was written or deleted since (taken over after a lapse: this engine must stop serving the sandbox), and with
// JetStream's error when the bucket cannot be reached (the lease then runs out at its expiry).
func (s *Store) Renew(ctx context.Context, l Lease) (Lease, error) {
	r, b := s.record(s.now(), l.Instance)
	rev, err := s.kv.Update(ctx, l.Entry, b, l.Revision)
	if err != nil {
		if lost := lostError(l, err); lost != nil {
			return Lease{}, lost
		}
		return Lease{}, fmt.Errorf("placement: renew %s: %w", l.Entry, err)
	}
	return s.hold(l.Entry, r, rev), nil
}

// Release deletes l's entry, on its revision (dispose). It fails with a [*LostError] when the
// entry is no longer l's, and then leaves it alone.
func (s *Store) Release(ctx context.Context, l Lease) error {
	if err := s.kv.Delete(ctx, l.Entry, jetstream.LastRevision(l.Revision)); err != nil {
		if lost := lostError(l, err); lost != nil {
			return lost
		}
		return fmt.Errorf("placement: release %s: %w", l.Entry, err)
	}
	return nil
}

// releaseKeyTries bounds how often ReleaseKey reads the entry again after writes of this
// engine's own moved its revision under the release.
const releaseKeyTries = 3

// ReleaseKey deletes the entry of (key, kind) if this engine owns it, whatever its revision:
// for a dispose whose lease at hand a write of this engine's own moved (a renewal in flight),
// or on an engine that no longer has the lease at hand. since is the revision the caller knows
// the entry reached (0 when it knows none): the read is [Store.GetSince]'s, so a replica behind
// that write cannot make the release miss the entry.
func (s *Store) ReleaseKey(ctx context.Context, key sandbox.Key, kind string, since uint64) error {
	var err error
	for range releaseKeyTries {
		var r Record
		var ok bool
		if r, ok, err = s.GetSince(ctx, key, kind, since); err != nil || !ok || r.Engine != s.engine {
			return err
		}
		err = s.Release(ctx, Lease{Entry: EntryKey(key, kind), Engine: s.engine, Revision: r.Revision})
		if !errors.Is(err, ErrNotOwner) {
			return err
		}
		since = r.Revision + 1 // written again since the read: read what replaced it
	}
	return err
}

// ReleaseScope deletes every entry of (scope, thread) that this engine owns (scope purge) and
// returns how many; entries of other engines are theirs to release.
func (s *Store) ReleaseScope(ctx context.Context, scope, thread string) (int, error) {
	es, err := s.ScopeEntries(ctx, scope, thread)
	errs := []error{err}
	n := 0
	for _, e := range es {
		if e.Record.Engine != s.engine {
			continue
		}
		l := Lease{Entry: EntryKey(e.Key, e.Kind), Engine: s.engine, Revision: e.Record.Revision}
		if err := s.Release(ctx, l); err != nil {
			if !errors.Is(err, ErrNotOwner) {
				errs = append(errs, err)
			}
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// lostError turns a CAS failure on l's entry into a [*LostError]; nil for any other error.
func lostError(l Lease, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return &LostError{Entry: l.Entry, Revision: l.Revision, Reason: "the entry was written since"}
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return &LostError{Entry: l.Entry, Revision: l.Revision, Reason: "the entry was deleted"}
	}
	return nil
}
