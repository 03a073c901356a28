package sandbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

const ladder = "none < runtime < os_process < container < hardened_container < microvm < vm"

// Construction (protocol §8.1): a disabled router without backends, a lookup error for an
// unknown selection, and a misconfigured floor or unreadable declarations refused before
// anything starts.
func TestNewRouter(t *testing.T) {
	micro := func(name string) func(*testing.T) sandbox.Backend {
		return func(t *testing.T) sandbox.Backend { return fakeAt(t, name, sandbox.IsolationMicroVM) }
	}
	at := func(name string, iso sandbox.Isolation) func(*testing.T) sandbox.Backend {
		return func(t *testing.T) sandbox.Backend { return fakeAt(t, name, iso) }
	}
	legacy := func(wrap func(*sandboxtest.Backend) sandbox.Backend) func(*testing.T) sandbox.Backend {
		return func(t *testing.T) sandbox.Backend { return wrap(fakeAt(t, "old", sandbox.IsolationMicroVM)) }
	}
	cases := []struct {
		name        string
		backends    []func(*testing.T) sandbox.Backend
		opts        []sandbox.RouterOption
		wantErr     error
		family      error
		mentions    []string
		wantEnabled bool
		wantBackend string // the fixed backend's name; "" wants nil
	}{
		{name: "no backends: disabled"},
		{name: "no backends whatever the options", opts: []sandbox.RouterOption{
			sandbox.WithMinIsolation(sandbox.IsolationVM), sandbox.WithSelected("docker")}},
		{name: "default floor refuses a container backend", backends: []func(*testing.T) sandbox.Backend{at("docker", sandbox.IsolationContainer)},
			wantErr: &sandbox.BackendNotPermittedError{}, family: sandbox.ErrRefused,
			mentions: []string{`"docker"`, `"container"`, `"microvm"`, ladder, "refused rather than degraded", "MinIsolation"}},
		{name: "lowered floor admits a container backend", backends: []func(*testing.T) sandbox.Backend{at("docker", sandbox.IsolationContainer)},
			opts: []sandbox.RouterOption{sandbox.WithMinIsolation(sandbox.IsolationContainer)}, wantEnabled: true, wantBackend: "docker"},
		{name: "microvm clears the default floor", backends: []func(*testing.T) sandbox.Backend{micro("mvm")},
			wantEnabled: true, wantBackend: "mvm"},
		{name: "fixed selection defaults to the first registered", backends: []func(*testing.T) sandbox.Backend{micro("a"), micro("b")},
			wantEnabled: true, wantBackend: "a"},
		{name: "selected names the backend", backends: []func(*testing.T) sandbox.Backend{micro("a"), micro("b")},
			opts: []sandbox.RouterOption{sandbox.WithSelected("b")}, wantEnabled: true, wantBackend: "b"},
		{name: "unknown selected lists the registered names", backends: []func(*testing.T) sandbox.Backend{micro("a"), micro("b")},
			opts: []sandbox.RouterOption{sandbox.WithSelected("c")}, wantErr: &sandbox.NoBackendError{}, family: sandbox.ErrNoBackend,
			mentions: []string{`"c"`, "registered: a, b"}},
		{name: "selected backend below the floor although another clears it",
			backends: []func(*testing.T) sandbox.Backend{micro("a"), at("b", sandbox.IsolationContainer)},
			opts:     []sandbox.RouterOption{sandbox.WithSelected("b")}, wantErr: &sandbox.BackendNotPermittedError{}, family: sandbox.ErrRefused,
			mentions: []string{`"b"`, `"container"`}},
		{name: "first registered below the floor is the fixed one",
			backends: []func(*testing.T) sandbox.Backend{at("weak", sandbox.IsolationProcess), micro("strong")},
			wantErr:  &sandbox.BackendNotPermittedError{}, mentions: []string{`"weak"`, `"os_process"`}},
		{name: "unstated backends below a fixed one are kept", backends: []func(*testing.T) sandbox.Backend{micro("a"), at("b", sandbox.IsolationNone)},
			wantEnabled: true, wantBackend: "a"},
		{name: "unknown rung is refused", backends: []func(*testing.T) sandbox.Backend{at("odd", "process")},
			opts:    []sandbox.RouterOption{sandbox.WithMinIsolation(sandbox.IsolationNone)},
			wantErr: &sandbox.BackendNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{`"process"`, "not a rung", ladder}},
		{name: "unknown rung is refused per spec too", backends: []func(*testing.T) sandbox.Backend{at("odd", "")},
			opts:    []sandbox.RouterOption{sandbox.WithMinIsolation(sandbox.IsolationNone), sandbox.WithSelection(sandbox.SelectionPerSpec)},
			wantErr: &sandbox.BackendNotPermittedError{}, mentions: []string{`"odd"`, "not a rung"}},
		{name: "legacy capabilities attribute", backends: []func(*testing.T) sandbox.Backend{legacy(func(b *sandboxtest.Backend) sandbox.Backend { return legacyCaps{b} })},
			wantErr: &sandbox.BackendNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{`"old"`, "legacy", "Declarations"}},
		{name: "legacy limits attribute", backends: []func(*testing.T) sandbox.Backend{legacy(func(b *sandboxtest.Backend) sandbox.Backend { return legacyLimits{b} })},
			wantErr: &sandbox.BackendNotPermittedError{}, mentions: []string{"legacy"}},
		{name: "legacy egress attribute", backends: []func(*testing.T) sandbox.Backend{legacy(func(b *sandboxtest.Backend) sandbox.Backend { return legacyEgress{b} })},
			wantErr: &sandbox.BackendNotPermittedError{}, mentions: []string{"legacy"}},
		{name: "legacy os attribute", backends: []func(*testing.T) sandbox.Backend{legacy(func(b *sandboxtest.Backend) sandbox.Backend { return legacyOS{b} })},
			wantErr: &sandbox.BackendNotPermittedError{}, mentions: []string{"legacy"}},
		{name: "legacy attribute on a backend that is not selected",
			backends: []func(*testing.T) sandbox.Backend{micro("a"), legacy(func(b *sandboxtest.Backend) sandbox.Backend { return legacyCaps{b} })},
			wantErr:  &sandbox.BackendNotPermittedError{}, mentions: []string{`"old"`}},
		{name: "legacy attribute per spec", backends: []func(*testing.T) sandbox.Backend{micro("a"), legacy(func(b *sandboxtest.Backend) sandbox.Backend { return legacyOS{b} })},
			opts:    []sandbox.RouterOption{sandbox.WithSelection(sandbox.SelectionPerSpec)},
			wantErr: &sandbox.BackendNotPermittedError{}, mentions: []string{`"old"`}},
		{name: "per spec keeps backends below the floor", backends: []func(*testing.T) sandbox.Backend{at("weak", sandbox.IsolationNone), micro("strong")},
			opts: []sandbox.RouterOption{sandbox.WithSelection(sandbox.SelectionPerSpec)}, wantEnabled: true},
		{name: "per spec fails only if none clears, with the first one's refusal",
			backends: []func(*testing.T) sandbox.Backend{at("weak1", sandbox.IsolationNone), at("weak2", sandbox.IsolationContainer)},
			opts:     []sandbox.RouterOption{sandbox.WithSelection(sandbox.SelectionPerSpec)},
			wantErr:  &sandbox.BackendNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{`"weak1"`, `"none"`, `"microvm"`}},
		{name: "selected with per_spec is invalid", backends: []func(*testing.T) sandbox.Backend{micro("a")},
			opts:    []sandbox.RouterOption{sandbox.WithSelected("a"), sandbox.WithSelection(sandbox.SelectionPerSpec)},
			wantErr: &sandbox.InvalidArgumentError{}, family: sandbox.ErrInvalid, mentions: []string{"per_spec"}},
		{name: "selected with per_spec is invalid without backends",
			opts:    []sandbox.RouterOption{sandbox.WithSelection(sandbox.SelectionPerSpec), sandbox.WithSelected("a")},
			wantErr: &sandbox.InvalidArgumentError{}, family: sandbox.ErrInvalid},
		{name: "nil options are skipped", backends: []func(*testing.T) sandbox.Backend{micro("a")},
			opts: []sandbox.RouterOption{nil, sandbox.WithLogger(nil), nil}, wantEnabled: true, wantBackend: "a"},
		{name: "every valid option together", backends: []func(*testing.T) sandbox.Backend{micro("a")},
			opts: []sandbox.RouterOption{sandbox.WithMinIsolation(sandbox.IsolationMicroVM), sandbox.WithMinIsolationScope(sandbox.ScopeConversation),
				sandbox.WithMinCleanup(sandbox.CleanupReclaim), sandbox.WithSelection(sandbox.SelectionFixed), sandbox.WithSelected("a"),
				sandbox.WithDeniedCapabilities(sandbox.RunCode), sandbox.WithDeniedIdentities(sandbox.IdentityUser),
				sandbox.WithReclaim(time.Second, sandbox.FailedReclaimKeep), sandbox.WithAcquireWait(time.Second),
				sandbox.WithObserver(&events{})},
			wantEnabled: true, wantBackend: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var bs []sandbox.Backend
			for _, mk := range tc.backends {
				bs = append(bs, mk(t))
			}
			r, err := sandbox.NewRouter(bs, tc.opts...)
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			checkFamily(t, err, tc.family)
			if err != nil {
				if r != nil {
					t.Fatalf("NewRouter returned a router with its error")
				}
				return
			}
			if got := r.Enabled(); got != tc.wantEnabled {
				t.Fatalf("Enabled() = %v, want %v", got, tc.wantEnabled)
			}
			got := r.Backend()
			switch {
			case tc.wantBackend == "" && got != nil:
				t.Fatalf("Backend() = %q, want nil", got.Name())
			case tc.wantBackend != "" && (got == nil || got.Name() != tc.wantBackend):
				t.Fatalf("Backend() = %v, want %q", got, tc.wantBackend)
			}
		})
	}
}

// Every option refuses a value it does not know, before any backend is looked at.
func TestRouterOptionErrors(t *testing.T) {
	cases := []struct {
		name     string
		opt      sandbox.RouterOption
		mentions []string
	}{
		{"isolation process", sandbox.WithMinIsolation("process"), []string{`"process"`, "os_process"}},
		{"isolation empty", sandbox.WithMinIsolation(""), []string{"isolation"}},
		{"scope", sandbox.WithMinIsolationScope("thread"), []string{`"thread"`}},
		{"cleanup", sandbox.WithMinCleanup("wipe"), []string{`"wipe"`}},
		{"selection", sandbox.WithSelection("random"), []string{`"random"`}},
		{"denied capability", sandbox.WithDeniedCapabilities(sandbox.Exec, "network"), []string{`"network"`}},
		{"denied identity", sandbox.WithDeniedIdentities("root"), []string{`"root"`}},
		{"reclaim timeout zero", sandbox.WithReclaim(0, sandbox.FailedReclaimDispose), []string{"reclaim timeout must be positive"}},
		{"reclaim timeout negative", sandbox.WithReclaim(-time.Second, sandbox.FailedReclaimDispose), []string{"-1s"}},
		{"reclaim policy", sandbox.WithReclaim(time.Second, "retry"), []string{`"retry"`}},
		{"acquire wait zero", sandbox.WithAcquireWait(0), []string{"acquire wait must be positive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := fakeAt(t, "a", sandbox.IsolationMicroVM)
			for _, bs := range [][]sandbox.Backend{nil, {b}} {
				r, err := sandbox.NewRouter(bs, tc.opt)
				checkRouterErr(t, err, &sandbox.InvalidArgumentError{}, tc.mentions...)
				checkFamily(t, err, sandbox.ErrInvalid)
				if r != nil {
					t.Fatalf("NewRouter returned a router with its error")
				}
			}
		})
	}
}

