package reaper

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// Drainer reads an egress proxy's window right before the reaper removes it (§4.8). Drain
// gets the proxy as inventoried (its ID is the expected ID; there is no caller key) and
// returns the publication of what it drained, or nil when there is nothing to publish. Drain
// never stops the removal: whatever it fails at, it returns nil and the proxy is removed.
type Drainer interface {
	Drain(ctx context.Context, proxy docker.Resource) Publication
}

// Publication publishes one drained window. The reaper calls it at most once, and only after
// removing the same proxy ID removed it or found it absent; after a failed, timed-out or
// cancelled removal it is dropped, and the next sweep drains the surviving proxy again.
type Publication func(ctx context.Context, removal docker.RemoveOutcome)

// member is one inventoried, qualifying resource.
type member struct {
	res     docker.Resource
	kind    string
	created time.Time
}

// group is the resources of one base name.
type group struct {
	base     string
	observer *member // an observer is a group of its own, its own anchor
	workload *member
	proxy    *member
	networks []*member
	anchor   *member
	expired  bool
	decision map[string]*sandbox.ReapDecision // by ID
}

// sweep is the state of one Reap call.
type sweep struct {
	inv docker.Inventory
	o   options
	log *zap.Logger
	res sandbox.ReapResult
}

// Reap sweeps inv once (egress-and-reap.md §4) and removes every qualifying resource whose
// group's anchor was created strictly before now − olderThan.
//
// The error is only for an argument refused before any engine call ([ErrInvalid]) and for
// ctx ending ([context.Canceled] or [context.DeadlineExceeded], as ctx.Err() returns it, with
// the partial result); every operational problem is a [sandbox.ReapFailure] in the result.
func Reap(ctx context.Context, inv docker.Inventory, olderThan time.Duration, opts ...Option) (sandbox.ReapResult, error) {
	if olderThan <= 0 {
		return sandbox.ReapResult{}, fmt.Errorf("%w: the age must be positive, got %s", ErrInvalid, olderThan)
	}
	if inv == nil {
		return sandbox.ReapResult{}, fmt.Errorf("%w: nil inventory", ErrInvalid)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return sandbox.ReapResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return sandbox.ReapResult{}, err
	}
	now := o.now()
	s := &sweep{inv: inv, o: o, log: o.log.With(zap.String("op", "reap"), zap.String("scope", o.scope))}
	s.res = sandbox.ReapResult{Scope: o.scope, OlderThan: olderThan, StartedAt: now, Cutoff: now.Add(-olderThan), DryRun: o.dryRun}
	err := s.run(ctx, now)
	s.res.FinishedAt = o.now()
	if s.res.FinishedAt.Before(now) {
		s.res.FinishedAt = now
	}
	return s.res, err
}

func (s *sweep) run(ctx context.Context, now time.Time) error {
	// A cutoff that cannot be represented (the subtraction overflowed) retains everything.
	retainAll := !s.res.Cutoff.Before(now)
	filter := label.IdentityFilter(s.o.scope)

	containers, ok, err := s.inventory(ctx, "containers", filter, s.inv.ListContainerIDs, s.inv.InspectContainerID)
	if err != nil || !ok {
		return err
	}
	if s.o.scope == "" {
		// Warm pool members carry the pool label, not the identity labels: waiting ones are
		// nobody's, bound ones record their key inside, so only an unscoped sweep sees them.
		pooled, ok, err := s.inventory(ctx, "pooled containers", label.PoolFilter(), s.inv.ListContainerIDs, s.inv.InspectContainerID)
		if err != nil || !ok {
			return err
		}
		containers = appendNew(containers, pooled)
	}
	networks, ok, err := s.inventory(ctx, "networks", filter, s.inv.ListNetworkIDs, s.inv.InspectNetworkID)
	if err != nil || !ok {
		return err
	}
	groups := classify(containers, networks)
	s.decide(groups, retainAll)
	s.log.Info("reap inventory taken", zap.Int("containers", len(containers)), zap.Int("networks", len(networks)),
		zap.Int("groups", len(groups)), zap.Time("cutoff", s.res.Cutoff))
	if ok, err := s.revalidateExpired(ctx, groups); err != nil || !ok {
		return err
	}
	if s.o.dryRun {
		for _, g := range groups {
			if g.expired {
				for _, d := range g.decision {
					d.Action = sandbox.ReapWouldRemove
				}
			}
		}
		s.res.Resources = s.snapshot(groups)
		return nil
	}
	defer func() { s.res.Resources = s.snapshot(groups) }()
	for _, g := range groups {
		if !g.expired {
			continue
		}
		for _, d := range g.decision {
			d.Action = sandbox.ReapNotReached
		}
		if err := s.remove(ctx, g); err != nil {
			return err
		}
	}
	return nil
}

