package sandbox

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DeclaredOutput is a file a workload leaves behind for collection, named literally relative
// to the working directory. Globs are forbidden: resolving one is enumeration, which only
// files_list grants.
type DeclaredOutput struct {
	Path        string
	Disposition OutputDisposition // default land
	MediaType   string            // declared by the kind, never sniffed
	Required    bool              // default true; false means absence is a normal outcome
	Name        *string           // landing name; nil = Path
}

// Output declares a required, landing output at path; adjust the fields for anything else.
func Output(path string) DeclaredOutput {
	return DeclaredOutput{Path: path, Disposition: DispositionLand, Required: true}
}

// LandingName is the name the output is delivered under.
func (o DeclaredOutput) LandingName() string {
	if o.Name != nil {
		return *o.Name
	}
	return o.Path
}

// HostToolAggregate is the sealed summary of a host-tool registry a spec carries.
type HostToolAggregate struct {
	ResultIntegrity  *SourceIntegrity // weakest over sources; nil when none is declared
	OutboundCaps     []string
	Identities       []ToolIdentity
	RequiresApproval bool
	HasUndeclared    bool
	ResponseLimits   TransferLimits // per-file = one response, total = the run, files = responses
	MaxCallsPerRun   int
}

// Spec describes one workload. The zero value is not a spec: build one with [NewSpec], which
// applies the protocol's defaults and validates.
type Spec struct {
	Kind                    string
	Image                   string
	ImageID                 string
	Egress                  Egress
	EgressAllow             []EgressRule
	WorkDir                 *string // nil: the backend allocates its base; a value names that exact base
	Labels                  map[string]string
	Requires                CapabilitySet
	MinIsolation            *Isolation // nil: no opinion; may only raise the host's floor
	DeclaredOutputs         []DeclaredOutput
	FilesIn                 TransferLimits
	FilesOut                TransferLimits
	OutputsNamedAtCallTime  bool
	RequiresOSFamily        *OSFamily
	HostTools               *HostToolAggregate
	IsolationScope          IsolationScope
	MinCleanup              *Cleanup
	ConfinedToGuestCallPath bool // advisory claim only
	ExclusiveAdmission      bool
	Resources               Resources // zero: the backend's own bounds
	Sleep                   *Sleep    // nil: the backend's sleep times; see [WithSleep]

	built bool // set by NewSpec; a literal or zero Spec is refused by the router
}

// SpecOption sets one field of a [Spec] under construction.
type SpecOption func(*Spec) error

// NewSpec builds a validated spec for kind with the protocol's defaults (closed egress,
// requires exec and files_in, default transfer limits both ways, conversation scope), then
// applies opts. Nil options are skipped; the first error is returned.
func NewSpec(kind string, opts ...SpecOption) (Spec, error) {
	s := Spec{
		Kind:           kind,
		Egress:         EgressClosed,
		Requires:       DefaultCapabilities(),
		FilesIn:        DefaultTransferLimits(),
		FilesOut:       DefaultTransferLimits(),
		IsolationScope: ScopeConversation,
		Labels:         map[string]string{},
	}
	if kind == "" {
		return Spec{}, &InvalidArgumentError{Reason: "a spec needs a kind"}
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&s); err != nil {
			return Spec{}, err
		}
	}
	if err := s.validate(); err != nil {
		return Spec{}, err
	}
	s.built = true
	return s, nil
}

func (s *Spec) validate() error {
	if _, err := ParseEgress(string(s.Egress)); err != nil {
		return err
	}
	if _, err := ParseIsolationScope(string(s.IsolationScope)); err != nil {
		return err
	}
	if len(s.EgressAllow) > 0 && s.Egress != EgressAllowlist {
		return &InvalidArgumentError{Reason: fmt.Sprintf(
			"the spec lists egress hosts %s but runs with %q egress; set egress to %q or drop the hosts",
			strings.Join(EgressHosts(s.EgressAllow), ", "), s.Egress, EgressAllowlist)}
	}
	rules, err := normalizeEgressRules(s.EgressAllow)
	if err != nil {
		return err
	}
	s.EgressAllow = rules
	if s.HostTools != nil && !s.Requires.Has(HostTools) {
		return &InvalidArgumentError{Reason: "the spec carries host tools but does not require host_tools; add it to Requires"}
	}
	if s.MinIsolation != nil {
		if _, err := ParseIsolation(string(*s.MinIsolation)); err != nil {
			return err
		}
	}
	if s.MinCleanup != nil {
		if _, err := ParseCleanup(string(*s.MinCleanup)); err != nil {
			return err
		}
	}
	for _, o := range s.DeclaredOutputs {
		if _, err := ParseOutputDisposition(string(o.Disposition)); err != nil {
			return err
		}
	}
	if s.Sleep != nil {
		if err := s.Sleep.Validate(); err != nil {
			return err
		}
	}
	return s.Resources.validate()
}

// Valid reports whether the spec was built by [NewSpec].
func (s Spec) Valid() bool { return s.built }

// Clone returns a copy whose mutable parts (labels, slices, sets) are not shared.
func (s Spec) Clone() Spec {
	c := s
	c.Labels = maps.Clone(s.Labels)
	c.EgressAllow = slices.Clone(s.EgressAllow)
	c.Requires = s.Requires.Clone()
	c.DeclaredOutputs = slices.Clone(s.DeclaredOutputs)
	return c
}