// The observer is handed to every reporting backend at the end of construction, or nil
// without one; a failed hand-out restores what was swapped already (§12.3).
func TestNewRouterHandsOutTheObserver(t *testing.T) {
	errSwap := errors.New("swap refused")
	ev := sandbox.EgressWindow{Key: convKey, Backend: "a",
		Decisions: []sandbox.EgressDecision{{Decision: sandbox.DecisionDeny, Host: "evil.example", Port: 443}}}
	cases := []struct {
		name      string
		observer  *events
		perSpec   bool
		isolation [2]sandbox.Isolation
		fail      [2]error
		wantErr   error
		mentions  []string
		wantSwaps [2]int
		wantNil   [2]bool // the backend holds no reporter afterwards
		wantPrev  [2]bool // the backend holds its reporter from before the router
	}{
		{name: "observer: both get the router's reporter", observer: &events{},
			isolation: [2]sandbox.Isolation{sandbox.IsolationMicroVM, sandbox.IsolationMicroVM}, wantSwaps: [2]int{1, 1}},
		{name: "no observer switches reads off",
			isolation: [2]sandbox.Isolation{sandbox.IsolationMicroVM, sandbox.IsolationMicroVM}, wantSwaps: [2]int{1, 1}, wantNil: [2]bool{true, true}},
		{name: "backends below the floor per spec get it too", observer: &events{}, perSpec: true,
			isolation: [2]sandbox.Isolation{sandbox.IsolationMicroVM, sandbox.IsolationContainer}, wantSwaps: [2]int{1, 1}},
		{name: "a failing second hand-out restores the first", observer: &events{},
			isolation: [2]sandbox.Isolation{sandbox.IsolationMicroVM, sandbox.IsolationMicroVM}, fail: [2]error{nil, errSwap},
			wantErr: errSwap, mentions: []string{"hand the observer to b"}, wantSwaps: [2]int{2, 0}, wantPrev: [2]bool{true, true}},
		{name: "a failing first hand-out changes nothing", observer: &events{},
			isolation: [2]sandbox.Isolation{sandbox.IsolationMicroVM, sandbox.IsolationMicroVM}, fail: [2]error{errSwap, nil},
			wantErr: errSwap, mentions: []string{"hand the observer to a"}, wantSwaps: [2]int{0, 0}, wantPrev: [2]bool{true, true}},
		{name: "a refused construction hands out nothing", observer: &events{},
			isolation: [2]sandbox.Isolation{sandbox.IsolationContainer, sandbox.IsolationMicroVM},
			wantErr:   &sandbox.BackendNotPermittedError{}, wantSwaps: [2]int{0, 0}, wantPrev: [2]bool{true, true}},
		{name: "a panicking observer is contained", observer: &events{explode: true},
			isolation: [2]sandbox.Isolation{sandbox.IsolationMicroVM, sandbox.IsolationMicroVM}, wantSwaps: [2]int{1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before [2]int // reports reaching each backend's reporter from before the router
			obs := make([]*observing, 2)
			for i, name := range []string{"a", "b"} {
				obs[i] = &observing{Backend: fakeAt(t, name, tc.isolation[i]), fail: tc.fail[i]}
				obs[i].obs = counted{n: &before[i]}
			}
			opts := []sandbox.RouterOption{}
			if tc.observer != nil {
				opts = append(opts, sandbox.WithObserver(tc.observer))
			}
			if tc.perSpec {
				opts = append(opts, sandbox.WithSelection(sandbox.SelectionPerSpec))
			}
			_, err := sandbox.NewRouter(backends(obs...), opts...)
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			for i, b := range obs {
				if b.swaps != tc.wantSwaps[i] {
					t.Fatalf("backend %d swapped %d times, want %d", i, b.swaps, tc.wantSwaps[i])
				}
				report := b.reporter()
				switch {
				case tc.wantNil[i]:
					if report != nil {
						t.Fatalf("backend %d holds a reporter, want none", i)
					}
					continue
				case report == nil:
					t.Fatalf("backend %d holds no reporter", i)
				}
				report.EgressObserved(context.Background(), ev)
				if got := before[i] == 1; got != tc.wantPrev[i] {
					t.Fatalf("backend %d: report reached the earlier reporter = %v, want %v", i, got, tc.wantPrev[i])
				}
			}
			if tc.observer != nil && err == nil {
				if n := len(tc.observer.egress); n != 2 {
					t.Fatalf("observer saw %d egress windows, want 2", n)
				}
				if got := tc.observer.egress[0]; got.Backend != "a" || !slices.Equal(got.Decisions, ev.Decisions) {
					t.Fatalf("observer saw %+v, want %+v", got, ev)
				}
			}
		})
	}
}

