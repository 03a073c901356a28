package messages

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func strp(s string) *string { return &s }

// TestSpecFromWire checks that the wire spec maps onto sandbox.NewSpec: defaults when
// fields are omitted, the same typed refusal for a bad value.
func TestSpecFromWire(t *testing.T) {
	cases := []struct {
		name    string
		in      APISpec
		check   func(sandbox.Spec) bool
		wantErr error
	}{
		{"defaults", APISpec{Kind: "shell", Image: "busybox"}, func(s sandbox.Spec) bool {
			return s.Egress == sandbox.EgressClosed && s.Requires.Has(sandbox.Exec) && s.Requires.Has(sandbox.FilesIn) &&
				s.FilesIn == sandbox.DefaultTransferLimits() && s.IsolationScope == sandbox.ScopeConversation
		}, nil},
		{"hosts mean allowlist", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "example.com"}}},
			func(s sandbox.Spec) bool { return s.Egress == sandbox.EgressAllowlist && len(s.EgressAllow) == 1 }, nil},
		{"empty requires is empty", APISpec{Kind: "k", Requires: []string{}},
			func(s sandbox.Spec) bool { return len(s.Requires) == 0 }, nil},
		{"no kind", APISpec{Image: "x"}, nil, sandbox.ErrInvalid},
		{"unknown egress", APISpec{Kind: "k", Egress: "open"}, nil, sandbox.ErrInvalid},
		{"unknown capability", APISpec{Kind: "k", Requires: []string{"teleport"}}, nil, sandbox.ErrInvalid},
		{"unknown rung", APISpec{Kind: "k", MinIsolation: strp("process")}, nil, sandbox.ErrInvalid},
		{"unknown scope", APISpec{Kind: "k", IsolationScope: "forever"}, nil, sandbox.ErrInvalid},
		{"hosts with closed egress", APISpec{Kind: "k", Egress: "closed", EgressAllow: []APIEgressRule{{Host: "a"}}}, nil, sandbox.ErrInvalid},
		{"lower-case method", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Methods: []string{"get"}}}}, nil, sandbox.ErrInvalid},
		{"bare star", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "*"}}}, nil, sandbox.ErrInvalid},
		{"ip literal", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "169.254.169.254"}}}, nil, sandbox.ErrInvalid},
		{"dot-dot path", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Methods: []string{"GET"}, Paths: []string{"/a/../b"}}}}, nil, sandbox.ErrInvalid},
		{"inspecting rule", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Methods: []string{"GET"}, Paths: []string{"/x/**"}}}},
			func(s sandbox.Spec) bool {
				return s.EgressAllow[0].Paths[0] == "/x/**" && s.RequiredCapabilities().Has(sandbox.EgressMethods)
			}, nil},
		{"shadow rule", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Methods: []string{"GET"}, Shadow: true}}},
			func(s sandbox.Spec) bool { return s.EgressAllow[0].Shadow && SpecToWire(s).EgressAllow[0].Shadow }, nil},
		{"credential", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Methods: []string{"GET"}, Credentials: []APIEgressCredential{
			{Header: "Authorization", Env: "A_TOKEN", Secret: "Bearer x", Paths: []string{"/v1/**"}}}}}},
			func(s sandbox.Spec) bool {
				c := s.EgressAllow[0].Credentials[0]
				w := SpecToWire(s).EgressAllow[0].Credentials[0]
				return c.Env == "A_TOKEN" && c.Secret == "Bearer x" && c.Paths[0] == "/v1/**" && w.Secret == "Bearer x"
			}, nil},
		{"credential on a tunnel", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Credentials: []APIEgressCredential{
			{Header: "Authorization", Env: "A_TOKEN", Secret: "x"}}}}}, nil, sandbox.ErrInvalid},
		{"shadow narrowing nothing", APISpec{Kind: "k", EgressAllow: []APIEgressRule{{Host: "a", Shadow: true}}}, nil, sandbox.ErrInvalid},
		{"unknown disposition", APISpec{Kind: "k", DeclaredOutputs: []APIDeclaredOutput{{Path: "o", Disposition: "burn"}}}, nil, sandbox.ErrInvalid},
		{"unknown identity", APISpec{Kind: "k", Requires: []string{"host_tools"}, HostTools: &APIHostTools{Identities: []string{"root"}}}, nil, sandbox.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := SpecFromWire(tc.in)
			if tc.wantErr != nil {
				var ia *sandbox.InvalidArgumentError
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &ia) {
					t.Fatalf("err %v, want an *sandbox.InvalidArgumentError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if !s.Valid() || !tc.check(s) {
				t.Fatalf("spec %+v fails its check", s)
			}
		})
	}
}