// Identities returns the identities the spec's host tools exercise.
func (s Spec) Identities() []ToolIdentity {
	if s.HostTools == nil {
		return nil
	}
	return slices.Clone(s.HostTools.Identities)
}

// RequiredCapabilities is Requires plus egress_methods when an allowlist rule asks for
// inspection (names methods or paths).
func (s Spec) RequiredCapabilities() CapabilitySet {
	req := s.Requires.Clone()
	if s.Egress == EgressAllowlist {
		for _, r := range s.EgressAllow {
			if r.Narrows() {
				req[EgressMethods] = struct{}{}
				break
			}
		}
	}
	return req
}

// NeedsStorageBase reports whether the workload needs a storage base: any spec requiring exec
// or a files capability. Runtime-only specs need no directory.
func (s Spec) NeedsStorageBase() bool {
	for _, c := range []Capability{Exec, FilesIn, FilesOut, FilesList, FilesDelete, HostTools} {
		if s.Requires.Has(c) {
			return true
		}
	}
	return false
}

// WithImage sets the image reference; the backend resolves it.
func WithImage(image string) SpecOption { return func(s *Spec) error { s.Image = image; return nil } }

// WithImageID pins a backend-native image id.
func WithImageID(id string) SpecOption { return func(s *Spec) error { s.ImageID = id; return nil } }

// WithEgress sets the egress mode.
func WithEgress(mode Egress) SpecOption { return func(s *Spec) error { s.Egress = mode; return nil } }

// WithAllowlist sets allowlist egress with the given rules.
func WithAllowlist(rules ...EgressRule) SpecOption {
	return func(s *Spec) error {
		s.Egress = EgressAllowlist
		s.EgressAllow = slices.Clone(rules)
		return nil
	}
}

// WithWorkDir names the exact storage base the workload needs.
func WithWorkDir(dir string) SpecOption { return func(s *Spec) error { s.WorkDir = &dir; return nil } }

// WithLabels adds labels, copied.
func WithLabels(labels map[string]string) SpecOption {
	return func(s *Spec) error { maps.Copy(s.Labels, labels); return nil }
}

// WithRequires replaces the required capabilities.
func WithRequires(caps ...Capability) SpecOption {
	return func(s *Spec) error {
		for _, c := range caps {
			if _, err := ParseCapability(string(c)); err != nil {
				return err
			}
		}
		s.Requires = NewCapabilitySet(caps...)
		return nil
	}
}

// WithIsolationFloor raises the isolation floor for this workload (Spec.MinIsolation).
func WithIsolationFloor(i Isolation) SpecOption {
	return func(s *Spec) error { s.MinIsolation = &i; return nil }
}

// WithDeclaredOutputs sets the outputs to collect.
func WithDeclaredOutputs(outputs ...DeclaredOutput) SpecOption {
	return func(s *Spec) error { s.DeclaredOutputs = slices.Clone(outputs); return nil }
}

// WithFilesIn sets the workload's inbound caps.
func WithFilesIn(l TransferLimits) SpecOption {
	return func(s *Spec) error { s.FilesIn = l; return nil }
}

// WithFilesOut sets the workload's outbound caps.
func WithFilesOut(l TransferLimits) SpecOption {
	return func(s *Spec) error { s.FilesOut = l; return nil }
}

// WithOutputsNamedAtCallTime lets calls name outputs the kind cannot name in advance.
func WithOutputsNamedAtCallTime() SpecOption {
	return func(s *Spec) error { s.OutputsNamedAtCallTime = true; return nil }
}

// WithRequiresOSFamily asks for a guest of family f.
func WithRequiresOSFamily(f OSFamily) SpecOption {
	return func(s *Spec) error {
		if _, err := ParseOSFamily(string(f)); err != nil {
			return err
		}
		s.RequiresOSFamily = &f
		return nil
	}
}

// WithHostTools attaches a sealed host-tool registry summary.
func WithHostTools(agg HostToolAggregate) SpecOption {
	return func(s *Spec) error { s.HostTools = &agg; return nil }
}

// WithIsolationScope sets how long one sandbox lives.
func WithIsolationScope(scope IsolationScope) SpecOption {
	return func(s *Spec) error { s.IsolationScope = scope; return nil }
}

// WithCleanupFloor raises the cleanup floor for this workload (Spec.MinCleanup).
func WithCleanupFloor(c Cleanup) SpecOption {
	return func(s *Spec) error { s.MinCleanup = &c; return nil }
}

// WithConfinedToGuestCallPath records the kind's advisory confinement claim.
func WithConfinedToGuestCallPath() SpecOption {
	return func(s *Spec) error { s.ConfinedToGuestCallPath = true; return nil }
}

// WithResources asks for at most r of the host's memory, CPUs and processes (a zero field asks
// nothing, leaving the backend's bound). A backend that cannot hold a sandbox to an ask, or
// whose bound is lower, refuses the spec ([*ResourcesNotPermittedError]).
func WithResources(r Resources) SpecOption {
	return func(s *Spec) error { s.Resources = r; return nil }
}

// WithExclusiveAdmission makes calls of this kind never overlap.
func WithExclusiveAdmission() SpecOption {
	return func(s *Spec) error { s.ExclusiveAdmission = true; return nil }
}
