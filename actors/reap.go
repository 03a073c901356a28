package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// ErrReapInProgress is returned by [Backend.Reap] while another Reap of the same backend is
// running: two sweeps of one engine would race each other's revalidation.
var ErrReapInProgress = errors.New("actors: a reap of this engine is already in progress")

// reaping holds the backends with a sweep in flight. (A field on Backend would do; this file
// keeps the reap wiring to itself until the ReaperActor of §3.7 exists.)
var reaping sync.Map // *Backend → struct{}

// Reap runs one age-based sweep of the backend's engine (egress-and-reap.md §4): see
// [reaper.Reap] for the rules, the options and what the error means. It fails with
// [sandbox.ErrUnsupported] when the engine implementation cannot take an inventory
// ([docker.Inventory]), and with [ErrReapInProgress] while another Reap of this backend runs.
// The sweep logs through the backend's logger; pass [reaper.WithDrainer] to drain proxies
// before their removal.
func (b *Backend) Reap(ctx context.Context, olderThan time.Duration, opts ...reaper.Option) (reaper.Result, error) {
	inv, ok := b.inventory()
	if !ok {
		return reaper.Result{}, fmt.Errorf("reap: %w: the engine implementation cannot list resources by ID", sandbox.ErrUnsupported)
	}
	if _, busy := reaping.LoadOrStore(b, struct{}{}); busy {
		return reaper.Result{}, ErrReapInProgress
	}
	defer reaping.Delete(b)
	all := append([]reaper.Option{reaper.WithLogger(b.log)}, opts...)
	return reaper.Reap(ctx, inv, olderThan, all...)
}

// inventory returns the raw engine (under the read retries of retry.go) as a
// [docker.Inventory], when it is one. The reaper never retries: a failed inventory call must
// stop the sweep, and the next sweep is the retry.
func (b *Backend) inventory() (docker.Inventory, bool) {
	e := b.engine
	if r, ok := e.(retrying); ok {
		e = r.Engine
	}
	inv, ok := e.(docker.Inventory)
	return inv, ok
}