// TestSpecRoundTrips checks SpecFromWire(SpecToWire(s)) == s for a spec that sets every
// field.
func TestSpecRoundTrips(t *testing.T) {
	integrity := sandbox.SourceTrusted
	name := "report.txt"
	spec, err := sandbox.NewSpec("codeact",
		sandbox.WithImage("img"), sandbox.WithImageID("sha256:abc"),
		sandbox.WithAllowlist(sandbox.EgressRule{Host: "api.example.com", Methods: []string{"GET"}, Paths: []string{"/repos/*/issues", "/v1/**"}, Authority: "a"}),
		sandbox.WithWorkDir("/srv/w"), sandbox.WithLabels(map[string]string{"team": "x"}),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.HostTools),
		sandbox.WithIsolationFloor(sandbox.IsolationContainer),
		sandbox.WithDeclaredOutputs(sandbox.Output("out/r.txt"), sandbox.DeclaredOutput{Path: "x", Disposition: sandbox.DispositionConsume, MediaType: "text/plain", Name: &name}),
		sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 2, MaxFiles: 3}),
		sandbox.WithFilesOut(sandbox.TransferLimits{MaxBytesPerFile: 4, MaxTotalBytes: 5, MaxFiles: 6}),
		sandbox.WithOutputsNamedAtCallTime(), sandbox.WithRequiresOSFamily(sandbox.OSPosix),
		sandbox.WithHostTools(sandbox.HostToolAggregate{ResultIntegrity: &integrity, OutboundCaps: []string{"c"},
			Identities: []sandbox.ToolIdentity{sandbox.IdentityApp}, RequiresApproval: true, HasUndeclared: true,
			ResponseLimits: sandbox.TransferLimits{MaxBytesPerFile: 7, MaxTotalBytes: 8, MaxFiles: 9}, MaxCallsPerRun: 10}),
		sandbox.WithIsolationScope(sandbox.ScopeCall), sandbox.WithCleanupFloor(sandbox.CleanupReset),
		sandbox.WithConfinedToGuestCallPath(), sandbox.WithExclusiveAdmission(),
		sandbox.WithResources(sandbox.Resources{MemoryBytes: 256 << 20, CPUs: 0.5, Pids: 64}),
	)
	if err != nil {
		t.Fatalf("new spec: %v", err)
	}
	back, err := SpecFromWire(SpecToWire(spec))
	if err != nil {
		t.Fatalf("from wire: %v", err)
	}
	if !reflect.DeepEqual(back, spec) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, spec)
	}
}

func TestDeclarationsRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		d    sandbox.Declarations
	}{
		{"silent", sandbox.Declarations{EgressModes: sandbox.NewEgressSet()}},
		{"full", sandbox.Declarations{
			Capabilities:    sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesOut),
			Limits:          &sandbox.SandboxLimits{FilesIn: sandbox.DefaultTransferLimits(), FilesOut: sandbox.TransferLimits{MaxFiles: 1}},
			EgressModes:     sandbox.NewEgressSet(sandbox.EgressClosed, sandbox.EgressAllowlist),
			OSFamilies:      []sandbox.OSFamily{sandbox.OSPosix},
			IsolationScopes: []sandbox.IsolationScope{sandbox.ScopeConversation, sandbox.ScopeCall},
			ObservesEgress:  true, EgressMethodTokens: []string{"GET"}, EgressPaths: true,
			AttachedIdentity:           &sandbox.AttachedIdentityDeclaration{Scope: sandbox.ScopeCall, RetentionSeconds: 5, Channels: []string{"c"}},
			RequiresExclusiveAdmission: true,
			Resources:                  &sandbox.Resources{MemoryBytes: 1 << 30, Pids: 512},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DeclarationsFromWire(DeclarationsToWire(tc.d))
			if !reflect.DeepEqual(got, tc.d) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.d)
			}
		})
	}
}

// TestEgressRuleJSON: an allowlist entry decodes from today's object, from a bare host
// string, and with methods and paths; it always encodes as an object.
func TestEgressRuleJSON(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []APIEgressRule
		wantErr bool
	}{
		{"object", `[{"host":"pypi.org"}]`, []APIEgressRule{{Host: "pypi.org"}}, false},
		{"bare string", `["pypi.org","files.example"]`, []APIEgressRule{{Host: "pypi.org"}, {Host: "files.example"}}, false},
		{"mixed", `["pypi.org",{"host":"api.github.com","methods":["GET"],"paths":["/repos/acme/**"]}]`,
			[]APIEgressRule{{Host: "pypi.org"}, {Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/**"}}}, false},
		{"number", `[42]`, nil, true},
		{"wrong field type", `[{"host":"a","methods":"GET"}]`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []APIEgressRule
			err := json.Unmarshal([]byte(tc.in), &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	b, err := json.Marshal(APIEgressRule{Host: "pypi.org"})
	if err != nil || string(b) != `{"host":"pypi.org"}` {
		t.Fatalf("encoded %s (%v), want today's object form", b, err)
	}
}