// Admission (protocol §8.2): every check in order, each with its error type, family and the
// content its message must state. EnsureCanServe, BackendFor, EffectiveCleanup and Acquire
// all apply the same checks, and a refusal never reaches the backend.
func TestAdmission(t *testing.T) {
	allCaps := sandbox.Capabilities()
	hostTools := func(agg sandbox.HostToolAggregate) []sandbox.SpecOption {
		return []sandbox.SpecOption{sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.HostTools),
			sandbox.WithHostTools(agg)}
	}
	withAll := func(opts ...sandbox.SpecOption) []sandbox.SpecOption { return opts }
	userTools := hostTools(sandbox.HostToolAggregate{Identities: []sandbox.ToolIdentity{sandbox.IdentityUser}})
	getOnly := sandbox.WithAllowlist(sandbox.EgressRule{Host: "api.example", Methods: []string{"GET"}})
	getRepos := sandbox.WithAllowlist(sandbox.EgressRule{Host: "api.example", Methods: []string{"GET"}, Paths: []string{"/repos/acme/**"}})
	big := sandbox.TransferLimits{MaxBytesPerFile: 64 * sandbox.MiB, MaxTotalBytes: 256 * sandbox.MiB, MaxFiles: 256}
	posix, windows := sandbox.OSPosix, sandbox.OSWindows
	decl := func(d sandbox.Declarations) sandboxtest.Option { return sandboxtest.WithDeclarations(d) }
	closed := sandbox.NewEgressSet(sandbox.EgressClosed)
	bounds := sandbox.Resources{MemoryBytes: 1 << 30, CPUs: 1, Pids: 512}

	cases := []struct {
		name     string
		backend  []sandboxtest.Option // after name "fake" and isolation microvm
		opts     []sandbox.RouterOption
		spec     []sandbox.SpecOption
		raw      *sandbox.Spec // used instead of spec when set
		wantErr  error
		family   error
		mentions []string
	}{
		{name: "defaults are served"},
		{name: "spec not built by NewSpec", raw: &sandbox.Spec{Kind: "report", Egress: sandbox.EgressClosed},
			wantErr: &sandbox.InvalidArgumentError{}, family: sandbox.ErrInvalid, mentions: []string{"NewSpec"}},
		{name: "zero spec", raw: &sandbox.Spec{}, wantErr: &sandbox.InvalidArgumentError{}, family: sandbox.ErrInvalid},

		// 0a: capability denials.
		{name: "0a denied capability", opts: []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.Exec)},
			wantErr: &sandbox.CapabilityDeniedError{}, family: sandbox.ErrRefused, mentions: []string{"requires exec", `"report"`, "this host will not"}},
		{name: "0a denied members named sorted", opts: []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.FilesIn, sandbox.RunCode, sandbox.Exec)},
			wantErr: &sandbox.CapabilityDeniedError{}, mentions: []string{"exec, files_in"}},
		{name: "0a denying an unrequired capability is silent", opts: []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.RunCode)}},
		{name: "0a denial covers the derived egress_methods", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			opts: []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.EgressMethods)}, spec: withAll(getOnly),
			wantErr: &sandbox.CapabilityDeniedError{}, mentions: []string{"egress_methods"}},
		{name: "0a no backend property softens a denial",
			backend: []sandboxtest.Option{sandboxtest.WithIsolation(sandbox.IsolationVM), sandboxtest.WithCapabilities(allCaps...)},
			opts:    []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.FilesIn)}, wantErr: &sandbox.CapabilityDeniedError{}},
		{name: "0a comes before the floor", opts: []sandbox.RouterOption{sandbox.WithDeniedCapabilities(sandbox.Exec)},
			spec: withAll(sandbox.WithIsolationFloor(sandbox.IsolationVM)), wantErr: &sandbox.CapabilityDeniedError{}},
		{name: "0a comes before 0b", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			opts:    []sandbox.RouterOption{sandbox.WithDeniedIdentities(sandbox.IdentityUser), sandbox.WithDeniedCapabilities(sandbox.HostTools)},
			spec:    userTools,
			wantErr: &sandbox.CapabilityDeniedError{}, mentions: []string{"host_tools"}},

		// 0b: identity denials.
		{name: "0b denied identity", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			opts: []sandbox.RouterOption{sandbox.WithDeniedIdentities(sandbox.IdentityUser)}, spec: userTools,
			wantErr: &sandbox.IdentityDeniedError{}, family: sandbox.ErrRefused, mentions: []string{"act as user", `"report"`}},
		{name: "0b denying an identity the tools do not use is silent", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			opts: []sandbox.RouterOption{sandbox.WithDeniedIdentities(sandbox.IdentityApp)}, spec: userTools},
		{name: "0b comes before the floor", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			opts: []sandbox.RouterOption{sandbox.WithDeniedIdentities(sandbox.IdentityUser)},
			spec: append(slices.Clone(userTools), sandbox.WithIsolationFloor(sandbox.IsolationVM)), wantErr: &sandbox.IdentityDeniedError{}},

		// 1: the floor.
		{name: "1 spec floor raises the host's", spec: withAll(sandbox.WithIsolationFloor(sandbox.IsolationVM)),
			wantErr: &sandbox.BackendNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{`"fake"`, `"microvm"`, `floor "vm"`, ladder}},
		{name: "1 spec floor at the backend's rung", spec: withAll(sandbox.WithIsolationFloor(sandbox.IsolationMicroVM))},
		{name: "1 spec floor below the host's changes nothing", spec: withAll(sandbox.WithIsolationFloor(sandbox.IsolationNone))},
		{name: "1 comes before capabilities", spec: withAll(sandbox.WithIsolationFloor(sandbox.IsolationVM), sandbox.WithRequires(sandbox.RunCode)),
			wantErr: &sandbox.BackendNotPermittedError{}},

		// 2: capabilities.
		{name: "2 missing capability", spec: withAll(sandbox.WithRequires(sandbox.Exec, sandbox.FilesList)),
			wantErr: &sandbox.CapabilityNotSupportedError{}, family: sandbox.ErrUnsupported,
			mentions: []string{`"fake"`, "support files_list", `"report"`, "declares exec, files_in"}},
		{name: "2 missing members named sorted", spec: withAll(sandbox.WithRequires(sandbox.RunCode, sandbox.FilesList, sandbox.Exec)),
			wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{"support files_list, run_code"}},
		{name: "2 unstated capabilities are the default set", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed})}},
		{name: "2 unstated capabilities go no further", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed})},
			spec: withAll(sandbox.WithRequires(sandbox.FilesOut)), wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{"declares exec, files_in"}},
		{name: "2 stated empty set declares nothing",
			backend: []sandboxtest.Option{decl(sandbox.Declarations{Capabilities: sandbox.CapabilitySet{}, EgressModes: closed})},
			wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{"support exec, files_in", "declares nothing"}},
		{name: "2 a narrowing rule requires egress_methods", spec: withAll(getOnly),
			wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{"support egress_methods"}},
		{name: "2 comes before method tokens", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods)},
			spec: withAll(getOnly, sandbox.WithRequires(sandbox.RunCode)), wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{"support run_code"}},

		// 2b: method tokens.
		{name: "2b method token not enforced", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods),
			EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist), EgressMethodTokens: []string{"POST"}})},
			spec: withAll(getOnly), wantErr: &sandbox.CapabilityNotSupportedError{}, family: sandbox.ErrUnsupported,
			mentions: []string{"egress_methods", "method GET", `"api.example"`}},
		{name: "2b no tokens at all", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods),
			EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist)})},
			spec: withAll(getOnly), wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{"method GET"}},
		{name: "2b tokens enforced", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods),
			EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist), EgressMethodTokens: []string{"POST", "GET"}})},
			spec: withAll(getOnly)},
		{name: "2b paths not enforced", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods),
			EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist), EgressMethodTokens: []string{"GET"}})},
			spec: withAll(getRepos), wantErr: &sandbox.CapabilityNotSupportedError{}, family: sandbox.ErrUnsupported,
			mentions: []string{"egress_methods", "no path patterns", `"api.example"`}},
		{name: "2b paths enforced", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods),
			EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist), EgressMethodTokens: []string{"GET"}, EgressPaths: true})},
			spec: withAll(getRepos)},
		{name: "2b comes before the OS family", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.EgressMethods),
			EgressModes:  sandbox.NewEgressSet(sandbox.EgressAllowlist)})},
			spec: withAll(getOnly, sandbox.WithRequiresOSFamily(windows)), wantErr: &sandbox.CapabilityNotSupportedError{}},

		// 3: OS family.
		{name: "3 family not served", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, OSFamilies: []sandbox.OSFamily{posix}})},
			spec: withAll(sandbox.WithRequiresOSFamily(windows)), wantErr: &sandbox.OSFamilyNotSupportedError{}, family: sandbox.ErrUnsupported,
			mentions: []string{`"fake"`, "serves posix guests", "requires a windows guest"}},
		{name: "3 family served", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, OSFamilies: []sandbox.OSFamily{windows, posix}})},
			spec: withAll(sandbox.WithRequiresOSFamily(windows))},
		{name: "3 no stated family refuses a spec that asks", spec: withAll(sandbox.WithRequiresOSFamily(posix)),
			wantErr: &sandbox.OSFamilyNotSupportedError{}, mentions: []string{"no guest whose shape it states", "posix"}},
		{name: "3 no stated family refuses nothing else"},
		{name: "3 comes before limits", spec: withAll(sandbox.WithRequiresOSFamily(posix), sandbox.WithFilesIn(big)),
			wantErr: &sandbox.OSFamilyNotSupportedError{}},

		// 4: transfer limits.
		{name: "4 files_in above the ceiling", spec: withAll(sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 9 * sandbox.MiB, MaxTotalBytes: 32 * sandbox.MiB, MaxFiles: 64})),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}, family: sandbox.ErrRefused,
			mentions: []string{"files_in", "9437184 bytes a file", "permits {8388608 bytes a file", `"fake"`, "refused rather than clamped"}},
		{name: "4 files_out above the ceiling", spec: withAll(sandbox.WithFilesOut(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 1, MaxFiles: 65})),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}, mentions: []string{"files_out", "65 files"}},
		{name: "4 the file count binds on its own", spec: withAll(sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 1, MaxFiles: 65})),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}, mentions: []string{"files_in"}},
		{name: "4 stated ceilings admit larger caps",
			backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Limits: &sandbox.SandboxLimits{FilesIn: big, FilesOut: big}})},
			spec:    withAll(sandbox.WithFilesIn(big), sandbox.WithFilesOut(big))},
		{name: "4 stated ceilings bind each direction",
			backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Limits: &sandbox.SandboxLimits{FilesIn: big, FilesOut: sandbox.DefaultTransferLimits()}})},
			spec:    withAll(sandbox.WithFilesIn(big), sandbox.WithFilesOut(big)), wantErr: &sandbox.TransferLimitsNotPermittedError{}, mentions: []string{"files_out"}},
		{name: "4 host-tool responses fold into files_in", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			spec:    hostTools(sandbox.HostToolAggregate{ResponseLimits: sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 1, MaxFiles: 1}}),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}, mentions: []string{"files_in", "33554433 bytes in all", "65 files"}},
		{name: "4 the larger per-file cap is folded in", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			spec: append(hostTools(sandbox.HostToolAggregate{ResponseLimits: sandbox.TransferLimits{MaxBytesPerFile: 9 * sandbox.MiB, MaxTotalBytes: 1, MaxFiles: 1}}),
				sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 1, MaxFiles: 1})),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}, mentions: []string{"files_in", "9437184 bytes a file"}},
		{name: "4 host-tool requests fold into files_out", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			spec: append(hostTools(sandbox.HostToolAggregate{MaxCallsPerRun: 1}),
				sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 1, MaxFiles: 1})),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}, mentions: []string{"files_out", "65 files"}},
		{name: "4 host tools within the ceilings after folding", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			spec: append(hostTools(sandbox.HostToolAggregate{MaxCallsPerRun: 16,
				ResponseLimits: sandbox.TransferLimits{MaxBytesPerFile: sandbox.MiB, MaxTotalBytes: 4 * sandbox.MiB, MaxFiles: 16}}),
				sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 8 * sandbox.MiB, MaxTotalBytes: 28 * sandbox.MiB, MaxFiles: 48}),
				sandbox.WithFilesOut(sandbox.TransferLimits{MaxBytesPerFile: 8 * sandbox.MiB, MaxTotalBytes: 32 * sandbox.MiB, MaxFiles: 48}))},
		{name: "4 comes before egress", backend: []sandboxtest.Option{decl(sandbox.Declarations{})}, spec: withAll(sandbox.WithFilesIn(big)),
			wantErr: &sandbox.TransferLimitsNotPermittedError{}},

		// 4b: resources.
		{name: "4b an ask of a backend that holds sandboxes to none", spec: withAll(sandbox.WithResources(sandbox.Resources{Pids: 64})),
			wantErr: &sandbox.ResourcesNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{`"fake"`, "enforces none", "refused rather than ignored"}},
		{name: "4b no ask, no resource declaration"},
		{name: "4b memory above the bound", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Resources: &bounds})},
			spec:    withAll(sandbox.WithResources(sandbox.Resources{MemoryBytes: 2 << 30})),
			wantErr: &sandbox.ResourcesNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{"memory_bytes 2147483648", "at most 1073741824", "refused rather than clamped"}},
		{name: "4b cpus above the bound", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Resources: &bounds})},
			spec: withAll(sandbox.WithResources(sandbox.Resources{CPUs: 1.5})), wantErr: &sandbox.ResourcesNotPermittedError{}, mentions: []string{"cpus 1.5", "at most 1"}},
		{name: "4b pids above the bound", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Resources: &bounds})},
			spec: withAll(sandbox.WithResources(sandbox.Resources{Pids: 513})), wantErr: &sandbox.ResourcesNotPermittedError{}, mentions: []string{"pids 513", "at most 512"}},
		{name: "4b less than every bound", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Resources: &bounds})},
			spec: withAll(sandbox.WithResources(sandbox.Resources{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 64}))},
		{name: "4b a zero bound is no ceiling", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed, Resources: &sandbox.Resources{Pids: 512}})},
			spec: withAll(sandbox.WithResources(sandbox.Resources{MemoryBytes: 64 << 30, CPUs: 64}))},
		{name: "4b comes before egress", backend: []sandboxtest.Option{decl(sandbox.Declarations{})},
			spec: withAll(sandbox.WithResources(sandbox.Resources{Pids: 1})), wantErr: &sandbox.ResourcesNotPermittedError{}},

		// 5: egress, never substituted.
		{name: "5 an empty egress set refuses closed", backend: []sandboxtest.Option{decl(sandbox.Declarations{})},
			wantErr: &sandbox.EgressNotEnforcedError{}, family: sandbox.ErrRefused, mentions: []string{`"fake"`, `"closed" egress`, `"report"`, "enforces nothing"}},
		{name: "5 an empty egress set refuses allowlist", backend: []sandboxtest.Option{decl(sandbox.Declarations{})},
			spec: withAll(sandbox.WithAllowlist(sandbox.Hosts("pypi.org")...)), wantErr: &sandbox.EgressNotEnforcedError{}, mentions: []string{"enforces nothing"}},
		{name: "5 a closed backend refuses allowlist", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed})},
			spec: withAll(sandbox.WithAllowlist(sandbox.Hosts("pypi.org")...)), wantErr: &sandbox.EgressNotEnforcedError{}, mentions: []string{`"allowlist"`, "enforces closed"}},
		{name: "5 a stricter mode is never substituted", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: sandbox.NewEgressSet(sandbox.EgressAllowlist)})},
			wantErr: &sandbox.EgressNotEnforcedError{}, mentions: []string{`"closed"`, "enforces allowlist"}},
		{name: "5 unrestricted refused, enforced set sorted", spec: withAll(sandbox.WithEgress(sandbox.EgressUnrestricted)),
			wantErr: &sandbox.EgressNotEnforcedError{}, mentions: []string{`"unrestricted"`, "enforces allowlist, closed"}},
		{name: "5 allowlist served", spec: withAll(sandbox.WithAllowlist(sandbox.Hosts("pypi.org")...))},
		{name: "5 comes before scope", backend: []sandboxtest.Option{decl(sandbox.Declarations{})},
			spec: withAll(sandbox.WithIsolationScope(sandbox.ScopeCall)), wantErr: &sandbox.EgressNotEnforcedError{}},

		// 6: scope.
		{name: "6 call scope not enforced", spec: withAll(sandbox.WithIsolationScope(sandbox.ScopeCall)),
			wantErr: &sandbox.ScopeNotEnforcedError{}, family: sandbox.ErrRefused, mentions: []string{`"fake"`, `"call"`}},
		{name: "6 the host's scope floor raises", opts: []sandbox.RouterOption{sandbox.WithMinIsolationScope(sandbox.ScopeCall)},
			wantErr: &sandbox.ScopeNotEnforcedError{}, mentions: []string{`"call"`}},
		{name: "6 declared call scope served", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed,
			IsolationScopes: []sandbox.IsolationScope{sandbox.ScopeConversation, sandbox.ScopeCall}})},
			spec: withAll(sandbox.WithIsolationScope(sandbox.ScopeCall))},
		{name: "6 a backend declaring only call refuses conversation", backend: []sandboxtest.Option{decl(sandbox.Declarations{EgressModes: closed,
			IsolationScopes: []sandbox.IsolationScope{sandbox.ScopeCall}})},
			wantErr: &sandbox.ScopeNotEnforcedError{}, mentions: []string{`"conversation"`}},
		{name: "6 comes before attached identity", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			spec:    withAll(sandbox.WithIsolationScope(sandbox.ScopeCall), sandbox.WithRequires(sandbox.Exec, sandbox.AttachedIdentity)),
			wantErr: &sandbox.ScopeNotEnforcedError{}},

		// 7: attached identity.
		{name: "7 no identity attached", backend: []sandboxtest.Option{sandboxtest.WithCapabilities(allCaps...)},
			spec:    withAll(sandbox.WithRequires(sandbox.Exec, sandbox.AttachedIdentity)),
			wantErr: &sandbox.AttachedIdentityNotPermittedError{}, family: sandbox.ErrRefused, mentions: []string{`"fake"`, "attaches no identity"}},
		{name: "7 identity beyond the host's bound", backend: []sandboxtest.Option{decl(sandbox.Declarations{
			Capabilities: sandbox.NewCapabilitySet(allCaps...), EgressModes: closed,
			AttachedIdentity: &sandbox.AttachedIdentityDeclaration{Scope: sandbox.ScopeCall, RetentionSeconds: 60}})},
			spec:    withAll(sandbox.WithRequires(sandbox.Exec, sandbox.AttachedIdentity)),
			wantErr: &sandbox.AttachedIdentityNotPermittedError{}, mentions: []string{"permits no attached identity"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM,
				append([]sandboxtest.Option{sandboxtest.WithSandboxOptions(sandboxtest.WithReset())}, tc.backend...)...)
			r := mustRouter(t, backends(fake), tc.opts...)
			var spec sandbox.Spec
			if tc.raw != nil {
				spec = *tc.raw
			} else {
				spec = specOf(t, "report", tc.spec...)
			}

			err := r.EnsureCanServe(spec)
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			checkFamily(t, err, tc.family)

			if b := r.BackendFor(spec); (b == nil) != (tc.wantErr != nil) {
				t.Fatalf("BackendFor = %v with EnsureCanServe error %v", b, err)
			}
			if _, cerr := r.EffectiveCleanup(spec); (cerr == nil) != (err == nil) || (err != nil && cerr.Error() != err.Error()) {
				t.Fatalf("EffectiveCleanup error %v, EnsureCanServe error %v", cerr, err)
			}

			key := convKey
			if r.EffectiveIsolationScope(spec) == sandbox.ScopeCall {
				key = callKey
			}
			sb, aerr := r.Acquire(context.Background(), key, spec)
			checkRouterErr(t, aerr, tc.wantErr, tc.mentions...)
			if aerr != nil {
				if sb != nil {
					t.Fatalf("Acquire returned a sandbox with its refusal")
				}
				if n := len(fake.Acquires()); n != 0 {
					t.Fatalf("a refused spec reached the backend %d times", n)
				}
			}
		})
	}
}