// decide marks each group expired or not by its anchor's age and records a kept decision for
// every member.
func (s *sweep) decide(groups []*group, retainAll bool) {
	for _, g := range groups {
		g.expired = !retainAll && g.anchor.created.Before(s.res.Cutoff)
		for _, m := range g.members() {
			d := &sandbox.ReapDecision{Group: g.base, Kind: m.kind, ID: m.res.ID, Name: m.res.Name, Created: m.created,
				Anchor: m == g.anchor, Expired: g.expired, Action: sandbox.ReapKept}
			g.decision[m.res.ID] = d
		}
	}
}

// revalidateExpired re-reads the anchor of every expired group before the first removal
// (§4.5); a group whose anchor was replaced is kept. ok and err as for revalidate.
func (s *sweep) revalidateExpired(ctx context.Context, groups []*group) (ok bool, err error) {
	for _, g := range groups {
		if !g.expired {
			continue
		}
		gone, ok, err := s.revalidate(ctx, g)
		if err != nil || !ok {
			return ok, err
		}
		if gone {
			g.expired = false
			for _, d := range g.decision {
				d.Action = sandbox.ReapReplaced
			}
		}
	}
	return true, nil
}

// snapshot copies the decisions out in removal order.
func (s *sweep) snapshot(groups []*group) []sandbox.ReapDecision {
	var out []sandbox.ReapDecision
	for _, g := range groups {
		out = append(out, g.decisions()...)
	}
	return out
}

// inventory lists IDs, inspects each, and checks what it is told. ok is false when the sweep
// must stop with an unlisted failure (already recorded); err only when ctx ended.
func (s *sweep) inventory(ctx context.Context, what string, filter map[string]string,
	list func(context.Context, map[string]string) ([]string, error),
	inspect func(context.Context, string) (docker.Resource, error),
) (_ []docker.Resource, ok bool, _ error) {
	ids, err := bounded(ctx, s.o.callTimeout, func(c context.Context) ([]string, error) { return list(c, filter) })
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		s.unlisted("", "", fmt.Sprintf("%s: list: %v", what, err))
		return nil, false, nil
	}
	kind := ""
	if what == "networks" {
		kind = sandbox.ReapNetwork
	}
	out := make([]docker.Resource, 0, len(ids))
	for _, id := range ids {
		r, err := bounded(ctx, s.o.callTimeout, func(c context.Context) (docker.Resource, error) { return inspect(c, id) })
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return nil, false, ctx.Err()
		case errors.Is(err, docker.ErrNotFound):
			// Gone between the listing and the inspection: nothing to judge.
			s.log.Debug("inventoried resource vanished before inspection", zap.String("container_id", id))
			continue
		default:
			s.unlisted(id, kind, fmt.Sprintf("%s: inspect: %v", id, err))
			return nil, false, nil
		}
		if problem := s.check(r, id); problem != "" {
			s.unlisted(id, kind, fmt.Sprintf("%s: %s", id, problem))
			return nil, false, nil
		}
		out = append(out, r)
	}
	return out, true, nil
}

