package service

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/messages"
)

// The inventory: list_sandboxes answers with the sandboxes this engine holds (its handle
// table), one page at a time, oldest acquire first. The operator console asks every engine
// of the pool for it, then keeps its view current from the audit stream.

// Page sizes of list_sandboxes.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// touch records a call naming h now.
func (h *handle) touch() { h.lastCall.Store(time.Now().UnixNano()) }

// entry is h as the inventory lists it.
func (h *handle) entry(engine string) messages.APISandboxEntry {
	spec := h.spec()
	state := messages.SandboxStateLive
	if sl, ok := h.sandbox().(interface{ SleepState() string }); ok && sl.SleepState() != "" {
		state = sl.SleepState() // paused or stopped (actors' sleep)
	}
	return messages.APISandboxEntry{ID: h.id, Engine: engine, Key: *messages.KeyToWire(h.key), Kind: h.kind,
		InstanceID: h.instanceID(), Image: spec.Image, Egress: string(spec.Egress), State: state,
		AcquiredAt: h.acquired, LastCallAt: time.Unix(0, h.lastCall.Load())}
}

// all returns every live handle, oldest acquire first (ties by ID).
func (t *handles) all() []*handle {
	t.mu.Lock()
	out := make([]*handle, 0, len(t.byID))
	for _, h := range t.byID {
		out = append(out, h)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b *handle) int {
		if c := a.acquired.Compare(b.acquired); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

// cursor is a position in the inventory's order: after the handle acquired at nanos with id.
type cursor struct {
	nanos int64
	id    string
}

func (c cursor) String() string { return strconv.FormatInt(c.nanos, 10) + "." + c.id }

// before reports whether h comes at or before c in the inventory's order.
func (c cursor) before(h *handle) bool {
	n := h.acquired.UnixNano()
	return n < c.nanos || (n == c.nanos && h.id <= c.id)
}

func parseCursor(s string) (cursor, error) {
	n, id, ok := strings.Cut(s, ".")
	nanos, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || !messages.ValidToken(id) {
		return cursor{}, &messages.BadRequestError{Field: "after", Reason: "after must be the next cursor of a previous list_sandboxes page"}
	}
	return cursor{nanos: nanos, id: id}, nil
}

// inventoryFilter is a list_sandboxes request's filter, checked.
type inventoryFilter struct {
	req   *messages.APIListSandboxesRequest
	now   time.Time
	after *cursor
	own   func(scope string) bool // nil: any scope; else the tenant's own scopes alone
}

func newInventoryFilter(req *messages.APIListSandboxesRequest, now time.Time) (*inventoryFilter, error) {
	switch {
	case req.Limit < 0:
		return nil, &messages.BadRequestError{Field: "limit", Reason: "limit must not be negative"}
	case req.OlderThanMS < 0:
		return nil, &messages.BadRequestError{Field: "older_than_ms", Reason: "older_than_ms must not be negative"}
	case req.IdleMS < 0:
		return nil, &messages.BadRequestError{Field: "idle_ms", Reason: "idle_ms must not be negative"}
	}
	f := &inventoryFilter{req: req, now: now}
	if req.After != "" {
		c, err := parseCursor(req.After)
		if err != nil {
			return nil, err
		}
		f.after = &c
	}
	return f, nil
}

// ownScopes is, on an engine with tenancy, the filter of a tenant's list_sandboxes that names
// no scope: the scopes its identity may use (tenancy.go, mayUse), so that a tenant's console
// finds its own sandboxes without being told its scope; nil for an operator, an engine
// without tenancy, or a request that names its scope (the tenancy check already held it to
// the caller's).
func (s *Service) ownScopes(c *call, scope string) func(string) bool {
	if s.tenancy == nil || scope != "" || c == nil || c.identity == nil || s.tenancy.operators[c.identity.Account] {
		return nil
	}
	id := c.identity
	return func(sc string) bool { return s.tenancy.mayUse(id, sc) }
}

// match reports whether e passes every filter the request set.
func (f *inventoryFilter) match(e *messages.APISandboxEntry) bool {
	r := f.req
	exact := [][2]string{{r.Scope, e.Key.Scope}, {r.ThreadID, e.Key.ThreadID}, {r.Kind, e.Kind},
		{r.InstanceID, e.InstanceID}, {r.Image, e.Image}, {r.Egress, e.Egress}, {r.State, e.State}}
	for _, p := range exact {
		if p[0] != "" && p[0] != p[1] {
			return false
		}
	}
	if f.own != nil && !f.own(e.Key.Scope) {
		return false
	}
	if r.OlderThanMS > 0 && f.now.Sub(e.AcquiredAt) < millis(r.OlderThanMS) {
		return false
	}
	return r.IdleMS <= 0 || f.now.Sub(e.LastCallAt) >= millis(r.IdleMS)
}

func listSandboxes(_ context.Context, s *Service, c *call, data []byte) (any, error) {
	req, err := decode[messages.APIListSandboxesRequest](data)
	if err != nil {
		return nil, err
	}
	f, err := newInventoryFilter(req, time.Now())
	if err != nil {
		return nil, err
	}
	f.own = s.ownScopes(c, req.Scope)
	limit := req.Limit
	if limit == 0 {
		limit = defaultListLimit
	}
	limit = min(limit, maxListLimit)
	out := &messages.APIListSandboxesResponse{Engine: s.id, Sandboxes: []messages.APISandboxEntry{}}
	var page []*handle // the matches past the cursor
	for _, h := range s.handles.all() {
		e := h.entry(s.id)
		if !f.match(&e) {
			continue
		}
		out.Total++
		if f.after == nil || !f.after.before(h) {
			page = append(page, h)
			if len(page) <= limit {
				out.Sandboxes = append(out.Sandboxes, e)
			}
		}
	}
	if len(page) > limit {
		last := page[limit-1]
		out.Next = cursor{nanos: last.acquired.UnixNano(), id: last.id}.String()
	}
	return out, nil
}
