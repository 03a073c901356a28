package sandbox

// The protocol's smaller enumerations. Each is string valued and parsed strictly: an unknown
// string is an error, never a guess.

// OSFamily is a guest's path grammar and argv quoting, never what is installed in it.
type OSFamily string

// OS families.
const (
	OSPosix   OSFamily = "posix"
	OSWindows OSFamily = "windows"
)

// OSFamilies lists every family.
func OSFamilies() []OSFamily { return []OSFamily{OSPosix, OSWindows} }

// ParseOSFamily parses a family strictly.
func ParseOSFamily(s string) (OSFamily, error) { return parseEnum("os family", s, OSFamilies()) }

// EntryKind classifies a guest filesystem entry.
type EntryKind string

// Entry kinds. Only a file is ever read; a hard link, fifo, device or socket is "other".
const (
	EntryFile      EntryKind = "file"
	EntryDirectory EntryKind = "directory"
	EntrySymlink   EntryKind = "symlink"
	EntryOther     EntryKind = "other"
)

// EntryKinds lists every kind.
func EntryKinds() []EntryKind {
	return []EntryKind{EntryFile, EntryDirectory, EntrySymlink, EntryOther}
}

// ParseEntryKind parses a kind strictly.
func ParseEntryKind(s string) (EntryKind, error) { return parseEnum("entry kind", s, EntryKinds()) }

// OutputDisposition says what happens to a collected output.
type OutputDisposition string

// Dispositions: land delivers to the host sink; consume is parsed by the kind, never delivered.
const (
	DispositionLand    OutputDisposition = "land"
	DispositionConsume OutputDisposition = "consume"
)

// OutputDispositions lists every disposition.
func OutputDispositions() []OutputDisposition {
	return []OutputDisposition{DispositionLand, DispositionConsume}
}

// ParseOutputDisposition parses a disposition strictly.
func ParseOutputDisposition(s string) (OutputDisposition, error) {
	return parseEnum("output disposition", s, OutputDispositions())
}

// Cleanup is what happens to a sandbox after a call, weakest first.
type Cleanup string

// Cleanup rungs: reclaim removes the call's directory, reset restores the baseline, dispose
// deletes the instance.
const (
	CleanupReclaim Cleanup = "reclaim"
	CleanupReset   Cleanup = "reset"
	CleanupDispose Cleanup = "dispose"
)

// Cleanups lists every rung, weakest first.
func Cleanups() []Cleanup { return []Cleanup{CleanupReclaim, CleanupReset, CleanupDispose} }

// Rank is the rung's strength, or -1 for an unknown value.
func (c Cleanup) Rank() int { return rankOf(c, Cleanups()) }

// ParseCleanup parses a rung strictly.
func ParseCleanup(s string) (Cleanup, error) { return parseEnum("cleanup", s, Cleanups()) }

// FailedReclaimPolicy says what the router does with an instance whose cleanup failed.
type FailedReclaimPolicy string

// Failed-reclaim policies.
const (
	FailedReclaimDispose FailedReclaimPolicy = "dispose"
	FailedReclaimKeep    FailedReclaimPolicy = "keep"
)

// FailedReclaimPolicies lists every policy.
func FailedReclaimPolicies() []FailedReclaimPolicy {
	return []FailedReclaimPolicy{FailedReclaimDispose, FailedReclaimKeep}
}

// ParseFailedReclaimPolicy parses a policy strictly.
func ParseFailedReclaimPolicy(s string) (FailedReclaimPolicy, error) {
	return parseEnum("failed reclaim policy", s, FailedReclaimPolicies())
}

// Selection is how the router picks a backend.
type Selection string

// Selections: fixed uses one backend; per_spec routes each spec to the first that serves it.
const (
	SelectionFixed   Selection = "fixed"
	SelectionPerSpec Selection = "per_spec"
)

// Selections lists every selection.
func Selections() []Selection { return []Selection{SelectionFixed, SelectionPerSpec} }

// ParseSelection parses a selection strictly.
func ParseSelection(s string) (Selection, error) { return parseEnum("selection", s, Selections()) }

// ToolIdentity is whose authority a host tool exercises.
type ToolIdentity string

// Tool identities.
const (
	IdentityApp  ToolIdentity = "app"
	IdentityUser ToolIdentity = "user"
)

// ToolIdentities lists every identity.
func ToolIdentities() []ToolIdentity { return []ToolIdentity{IdentityApp, IdentityUser} }

// ParseToolIdentity parses an identity strictly.
func ParseToolIdentity(s string) (ToolIdentity, error) {
	return parseEnum("identity", s, ToolIdentities())
}

// SourceIntegrity is how far a host tool's result can be trusted, weakest first.
type SourceIntegrity string