// check refuses an inspection the sweep cannot trust: a missing or different ID, an
// unparseable creation time, or (with a scope) a scope label the listing should have excluded.
func (s *sweep) check(r docker.Resource, listed string) string {
	switch {
	case r.ID == "":
		return "the inspection answered without an ID"
	case r.ID != listed:
		return fmt.Sprintf("the inspection answered for another ID %q", r.ID)
	}
	if _, err := parseCreated(r.Created); err != nil {
		return err.Error()
	}
	if s.o.scope != "" {
		if got, want := r.Labels[label.Scope], label.Value(s.o.scope); got != want {
			return fmt.Sprintf("scope label %q does not match the requested scope %q", got, want)
		}
	}
	return ""
}

// parseCreated accepts a full RFC 3339 date-time with a zone and up to nanoseconds; a date
// alone and the zero time are refused.
func parseCreated(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !strings.ContainsAny(v, "Tt") {
		return time.Time{}, fmt.Errorf("unparseable creation time %q", v)
	}
	if t.UTC().Year() <= 1 {
		return time.Time{}, fmt.Errorf("zero creation time %q", v)
	}
	return t, nil
}

func (s *sweep) unlisted(id, kind, detail string) {
	s.res.Failures = append(s.res.Failures, sandbox.ReapFailure{Code: sandbox.DisposalUnlisted, Detail: detail, ResourceID: id, ResourceKind: kind})
	s.log.Warn("reap deletes nothing: inventory could not be trusted", zap.String("detail", detail))
}

// classify keeps the qualifying resources and groups them by base name (§4.3).
func classify(containers, networks []docker.Resource) []*group {
	byBase := map[string]*group{}
	get := func(base string) *group {
		g := byBase[base]
		if g == nil {
			g = &group{base: base, decision: map[string]*sandbox.ReapDecision{}}
			byBase[base] = g
		}
		return g
	}
	var out []*group
	for _, r := range containers {
		if docker.IsObserverName(r.Name) && r.Labels[label.Role] == label.RoleObserver && hasIdentity(r.Labels) {
			created, _ := parseCreated(r.Created)
			m := &member{res: r, kind: sandbox.ReapObserver, created: created}
			out = append(out, &group{base: r.Name, observer: m, anchor: m, decision: map[string]*sandbox.ReapDecision{}})
			continue
		}
		if base, ok := poolBase(r); ok {
			created, _ := parseCreated(r.Created)
			get(base).workload = &member{res: r, kind: sandbox.ReapWorkload, created: created}
			continue
		}
		base, role, ok := docker.ParseName(r.Name)
		if !ok || !hasIdentity(r.Labels) {
			continue
		}
		_, hasRole := r.Labels[label.Role]
		created, _ := parseCreated(r.Created)
		switch {
		case role == docker.RoleWorkload && !hasRole:
			g := get(base)
			g.workload = &member{res: r, kind: sandbox.ReapWorkload, created: created}
		case role == docker.RoleProxyName && r.Labels[label.Role] == label.RoleProxy:
			g := get(base)
			g.proxy = &member{res: r, kind: sandbox.ReapProxy, created: created}
		}
	}
	// Networks whose group has no container are judged one by one by their own age.
	for _, r := range networks {
		base, role, ok := docker.ParseName(r.Name)
		if !ok || role != docker.RoleNetworkName || !hasIdentity(r.Labels) {
			continue
		}
		created, _ := parseCreated(r.Created)
		m := &member{res: r, kind: sandbox.ReapNetwork, created: created}
		if g := byBase[base]; g != nil {
			g.networks = append(g.networks, m)
			continue
		}
		out = append(out, &group{base: base, networks: []*member{m}, anchor: m, decision: map[string]*sandbox.ReapDecision{}})
	}
	for _, g := range byBase {
		g.anchorMembers()
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].base != out[j].base {
			return out[i].base < out[j].base
		}
		return out[i].anchor.res.ID < out[j].anchor.res.ID
	})
	return out
}

