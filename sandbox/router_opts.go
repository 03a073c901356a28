package sandbox

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// RouterOption configures a [Router]. Nil options are skipped; the first error stops
// construction.
type RouterOption func(*routerOptions) error

type routerOptions struct {
	minIsolation      Isolation
	minIsolationScope IsolationScope
	minCleanup        Cleanup
	selected          string
	selection         Selection
	deniedCaps        CapabilitySet
	deniedIdentities  map[ToolIdentity]struct{}
	reclaimTimeout    time.Duration
	reclaimPolicy     FailedReclaimPolicy
	acquireWait       time.Duration
	observer          Observer
	logger            *zap.Logger
}

func defaultRouterOptions() routerOptions {
	return routerOptions{
		minIsolation:      IsolationMicroVM,
		minIsolationScope: ScopeConversation,
		minCleanup:        CleanupDispose,
		selection:         SelectionFixed,
		deniedCaps:        CapabilitySet{},
		deniedIdentities:  map[ToolIdentity]struct{}{},
		reclaimTimeout:    30 * time.Second,
		reclaimPolicy:     FailedReclaimDispose,
		acquireWait:       120 * time.Second,
		logger:            zap.NewNop(),
	}
}

// WithMinIsolation sets the host's isolation floor (default microvm). A container backend is
// refused at construction unless the host lowers the floor to container.
func WithMinIsolation(i Isolation) RouterOption {
	return func(o *routerOptions) error {
		if _, err := ParseIsolation(string(i)); err != nil {
			return err
		}
		o.minIsolation = i
		return nil
	}
}

// WithMinIsolationScope sets the host's scope floor (default conversation).
func WithMinIsolationScope(s IsolationScope) RouterOption {
	return func(o *routerOptions) error {
		if _, err := ParseIsolationScope(string(s)); err != nil {
			return err
		}
		o.minIsolationScope = s
		return nil
	}
}

// WithMinCleanup sets the host's cleanup floor (default dispose). Lowering it to reclaim is
// the host's opt-in to warm reuse.
func WithMinCleanup(c Cleanup) RouterOption {
	return func(o *routerOptions) error {
		if _, err := ParseCleanup(string(c)); err != nil {
			return err
		}
		o.minCleanup = c
		return nil
	}
}

// WithSelected names the one backend to use (default: the first registered).
func WithSelected(name string) RouterOption {
	return func(o *routerOptions) error { o.selected = name; return nil }
}

// WithSelection sets how a backend is picked (default fixed).
func WithSelection(s Selection) RouterOption {
	return func(o *routerOptions) error {
		if _, err := ParseSelection(string(s)); err != nil {
			return err
		}
		o.selection = s
		return nil
	}
}

// WithDeniedCapabilities refuses every spec requiring one of caps, whatever the backend.
func WithDeniedCapabilities(caps ...Capability) RouterOption {
	return func(o *routerOptions) error {
		for _, c := range caps {
			if _, err := ParseCapability(string(c)); err != nil {
				return err
			}
			o.deniedCaps[c] = struct{}{}
		}
		return nil
	}
}

// WithDeniedIdentities refuses every spec whose host tools act as one of ids.
func WithDeniedIdentities(ids ...ToolIdentity) RouterOption {
	return func(o *routerOptions) error {
		for _, id := range ids {
			if _, err := ParseToolIdentity(string(id)); err != nil {
				return err
			}
			o.deniedIdentities[id] = struct{}{}
		}
		return nil
	}
}

// WithReclaim sets the reclaim bound and what happens when a reclaim fails (default 30 s,
// dispose).
func WithReclaim(timeout time.Duration, policy FailedReclaimPolicy) RouterOption {
	return func(o *routerOptions) error {
		if timeout <= 0 {
			return &InvalidArgumentError{Reason: fmt.Sprintf("reclaim timeout must be positive, got %s", timeout)}
		}
		if _, err := ParseFailedReclaimPolicy(string(policy)); err != nil {
			return err
		}
		o.reclaimTimeout, o.reclaimPolicy = timeout, policy
		return nil
	}
}

// WithAcquireWait bounds how long an acquire waits behind another of the same key and kind
// (default 120 s).
func WithAcquireWait(d time.Duration) RouterOption {
	return func(o *routerOptions) error {
		if d <= 0 {
			return &InvalidArgumentError{Reason: fmt.Sprintf("acquire wait must be positive, got %s", d)}
		}
		o.acquireWait = d
		return nil
	}
}

// WithObserver reports every act to obs: the router's own (acquires, disposals, purges), its
// backends' (the router hands obs, guarded, to each [Reporting] backend at construction) and
// an API's in front of it ([Router.Observer]). Combine several with [Observers]. Without one no
// act is built, and reporting backends read no egress enforcer.
func WithObserver(obs Observer) RouterOption {
	return func(o *routerOptions) error { o.observer = obs; return nil }
}

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) RouterOption {
	return func(o *routerOptions) error {
		if l != nil {
			o.logger = l
		}
		return nil
	}
}
