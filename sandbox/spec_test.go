package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestNewSpecDefaults(t *testing.T) {
	s, err := NewSpec("codeact")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Valid() || s.Egress != EgressClosed || s.IsolationScope != ScopeConversation || s.WorkDir != nil {
		t.Fatalf("defaults wrong: %+v", s)
	}
	if !s.Requires.Has(Exec) || !s.Requires.Has(FilesIn) || len(s.Requires) != 2 {
		t.Fatalf("requires = %s", s.Requires)
	}
	if s.FilesIn != DefaultTransferLimits() || s.FilesOut != DefaultTransferLimits() {
		t.Fatal("transfer limits must default, not be the zero cap")
	}
	if !DefaultTransferLimits().Within(DefaultTransferLimits()) {
		t.Fatal("default must fit default")
	}
	if (Spec{}).Valid() {
		t.Fatal("the zero Spec is not a spec")
	}
}

func TestNewSpecValidation(t *testing.T) {
	cases := []struct {
		name    string
		kind    string
		opts    []SpecOption
		wantErr string
	}{
		{"no kind", "", nil, "needs a kind"},
		{"unknown egress", "k", []SpecOption{WithEgress("open")}, "unknown egress"},
		{"unknown scope", "k", []SpecOption{WithIsolationScope("thread")}, "unknown isolation scope"},
		{"hosts without allowlist", "k", []SpecOption{WithAllowlist(Hosts("a.example")...), WithEgress(EgressClosed)},
			`lists egress hosts a.example but runs with "closed" egress; set egress to "allowlist" or drop the hosts`},
		{"host tools not required", "k", []SpecOption{WithHostTools(HostToolAggregate{})}, "does not require host_tools"},
		{"lower-case method", "k", []SpecOption{WithAllowlist(EgressRule{Host: "a", Methods: []string{"get"}})}, "upper-case"},
		{"conflicting methods", "k", []SpecOption{WithAllowlist(EgressRule{Host: "a", Methods: []string{"GET"}}, EgressRule{Host: "A", Methods: []string{"POST"}})},
			"twice with different methods"},
		{"unknown capability", "k", []SpecOption{WithRequires("network")}, "unknown capability"},
		{"unknown floor", "k", []SpecOption{WithIsolationFloor("process")}, "unknown isolation"},
		{"unknown cleanup", "k", []SpecOption{WithCleanupFloor("scrub")}, "unknown cleanup"},
		{"unknown family", "k", []SpecOption{WithRequiresOSFamily("beos")}, "unknown os family"},
		{"unknown disposition", "k", []SpecOption{WithDeclaredOutputs(DeclaredOutput{Path: "a", Disposition: "drop"})}, "unknown output disposition"},
		{"negative memory", "k", []SpecOption{WithResources(Resources{MemoryBytes: -1})}, "memory_bytes is negative"},
		{"negative pids", "k", []SpecOption{WithResources(Resources{Pids: -1})}, "pids is negative"},
		{"negative cpus", "k", []SpecOption{WithResources(Resources{CPUs: -0.5})}, "cpus must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSpec(tc.kind, tc.opts...)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want invalid containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestSpecAllowlistNormalises(t *testing.T) {
	s, err := NewSpec("k", nil, WithAllowlist(
		EgressRule{Host: "Api.Example"}, EgressRule{Host: "api.example"},
		EgressRule{Host: "b.example", Methods: []string{"POST", "GET", "GET"}},
		EgressRule{Host: "B.example", Methods: []string{"GET", "POST"}},
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.EgressAllow) != 2 {
		t.Fatalf("equivalent entries must collapse: %+v", s.EgressAllow)
	}
	if got := strings.Join(s.EgressAllow[1].Methods, ","); got != "GET,POST" {
		t.Fatalf("methods = %s", got)
	}
	if !s.RequiredCapabilities().Has(EgressMethods) || s.Requires.Has(EgressMethods) {
		t.Fatal("a narrowing rule adds egress_methods to the required set only")
	}
	plain, _ := NewSpec("k", WithAllowlist(Hosts("a")...))
	if plain.RequiredCapabilities().Has(EgressMethods) {
		t.Fatal("bare hosts need no egress_methods")
	}
}

func TestSpecOptionsAndClone(t *testing.T) {
	name := "renamed"
	s, err := NewSpec("k",
		WithImage("img"), WithImageID("sha256:x"), WithWorkDir("/data"), WithLabels(map[string]string{"a": "1"}),
		WithRequires(Exec, FilesOut, HostTools), WithIsolationFloor(IsolationVM),
		WithDeclaredOutputs(DeclaredOutput{Path: "o", Disposition: DispositionLand, Required: true, Name: &name}, Output("p")),
		WithFilesIn(TransferLimits{1, 2, 3}), WithFilesOut(TransferLimits{4, 5, 6}), WithOutputsNamedAtCallTime(),
		WithRequiresOSFamily(OSPosix), WithHostTools(HostToolAggregate{Identities: []ToolIdentity{IdentityApp}}),
		WithIsolationScope(ScopeCall), WithCleanupFloor(CleanupReset), WithConfinedToGuestCallPath(), WithExclusiveAdmission())
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != "img" || s.ImageID != "sha256:x" || *s.WorkDir != "/data" || *s.MinIsolation != IsolationVM ||
		s.FilesIn.MaxFiles != 3 || s.FilesOut.MaxFiles != 6 || !s.OutputsNamedAtCallTime || *s.RequiresOSFamily != OSPosix ||
		s.IsolationScope != ScopeCall || *s.MinCleanup != CleanupReset || !s.ConfinedToGuestCallPath || !s.ExclusiveAdmission {
		t.Fatalf("options not applied: %+v", s)
	}
	if s.DeclaredOutputs[0].LandingName() != "renamed" || s.DeclaredOutputs[1].LandingName() != "p" {
		t.Fatal("landing names wrong")
	}
	if ids := s.Identities(); len(ids) != 1 || ids[0] != IdentityApp {
		t.Fatalf("identities = %v", ids)
	}
	if !s.NeedsStorageBase() {
		t.Fatal("exec needs a base")
	}
	c := s.Clone()
	c.Labels["a"] = "2"
	c.Requires[Snapshot] = struct{}{}
	if s.Labels["a"] != "1" || s.Requires.Has(Snapshot) {
		t.Fatal("clone shares mutable state")
	}
	rt, _ := NewSpec("k", WithRequires())
	if rt.NeedsStorageBase() || rt.Identities() != nil {
		t.Fatal("runtime-only spec needs no base")
	}
}

func TestDeclarationsSilence(t *testing.T) {
	var d Declarations
	if caps := d.EffectiveCapabilities(); len(caps) != 2 || !caps.Has(Exec) {
		t.Fatal("unstated capabilities mean the default set")
	}
	if d.EffectiveLimits() != DefaultSandboxLimits() {
		t.Fatal("unstated limits mean the defaults")
	}
	if s := d.EffectiveIsolationScopes(); len(s) != 1 || s[0] != ScopeConversation {
		t.Fatal("unstated scopes mean conversation")
	}
	if d.EgressModes.Has(EgressClosed) || d.ServesOS(OSPosix) {
		t.Fatal("empty egress and OS sets answer nothing")
	}
	stated := Declarations{Capabilities: CapabilitySet{}, Limits: &SandboxLimits{}}
	if len(stated.EffectiveCapabilities()) != 0 || stated.EffectiveLimits() != (SandboxLimits{}) {
		t.Fatal("stated-empty must differ from unstated")
	}
}

func TestFoldDisposalFailures(t *testing.T) {
	if FoldDisposalFailures(nil) != nil {
		t.Fatal("none folds to nil")
	}
	cases := []struct {
		name  string
		codes []DisposalCode
		want  DisposalCode
	}{
		{"single", []DisposalCode{DisposalRefused}, DisposalRefused},
		{"precedence", []DisposalCode{DisposalUnknown, DisposalRefused, DisposalTimeout}, DisposalTimeout},
		{"unreachable wins", []DisposalCode{DisposalUnlisted, DisposalUnreachable}, DisposalUnreachable},
		{"unrecognised is unknown", []DisposalCode{"weird"}, DisposalUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var fs []DisposalFailure
			for i, c := range tc.codes {
				fs = append(fs, DisposalFailure{Code: c, Detail: string(rune('a' + i))})
			}
			got := FoldDisposalFailures(fs)
			if got.Code != tc.want {
				t.Fatalf("code = %s, want %s", got.Code, tc.want)
			}
			if len(tc.codes) > 1 && !strings.Contains(got.Detail, "a; b") {
				t.Fatalf("detail = %q", got.Detail)
			}
			if !strings.Contains(got.Error(), string(tc.want)) {
				t.Fatal("error text lacks the code")
			}
		})
	}
}

func TestCommandValidate(t *testing.T) {
	if Argv("true").Validate() != nil || Shell("true").Validate() != nil {
		t.Fatal("valid commands refused")
	}
	if !errors.Is((Command{}).Validate(), ErrInvalid) || !errors.Is((Command{Argv: []string{"a"}, Shell: "b"}).Validate(), ErrInvalid) {
		t.Fatal("invalid commands accepted")
	}
}

func TestNewFileStat(t *testing.T) {
	if st := NewFileStat("a", EntryFile, 5); st.Size == nil || *st.Size != 5 {
		t.Fatal("file keeps its size")
	}
	for _, k := range []EntryKind{EntrySymlink, EntryDirectory, EntryOther} {
		if NewFileStat("a", k, 5).Size != nil {
			t.Fatalf("%s must have no size", k)
		}
	}
}
