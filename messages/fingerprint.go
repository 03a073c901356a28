package messages

// Wire types of the fingerprint call (docker-backend §12.5, protocol §14.8): a host proves a
// kind's confinement by asking for a baseline fingerprint of a fresh sandbox, running the
// kind's real call and cleanup through the other calls, and asking for the final one, which
// comes back compared with the baseline.
const (
	APIFingerprintRequestType  = APITypePrefix + "fingerprint_request"
	APIFingerprintResponseType = APITypePrefix + "fingerprint_response"
)

// Fingerprint phases.
const (
	// FingerprintBaseline measures the sandbox before the call and keeps the measurement;
	// a dirty or unmeasurable sandbox is refused.
	FingerprintBaseline = "baseline"
	// FingerprintFinal measures it again, compares it with the kept baseline and forgets it.
	FingerprintFinal = "final"
)

// APIFingerprintRequest asks for one fingerprint of the sandbox the envelope names.
type APIFingerprintRequest struct {
	APIEnvelope
	Phase string `json:"phase"` // FingerprintBaseline or FingerprintFinal
}

// APIFingerprintResponse is one fingerprint. Passed is true only for a final fingerprint
// equal to its baseline: a baseline, a skip and a difference all leave it false, so a host
// asserting passed never mistakes anything else for proof. Skipped is set, with Reason, when
// the engine cannot be measured at all (a daemon that does not run Linux).
type APIFingerprintResponse struct {
	APIResponse
	Phase           string                    `json:"phase"`
	Skipped         bool                      `json:"skipped,omitempty"`
	Reason          string                    `json:"reason,omitempty"`
	ChangedPaths    []string                  `json:"changed_paths"`
	RunningPrograms []string                  `json:"running_programs"`
	Comparison      *APIFingerprintComparison `json:"comparison,omitempty"` // final only
	Passed          bool                      `json:"passed"`
}

// APIFingerprintComparison is what changed between the baseline and the final fingerprint.
type APIFingerprintComparison struct {
	PathsAdded      []string `json:"paths_added"`
	PathsRemoved    []string `json:"paths_removed"`
	ProgramsAdded   []string `json:"programs_added"`
	ProgramsRemoved []string `json:"programs_removed"`
}
