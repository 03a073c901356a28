package console

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// Engine is what the console knows of one engine of the pool, from $SRV.STATS and its health.
type Engine struct {
	ID        string    `json:"id"`
	Version   string    `json:"version"`
	Status    string    `json:"status"` // the health reply's: ok, draining, engine_unavailable; "silent" once it stops answering
	Daemon    string    `json:"daemon,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Sandboxes int       `json:"sandboxes"`
	InFlight  int       `json:"in_flight"`
	Requests  int       `json:"requests"`
	Errors    int       `json:"errors"`  // calls that failed by the engine's fault (internal, engine_unavailable, image_missing)
	Refused   int       `json:"refused"` // calls refused for the caller's reasons (bad_request, forbidden, …), the console's probes among them
	LastSeen  time.Time `json:"last_seen"`
}

// ring keeps the last n values added.
type ring[T any] struct {
	n    int
	vals []T
}

func (r *ring[T]) add(v T) {
	r.vals = append(r.vals, v)
	if len(r.vals) > r.n {
		r.vals = slices.Delete(r.vals, 0, len(r.vals)-r.n)
	}
}

func (r *ring[T]) all() []T { return slices.Clone(r.vals) }

// update is one change the browsers are told: its kind names the server-sent event.
type update struct {
	kind string
	data any
}

// state is everything the page shows, and the browsers that watch it. Every change is
// applied and fanned out under mu, so a browser's snapshot and the updates after it never
// miss or repeat a change.
type state struct {
	mu        sync.Mutex
	engines   map[string]*Engine
	sandboxes map[sandboxRef]messages.APISandboxEntry
	audit     ring[json.RawMessage]
	egress    ring[json.RawMessage]
	reaps     ring[json.RawMessage]
	notice    string         // what the page says is missing, "" when nothing is
	snaps     ring[Snapshot] // lifecycle.go
	hub       *hub
}

// sandboxRef is a sandbox's place: its engine and handle.
type sandboxRef struct{ engine, id string }

func newState(window int) *state {
	return &state{engines: map[string]*Engine{}, sandboxes: map[sandboxRef]messages.APISandboxEntry{},
		audit: ring[json.RawMessage]{n: window}, egress: ring[json.RawMessage]{n: window}, reaps: ring[json.RawMessage]{n: window},
		snaps: ring[Snapshot]{n: window}, hub: newHub()}
}

// snapshot is the first message a browser gets.
type snapshot struct {
	Identity  string                     `json:"identity"`
	Actions   map[string]string          `json:"actions"`
	Engines   []*Engine                  `json:"engines"`
	Sandboxes []messages.APISandboxEntry `json:"sandboxes"`
	Audit     []json.RawMessage          `json:"audit"`
	Egress    []json.RawMessage          `json:"egress"`
	Reaps     []json.RawMessage          `json:"reaps"`
	Snapshots []Snapshot                 `json:"snapshots"`
	Notice    string                     `json:"notice,omitempty"`
}

// watch registers a browser and returns its snapshot, taken under the same lock as every
// change, and its channel of updates.
func (s *state) watch(identity string, actions map[string]string) (snapshot, *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Identity: identity, Actions: actions, Engines: s.engineList(), Sandboxes: s.sandboxList(),
		Audit: s.audit.all(), Egress: s.egress.all(), Reaps: s.reaps.all(), Notice: s.notice, Snapshots: s.snaps.all()}
	return snap, s.hub.add()
}

func (s *state) engineList() []*Engine {
	out := make([]*Engine, 0, len(s.engines))
	for _, id := range slices.Sorted(maps.Keys(s.engines)) {
		e := *s.engines[id]
		out = append(out, &e)
	}
	return out
}

func (s *state) sandboxList() []messages.APISandboxEntry {
	out := slices.Collect(maps.Values(s.sandboxes))
	slices.SortFunc(out, func(a, b messages.APISandboxEntry) int { return a.AcquiredAt.Compare(b.AcquiredAt) })
	return out
}

// sandboxes returns every sandbox the console shows.
func (s *state) sandboxesNow() []messages.APISandboxEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxList()
}

// setEngines replaces the engines with what the last poll found.
func (s *state) setEngines(found map[string]*Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engines = found
	s.hub.send(update{"engines", s.engineList()})
}

// setNotice sets what the page says is missing ("" clears it), telling the browsers when it
// changed.
func (s *state) setNotice(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notice == text {
		return
	}
	s.notice = text
	s.hub.send(update{"notice", text})
}

// forgetEngine drops the sandboxes of an engine that no longer answers.
func (s *state) forgetEngine(engine string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(func(e messages.APISandboxEntry) bool { return e.Engine == engine })
}

// listed replaces an engine's sandboxes with a list_sandboxes inventory asked for at asked,
// keeping what audit events added since.
func (s *state) listed(engine string, asked time.Time, entries []messages.APISandboxEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(func(e messages.APISandboxEntry) bool { return e.Engine == engine && e.AcquiredAt.Before(asked) })
	for _, e := range entries {
		s.putLocked(e)
	}
}

func (s *state) putLocked(e messages.APISandboxEntry) {
	s.sandboxes[sandboxRef{e.Engine, e.ID}] = e
	s.hub.send(update{"sandbox", e})
}

func (s *state) dropLocked(match func(messages.APISandboxEntry) bool) {
	for ref, e := range s.sandboxes {
		if match(e) {
			delete(s.sandboxes, ref)
			s.hub.send(update{"sandbox_gone", map[string]string{"engine": ref.engine, "id": ref.id}})
		}
	}
}

// egressEvent keeps one egress window.
func (s *state) egressEvent(raw json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.egress.add(raw)
	s.hub.send(update{"egress", raw})
}

// reapEvent keeps one reap summary.
func (s *state) reapEvent(raw json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reaps.add(raw)
	s.hub.send(update{"reap", raw})
}

// auditEvent keeps one audit event and applies it to the sandboxes.
func (s *state) auditEvent(raw json.RawMessage, ev *events.AuditEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audit.add(raw)
	s.hub.send(update{"audit", raw})
	if ev.Outcome == sandbox.OutcomeRefused && ev.Type != events.AuditSandboxAcquired {
		return // a refused call changed nothing (the console's own probes are refused disposals)
	}
	var key messages.APIKey
	if ev.Key != nil {
		key = *ev.Key
	}
	if s.lifecycleLocked(ev, key) { // lifecycle.go
		return
	}
	switch ev.Type {
	case events.AuditSandboxAcquired:
		s.acquiredLocked(ev, key)
	case events.AuditSandboxDisposed:
		s.dropLocked(func(e messages.APISandboxEntry) bool {
			return e.Key == key && (ev.Kind == "" || e.Kind == ev.Kind) && (ev.InstanceID == "" || e.InstanceID == ev.InstanceID)
		})
	case events.AuditScopePurged:
		s.dropLocked(func(e messages.APISandboxEntry) bool {
			return e.Key.Scope == key.Scope && e.Key.ThreadID == key.ThreadID
		})
	case events.AuditEngineStopped:
		s.dropLocked(func(e messages.APISandboxEntry) bool { return e.Engine == ev.Service })
	default:
		s.calledLocked(ev)
	}
}

// acquiredLocked adds or refreshes the row of a sandbox an acquire handed out.
func (s *state) acquiredLocked(ev *events.AuditEvent, key messages.APIKey) {
	if ev.Outcome == sandbox.OutcomeRefused || ev.Sandbox == "" || ev.Service == "" {
		return
	}
	e, ok := s.sandboxes[sandboxRef{ev.Service, ev.Sandbox}]
	if !ok {
		e = messages.APISandboxEntry{ID: ev.Sandbox, Engine: ev.Service, Key: key, Kind: ev.Kind,
			State: messages.SandboxStateLive, AcquiredAt: ev.Time}
	}
	e.InstanceID, e.LastCallAt = ev.InstanceID, ev.Time
	if ev.Acquire != nil {
		e.Image, e.Egress = ev.Acquire.Image, ev.Acquire.Egress
	}
	s.putLocked(e)
}

// calledLocked moves the last call of the sandbox an act named (and its instance, on a reset).
func (s *state) calledLocked(ev *events.AuditEvent) {
	e, ok := s.sandboxes[sandboxRef{ev.Service, ev.Sandbox}]
	if !ok || ev.Sandbox == "" {
		return
	}
	e.LastCallAt = ev.Time
	if ev.Type == events.AuditSandboxReset && ev.InstanceID != "" {
		e.InstanceID = ev.InstanceID
	}
	s.putLocked(e)
}
