package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Member is one engine's announcement.
type Member struct {
	Engine string `json:"engine"`
	Daemon string `json:"daemon,omitempty"` // the Docker daemon it drives (its ID)
	// Load: the sandboxes it holds and the cold acquires it is running.
	Sandboxes    int       `json:"sandboxes"`
	ColdInFlight int       `json:"cold_in_flight"`
	Draining     bool      `json:"draining,omitempty"`
	At           time.Time `json:"at"` // when it was announced, by the engine's clock
}

// Members is the membership bucket: one entry per engine, expiring with the bucket's TTL
// ([WithLease]) unless announced again.
type Members struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	ttl time.Duration
}

// NewMembers opens (creating it when absent) the membership bucket on js. The bucket's TTL is
// the lease option: an engine silent for that long is no longer listed.
func NewMembers(ctx context.Context, js jetstream.JetStream, opts ...Option) (*Members, error) {
	if js == nil {
		return nil, errOption("a JetStream context is required")
	}
	o, err := buildOptions(DefaultMembersBucket, opts)
	if err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, js, jetstream.KeyValueConfig{Bucket: o.bucket, History: 1, Replicas: o.replicas,
		TTL: o.lease, Storage: jetstream.MemoryStorage, Description: "maf-sandbox engines: heartbeat, daemon and load"})
	if err != nil {
		return nil, err
	}
	return &Members{js: js, kv: kv, ttl: o.lease}, nil
}

// TTL is how long an announcement counts.
func (m *Members) TTL() time.Duration { return m.ttl }

// Announce writes mb (its At set to now); an engine calls it at a fraction of the TTL.
func (m *Members) Announce(ctx context.Context, mb Member) error {
	if mb.Engine == "" {
		return errOption("a member needs an engine ID")
	}
	mb.At = time.Now().UTC()
	b, _ := json.Marshal(mb) // plain fields always encode
	if _, err := m.kv.Put(ctx, token(mb.Engine), b); err != nil {
		return fmt.Errorf("placement: announce %s: %w", mb.Engine, err)
	}
	return nil
}

// Leave removes engine's entry at once (a clean stop), rather than letting it expire.
func (m *Members) Leave(ctx context.Context, engine string) error {
	if err := m.kv.Delete(ctx, token(engine)); err != nil {
		return fmt.Errorf("placement: leave %s: %w", engine, err)
	}
	return nil
}

// List returns the engines announced within the TTL, by engine ID.
//
// It reads the keys from the bucket stream's subject counts, not with KeyValue.ListKeys: that
// listing is an ordered consumer that counts the pending entries when it starts and waits
// until it has seen that many, so an entry the TTL removes meanwhile leaves it waiting for the
// caller's whole context (seen in CI: a 30-second List).
func (m *Members) List(ctx context.Context) ([]Member, error) {
	bucket := m.kv.Bucket()
	stream, err := m.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, fmt.Errorf("placement: list members: %w", err)
	}
	prefix := "$KV." + bucket + "."
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("placement: list members: %w", err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subject, prefix))
	}
	now := time.Now()
	var out []Member
	for _, k := range keys {
		e, err := m.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("placement: get member %s: %w", k, err)
		}
		var mb Member
		if json.Unmarshal(e.Value(), &mb) != nil || now.Sub(mb.At) > m.ttl {
			continue // not ours, or stale though the bucket has not removed it yet
		}
		out = append(out, mb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Engine < out[j].Engine })
	return out, nil
}

// Load is what the choice of engine weighs: the sandboxes an engine holds plus the cold
// acquires it is running (each of those is a container being created on its daemon now).
func (m Member) Load() int { return m.Sandboxes + m.ColdInFlight }

// Pick chooses the engine a cold acquire that reached self through the pool's queue group
// should be created on: self compared with one other live, non-draining member drawn by
// pick(n) (an index below n), the lighter by [Member.Load] winning and self on a tie. The
// queue group already drew self at random, so this is the power of two random choices: it
// spreads new sandboxes by load with one comparison, and unlike "always the least loaded" it
// does not send every engine's acquires to the same one while their copies of the load are a
// few announcements old. A draining self always hands the acquire on when it can.
func Pick(self Member, members []Member, pick func(n int) int) string {
	var others []Member
	for _, m := range members {
		if m.Engine != self.Engine && !m.Draining {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return self.Engine
	}
	other := others[pick(len(others))]
	if self.Draining || other.Load() < self.Load() {
		return other.Engine
	}
	return self.Engine
}