// Per-spec selection: the first registered backend passing checks 1-7 serves, as a pure
// function of spec and declarations; below-floor backends are never routed to; when none
// passes, the first candidate's refusal type is raised with the others named.
func TestPerSpecRouting(t *testing.T) {
	build := func(t *testing.T) (*sandbox.Router, map[string]*sandboxtest.Backend) {
		bs := map[string]*sandboxtest.Backend{
			"weak":  fakeAt(t, "weak", sandbox.IsolationNone, sandboxtest.WithCapabilities(sandbox.Capabilities()...)),
			"alpha": fakeAt(t, "alpha", sandbox.IsolationMicroVM),
			"beta":  fakeAt(t, "beta", sandbox.IsolationMicroVM, sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesIn, sandbox.FilesList)),
			"gamma": fakeAt(t, "gamma", sandbox.IsolationVM, sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesIn, sandbox.FilesList, sandbox.RunCode)),
		}
		r := mustRouter(t, backends(bs["weak"], bs["alpha"], bs["beta"], bs["gamma"]), sandbox.WithSelection(sandbox.SelectionPerSpec))
		return r, bs
	}
	cases := []struct {
		name     string
		spec     []sandbox.SpecOption
		want     string // the serving backend; "" wants a refusal
		wantErr  error
		family   error
		mentions []string
		absent   []string // the message must not name these
	}{
		{name: "defaults go to the first that passes", want: "alpha"},
		{name: "first passing wins over a later one", spec: []sandbox.SpecOption{sandbox.WithRequires(sandbox.Exec, sandbox.FilesList)}, want: "beta"},
		{name: "only the last passes", spec: []sandbox.SpecOption{sandbox.WithRequires(sandbox.RunCode)}, want: "gamma"},
		{name: "spec floor skips lower rungs", spec: []sandbox.SpecOption{sandbox.WithIsolationFloor(sandbox.IsolationVM)}, want: "gamma"},
		{name: "spec floor cannot reach below the host's", spec: []sandbox.SpecOption{sandbox.WithIsolationFloor(sandbox.IsolationNone)}, want: "alpha"},
		{name: "none passes: the first candidate's refusal, the others named",
			spec:    []sandbox.SpecOption{sandbox.WithRequires(sandbox.Snapshot)},
			wantErr: &sandbox.CapabilityNotSupportedError{}, family: sandbox.ErrUnsupported,
			mentions: []string{`"alpha"`, "snapshot", "also refused by beta, gamma"}, absent: []string{"weak"}},
		{name: "the first candidate's type even when the others refuse otherwise",
			spec:    []sandbox.SpecOption{sandbox.WithRequires(sandbox.RunCode), sandbox.WithEgress(sandbox.EgressUnrestricted)},
			wantErr: &sandbox.CapabilityNotSupportedError{}, mentions: []string{`"alpha"`, "also refused by beta, gamma"}},
		{name: "every candidate refuses the egress",
			spec:    []sandbox.SpecOption{sandbox.WithEgress(sandbox.EgressUnrestricted)},
			wantErr: &sandbox.EgressNotEnforcedError{}, family: sandbox.ErrRefused,
			mentions: []string{`"alpha"`, `"unrestricted"`, "also refused by beta, gamma"}, absent: []string{"weak"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, bs := build(t)
			if r.Backend() != nil {
				t.Fatalf("Backend() = %v under per-spec selection, want nil", r.Backend())
			}
			spec := specOf(t, "report", tc.spec...)
			for range 5 { // a pure function: the same answer every time
				got := r.BackendFor(spec)
				switch {
				case tc.want == "" && got != nil:
					t.Fatalf("BackendFor = %q, want none", got.Name())
				case tc.want != "" && (got == nil || got.Name() != tc.want):
					t.Fatalf("BackendFor = %v, want %q", got, tc.want)
				}
			}
			err := r.EnsureCanServe(spec)
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			checkFamily(t, err, tc.family)
			for _, a := range tc.absent {
				if strings.Contains(err.Error(), a) {
					t.Fatalf("error %q names %q", err, a)
				}
			}
			_, err = r.Acquire(context.Background(), convKey, spec)
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			for name, b := range bs {
				wantAsked := name == tc.want
				if asked := len(b.Acquires()) > 0; asked != wantAsked {
					t.Fatalf("backend %s asked = %v, want %v", name, asked, wantAsked)
				}
			}
		})
	}
}

// A single routable candidate's refusal is returned as it is, naming nobody else.
func TestPerSpecSingleCandidate(t *testing.T) {
	weak := fakeAt(t, "weak", sandbox.IsolationNone, sandboxtest.WithCapabilities(sandbox.Capabilities()...))
	strong := fakeAt(t, "strong", sandbox.IsolationMicroVM)
	r := mustRouter(t, backends(weak, strong), sandbox.WithSelection(sandbox.SelectionPerSpec))
	err := r.EnsureCanServe(specOf(t, "report", sandbox.WithRequires(sandbox.RunCode)))
	checkRouterErr(t, err, &sandbox.CapabilityNotSupportedError{}, `"strong"`)
	if strings.Contains(err.Error(), "also refused") || strings.Contains(err.Error(), "weak") {
		t.Fatalf("error %q names other backends", err)
	}
	var cns *sandbox.CapabilityNotSupportedError
	if !errors.As(err, &cns) || err != error(cns) {
		t.Fatalf("error %v is wrapped, want the candidate's own refusal", err)
	}
}

// A disabled router runs nothing: EnsureCanServe is silent, Acquire and EffectiveCleanup say
// no backend is configured.
func TestDisabledRouter(t *testing.T) {
	obs := &events{}
	r := mustRouter(t, nil, sandbox.WithObserver(obs))
	spec := specOf(t, "report")
	for _, s := range []sandbox.Spec{spec, {}} {
		if err := r.EnsureCanServe(s); err != nil {
			t.Fatalf("EnsureCanServe = %v, want nil", err)
		}
	}
	if b := r.BackendFor(spec); b != nil {
		t.Fatalf("BackendFor = %v, want nil", b)
	}
	_, err := r.EffectiveCleanup(spec)
	checkRouterErr(t, err, &sandbox.NoBackendError{})
	sb, err := r.Acquire(context.Background(), convKey, spec)
	checkRouterErr(t, err, &sandbox.NoBackendError{}, "no sandbox backend is configured")
	checkFamily(t, err, sandbox.ErrNoBackend)
	if sb != nil {
		t.Fatalf("Acquire returned %v", sb)
	}
	var nb *sandbox.NoBackendError
	if len(obs.acquired) != 1 || !errors.As(obs.acquired[0].Err, &nb) {
		t.Fatalf("events = %+v, want one refusal by NoBackendError", obs.acquired)
	}
	if f := r.Dispose(context.Background(), convKey, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("Dispose = %v, want nil", f)
	}
	if p := r.DisposeScope(context.Background(), "tenant", "thread"); p != (sandbox.ScopePurge{}) {
		t.Fatalf("DisposeScope = %+v, want zero", p)
	}
}

// The key must match the effective scope (protocol §8.3 step 4): call scope needs a CallID,
// conversation scope must not have one. The backend is never asked.
func TestAcquireKeyMatchesScope(t *testing.T) {
	bothScopes := sandboxtest.WithDeclarations(sandbox.Declarations{EgressModes: sandbox.NewEgressSet(sandbox.EgressClosed),
		IsolationScopes: []sandbox.IsolationScope{sandbox.ScopeConversation, sandbox.ScopeCall}})
	cases := []struct {
		name     string
		opts     []sandbox.RouterOption
		spec     []sandbox.SpecOption
		key      sandbox.Key
		wantErr  error
		mentions []string
	}{
		{name: "call scope without a CallID", spec: []sandbox.SpecOption{sandbox.WithIsolationScope(sandbox.ScopeCall)}, key: convKey,
			wantErr: &sandbox.InvalidArgumentError{}, mentions: []string{"need a key with a CallID"}},
		{name: "conversation scope with a CallID", key: callKey,
			wantErr: &sandbox.InvalidArgumentError{}, mentions: []string{"was given a key with a CallID"}},
		{name: "the host's call floor needs a CallID", opts: []sandbox.RouterOption{sandbox.WithMinIsolationScope(sandbox.ScopeCall)}, key: convKey,
			wantErr: &sandbox.InvalidArgumentError{}, mentions: []string{"CallID"}},
		{name: "the host's call floor with a CallID", opts: []sandbox.RouterOption{sandbox.WithMinIsolationScope(sandbox.ScopeCall)}, key: callKey},
		{name: "call scope with a CallID", spec: []sandbox.SpecOption{sandbox.WithIsolationScope(sandbox.ScopeCall)}, key: callKey},
		{name: "conversation scope without a CallID", key: convKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, bothScopes)
			r := mustRouter(t, backends(fake), tc.opts...)
			sb, err := r.Acquire(context.Background(), tc.key, specOf(t, "report", tc.spec...))
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			if tc.wantErr != nil {
				checkFamily(t, err, sandbox.ErrInvalid)
			}
			if (sb == nil) != (err != nil) {
				t.Fatalf("Acquire = %v, %v", sb, err)
			}
			if err != nil && len(fake.Acquires()) != 0 {
				t.Fatalf("a refused key reached the backend")
			}
		})
	}
}

// A sandbox with an empty instance ID breaks the protocol: the router disposes it and says so
// (protocol §4.1, §8.3 step 6).
func TestAcquireEmptyInstanceID(t *testing.T) {
	cases := []struct {
		name        string
		dispose     []sandboxtest.Option
		wantUnclean bool
	}{
		{name: "disposed and refused"},
		{name: "a failed disposal leaves the key unclean", dispose: []sandboxtest.Option{
			sandboxtest.WithDisposeFailure(failure(sandbox.DisposalTimeout, "still there"))}, wantUnclean: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, tc.dispose...)
			b := &handing{Backend: fake, hand: func(int) (sandbox.Sandbox, error) { return noID{fake.Sandbox()}, nil }}
			r := mustRouter(t, backends(b))
			sb, err := r.Acquire(context.Background(), convKey, specOf(t, "report"))
			checkRouterErr(t, err, &sandbox.ProtocolError{}, `"fake"`, "empty instance ID")
			checkFamily(t, err, sandbox.ErrProtocol)
			if sb != nil {
				t.Fatalf("Acquire handed out the sandbox")
			}
			ds := fake.Disposals()
			if len(ds) != 1 || ds[0].Key != convKey || ds[0].Options.Kind == nil || *ds[0].Options.Kind != "report" {
				t.Fatalf("disposals = %+v, want one of kind report", ds)
			}
			if _, unclean := r.Unclean(convKey); unclean != tc.wantUnclean {
				t.Fatalf("Unclean = %v, want %v", unclean, tc.wantUnclean)
			}
		})
	}
}