// anchorMembers names the group's anchor (its workload, else its proxy) and drops the
// members whose identity differs from the anchor's: they are not this group's, and are never
// removed.
func (g *group) anchorMembers() {
	g.anchor = g.workload
	if g.anchor == nil {
		g.anchor = g.proxy
	}
	if g.proxy != nil && g.proxy != g.anchor && !sameIdentity(g.proxy.res.Labels, g.anchor.res.Labels) {
		g.proxy = nil
	}
	kept := g.networks[:0]
	for _, n := range g.networks {
		if sameIdentity(n.res.Labels, g.anchor.res.Labels) {
			kept = append(kept, n)
		}
	}
	g.networks = kept
}

// poolBase is the group of a warm pool member: its own pool name while it waits, the key's
// derived name once bound. ok is false for anything else, and for a container that carries
// identity labels too (it is judged as a workload of its key).
func poolBase(r docker.Resource) (string, bool) {
	if _, pooled := r.Labels[label.Pool]; !pooled || hasIdentity(r.Labels) {
		return "", false
	}
	name := strings.TrimPrefix(r.Name, "/")
	if docker.IsPoolName(name) {
		return name, true
	}
	if base, role, ok := docker.ParseName(name); ok && role == docker.RoleWorkload {
		return base, true
	}
	return "", false
}

// appendNew appends to list the resources of more it does not hold yet (by ID).
func appendNew(list, more []docker.Resource) []docker.Resource {
	seen := map[string]bool{}
	for _, r := range list {
		seen[r.ID] = true
	}
	for _, r := range more {
		if !seen[r.ID] {
			list = append(list, r)
		}
	}
	return list
}

func hasIdentity(labels map[string]string) bool {
	for _, k := range label.IdentityKeys() {
		if labels[k] == "" {
			return false
		}
	}
	return true
}

