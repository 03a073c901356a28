package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/mafsandbox/engine/docker"
)

// statMemo holds engine stats taken while the guest cannot change its filesystem (frozen, or
// created and not yet started), so one walk's components can be fetched concurrently and
// asked again for free. A nil memo asks the engine every time.
type statMemo struct {
	mu       sync.Mutex
	answers  map[string]statAnswer
	kindOnly bool // the answers need no owner: the driver's cheaper kind-only stat serves
}

type statAnswer struct {
	e   *docker.Entry
	err error
}

func newStatMemo() *statMemo { return &statMemo{answers: map[string]statAnswer{}} }

// newKindMemo is a memo for walks that decide on the kind alone (no owner).
func newKindMemo() *statMemo { return &statMemo{answers: map[string]statAnswer{}, kindOnly: true} }

// ask stats p with the engine call the memo's answers need.
func (m *statMemo) ask(ctx context.Context, e statter, target, p string) (*docker.Entry, error) {
	if m.kindOnly {
		return e.StatType(ctx, target, p)
	}
	return e.Stat(ctx, target, p)
}

// statter is what a walk's memo asks of the engine: the full stat (owner included) and the
// kind-only one, which falls back on the full stat where the driver has no cheaper one
// (retrying.StatType).
type statter interface {
	Stat(ctx context.Context, target, guestPath string) (*docker.Entry, error)
	StatType(ctx context.Context, target, guestPath string) (*docker.Entry, error)
}

// prefetch stats every path not yet known, all at once: one docker client process each,
// so the walk's wall clock is one stat rather than one per component.
func (m *statMemo) prefetch(ctx context.Context, e statter, target string, paths []string) {
	if m == nil {
		return
	}
	var wg sync.WaitGroup
	for _, p := range paths {
		m.mu.Lock()
		_, known := m.answers[p]
		if !known {
			m.answers[p] = statAnswer{} // claimed; filled below
		}
		m.mu.Unlock()
		if known {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var entry *docker.Entry
			var err error
			defer func() {
				// A driver bug must fail this stat, not the process: this goroutine is not
				// the actor's, so no supervisor would catch it.
				if r := recover(); r != nil {
					err = fmt.Errorf("stat %s: engine driver panicked: %v", p, r)
				}
				m.mu.Lock()
				m.answers[p] = statAnswer{entry, err}
				m.mu.Unlock()
			}()
			entry, err = m.ask(ctx, e, target, p)
		}()
	}
	wg.Wait()
}

// stat answers from the memo, asking the engine for what was not prefetched.
func (m *statMemo) stat(ctx context.Context, e statter, target, path string) (*docker.Entry, error) {
	if m == nil {
		return e.Stat(ctx, target, path)
	}
	m.mu.Lock()
	a, ok := m.answers[path]
	m.mu.Unlock()
	if ok {
		return a.e, a.err
	}
	entry, err := m.ask(ctx, e, target, path)
	m.mu.Lock()
	m.answers[path] = statAnswer{entry, err}
	m.mu.Unlock()
	return entry, err
}
