package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every error of the protocol's table: matched by errors.As through a %w wrap, in its family
// by errors.Is, and saying what the table says its message must state.
func TestErrorsTable(t *testing.T) {
	in := DefaultTransferLimits()
	cases := []struct {
		name     string
		err      error
		as       func(error) bool
		families []error
		notIn    []error
		mentions []string
	}{
		{"no backend", &NoBackendError{}, asType[*NoBackendError], []error{ErrNoBackend}, []error{ErrRefused},
			[]string{"no sandbox backend is configured"}},
		{"unknown selected", &NoBackendError{Selected: "x", Registered: []string{"docker", "fake"}}, asType[*NoBackendError],
			[]error{ErrNoBackend}, nil, []string{`"x"`, "docker, fake"}},
		{"not permitted", &BackendNotPermittedError{Backend: "docker", Declared: IsolationContainer, Floor: IsolationMicroVM},
			asType[*BackendNotPermittedError], []error{ErrRefused}, []error{ErrUnsupported},
			[]string{`"docker"`, `"container"`, `"microvm"`, "none < runtime < os_process < container < hardened_container < microvm < vm", "refused rather than degraded", "MinIsolation"}},
		{"not permitted unknown rung", &BackendNotPermittedError{Backend: "b", Declared: "weird", Floor: IsolationMicroVM},
			asType[*BackendNotPermittedError], []error{ErrRefused}, nil, []string{"not a rung", `"weird"`, "MinIsolation"}},
		{"not permitted legacy", &BackendNotPermittedError{Backend: "b", Reason: "legacy attributes"},
			asType[*BackendNotPermittedError], []error{ErrRefused}, nil, []string{"legacy attributes", "refused rather than degraded"}},
		{"capability not supported", &CapabilityNotSupportedError{Backend: "docker", Missing: []Capability{FilesList, RunCode}, Kind: "k", Declared: NewCapabilitySet(Exec)},
			asType[*CapabilityNotSupportedError], []error{ErrUnsupported}, []error{ErrRefused},
			[]string{`"docker"`, "files_list, run_code", `"k"`, "declares exec"}},
		{"capability not supported nothing", &CapabilityNotSupportedError{Backend: "b", Missing: []Capability{Exec}, Kind: "k"},
			asType[*CapabilityNotSupportedError], []error{ErrUnsupported}, nil, []string{"declares nothing"}},
		{"os family", &OSFamilyNotSupportedError{Backend: "b", Families: []OSFamily{OSPosix}, Requested: OSWindows},
			asType[*OSFamilyNotSupportedError], []error{ErrUnsupported}, nil, []string{"posix", "windows"}},
		{"os family none", &OSFamilyNotSupportedError{Backend: "b", Requested: OSPosix},
			asType[*OSFamilyNotSupportedError], []error{ErrUnsupported}, nil, []string{"no guest whose shape it states", "posix"}},
		{"capability denied", &CapabilityDeniedError{Denied: []Capability{HostTools, Exec}, Kind: "k"},
			asType[*CapabilityDeniedError], []error{ErrRefused}, nil, []string{"exec, host_tools", `"k"`, "this host will not"}},
		{"identity denied", &IdentityDeniedError{Identities: []ToolIdentity{IdentityUser}, Kind: "k"},
			asType[*IdentityDeniedError], []error{ErrRefused}, nil, []string{"user", `"k"`}},
		{"egress not enforced", &EgressNotEnforcedError{Backend: "docker", Mode: EgressAllowlist, Kind: "bicep", Enforced: []Egress{EgressClosed}},
			asType[*EgressNotEnforcedError], []error{ErrRefused}, nil,
			[]string{`sandbox backend "docker" cannot enforce the "allowlist" egress the "bicep" workload runs in (it enforces closed)`}},
		{"egress nothing", &EgressNotEnforcedError{Backend: "b", Mode: EgressClosed, Kind: "k"},
			asType[*EgressNotEnforcedError], []error{ErrRefused}, nil, []string{"enforces nothing"}},
		{"transfer limits", &TransferLimitsNotPermittedError{Backend: "b", Direction: "files_in", Asked: TransferLimits{9, 9, 9}, Permitted: in},
			asType[*TransferLimitsNotPermittedError], []error{ErrRefused}, nil, []string{"files_in", "9 bytes a file", "8388608", "refused rather than clamped"}},
		{"resources", &ResourcesNotPermittedError{Backend: "b", Resource: "pids", Asked: "600", Permitted: "512"},
			asType[*ResourcesNotPermittedError], []error{ErrRefused}, nil, []string{`"b"`, "pids 600", "at most 512", "refused rather than clamped"}},
		{"resources none enforced", &ResourcesNotPermittedError{Backend: "b"},
			asType[*ResourcesNotPermittedError], []error{ErrRefused}, nil, []string{"enforces none"}},
		{"scope", &ScopeNotEnforcedError{Backend: "b", Scope: ScopeCall}, asType[*ScopeNotEnforcedError], []error{ErrRefused}, nil,
			[]string{`"b"`, `"call"`}},
		{"unclean", &UncleanError{Key: Key{"s", "t", "a", ""}, Code: DisposalTimeout}, asType[*UncleanError], []error{ErrRefused}, nil,
			[]string{"s/t/a", "timeout"}},
		{"attached identity", &AttachedIdentityNotPermittedError{Bound: "scope above call"}, asType[*AttachedIdentityNotPermittedError],
			[]error{ErrRefused}, nil, []string{"scope above call"}},
		{"not confined", &NotConfinedError{Path: "../x", WorkDir: "/w", Reason: "resolves outside working directory"},
			asType[*NotConfinedError], []error{ErrInvalid}, []error{ErrOS}, []string{`"../x"`, `"/w"`}},
		{"not a directory", &NotDirectoryError{Path: "/w/plain.txt"}, asType[*NotDirectoryError], []error{ErrOS, syscall.ENOTDIR},
			[]error{ErrInvalid}, []string{"/w/plain.txt", "not a directory"}},
		{"not regular", &NotRegularError{Path: "/w/l", Kind: EntrySymlink}, asType[*NotRegularError], []error{ErrOS}, nil,
			[]string{"/w/l", "symlink"}},
		{"missing", &PathError{Op: "read", Path: "/w/x", Err: fs.ErrNotExist}, asType[*PathError], []error{ErrOS, fs.ErrNotExist}, nil,
			[]string{"/w/x"}},
		{"is directory", &PathError{Op: "read", Path: "/w/d", Err: ErrIsDirectory}, asType[*PathError], []error{ErrOS, ErrIsDirectory}, nil,
			[]string{"/w/d", "is a directory"}},
		{"timeout", &TimeoutError{Op: "exec", Timeout: time.Second}, asType[*TimeoutError], []error{ErrTimeout, ErrOS}, nil,
			[]string{"exec", "1s"}},
		{"timeout discarded", &TimeoutError{Op: "exec", Timeout: time.Second, Discarded: true}, asType[*TimeoutError], []error{ErrTimeout, ErrOS}, []error{ErrGone},
			[]string{"exec timed out after 1s", "discarded", "acquire it again"}},
		{"gone", &GoneError{InstanceID: "0123456789abcdef", Reason: "an exec timeout discarded it"}, asType[*GoneError], []error{ErrGone},
			[]error{ErrOS, ErrInvalid, ErrTimeout}, []string{"0123456789ab ", "no longer exists", "an exec timeout discarded it", "nothing ran", "acquire"}},
		{"queued timeout", &QueuedTimeoutError{Timeout: time.Second}, asType[*QueuedTimeoutError], []error{ErrTimeout}, []error{ErrOS},
			[]string{"before the program started"}},
		{"program timeout", &ProgramTimeoutError{Timeout: time.Second, Output: "out", Signal: SignalSent, Reach: ReachGroup},
			asType[*ProgramTimeoutError], []error{ErrTimeout}, nil, []string{"out", "sent", "group"}},
		{"exec output limit", &ExecOutputLimitExceededError{Budget: 10}, asType[*ExecOutputLimitExceededError], []error{ErrOS}, nil,
			[]string{"10-byte budget"}},
		{"output missing", &OutputMissingError{Kind: "k", Path: "out.txt"}, asType[*OutputMissingError], []error{ErrOutput}, nil,
			[]string{`"k"`, `"out.txt"`, "Required=false"}},
		{"output not confined", &OutputNotConfinedError{Path: "o", Err: &NotConfinedError{}}, asType[*OutputNotConfinedError],
			[]error{ErrOutput, ErrInvalid}, nil, []string{`"o"`}},
		{"output not regular", &OutputNotRegularError{Path: "o", Kind: EntryDirectory}, asType[*OutputNotRegularError], []error{ErrOutput}, nil,
			[]string{`"o"`, "directory"}},
		{"output size unknown", &OutputSizeUnknownError{Path: "o"}, asType[*OutputSizeUnknownError], []error{ErrOutput}, nil, []string{`"o"`}},
		{"output unreachable", &OutputUnreachableError{Path: "o", Err: fs.ErrPermission}, asType[*OutputUnreachableError],
			[]error{ErrOutput, fs.ErrPermission}, nil, []string{`"o"`}},
		{"cap exceeded", &TransferCapExceededError{Path: "big", Cap: "per-file cap", Limit: 10, Actual: 11}, asType[*TransferCapExceededError],
			[]error{ErrOutput}, nil, []string{`"big"`, "per-file cap of 10", "not truncated"}},
		{"landing not confined", &LandingNotConfinedError{Name: "a"}, asType[*LandingNotConfinedError], []error{ErrOutput}, nil, []string{`"a"`}},
		{"sink required", &OutputSinkRequiredError{Paths: []string{"a", "b"}}, asType[*OutputSinkRequiredError], []error{ErrOutput}, nil,
			[]string{"a, b"}},
		{"sink required call time", &OutputSinkRequiredError{AtCallTime: true}, asType[*OutputSinkRequiredError], []error{ErrOutput}, nil,
			[]string{"names at call time"}},
		{"name invalid", &ArtifactNameInvalidError{Name: "a//b", Rule: "empty segment"}, asType[*ArtifactNameInvalidError], []error{ErrOutput}, nil,
			[]string{"empty segment"}},
		{"name collision", &ArtifactNameCollisionError{First: "A", Second: "a"}, asType[*ArtifactNameCollisionError], []error{ErrOutput}, nil,
			[]string{`"A"`, `"a"`, "case or Unicode form"}},
		{"name collision identical", &ArtifactNameCollisionError{First: "a", Second: "a", Identical: true}, asType[*ArtifactNameCollisionError],
			[]error{ErrOutput}, nil, []string{"identical name"}},
		{"landing exists", &LandingExistsError{Name: "a"}, asType[*LandingExistsError], []error{ErrOutput}, nil, []string{`"a"`}},
		{"landing not text", &LandingNotTextError{Name: "a"}, asType[*LandingNotTextError], []error{ErrOutput}, nil, []string{`"a"`}},
		{"tool not declared", &HostToolNotDeclaredError{Tool: "t"}, asType[*HostToolNotDeclaredError], []error{ErrInvalid}, nil, []string{`"t"`, "declare"}},
		{"tool identity", &HostToolIdentityNotAllowedError{Tool: "t", Identity: IdentityUser}, asType[*HostToolIdentityNotAllowedError],
			[]error{ErrInvalid}, nil, []string{`"t"`, "user", "AllowedIdentities"}},
		{"invalid", &InvalidArgumentError{Reason: "bad"}, asType[*InvalidArgumentError], []error{ErrInvalid}, nil, []string{"bad"}},
		{"unsupported", &UnsupportedError{Backend: "docker", Op: "ListDir", Reason: "no primitive"}, asType[*UnsupportedError],
			[]error{ErrUnsupported}, nil, []string{`"docker"`, "ListDir", "no primitive"}},
		{"protocol", &ProtocolError{Backend: "b", Reason: "empty instance ID"}, asType[*ProtocolError], []error{ErrProtocol}, nil,
			[]string{"empty instance ID"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := fmt.Errorf("outer: %w", tc.err)
			if !tc.as(wrapped) {
				t.Fatalf("errors.As failed for %T", tc.err)
			}
			for _, f := range tc.families {
				if !errors.Is(wrapped, f) {
					t.Errorf("%T not in family %v", tc.err, f)
				}
			}
			for _, f := range tc.notIn {
				if errors.Is(wrapped, f) {
					t.Errorf("%T wrongly in family %v", tc.err, f)
				}
			}
			msg := tc.err.Error()
			for _, m := range tc.mentions {
				if !strings.Contains(msg, m) {
					t.Errorf("message %q does not mention %q", msg, m)
				}
			}
		})
	}
}

func asType[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestConformanceFailureMessage(t *testing.T) {
	err := &ConformanceFailure{Suite: "FILES_OUT", Total: 12, Failures: []ProbeFailure{
		{Name: "a-link-is-never-read", Reason: "read succeeded", Why: "links must be refused"},
	}}
	msg := err.Error()
	for _, want := range []string{"1 of 12 FILES_OUT conformance probes failed:", "a-link-is-never-read", "read succeeded", "links must be refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	var cf *ConformanceFailure
	if !errors.As(fmt.Errorf("x: %w", err), &cf) {
		t.Fatal("errors.As failed")
	}
}
