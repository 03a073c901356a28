package sandboxtest

import (
	"errors"

	"github.com/mafsandbox/engine/sandbox"
)

// DefaultName is the fake backend's name unless [WithName] says otherwise.
const DefaultName = "fake"

// Option configures a [Backend] built by [New].
type Option func(*options) error

type options struct {
	name           string
	isolation      sandbox.Isolation
	declarations   sandbox.Declarations
	sandbox        *Sandbox
	sandboxOpts    []SandboxOption
	acquireErr     error
	disposeFailure *sandbox.DisposalFailure
	scopePurge     *sandbox.ScopePurge
}

// DefaultDeclarations is what the fake declares unless [WithDeclarations] says otherwise:
// the default capability set and egress {allowlist, closed}; everything else unstated.
func DefaultDeclarations() sandbox.Declarations {
	return sandbox.Declarations{
		Capabilities: sandbox.DefaultCapabilities(),
		EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist, sandbox.EgressClosed),
	}
}

func defaultOptions() options {
	return options{name: DefaultName, isolation: sandbox.IsolationNone, declarations: DefaultDeclarations()}
}

// WithName sets the backend's name; it must not be empty.
func WithName(name string) Option {
	return func(o *options) error {
		if name == "" {
			return errors.New("sandboxtest: a backend name must not be empty")
		}
		o.name = name
		return nil
	}
}

// WithIsolation sets the declared isolation rung. Any value is taken, rungs off the ladder
// included, so that tests can see the router refuse them.
func WithIsolation(i sandbox.Isolation) Option {
	return func(o *options) error { o.isolation = i; return nil }
}

// WithDeclarations replaces the declarations as a whole.
func WithDeclarations(d sandbox.Declarations) Option {
	return func(o *options) error { o.declarations = d; return nil }
}

// WithCapabilities replaces only the declared capabilities.
func WithCapabilities(caps ...sandbox.Capability) Option {
	return func(o *options) error { o.declarations.Capabilities = sandbox.NewCapabilitySet(caps...); return nil }
}

// WithSandbox makes Acquire hand out sb instead of a sandbox built by [New].
func WithSandbox(sb *Sandbox) Option {
	return func(o *options) error {
		if sb == nil {
			return errors.New("sandboxtest: WithSandbox needs a sandbox")
		}
		o.sandbox = sb
		return nil
	}
}

// WithSandboxOptions configures the sandbox [New] builds; it is ignored with [WithSandbox].
func WithSandboxOptions(opts ...SandboxOption) Option {
	return func(o *options) error { o.sandboxOpts = append(o.sandboxOpts, opts...); return nil }
}

// WithAcquireError makes Acquire return err instead of a sandbox.
func WithAcquireError(err error) Option {
	return func(o *options) error { o.acquireErr = err; return nil }
}

// WithDisposeFailure makes Dispose report f (copied) and leave the key's sandboxes counted as
// live.
func WithDisposeFailure(f sandbox.DisposalFailure) Option {
	return func(o *options) error { o.disposeFailure = &f; return nil }
}

// WithScopePurge makes DisposeScope report p instead of counting the conversation's live
// sandboxes.
func WithScopePurge(p sandbox.ScopePurge) Option {
	return func(o *options) error { o.scopePurge = &p; return nil }
}
