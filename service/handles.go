package service

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"

	"github.com/mafsandbox/engine/sandbox"
)

// handle is one sandbox this engine handed out: the acquire's key and spec travel with it,
// so later calls are checked against the key and collect_outputs uses the spec.
type handle struct {
	id   string
	key  sandbox.Key
	kind string
	cur  atomic.Pointer[handleState] // replaced whole by a later acquire of the same instance

	acquired time.Time    // when the engine first handed it out (inventory.go)
	lastCall atomic.Int64 // unix nanoseconds of the last acquire or call naming it (inventory.go)

	mu       sync.Mutex
	instance string          // the instance ID, changed by Reset
	owners   map[string]bool // tenancy.go: the accounts that acquired it; nil without tenancy
}

// own binds h to account, which acquired it.
func (h *handle) own(account string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.owners == nil {
		h.owners = map[string]bool{}
	}
	h.owners[account] = true
}

// ownedBy reports whether account acquired h.
func (h *handle) ownedBy(account string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.owners[account]
}

// handleState is what the latest acquire of a handle's instance returned.
type handleState struct {
	sb   sandbox.Sandbox
	spec sandbox.Spec
}

// sandbox is the sandbox the latest acquire returned.
func (h *handle) sandbox() sandbox.Sandbox { return h.cur.Load().sb }

// spec is the spec of the latest acquire.
func (h *handle) spec() sandbox.Spec { return h.cur.Load().spec }

func (h *handle) instanceID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.instance
}

// handles is the engine's table of sandboxes handed out. Acquiring the same instance again
// returns the same handle, so the table holds one entry per live sandbox.
type handles struct {
	mu         sync.Mutex
	byID       map[string]*handle
	byInstance map[handleKey]string
	reserved   map[handleKey]string // the handle an acquire's act named before put

	// Handles whose sandbox is gone, with the instance each addressed, so that later calls
	// on them still say so; the oldest are forgotten beyond maxBuried.
	buried map[string]buriedHandle
	order  []string
}

// buriedHandle is what is kept of a handle whose sandbox is gone.
type buriedHandle struct {
	key      sandbox.Key
	instance string
}

// maxBuried bounds the handles remembered as gone.
const maxBuried = 4096

type handleKey struct {
	id       sandbox.SandboxID
	instance string
}

func newHandles() *handles {
	return &handles{byID: map[string]*handle{}, byInstance: map[handleKey]string{}, reserved: map[handleKey]string{},
		buried: map[string]buriedHandle{}}
}

// put records sb, acquired for key and spec by account (tenancy.go: the handle is bound to
// the accounts that acquired it; "" without tenancy), and returns its handle.
func (t *handles) put(key sandbox.Key, spec sandbox.Spec, sb sandbox.Sandbox, account string) *handle {
	h := t.putSandbox(key, spec, sb)
	if account != "" {
		h.own(account)
	}
	return h
}

func (t *handles) putSandbox(key sandbox.Key, spec sandbox.Spec, sb sandbox.Sandbox) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	hk := handleKey{sandbox.Identity(key, spec.Kind), sb.InstanceID()}
	if id, ok := t.byInstance[hk]; ok {
		if h := t.byID[id]; h != nil {
			h.cur.Store(&handleState{sb: sb, spec: spec})
			h.touch()
			return h
		}
	}
	id, ok := t.reserved[hk]
	if ok {
		delete(t.reserved, hk)
	} else {
		id = nuid.Next()
	}
	h := &handle{id: id, key: key, kind: spec.Kind, instance: sb.InstanceID(), acquired: time.Now()}
	h.touch()
	h.cur.Store(&handleState{sb: sb, spec: spec})
	t.byID[h.id] = h
	t.byInstance[hk] = h.id
	return h
}

// reserver names, for an acquire of key and kind, the handle its answer will carry for an
// instance: the handle that instance has, or a new one that put then takes. The acquire's act
// is reported, with that name, before the answer is made.
func (t *handles) reserver(key sandbox.Key, kind string) func(instanceID string) string {
	return func(instance string) string {
		t.mu.Lock()
		defer t.mu.Unlock()
		hk := handleKey{sandbox.Identity(key, kind), instance}
		if id, ok := t.byInstance[hk]; ok && t.byID[id] != nil {
			return id
		}
		if id, ok := t.reserved[hk]; ok {
			return id
		}
		if len(t.reserved) >= maxReserved {
			clear(t.reserved) // acquires that never put: nothing depends on their names
		}
		id := nuid.Next()
		t.reserved[hk] = id
		return id
	}
}

// maxReserved bounds the names reserved by acquires that have not put their handle yet.
const maxReserved = 4096

// get returns the handle of id, or nil.
func (t *handles) get(id string) *handle {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// reset records that h's sandbox now runs as instance.
func (t *handles) reset(h *handle, instance string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byInstance, handleKey{sandbox.Identity(h.key, h.kind), h.instanceID()})
	h.mu.Lock()
	h.instance = instance
	h.mu.Unlock()
	t.byInstance[handleKey{sandbox.Identity(h.key, h.kind), instance}] = h.id
}

// drop forgets every handle match accepts and returns their IDs.
func (t *handles) drop(match func(*handle) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id, h := range t.byID {
		if match(h) {
			delete(t.byID, id)
			delete(t.byInstance, handleKey{sandbox.Identity(h.key, h.kind), h.instanceID()})
			ids = append(ids, id)
		}
	}
	return ids
}

// bury drops the handle id, whose sandbox no longer exists, and remembers it as gone: health
// stops counting it and later calls on it are answered from [handles.buriedHandle].
func (t *handles) bury(id string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.byID[id]
	if h == nil {
		return nil
	}
	delete(t.byID, id)
	delete(t.byInstance, handleKey{sandbox.Identity(h.key, h.kind), h.instanceID()})
	t.buried[id] = buriedHandle{key: h.key, instance: h.instanceID()}
	t.order = append(t.order, id)
	if len(t.order) > maxBuried {
		delete(t.buried, t.order[0])
		t.order = t.order[1:]
	}
	return []string{id}
}

// buriedHandle returns what is kept of a buried handle.
func (t *handles) buriedHandle(id string) (buriedHandle, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.buried[id]
	return b, ok
}

// len counts the handles.
// byKind counts the live sandboxes by kind.
func (t *handles) byKind() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := map[string]int{}
	for _, h := range t.byID {
		n[h.kind]++
	}
	return n
}

func (t *handles) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}