// An instance ID this router never served for (key, kind, backend) is untrusted in
// conversation scope (protocol §8.3 step 7): reset when the backend declares snapshot,
// otherwise disposed and acquired once more. A created instance, and one served before, are
// trusted.
func TestAcquireUntrustedInstance(t *testing.T) {
	type step struct {
		kind      string
		wantErr   error
		family    error
		mentions  []string
		acquires  int // cumulative backend acquires
		disposals int // cumulative backend disposals
		resets    int // cumulative resets of the fake sandbox
		wantID    string
		unclean   sandbox.DisposalCode // "" wants the key clean
	}
	snapshot := sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesIn, sandbox.Snapshot)
	cases := []struct {
		name    string
		backend []sandboxtest.Option
		sandbox []sandboxtest.SandboxOption
		hand    func(sb *sandboxtest.Sandbox, t *testing.T) func(n int) (sandbox.Sandbox, error)
		spec    []sandbox.SpecOption
		key     sandbox.Key
		steps   []step
	}{
		{name: "unknown instance without snapshot: disposed, acquired once more",
			steps: []step{{acquires: 2, disposals: 1, wantID: "inst-1"}, {acquires: 3, disposals: 1, wantID: "inst-1"}}},
		{name: "unknown instance with snapshot: reset", backend: []sandboxtest.Option{snapshot},
			sandbox: []sandboxtest.SandboxOption{sandboxtest.WithReset()},
			steps:   []step{{acquires: 1, resets: 1}, {acquires: 2, resets: 1}}},
		{name: "created instance is trusted",
			hand: func(sb *sandboxtest.Sandbox, _ *testing.T) func(int) (sandbox.Sandbox, error) {
				return func(int) (sandbox.Sandbox, error) { return fresh{sb, true}, nil }
			},
			steps: []step{{acquires: 1, wantID: "inst-1"}, {acquires: 2, wantID: "inst-1"}}},
		{name: "an instance that says it was not created is untrusted",
			hand: func(sb *sandboxtest.Sandbox, _ *testing.T) func(int) (sandbox.Sandbox, error) {
				return func(int) (sandbox.Sandbox, error) { return fresh{sb, false}, nil }
			},
			steps: []step{{acquires: 2, disposals: 1}, {acquires: 3, disposals: 1}}},
		{name: "the replacement is trusted",
			hand: func(_ *sandboxtest.Sandbox, t *testing.T) func(int) (sandbox.Sandbox, error) {
				old := mustSandbox(t, sandboxtest.WithInstanceID("leftover"))
				repl := mustSandbox(t, sandboxtest.WithInstanceID("replacement"))
				return func(n int) (sandbox.Sandbox, error) {
					if n == 1 {
						return old, nil
					}
					return repl, nil
				}
			},
			steps: []step{{acquires: 2, disposals: 1, wantID: "replacement"}, {acquires: 3, disposals: 1, wantID: "replacement"}}},
		{name: "a later unknown ID is untrusted again",
			hand: func(_ *sandboxtest.Sandbox, t *testing.T) func(int) (sandbox.Sandbox, error) {
				a := mustSandbox(t, sandboxtest.WithInstanceID("a"))
				b := mustSandbox(t, sandboxtest.WithInstanceID("b"))
				return func(n int) (sandbox.Sandbox, error) {
					if n <= 2 {
						return a, nil
					}
					return b, nil
				}
			},
			steps: []step{{acquires: 2, disposals: 1, wantID: "a"}, {acquires: 4, disposals: 2, wantID: "b"}, {acquires: 5, disposals: 2, wantID: "b"}}},
		{name: "served for one kind is unknown for another",
			steps: []step{{kind: "report", acquires: 2, disposals: 1}, {kind: "render", acquires: 4, disposals: 2}, {kind: "report", acquires: 5, disposals: 2}}},
		{name: "call scope trusts what it is given",
			backend: []sandboxtest.Option{sandboxtest.WithDeclarations(sandbox.Declarations{EgressModes: sandbox.NewEgressSet(sandbox.EgressClosed),
				IsolationScopes: []sandbox.IsolationScope{sandbox.ScopeCall}})},
			spec: []sandbox.SpecOption{sandbox.WithIsolationScope(sandbox.ScopeCall)}, key: callKey,
			steps: []step{{acquires: 1}, {acquires: 2}}},
		{name: "a failed disposal of the unknown instance leaves the key unclean",
			backend: []sandboxtest.Option{sandboxtest.WithDisposeFailure(failure(sandbox.DisposalTimeout, "engine at 10.0.0.7 timed out"))},
			steps: []step{
				{wantErr: &sandbox.UncleanError{}, family: sandbox.ErrRefused, mentions: []string{"tenant/thread/agent", "(timeout)"},
					acquires: 1, disposals: 1, unclean: sandbox.DisposalTimeout},
				{wantErr: &sandbox.UncleanError{}, acquires: 1, disposals: 1, unclean: sandbox.DisposalTimeout}}},
		{name: "a failed reset disposes that instance and keeps the key open", backend: []sandboxtest.Option{snapshot},
			steps: []step{
				{wantErr: &sandbox.UnsupportedError{}, family: sandbox.ErrUnsupported, mentions: []string{"reset untrusted instance"},
					acquires: 1, disposals: 1}}},
		{name: "a failed reset whose disposal fails leaves the key unclean",
			backend: []sandboxtest.Option{snapshot, sandboxtest.WithDisposeFailure(sandbox.DisposalFailure{Code: sandbox.DisposalTimeout, Detail: "slow"})},
			steps: []step{
				{wantErr: &sandbox.UncleanError{}, mentions: []string{"(timeout)"}, acquires: 1, disposals: 1, unclean: sandbox.DisposalTimeout},
				{wantErr: &sandbox.UncleanError{}, acquires: 1, disposals: 1, unclean: sandbox.DisposalTimeout}}},
		{name: "a failed second acquire is returned",
			hand: func(sb *sandboxtest.Sandbox, _ *testing.T) func(int) (sandbox.Sandbox, error) {
				return func(n int) (sandbox.Sandbox, error) {
					if n == 2 {
						return nil, errEngineDown
					}
					return sb, nil
				}
			},
			steps: []step{{wantErr: errEngineDown, acquires: 2, disposals: 1}, {acquires: 4, disposals: 2, wantID: "inst-1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := mustSandbox(t, append([]sandboxtest.SandboxOption{sandboxtest.WithInstanceID("inst-1")}, tc.sandbox...)...)
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, append([]sandboxtest.Option{sandboxtest.WithSandbox(sb)}, tc.backend...)...)
			b := &handing{Backend: fake}
			if tc.hand != nil {
				b.hand = tc.hand(sb, t)
			}
			obs := &events{}
			r := mustRouter(t, backends(b), sandbox.WithObserver(obs))
			key := tc.key
			if key == (sandbox.Key{}) {
				key = convKey
			}
			var before step
			for i, st := range tc.steps {
				kind := st.kind
				if kind == "" {
					kind = "report"
				}
				got, err := r.Acquire(context.Background(), key, specOf(t, kind, tc.spec...))
				checkAcquireReport(t, i, obs.last(), err, st.resets > before.resets, st.disposals > before.disposals)
				before = st
				checkRouterErr(t, err, st.wantErr, st.mentions...)
				checkFamily(t, err, st.family)
				if n := len(fake.Acquires()); n != st.acquires {
					t.Fatalf("step %d: backend acquired %d times, want %d", i, n, st.acquires)
				}
				ds := fake.Disposals()
				if len(ds) != st.disposals {
					t.Fatalf("step %d: backend disposed %d times, want %d: %+v", i, len(ds), st.disposals, ds)
				}
				for _, d := range ds {
					if d.Options.Kind == nil || d.Options.InstanceID == "" {
						t.Fatalf("step %d: disposal %+v is not of one exact instance", i, d)
					}
				}
				if n := sb.Resets(); n != st.resets {
					t.Fatalf("step %d: reset %d times, want %d", i, n, st.resets)
				}
				code, unclean := r.Unclean(key)
				if (st.unclean != "") != unclean || code != st.unclean {
					t.Fatalf("step %d: Unclean = %q, %v, want %q", i, code, unclean, st.unclean)
				}
				if err != nil {
					if got != nil {
						t.Fatalf("step %d: a sandbox came with the error", i)
					}
					var ue *sandbox.UncleanError
					if errors.As(err, &ue) && strings.Contains(err.Error(), "10.0.0.7") {
						t.Fatalf("step %d: unclean refusal %q carries backend detail", i, err)
					}
					continue
				}
				if st.wantID != "" && got.InstanceID() != st.wantID {
					t.Fatalf("step %d: InstanceID = %q, want %q", i, got.InstanceID(), st.wantID)
				}
			}
		})
	}
}

// checkAcquireReport checks what an acquire reported of an untrusted instance: reset when
// it reset one, replaced when it disposed one and served another, the backend's word
// otherwise (created or reused), nothing when refused.
func checkAcquireReport(t *testing.T, step int, rep sandbox.SandboxAcquired, err error, reset, disposed bool) {
	t.Helper()
	want := []string{sandbox.OutcomeCreated, sandbox.OutcomeReused}
	switch {
	case err != nil:
		want = []string{""}
	case reset:
		want = []string{sandbox.OutcomeReset}
	case disposed:
		want = []string{sandbox.OutcomeReplaced}
	}
	untrusted := reset || disposed
	if !slices.Contains(want, rep.Outcome) || (err == nil && untrusted) != (rep.Untrusted != "") || (err != nil) != (rep.Err != nil) {
		t.Fatalf("step %d: report %+v, want outcome %q", step, rep, want)
	}
}

// The reset path changes the instance ID, and the router trusts the new one.
func TestAcquireResetChangesTheID(t *testing.T) {
	sb := mustSandbox(t, sandboxtest.WithInstanceID("pre-existing"), sandboxtest.WithReset())
	fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, sandboxtest.WithSandbox(sb),
		sandboxtest.WithCapabilities(sandbox.Exec, sandbox.FilesIn, sandbox.Snapshot))
	r := mustRouter(t, backends(fake))
	got, err := r.Acquire(context.Background(), convKey, specOf(t, "report"))
	checkRouterErr(t, err, nil)
	if got.InstanceID() == "pre-existing" || got.InstanceID() == "" {
		t.Fatalf("InstanceID after reset = %q", got.InstanceID())
	}
}

// Acquires of one key and kind never overlap inside the backend; other kinds and other keys
// run concurrently (protocol §8.3 step 1, §8.5).
func TestAcquireSerialisesPerKeyAndKind(t *testing.T) {
	defer goleak.VerifyNone(t)
	type req struct {
		key  sandbox.Key
		kind string
	}
	cases := []struct {
		name       string
		reqs       [2]req
		concurrent bool
	}{
		{name: "one key and kind", reqs: [2]req{{convKey, "report"}, {convKey, "report"}}},
		{name: "two kinds of one key", reqs: [2]req{{convKey, "report"}, {convKey, "render"}}, concurrent: true},
		{name: "two keys of one kind", reqs: [2]req{{convKey, "report"}, {otherKey, "report"}}, concurrent: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlocking(t, sandboxtest.WithIsolation(sandbox.IsolationMicroVM))
			r := mustRouter(t, backends(b))
			errs := make(chan error, 2)
			var wg sync.WaitGroup
			for _, rq := range tc.reqs {
				spec := specOf(t, rq.kind)
				wg.Go(func() {
					_, err := r.Acquire(context.Background(), rq.key, spec)
					errs <- err
				})
			}
			<-b.entered // one is inside
			wait := time.NewTimer(100 * time.Millisecond)
			defer wait.Stop()
			select {
			case <-b.entered: // the other is inside too
				if !tc.concurrent {
					t.Errorf("a second acquire of one key and kind entered the backend while the first was inside")
				}
				b.release <- struct{}{}
				b.release <- struct{}{}
			case <-wait.C:
				if tc.concurrent {
					t.Errorf("the second acquire did not run while the first was inside")
				}
				b.release <- struct{}{} // the first leaves; the second enters only now
				<-b.entered
				b.release <- struct{}{}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
			}
			if !tc.concurrent && b.most(tc.reqs[0].kind) != 1 {
				t.Fatalf("%d acquires of one key and kind were inside at once", b.most(tc.reqs[0].kind))
			}
		})
	}
}