func sameIdentity(a, b map[string]string) bool {
	for _, k := range label.IdentityKeys() {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// members returns the group in removal order: proxy, workload, networks; an observer's
// group has the observer alone.
func (g *group) members() []*member {
	var out []*member
	if g.observer != nil {
		out = append(out, g.observer)
	}
	if g.proxy != nil {
		out = append(out, g.proxy)
	}
	if g.workload != nil {
		out = append(out, g.workload)
	}
	return append(out, g.networks...)
}

func (g *group) decisions() []sandbox.ReapDecision {
	var out []sandbox.ReapDecision
	for _, m := range g.members() {
		out = append(out, *g.decision[m.res.ID])
	}
	return out
}

// revalidate re-inspects the anchor of an expired group by ID (§4.5). gone: the anchor is
// absent, leave the group alone. ok false: an unlisted failure was recorded and nothing may
// be removed. err only when ctx ended.
func (s *sweep) revalidate(ctx context.Context, g *group) (gone, ok bool, _ error) {
	a := g.anchor
	inspect := s.inv.InspectContainerID
	if a.kind == sandbox.ReapNetwork {
		inspect = s.inv.InspectNetworkID
	}
	r, err := bounded(ctx, s.o.callTimeout, func(c context.Context) (docker.Resource, error) { return inspect(c, a.res.ID) })
	switch {
	case err == nil && r.ID == a.res.ID:
		return false, true, nil
	case err == nil:
		s.unlisted(a.res.ID, a.kind, fmt.Sprintf("%s: revalidation answered for another ID %q", a.res.Name, r.ID))
		return false, false, nil
	case ctx.Err() != nil:
		return false, false, ctx.Err()
	case errors.Is(err, docker.ErrNotFound):
		s.log.Info("reap leaves a group alone: its anchor is gone", zap.String("container", a.res.Name), zap.String("container_id", a.res.ID))
		return true, true, nil
	}
	s.unlisted(a.res.ID, a.kind, fmt.Sprintf("%s: revalidate: %v", a.res.Name, err))
	return false, false, nil
}

// remove removes one expired group in order: proxy (drained), workload, networks (§4.6); an
// observer's group, the observer.
func (s *sweep) remove(ctx context.Context, g *group) error {
	for _, c := range []*member{g.observer, g.proxy, g.workload} {
		if c == nil {
			continue
		}
		var publish Publication
		if c.kind == sandbox.ReapProxy && s.o.drainer != nil {
			publish = s.drain(ctx, c.res)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		// The driver waits out a removal already under way (the daemon's own, of an observer
		// that just exited) and then reports the container removed.
		outcome, err := bounded(ctx, s.o.callTimeout, func(cc context.Context) (docker.RemoveOutcome, error) {
			return s.inv.RemoveContainerID(cc, c.res.ID)
		})
		if ctx.Err() != nil {
			// Cancelled: the outcome is unknown and the drained window is not published.
			return ctx.Err()
		}
		if err != nil {
			s.failed(g, c, err)
			s.skipRest(g)
			return nil
		}
		if publish != nil {
			publish(ctx, outcome)
		}
		if outcome == docker.Absent {
			g.decision[c.res.ID].Action = sandbox.ReapAbsent
			s.skipRest(g)
			return nil
		}
		g.decision[c.res.ID].Action = sandbox.ReapRemoved
		switch c.kind {
		case sandbox.ReapProxy:
			s.res.ProxiesRemoved++
		case sandbox.ReapObserver:
			s.res.ObserversRemoved++
		default:
			s.res.Disposed++
		}
		s.log.Info("reap removed a container", zap.String("container", c.res.Name), zap.String("container_id", c.res.ID), zap.String("kind", c.kind))
	}
	for _, n := range g.networks {
		outcome, err := bounded(ctx, s.o.callTimeout, func(cc context.Context) (docker.RemoveOutcome, error) {
			return s.inv.RemoveNetworkID(cc, n.res.ID)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err != nil:
			s.failed(g, n, err)
		case outcome == docker.Absent:
			g.decision[n.res.ID].Action = sandbox.ReapAbsent
		default:
			g.decision[n.res.ID].Action = sandbox.ReapRemoved
			s.res.NetworksRemoved++
			s.log.Info("reap removed a network", zap.String("network", n.res.Name), zap.String("network_id", n.res.ID))
		}
	}
	return nil
}

// drain runs the drainer under its own bounded context; nil means nothing to publish.
func (s *sweep) drain(ctx context.Context, proxy docker.Resource) Publication {
	// A drain is an inspect, a stop and a log read: three calls' worth of time.
	dctx, cancel := context.WithTimeout(ctx, 3*s.o.callTimeout)
	defer cancel()
	return s.o.drainer.Drain(dctx, proxy)
}

// skipRest marks every member of g not yet acted on as skipped.
func (s *sweep) skipRest(g *group) {
	for _, d := range g.decision {
		if d.Action == sandbox.ReapNotReached {
			d.Action = sandbox.ReapSkipped
		}
	}
}

func (s *sweep) failed(g *group, m *member, err error) {
	g.decision[m.res.ID].Action = sandbox.ReapFailed
	f := sandbox.ReapFailure{Code: code(err), Detail: fmt.Sprintf("%s: remove %s: %v", m.res.Name, m.kind, err), ResourceID: m.res.ID, ResourceKind: m.kind}
	s.res.Failures = append(s.res.Failures, f)
	s.log.Warn("reap could not remove a resource", zap.String("container", m.res.Name), zap.String("container_id", m.res.ID),
		zap.String("code", string(f.Code)), zap.Error(err))
}

// code classifies a removal failure (§4.7). The caller has already ruled out its own ctx.
func code(err error) sandbox.DisposalCode {
	switch {
	case errors.Is(err, docker.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return sandbox.DisposalTimeout
	case errors.Is(err, docker.ErrUnreachable):
		return sandbox.DisposalUnreachable
	}
	return sandbox.DisposalRefused
}

// bounded runs fn under its own deadline derived from ctx.
func bounded[T any](ctx context.Context, d time.Duration, fn func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(cctx)
}