// Source integrities.
const (
	SourceUntrusted SourceIntegrity = "untrusted"
	SourceTrusted   SourceIntegrity = "trusted"
)

// SourceIntegrities lists every integrity, weakest first.
func SourceIntegrities() []SourceIntegrity { return []SourceIntegrity{SourceUntrusted, SourceTrusted} }

// Rank is the integrity's strength, or -1 for an unknown value.
func (s SourceIntegrity) Rank() int { return rankOf(s, SourceIntegrities()) }

// ParseSourceIntegrity parses an integrity strictly.
func ParseSourceIntegrity(s string) (SourceIntegrity, error) {
	return parseEnum("source integrity", s, SourceIntegrities())
}

// NameNormalization is how a sink normalises delivered artifact names.
type NameNormalization string

// Name normalizations.
const (
	NormalizeNFC  NameNormalization = "nfc"
	NormalizeNone NameNormalization = "none"
)

// NameNormalizations lists every normalization.
func NameNormalizations() []NameNormalization {
	return []NameNormalization{NormalizeNFC, NormalizeNone}
}

// ParseNameNormalization parses a normalization strictly.
func ParseNameNormalization(s string) (NameNormalization, error) {
	return parseEnum("name normalization", s, NameNormalizations())
}

// DisposalCode classifies why a disposal may have left something behind. The order of
// [DisposalCodes] is the precedence used when folding several failures into one.
type DisposalCode string

// Disposal codes, in folding precedence.
const (
	DisposalUnreachable DisposalCode = "unreachable"
	DisposalTimeout     DisposalCode = "timeout"
	DisposalRefused     DisposalCode = "refused"
	DisposalUnlisted    DisposalCode = "unlisted"
	DisposalUnknown     DisposalCode = "unknown"
)

// DisposalCodes lists every code in folding precedence.
func DisposalCodes() []DisposalCode {
	return []DisposalCode{DisposalUnreachable, DisposalTimeout, DisposalRefused, DisposalUnlisted, DisposalUnknown}
}

// ParseDisposalCode parses a code strictly.
func ParseDisposalCode(s string) (DisposalCode, error) {
	return parseEnum("disposal code", s, DisposalCodes())
}

// SignalOutcome says what became of the signal sent to a timed-out host-tool program.
type SignalOutcome string

// Signal outcomes.
const (
	SignalSent       SignalOutcome = "sent"
	SignalRefused    SignalOutcome = "refused"
	SignalAbsent     SignalOutcome = "absent"
	SignalUnrecorded SignalOutcome = "unrecorded"
	SignalUnknown    SignalOutcome = "unknown"
)

// SignalOutcomes lists every outcome.
func SignalOutcomes() []SignalOutcome {
	return []SignalOutcome{SignalSent, SignalRefused, SignalAbsent, SignalUnrecorded, SignalUnknown}
}

// ParseSignalOutcome parses an outcome strictly.
func ParseSignalOutcome(s string) (SignalOutcome, error) {
	return parseEnum("signal outcome", s, SignalOutcomes())
}

// SignalReach says what a signal was addressed to.
type SignalReach string

// Signal reaches.
const (
	ReachGroup   SignalReach = "group"
	ReachProgram SignalReach = "program"
	ReachNothing SignalReach = "nothing"
)

// SignalReaches lists every reach.
func SignalReaches() []SignalReach { return []SignalReach{ReachGroup, ReachProgram, ReachNothing} }

// ParseSignalReach parses a reach strictly.
func ParseSignalReach(s string) (SignalReach, error) {
	return parseEnum("signal reach", s, SignalReaches())
}

// EgressDecisionCode is an egress enforcer's verdict on one connection attempt.
type EgressDecisionCode string

// Egress decision codes. Only ALLOW opened a tunnel. WOULD-DENY is a request a shadow rule
// ([EgressRule.Shadow]) would have refused and let pass.
const (
	DecisionAllow         EgressDecisionCode = "ALLOW"
	DecisionDeny          EgressDecisionCode = "DENY"
	DecisionDenyNonGlobal EgressDecisionCode = "DENY-NONGLOBAL"
	DecisionUnreachable   EgressDecisionCode = "UNREACHABLE"
	DecisionWouldDeny     EgressDecisionCode = "WOULD-DENY"
)

// EgressDecisionCodes lists every code.
func EgressDecisionCodes() []EgressDecisionCode {
	return []EgressDecisionCode{DecisionAllow, DecisionDeny, DecisionDenyNonGlobal, DecisionUnreachable, DecisionWouldDeny}
}

// ParseEgressDecisionCode parses a code strictly.
func ParseEgressDecisionCode(s string) (EgressDecisionCode, error) {
	return parseEnum("egress decision", s, EgressDecisionCodes())
}