// Waiting behind another acquire of the same key and kind is bounded: by WithAcquireWait,
// which yields a timeout error, and by ctx, whose end is not a timeout.
func TestAcquireWait(t *testing.T) {
	defer goleak.VerifyNone(t)
	cases := []struct {
		name     string
		wait     time.Duration
		ctx      func() (context.Context, context.CancelFunc)
		wantErr  error
		notIn    error
		mentions []string
	}{
		{name: "the wait bound expires", wait: 20 * time.Millisecond,
			ctx:     func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			wantErr: &sandbox.TimeoutError{}, mentions: []string{"wait for acquire of tenant/thread/agent", "20ms"}},
		{name: "ctx cancelled while waiting", wait: time.Minute,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(20*time.Millisecond, cancel)
				return ctx, cancel
			},
			wantErr: context.Canceled, notIn: sandbox.ErrTimeout, mentions: []string{"wait for acquire of tenant/thread/agent"}},
		{name: "ctx deadline while waiting is not a timeout error", wait: time.Minute,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded, notIn: sandbox.ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlocking(t, sandboxtest.WithIsolation(sandbox.IsolationMicroVM))
			obs := &events{}
			r := mustRouter(t, backends(b), sandbox.WithAcquireWait(tc.wait), sandbox.WithObserver(obs))
			spec := specOf(t, "report")
			first := make(chan error, 1)
			go func() {
				_, err := r.Acquire(context.Background(), convKey, spec)
				first <- err
			}()
			<-b.entered
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err := r.Acquire(ctx, convKey, spec)
			checkRouterErr(t, err, tc.wantErr, tc.mentions...)
			if tc.notIn != nil && errors.Is(err, tc.notIn) {
				t.Fatalf("error %v is in the %v family", err, tc.notIn)
			}
			b.release <- struct{}{}
			if err := <-first; err != nil {
				t.Fatalf("first Acquire: %v", err)
			}
			if n := b.most("report"); n != 1 {
				t.Fatalf("%d acquires were inside at once", n)
			}
			if n := len(obs.acquired); n != 1 {
				t.Fatalf("observer saw %d acquires, want the served one only", n)
			}
		})
	}
}

// A key that turns unclean while its acquire is inside the backend gets what was created
// disposed, and the acquire refused (protocol §8.3 step 5).
func TestAcquireKeyTurnsUncleanMeanwhile(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := newBlocking(t, sandboxtest.WithIsolation(sandbox.IsolationMicroVM),
		sandboxtest.WithDisposeFailure(failure(sandbox.DisposalRefused, "daemon said no")))
	b.slow = map[string]bool{"slow": true}
	r := mustRouter(t, backends(b))
	slow := make(chan error, 1)
	slowSpec := specOf(t, "slow")
	go func() {
		_, err := r.Acquire(context.Background(), convKey, slowSpec)
		slow <- err
	}()
	<-b.entered
	// Another kind of the same key: its unknown instance cannot be disposed.
	_, err := r.Acquire(context.Background(), convKey, specOf(t, "quick"))
	checkRouterErr(t, err, &sandbox.UncleanError{}, "(refused)")
	b.release <- struct{}{}
	err = <-slow
	checkRouterErr(t, err, &sandbox.UncleanError{}, "(refused)")
	var disposedSlow bool
	for _, d := range b.Disposals() {
		if d.Options.Kind != nil && *d.Options.Kind == "slow" && d.Options.InstanceID != "" {
			disposedSlow = true
		}
	}
	if !disposedSlow {
		t.Fatalf("disposals = %+v, want the slow kind's instance disposed", b.Disposals())
	}
}

// Acts (protocol §12): one SandboxAcquired per acquire, a refusal carrying the error the call
// returned (an observer records what it may of it: events its code); a panicking observer
// never alters a call.
func TestAcquireObserverEvents(t *testing.T) {
	cases := []struct {
		name        string
		explode     bool
		perSpec     bool
		acquireErr  error
		spec        []sandbox.SpecOption
		key         sandbox.Key
		wantErr     error
		wantBackend string
	}{
		{name: "served", wantBackend: "alpha"},
		{name: "served to a panicking observer", explode: true, wantBackend: "alpha"},
		{name: "refused by admission", spec: []sandbox.SpecOption{sandbox.WithRequires(sandbox.RunCode)},
			wantErr: &sandbox.CapabilityNotSupportedError{}},
		{name: "refused per spec: the first candidate's type", perSpec: true, spec: []sandbox.SpecOption{sandbox.WithRequires(sandbox.RunCode)},
			wantErr: &sandbox.CapabilityNotSupportedError{}},
		{name: "refused to a panicking observer", explode: true, spec: []sandbox.SpecOption{sandbox.WithEgress(sandbox.EgressUnrestricted)},
			wantErr: &sandbox.EgressNotEnforcedError{}},
		{name: "key refused after routing", key: callKey, wantErr: &sandbox.InvalidArgumentError{},
			wantBackend: "alpha"},
		{name: "backend failure outside the protocol's types", acquireErr: errEngineDown, wantErr: errEngineDown,
			wantBackend: "alpha"},
		{name: "backend failure wrapping a protocol type", acquireErr: fmtErr(&sandbox.TimeoutError{Op: "pull image"}),
			wantErr: &sandbox.TimeoutError{}, wantBackend: "alpha"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := &events{explode: tc.explode}
			alpha := fakeAt(t, "alpha", sandbox.IsolationMicroVM, sandboxtest.WithSandbox(mustSandbox(t, sandboxtest.WithInstanceID("inst-a"))))
			if tc.acquireErr != nil {
				alpha.SetAcquireError(tc.acquireErr)
			}
			bs := backends(alpha)
			opts := []sandbox.RouterOption{sandbox.WithObserver(obs)}
			if tc.perSpec {
				bs = append(bs, fakeAt(t, "beta", sandbox.IsolationMicroVM))
				opts = append(opts, sandbox.WithSelection(sandbox.SelectionPerSpec))
			}
			r := mustRouter(t, bs, opts...)
			key := tc.key
			if key == (sandbox.Key{}) {
				key = convKey
			}
			sb, err := r.Acquire(context.Background(), key, specOf(t, "report", tc.spec...))
			checkRouterErr(t, err, tc.wantErr)
			if (sb != nil) != (tc.wantErr == nil) {
				t.Fatalf("Acquire = %v, %v", sb, err)
			}
			if len(obs.acquired) != 1 {
				t.Fatalf("events = %+v, want one", obs.acquired)
			}
			got := obs.acquired[0]
			want := sandbox.SandboxAcquired{Act: sandbox.Act{Key: key, Kind: "report", Backend: tc.wantBackend}, Image: got.Image, Egress: got.Egress}
			if err == nil {
				// The fake hands out an instance it did not create, which this router never
				// served: untrusted, it is disposed and the next one served (§8.3 step 7).
				want.InstanceID, want.Outcome, want.Untrusted = "inst-a", sandbox.OutcomeReplaced, "inst-a"
			}
			if got.Err != err { //nolint:errorlint // the very error the call returned
				t.Fatalf("act carries %v, want the call's %v", got.Err, err)
			}
			got.Err, got.Took = nil, 0
			if got != want {
				t.Fatalf("act = %+v, want %+v", got, want)
			}
		})
	}
}

// Dispose asks every registered backend, below-floor ones included, folds what may remain
// and never fails the caller; a panicking backend is contained (protocol §8.4).
func TestDispose(t *testing.T) {
	kind := "report"
	cases := []struct {
		name     string
		backends func(t *testing.T) []sandbox.Backend
		opts     []sandbox.RouterOption
		dispose  sandbox.DisposeOptions
		want     *sandbox.DisposalFailure
		mentions []string
	}{
		{name: "every backend of a fixed router", backends: func(t *testing.T) []sandbox.Backend {
			return backends(fakeAt(t, "a", sandbox.IsolationMicroVM), fakeAt(t, "b", sandbox.IsolationContainer))
		}},
		{name: "below-floor backends per spec", opts: []sandbox.RouterOption{sandbox.WithSelection(sandbox.SelectionPerSpec)},
			backends: func(t *testing.T) []sandbox.Backend {
				return backends(fakeAt(t, "weak", sandbox.IsolationNone), fakeAt(t, "strong", sandbox.IsolationMicroVM))
			}},
		{name: "the options reach every backend", dispose: sandbox.DisposeOptions{Kind: &kind, InstanceID: "inst-1"},
			backends: func(t *testing.T) []sandbox.Backend {
				return backends(fakeAt(t, "a", sandbox.IsolationMicroVM), fakeAt(t, "b", sandbox.IsolationNone))
			}},
		{name: "failures folded by precedence, details joined",
			backends: func(t *testing.T) []sandbox.Backend {
				return backends(
					fakeAt(t, "a", sandbox.IsolationMicroVM, sandboxtest.WithDisposeFailure(failure(sandbox.DisposalTimeout, "a timed out"))),
					fakeAt(t, "b", sandbox.IsolationMicroVM),
					fakeAt(t, "c", sandbox.IsolationMicroVM, sandboxtest.WithDisposeFailure(failure(sandbox.DisposalUnreachable, "c unreachable"))))
			},
			want: &sandbox.DisposalFailure{Code: sandbox.DisposalUnreachable, Detail: "a timed out; c unreachable"}},
		{name: "a panicking backend is contained",
			backends: func(t *testing.T) []sandbox.Backend {
				return []sandbox.Backend{panicky{fakeAt(t, "boom", sandbox.IsolationMicroVM)}, fakeAt(t, "b", sandbox.IsolationMicroVM)}
			},
			want: &sandbox.DisposalFailure{Code: sandbox.DisposalUnknown}, mentions: []string{"boom panicked", "dispose exploded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bs := tc.backends(t)
			obs := &events{}
			r := mustRouter(t, bs, append([]sandbox.RouterOption{sandbox.WithObserver(obs)}, tc.opts...)...)
			got := r.Dispose(context.Background(), convKey, tc.dispose)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("Dispose = %v, want nil", got)
			case tc.want != nil && (got == nil || got.Code != tc.want.Code || (tc.want.Detail != "" && got.Detail != tc.want.Detail)):
				t.Fatalf("Dispose = %+v, want %+v", got, tc.want)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(got.Detail, m) {
					t.Fatalf("detail %q does not mention %q", got.Detail, m)
				}
			}
			for _, b := range bs {
				fake := asFake(b)
				if fake == nil {
					continue
				}
				ds := fake.Disposals()
				if len(ds) != 1 || ds[0].Key != convKey || ds[0].Options != tc.dispose {
					t.Fatalf("backend %s disposals = %+v, want one of %v with %+v", fake.Name(), ds, convKey, tc.dispose)
				}
			}
			if len(obs.disposed) != 1 || obs.disposed[0].Key != convKey || (obs.disposed[0].Undisposed == nil) != (tc.want == nil) {
				t.Fatalf("events = %+v", obs.disposed)
			}
		})
	}
}

