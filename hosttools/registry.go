package hosttools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// Declaration is a tool's complete information-flow declaration. Every leg is answered, and
// nil is an answer: Source nil brings nothing external in, Sink nil lets nothing
// conversation-derived out, Identity nil exercises no authority.
type Declaration struct {
	Source   *sandbox.SourceIntegrity
	Sink     *string
	Identity *sandbox.ToolIdentity
}

// Arguments are one call's keyword arguments as the guest's JSON carried them.
type Arguments map[string]json.RawMessage

// Decode unmarshals the argument called name into v; a missing argument leaves v unchanged.
func (a Arguments) Decode(name string, v any) error {
	raw, ok := a[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode argument %s: %w", name, err)
	}
	return nil
}

// Func is a host tool's body. Its result is sent to the guest as JSON (json.RawMessage is
// sent as it is, after validation); an error or a panic reaches the guest only as a generic
// refusal, with the detail in the host's log. ctx is never cancelled by the run's deadline: a
// tool that has started runs to its end.
type Func func(ctx context.Context, args Arguments) (any, error)

// Param is one keyword argument a tool binds.
type Param struct {
	Name     string
	Required bool
}

// Tool is one function a guest may call.
type Tool struct {
	Name        string
	Description string
	// Declaration nil means undeclared: refused at registration under RequireDeclared,
	// otherwise served as an untrusted source acting as app.
	Declaration *Declaration
	// Params are the keyword arguments the tool binds; a call naming another one, or
	// missing a required one, is refused before the tool runs.
	Params []Param
	// AnyArguments skips binding: every object of arguments reaches the tool (a tool
	// served elsewhere, whose signature the host does not know).
	AnyArguments bool
	Func         Func
}

// Registry holds the tools a host offers. It is empty by default, safe for concurrent use,
// and sealed by [Registry.Aggregate] or [Registry.NewRun].
type Registry struct {
	opts    options
	mu      sync.Mutex
	tools   map[string]Tool
	sealed  bool
	warned  bool
	undecl  bool
	ordered []string
}

// NewRegistry builds an empty registry over the defaults (RequireDeclared off, allowed
// identities {app}, 16 calls a run, the default transfer limits for responses), then applies
// opts. Nil options are skipped; the first error is returned.
func NewRegistry(opts ...Option) (*Registry, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Registry{opts: o, tools: map[string]Tool{}}, nil
}

// Register adds t. Refused with [*RegistrationError]: an empty or duplicate name, a nil
// Func, a sealed registry; with [*sandbox.HostToolNotDeclaredError]: an undeclared tool under
// RequireDeclared; with [*sandbox.HostToolIdentityNotAllowedError]: a declared identity (or an
// undeclared tool's implied app) outside the allowed identities. The first registration logs
// a one-time warning, since calls bypass any middleware, unless [WithoutRegistrationWarning].
func (r *Registry) Register(t Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.sealed:
		return &RegistrationError{Tool: t.Name, Reason: "the registry was sealed by Aggregate or NewRun", Err: ErrSealed}
	case t.Name == "":
		return &RegistrationError{Tool: t.Name, Reason: "a tool name must be a non-empty string"}
	case t.Func == nil:
		return &RegistrationError{Tool: t.Name, Reason: "the tool has no function"}
	}
	if _, dup := r.tools[t.Name]; dup {
		return &RegistrationError{Tool: t.Name, Reason: "a tool of that name is already registered"}
	}
	if t.Declaration == nil && r.opts.requireDeclared {
		return &sandbox.HostToolNotDeclaredError{Tool: t.Name}
	}
	if id, acts := identityOf(t); acts && !slices.Contains(r.opts.allowed, id) {
		return &sandbox.HostToolIdentityNotAllowedError{Tool: t.Name, Identity: id}
	}
	for _, p := range t.Params {
		if p.Name == "" {
			return &RegistrationError{Tool: t.Name, Reason: "a parameter name must be non-empty"}
		}
	}
	t.Params = slices.Clone(t.Params)
	if t.Declaration != nil {
		d := *t.Declaration
		t.Declaration = &d
	} else {
		r.undecl = true
	}
	r.tools[t.Name] = t
	r.ordered = append(r.ordered, t.Name)
	if !r.warned && !r.opts.quiet {
		r.warned = true
		r.opts.logger.Warn("host tools registered: calls from guest programs reach these functions directly, bypassing any middleware",
			zap.String("tool", t.Name))
	}
	return nil
}

// identityOf is the authority a tool exercises: its declared identity, app for an undeclared
// tool, none for a declared nil identity.
func identityOf(t Tool) (sandbox.ToolIdentity, bool) {
	if t.Declaration == nil {
		return sandbox.IdentityApp, true
	}
	if t.Declaration.Identity == nil {
		return "", false
	}
	return *t.Declaration.Identity, true
}

// Names lists the registered tools in registration order.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ordered)
}

// Tools returns the registered tools in registration order.
func (r *Registry) Tools() []Tool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Tool, 0, len(r.ordered))
	for _, n := range r.ordered {
		out = append(out, r.tools[n])
	}
	return out
}

// MaxCallsPerRun is how many calls one run may make, refusals included.
func (r *Registry) MaxCallsPerRun() int { return r.opts.maxCalls }

// ResponseLimits bounds a run's responses: per file one response, total the run, files the
// delivered responses.
func (r *Registry) ResponseLimits() sandbox.TransferLimits { return r.opts.limits }

// Sealed reports whether Aggregate or NewRun has sealed the registry.
func (r *Registry) Sealed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sealed
}

// Aggregate seals the registry and summarises it for [sandbox.WithHostTools]: the weakest
// integrity over sources only (nil when no tool is a source; an undeclared tool counts as an
// untrusted source), every sink cap verbatim, the identities exercised, whether any tool acts
// as the user, whether any is undeclared, plus the response limits and the call cap.
func (r *Registry) Aggregate() sandbox.HostToolAggregate {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealed = true
	agg := sandbox.HostToolAggregate{HasUndeclared: r.undecl, ResponseLimits: r.opts.limits, MaxCallsPerRun: r.opts.maxCalls}
	caps := map[string]bool{}
	ids := map[sandbox.ToolIdentity]bool{}
	for _, name := range r.ordered {
		t := r.tools[name]
		src := sandbox.SourceUntrusted
		hasSource := t.Declaration == nil
		if t.Declaration != nil && t.Declaration.Source != nil {
			src, hasSource = *t.Declaration.Source, true
		}
		if hasSource && (agg.ResultIntegrity == nil || src.Rank() < agg.ResultIntegrity.Rank()) {
			s := src
			agg.ResultIntegrity = &s
		}
		if t.Declaration != nil && t.Declaration.Sink != nil {
			caps[*t.Declaration.Sink] = true
		}
		if id, acts := identityOf(t); acts {
			ids[id] = true
		}
	}
	for c := range caps {
		agg.OutboundCaps = append(agg.OutboundCaps, c)
	}
	sort.Strings(agg.OutboundCaps)
	for _, id := range sandbox.ToolIdentities() {
		if ids[id] {
			agg.Identities = append(agg.Identities, id)
		}
	}
	agg.RequiresApproval = ids[sandbox.IdentityUser]
	return agg
}

// lookup returns the tool called name.
func (r *Registry) lookup(name string) (Tool, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.tools[name]
	return t, ok
}

func (r *Registry) seal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sealed = true
}
