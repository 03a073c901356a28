package sandbox

import "slices"

// Declarations is a backend's self-description, read synchronously before any sandbox exists.
// It must be settled data: anything needing an engine round trip is computed in a factory
// before the backend is registered.
//
// Silence has a meaning per field, and "not stated" differs from "stated empty": a nil
// Capabilities means the default set, a nil Limits the default limits, while an empty
// EgressModes enforces nothing (every spec is refused) and an empty OSFamilies answers
// nothing (only specs that ask are refused).
type Declarations struct {
	Capabilities               CapabilitySet  // nil: DefaultCapabilities
	Limits                     *SandboxLimits // nil: DefaultSandboxLimits
	EgressModes                EgressSet      // empty: enforces nothing
	OSFamilies                 []OSFamily     // empty: no answer
	IsolationScopes            []IsolationScope
	ObservesEgress             bool
	EgressMethodTokens         []string // methods an inspecting allowlist rule may name
	EgressPaths                bool     // enforces the path patterns of inspecting rules
	AttachedIdentity           *AttachedIdentityDeclaration
	RequiresExclusiveAdmission bool
	// Resources are the most of the host one sandbox may be given (a zero field: no ceiling).
	// nil: the backend holds sandboxes to no resource ask, and refuses a spec that makes one.
	Resources *Resources
}

// AttachedIdentityDeclaration bounds a platform identity a backend attaches to sandboxes.
type AttachedIdentityDeclaration struct {
	Scope            IsolationScope
	RetentionSeconds int64
	Channels         []string
}

// EffectiveCapabilities applies the silence rule: unstated means the default set.
func (d Declarations) EffectiveCapabilities() CapabilitySet {
	if d.Capabilities == nil {
		return DefaultCapabilities()
	}
	return d.Capabilities
}

// EffectiveLimits applies the silence rule: unstated means the default limits.
func (d Declarations) EffectiveLimits() SandboxLimits {
	if d.Limits == nil {
		return DefaultSandboxLimits()
	}
	return *d.Limits
}

// EffectiveIsolationScopes applies the one silence that is a claim: unstated or empty means
// conversation scope.
func (d Declarations) EffectiveIsolationScopes() []IsolationScope {
	if len(d.IsolationScopes) == 0 {
		return []IsolationScope{ScopeConversation}
	}
	return d.IsolationScopes
}

// ServesOS reports whether family is declared.
func (d Declarations) ServesOS(family OSFamily) bool { return slices.Contains(d.OSFamilies, family) }

// LegacyDeclarer is the shape of a backend that still exposes the four loose declaration
// attributes of older protocol versions. The router refuses such a backend at construction,
// because it cannot tell which description is meant.
type LegacyDeclarer interface {
	Capabilities() CapabilitySet
}

// legacyLimits, legacyEgress and legacyOS are the other three legacy attributes.
type legacyLimits interface{ Limits() SandboxLimits }
type legacyEgress interface{ EgressModes() EgressSet }
type legacyOS interface{ OSFamilies() []OSFamily }

func hasLegacyDeclarations(b Backend) bool {
	switch b.(type) {
	case LegacyDeclarer, legacyLimits, legacyEgress, legacyOS:
		return true
	}
	return false
}