// The unclean ledger (protocol §8.3 step 2, §8.4): a refused key stays refused, carrying
// only the disposal code, until a disposal of it lands or its conversation is purged clean.
func TestUncleanLedger(t *testing.T) {
	render := "render"
	cases := []struct {
		name   string
		reopen func(ctx context.Context, r *sandbox.Router, fake *sandboxtest.Backend)
		want   bool // the key is refused afterwards
	}{
		{name: "nothing done keeps refusing", reopen: func(context.Context, *sandbox.Router, *sandboxtest.Backend) {}, want: true},
		{name: "a landing dispose reopens", reopen: func(ctx context.Context, r *sandbox.Router, fake *sandboxtest.Backend) {
			fake.SetDisposeFailure(nil)
			if f := r.Dispose(ctx, convKey, sandbox.DisposeOptions{}); f != nil {
				panic(f)
			}
		}},
		{name: "a failing dispose keeps refusing", reopen: func(ctx context.Context, r *sandbox.Router, _ *sandboxtest.Backend) {
			_ = r.Dispose(ctx, convKey, sandbox.DisposeOptions{})
		}, want: true},
		{name: "a landing dispose of another key keeps refusing", reopen: func(ctx context.Context, r *sandbox.Router, fake *sandboxtest.Backend) {
			fake.SetDisposeFailure(nil)
			_ = r.Dispose(ctx, otherKey, sandbox.DisposeOptions{})
		}, want: true},
		{name: "a landing dispose of another kind keeps refusing", reopen: func(ctx context.Context, r *sandbox.Router, fake *sandboxtest.Backend) {
			fake.SetDisposeFailure(nil)
			_ = r.Dispose(ctx, convKey, sandbox.DisposeOptions{Kind: &render})
		}, want: true},
		{name: "a landing dispose of one instance keeps refusing", reopen: func(ctx context.Context, r *sandbox.Router, fake *sandboxtest.Backend) {
			fake.SetDisposeFailure(nil)
			_ = r.Dispose(ctx, convKey, sandbox.DisposeOptions{InstanceID: "someone-else"})
		}, want: true},
		{name: "a clean purge of the conversation reopens", reopen: func(ctx context.Context, r *sandbox.Router, _ *sandboxtest.Backend) {
			_ = r.DisposeScope(ctx, convKey.Scope, convKey.ThreadID)
		}},
		{name: "a purge through Scope reopens", reopen: func(ctx context.Context, r *sandbox.Router, _ *sandboxtest.Backend) {
			_, _ = r.Scope(ctx, convKey.Scope, convKey.ThreadID, func(context.Context) error { return nil })
		}},
		{name: "a purge of another conversation keeps refusing", reopen: func(ctx context.Context, r *sandbox.Router, _ *sandboxtest.Backend) {
			_ = r.DisposeScope(ctx, otherKey.Scope, otherKey.ThreadID)
		}, want: true},
		{name: "a purge of another scope keeps refusing", reopen: func(ctx context.Context, r *sandbox.Router, _ *sandboxtest.Backend) {
			_ = r.DisposeScope(ctx, "other-tenant", convKey.ThreadID)
		}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM,
				sandboxtest.WithDisposeFailure(failure(sandbox.DisposalUnlisted, "container abc123 on host-7")))
			r := mustRouter(t, backends(fake))
			spec := specOf(t, "report")
			_, err := r.Acquire(ctx, convKey, spec) // the unknown instance cannot be disposed
			checkRouterErr(t, err, &sandbox.UncleanError{})
			tc.reopen(ctx, r, fake)
			if _, unclean := r.Unclean(convKey); unclean != tc.want {
				t.Fatalf("Unclean = %v, want %v", unclean, tc.want)
			}
			before := len(fake.Acquires())
			_, err = r.Acquire(ctx, convKey, spec)
			if !tc.want {
				// The fake may fail to dispose the unknown instance again; what matters is that
				// the ledger let the acquire through to the backend.
				if len(fake.Acquires()) == before {
					t.Fatalf("the reopened key never reached the backend: %v", err)
				}
				return
			}
			checkRouterErr(t, err, &sandbox.UncleanError{}, "tenant/thread/agent", "(unlisted)")
			var ue *sandbox.UncleanError
			errors.As(err, &ue)
			if ue.Code != sandbox.DisposalUnlisted || ue.Key != convKey {
				t.Fatalf("UncleanError = %+v", ue)
			}
			if strings.Contains(err.Error(), "abc123") || strings.Contains(err.Error(), "host-7") {
				t.Fatalf("refusal %q carries backend detail", err)
			}
			if len(fake.Acquires()) != before {
				t.Fatalf("an unclean key reached the backend")
			}
			_, _ = r.Acquire(ctx, otherKey, spec)
			if len(fake.Acquires()) == before {
				t.Fatalf("another key was refused without asking the backend")
			}
		})
	}
}

// Dispose waits for another disposal of the same key only as long as ctx lasts; what it could
// not do is reported, never returned as an error.
func TestDisposeWaitsForTheKey(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := &stuckDispose{Backend: fakeAt(t, "fake", sandbox.IsolationMicroVM), entered: make(chan struct{}, 1), release: make(chan struct{})}
	r := mustRouter(t, backends(b))
	first := make(chan *sandbox.DisposalFailure, 1)
	go func() { first <- r.Dispose(context.Background(), convKey, sandbox.DisposeOptions{}) }()
	<-b.entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	f := r.Dispose(ctx, convKey, sandbox.DisposeOptions{})
	if f == nil || f.Code != sandbox.DisposalUnknown || !strings.Contains(f.Detail, "disposal of tenant/thread/agent") {
		t.Fatalf("Dispose while the key is held = %+v, want an unknown failure", f)
	}
	other := make(chan *sandbox.DisposalFailure, 1)
	go func() { other <- r.Dispose(context.Background(), otherKey, sandbox.DisposeOptions{}) }()
	<-b.entered // another key does not wait for the first
	b.release <- struct{}{}
	b.release <- struct{}{}
	if f := <-first; f != nil {
		t.Fatalf("first Dispose = %v", f)
	}
	if f := <-other; f != nil {
		t.Fatalf("other Dispose = %v", f)
	}
	if n := len(b.Disposals()); n != 2 {
		t.Fatalf("backend disposed %d times, want 2", n)
	}
}

// A free key's lock is taken whatever the state of ctx: the answer must not depend on which
// select case the runtime happens to pick.
func TestFreeKeyLockIgnoresAnEndedContext(t *testing.T) {
	fake := fakeAt(t, "fake", sandbox.IsolationMicroVM)
	r := mustRouter(t, backends(fake))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 64 {
		if f := r.Dispose(ctx, convKey, sandbox.DisposeOptions{}); f != nil {
			t.Fatalf("Dispose %d with an ended ctx and a free key = %v", i, f)
		}
	}
	if n := len(fake.Disposals()); n != 64 {
		t.Fatalf("backend disposed %d times, want 64", n)
	}
}

// DisposeScope asks every backend, sums the counts, folds the failures, contains panics and
// never fails the caller (protocol §8.4).
func TestDisposeScope(t *testing.T) {
	purge := func(n int, f *sandbox.DisposalFailure) sandboxtest.Option {
		return sandboxtest.WithScopePurge(sandbox.ScopePurge{Disposed: n, Undisposed: f})
	}
	cases := []struct {
		name     string
		backends func(t *testing.T) []sandbox.Backend
		opts     []sandbox.RouterOption
		want     sandbox.ScopePurge
		mentions []string
	}{
		{name: "counts summed over every backend", backends: func(t *testing.T) []sandbox.Backend {
			return backends(fakeAt(t, "a", sandbox.IsolationMicroVM, purge(2, nil)), fakeAt(t, "b", sandbox.IsolationContainer, purge(3, nil)))
		}, want: sandbox.ScopePurge{Disposed: 5}},
		{name: "below-floor backends per spec", opts: []sandbox.RouterOption{sandbox.WithSelection(sandbox.SelectionPerSpec)},
			backends: func(t *testing.T) []sandbox.Backend {
				return backends(fakeAt(t, "weak", sandbox.IsolationNone, purge(1, nil)), fakeAt(t, "strong", sandbox.IsolationMicroVM, purge(1, nil)))
			}, want: sandbox.ScopePurge{Disposed: 2}},
		{name: "failures folded, counts kept", backends: func(t *testing.T) []sandbox.Backend {
			return backends(
				fakeAt(t, "a", sandbox.IsolationMicroVM, purge(1, &sandbox.DisposalFailure{Code: sandbox.DisposalRefused, Detail: "a refused"})),
				fakeAt(t, "b", sandbox.IsolationMicroVM, purge(2, &sandbox.DisposalFailure{Code: sandbox.DisposalTimeout, Detail: "b timed out"})))
		}, want: sandbox.ScopePurge{Disposed: 3, Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalTimeout, Detail: "a refused; b timed out"}}},
		{name: "a panicking backend is contained", backends: func(t *testing.T) []sandbox.Backend {
			return []sandbox.Backend{fakeAt(t, "a", sandbox.IsolationMicroVM, purge(4, nil)), panicky{fakeAt(t, "boom", sandbox.IsolationMicroVM)}}
		}, want: sandbox.ScopePurge{Disposed: 4, Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalUnknown}},
			mentions: []string{"boom panicked", "purge exploded"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bs := tc.backends(t)
			obs := &events{explode: true} // a panicking observer changes nothing either
			r := mustRouter(t, bs, append([]sandbox.RouterOption{sandbox.WithObserver(obs)}, tc.opts...)...)
			got := r.DisposeScope(context.Background(), "tenant", "thread")
			checkPurge(t, got, tc.want, tc.mentions...)
			for _, b := range bs {
				if fake := asFake(b); fake != nil {
					if ds := fake.ScopeDisposals(); len(ds) != 1 || ds[0] != (sandboxtest.ScopeDisposal{Scope: "tenant", ThreadID: "thread"}) {
						t.Fatalf("backend %s scope disposals = %+v", fake.Name(), ds)
					}
				}
			}
			if len(obs.scopes) != 1 || obs.scopes[0].Key != (sandbox.Key{Scope: "tenant", ThreadID: "thread"}) || obs.scopes[0].Purge.Disposed != tc.want.Disposed {
				t.Fatalf("events = %+v", obs.scopes)
			}
			if n := r.PurgeScopedThread(context.Background(), "tenant", "thread"); n != tc.want.Disposed {
				t.Fatalf("PurgeScopedThread = %d, want %d", n, tc.want.Disposed)
			}
		})
	}
}

// Scope runs the body and always disposes the conversation afterwards; disposal trouble never
// replaces the body's error (protocol §8.4).
func TestScope(t *testing.T) {
	errBody := errors.New("body failed")
	cases := []struct {
		name    string
		purge   sandbox.ScopePurge
		body    func(ctx context.Context) error
		wantErr error
		panics  bool
	}{
		{name: "clean body, clean disposal", purge: sandbox.ScopePurge{Disposed: 2},
			body: func(context.Context) error { return nil }},
		{name: "the body's error is returned", purge: sandbox.ScopePurge{Disposed: 1},
			body: func(context.Context) error { return errBody }, wantErr: errBody},
		{name: "disposal trouble never replaces the body's error",
			purge: sandbox.ScopePurge{Disposed: 1, Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalTimeout, Detail: "slow"}},
			body:  func(context.Context) error { return errBody }, wantErr: errBody},
		{name: "disposal trouble is reported, not returned",
			purge: sandbox.ScopePurge{Undisposed: &sandbox.DisposalFailure{Code: sandbox.DisposalRefused, Detail: "no"}},
			body:  func(context.Context) error { return nil }},
		{name: "a body that ends its context still gets the disposal", purge: sandbox.ScopePurge{Disposed: 1},
			body: func(ctx context.Context) error { return context.Cause(ctx) }, wantErr: context.Canceled},
		{name: "a panicking body still gets the disposal", purge: sandbox.ScopePurge{Disposed: 1},
			body: func(context.Context) error { panic("body exploded") }, panics: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, sandboxtest.WithScopePurge(tc.purge))
			r := mustRouter(t, backends(ctxPurge{fake}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var got sandbox.ScopeDisposal
			var err error
			func() {
				defer func() {
					p := recover()
					if (p != nil) != tc.panics {
						t.Fatalf("panic = %v, want panics %v", p, tc.panics)
					}
				}()
				got, err = r.Scope(ctx, "tenant", "thread", func(ctx context.Context) error {
					if len(fake.ScopeDisposals()) != 0 {
						t.Errorf("disposed before the body ran")
					}
					cancel()
					return tc.body(ctx)
				})
			}()
			if ds := fake.ScopeDisposals(); len(ds) != 1 || ds[0] != (sandboxtest.ScopeDisposal{Scope: "tenant", ThreadID: "thread"}) {
				t.Fatalf("scope disposals = %+v, want one of tenant/thread", ds)
			}
			if tc.panics {
				return
			}
			checkRouterErr(t, err, tc.wantErr)
			checkPurge(t, sandbox.ScopePurge(got), tc.purge)
		})
	}
}

// Cleanup resolution (protocol §8.6): the weakest rung the serving backend establishes at or
// above the stricter of the host's and the spec's floor; dispose by default, reclaim only
// when the host lowers the floor and the backend declares reclaim; call scope always
// disposes.
func TestEffectiveCleanup(t *testing.T) {
	caps := func(cs ...sandbox.Capability) []sandbox.Capability {
		return append([]sandbox.Capability{sandbox.Exec, sandbox.FilesIn}, cs...)
	}
	both := caps(sandbox.Snapshot, sandbox.Reclaim)
	cases := []struct {
		name    string
		floor   sandbox.Cleanup // the host's; "" keeps the default
		caps    []sandbox.Capability
		spec    []sandbox.SpecOption
		want    sandbox.Cleanup
		wantErr error
	}{
		{name: "default disposes whatever is declared", caps: both, want: sandbox.CleanupDispose},
		{name: "default disposes with nothing declared", caps: caps(), want: sandbox.CleanupDispose},
		{name: "host reclaim floor and reclaim declared", floor: sandbox.CleanupReclaim, caps: both, want: sandbox.CleanupReclaim},
		{name: "host reclaim floor, reclaim alone", floor: sandbox.CleanupReclaim, caps: caps(sandbox.Reclaim), want: sandbox.CleanupReclaim},
		{name: "host reclaim floor without reclaim: reset", floor: sandbox.CleanupReclaim, caps: caps(sandbox.Snapshot), want: sandbox.CleanupReset},
		{name: "host reclaim floor with neither: dispose", floor: sandbox.CleanupReclaim, caps: caps(), want: sandbox.CleanupDispose},
		{name: "host reset floor with snapshot", floor: sandbox.CleanupReset, caps: both, want: sandbox.CleanupReset},
		{name: "host reset floor without snapshot", floor: sandbox.CleanupReset, caps: caps(sandbox.Reclaim), want: sandbox.CleanupDispose},
		{name: "spec floor raises to reset", floor: sandbox.CleanupReclaim, caps: both,
			spec: []sandbox.SpecOption{sandbox.WithCleanupFloor(sandbox.CleanupReset)}, want: sandbox.CleanupReset},
		{name: "spec floor raises to dispose", floor: sandbox.CleanupReclaim, caps: both,
			spec: []sandbox.SpecOption{sandbox.WithCleanupFloor(sandbox.CleanupDispose)}, want: sandbox.CleanupDispose},
		{name: "spec floor cannot lower the host's", caps: both,
			spec: []sandbox.SpecOption{sandbox.WithCleanupFloor(sandbox.CleanupReclaim)}, want: sandbox.CleanupDispose},
		{name: "the confinement claim is advisory only", caps: both,
			spec: []sandbox.SpecOption{sandbox.WithConfinedToGuestCallPath()}, want: sandbox.CleanupDispose},
		{name: "call scope always disposes", floor: sandbox.CleanupReclaim, caps: both,
			spec: []sandbox.SpecOption{sandbox.WithIsolationScope(sandbox.ScopeCall)}, want: sandbox.CleanupDispose},
		{name: "refused like EnsureCanServe", caps: both, spec: []sandbox.SpecOption{sandbox.WithRequires(sandbox.RunCode)},
			wantErr: &sandbox.CapabilityNotSupportedError{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, sandboxtest.WithDeclarations(sandbox.Declarations{
				Capabilities: sandbox.NewCapabilitySet(tc.caps...), EgressModes: sandbox.NewEgressSet(sandbox.EgressClosed),
				IsolationScopes: []sandbox.IsolationScope{sandbox.ScopeConversation, sandbox.ScopeCall}}))
			var opts []sandbox.RouterOption
			if tc.floor != "" {
				opts = append(opts, sandbox.WithMinCleanup(tc.floor))
			}
			r := mustRouter(t, backends(fake), opts...)
			got, err := r.EffectiveCleanup(specOf(t, "report", tc.spec...))
			checkRouterErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Fatalf("EffectiveCleanup = %q, want %q", got, tc.want)
			}
		})
	}
}

// The effective isolation scope is the stricter of the host's and the spec's.
func TestEffectiveIsolationScope(t *testing.T) {
	cases := []struct {
		name       string
		host, spec sandbox.IsolationScope
		want       sandbox.IsolationScope
	}{
		{"both conversation", sandbox.ScopeConversation, sandbox.ScopeConversation, sandbox.ScopeConversation},
		{"spec raises", sandbox.ScopeConversation, sandbox.ScopeCall, sandbox.ScopeCall},
		{"host raises", sandbox.ScopeCall, sandbox.ScopeConversation, sandbox.ScopeCall},
		{"both call", sandbox.ScopeCall, sandbox.ScopeCall, sandbox.ScopeCall},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRouter(t, nil, sandbox.WithMinIsolationScope(tc.host))
			if got := r.EffectiveIsolationScope(specOf(t, "report", sandbox.WithIsolationScope(tc.spec))); got != tc.want {
				t.Fatalf("EffectiveIsolationScope = %q, want %q", got, tc.want)
			}
		})
	}
}

// The observer's zero value does nothing, so hosts embed it and override what they need.
func TestNopObserver(t *testing.T) {
	ctx := context.Background()
	var o sandbox.Observer = sandbox.NopObserver{}
	o.SandboxAcquired(ctx, sandbox.SandboxAcquired{})
	o.SandboxDisposed(ctx, sandbox.SandboxDisposed{})
	o.ScopeDisposed(ctx, sandbox.ScopeDisposed{})
	o.EgressObserved(ctx, sandbox.EgressWindow{})
	r := mustRouter(t, backends(fakeAt(t, "fake", sandbox.IsolationMicroVM)), sandbox.WithObserver(o))
	if _, err := r.Acquire(ctx, convKey, specOf(t, "report")); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	_ = r.Dispose(ctx, convKey, sandbox.DisposeOptions{})
	_ = r.DisposeScope(ctx, "tenant", "thread")
}

// Observers hands each act to every observer in turn, skipping nil ones; a router over it
// contains a panicking one, and the others still hear every act.
func TestObserversFanOut(t *testing.T) {
	if sandbox.Observers() != nil || sandbox.Observers(nil, nil) != nil {
		t.Fatal("Observers of nothing is not nil")
	}
	one := &events{}
	if sandbox.Observers(nil, one) != sandbox.Observer(one) {
		t.Fatal("Observers of one is not that one")
	}
	a, b := &events{}, &events{}
	r := mustRouter(t, backends(fakeAt(t, "fake", sandbox.IsolationMicroVM)), sandbox.WithObserver(sandbox.Observers(a, nil, b)))
	if r.Observer() == nil {
		t.Fatal("the router hands out no observer")
	}
	ctx := context.Background()
	if _, err := r.Acquire(ctx, convKey, specOf(t, "report")); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	_ = r.Dispose(ctx, convKey, sandbox.DisposeOptions{})
	r.Observer().ScopeDisposed(ctx, sandbox.ScopeDisposed{})
	for i, o := range []*events{a, b} {
		if len(o.acquired) != 1 || len(o.disposed) != 1 || len(o.scopes) != 1 {
			t.Fatalf("observer %d heard %d acquires, %d disposals, %d purges; want one each", i, len(o.acquired), len(o.disposed), len(o.scopes))
		}
	}
	boom := &events{explode: true}
	r = mustRouter(t, backends(fakeAt(t, "fake", sandbox.IsolationMicroVM)), sandbox.WithObserver(boom))
	r.Observer().ScopeDisposed(ctx, sandbox.ScopeDisposed{}) // contained: the test goes on
	if len(boom.scopes) != 1 {
		t.Fatalf("the panicking observer heard %d purges", len(boom.scopes))
	}
	if mustRouter(t, nil).Observer() != nil {
		t.Fatal("a router without an observer hands one out")
	}
}

// Admission is silent: refusals are returned, never logged. The one construction warning
// names the backends kept for disposal only; failed disposals are logged with their detail.
func TestRouterLogging(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	weak := fakeAt(t, "weak", sandbox.IsolationContainer, sandboxtest.WithDisposeFailure(failure(sandbox.DisposalTimeout, "slow daemon")))
	weaker := fakeAt(t, "weaker", sandbox.IsolationNone)
	strong := fakeAt(t, "strong", sandbox.IsolationMicroVM)
	r := mustRouter(t, backends(weak, strong, weaker), sandbox.WithSelection(sandbox.SelectionPerSpec), sandbox.WithLogger(zap.New(core)))
	warnings := logs.TakeAll()
	if len(warnings) != 1 || warnings[0].Level != zap.WarnLevel {
		t.Fatalf("construction logged %+v, want one warning", warnings)
	}
	if got := warnings[0].ContextMap()["backends"]; !slices.Equal(got.([]any), []any{"weak", "weaker"}) {
		t.Fatalf("warning names %v, want weak and weaker", got)
	}
	for _, opt := range [][]sandbox.SpecOption{{sandbox.WithRequires(sandbox.RunCode)}, {sandbox.WithEgress(sandbox.EgressUnrestricted)}} {
		if err := r.EnsureCanServe(specOf(t, "report", opt...)); err == nil {
			t.Fatalf("EnsureCanServe served a spec no backend can")
		}
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("admission logged %+v", logs.TakeAll())
	}
	_ = r.Dispose(context.Background(), convKey, sandbox.DisposeOptions{})
	got := logs.FilterMessage("dispose").TakeAll()
	if len(got) != 1 || got[0].ContextMap()["backend"] != "weak" || got[0].ContextMap()["detail"] != "slow daemon" {
		t.Fatalf("disposal logged %+v, want the weak backend's failure", got)
	}
}

// An instance vouched for (a cluster's taker adopting what its lapsed owner served) is trusted
// like one this router served; vouching for another ID, kind or backend trusts nothing found.
func TestAcquireVouchedInstance(t *testing.T) {
	for _, tc := range []struct {
		name, kind, backend, id string
		disposals               int
	}{
		{"vouched", "report", "fake", "inst-1", 0},
		{"another instance vouched", "report", "fake", "other", 1},
		{"vouched for another kind", "render", "fake", "inst-1", 1},
		{"vouched on another backend", "report", "elsewhere", "inst-1", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := mustSandbox(t, sandboxtest.WithInstanceID("inst-1"))
			fake := fakeAt(t, "fake", sandbox.IsolationMicroVM, sandboxtest.WithSandbox(sb))
			r := mustRouter(t, backends(fake))
			r.Vouch(convKey, tc.kind, tc.backend, tc.id)
			got, err := r.Acquire(context.Background(), convKey, specOf(t, "report"))
			if err != nil || got.InstanceID() != "inst-1" {
				t.Fatalf("acquire: %v, %v", got, err)
			}
			if n := len(fake.Disposals()); n != tc.disposals {
				t.Fatalf("%d disposals, want %d", n, tc.disposals)
			}
		})
	}
}
