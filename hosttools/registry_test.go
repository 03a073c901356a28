package hosttools_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/sandbox"
)

func nop(context.Context, hosttools.Arguments) (any, error) { return nil, nil }

func TestRegister(t *testing.T) {
	user, app := sandbox.IdentityUser, sandbox.IdentityApp
	cases := []struct {
		name    string
		opts    []hosttools.Option
		first   *hosttools.Tool
		tool    hosttools.Tool
		wantErr error
		wantAs  any
	}{
		{name: "a declared app tool registers", tool: hosttools.Tool{Name: "a", Declaration: &hosttools.Declaration{Identity: &app}, Func: nop}},
		{name: "an undeclared tool registers without RequireDeclared", tool: hosttools.Tool{Name: "a", Func: nop}},
		{name: "an empty name is refused", tool: hosttools.Tool{Name: "", Declaration: declared(), Func: nop},
			wantErr: sandbox.ErrInvalid, wantAs: new(*hosttools.RegistrationError)},
		{name: "a tool without a function is refused", tool: hosttools.Tool{Name: "a", Declaration: declared()},
			wantErr: sandbox.ErrInvalid, wantAs: new(*hosttools.RegistrationError)},
		{name: "a duplicate name is refused", first: &hosttools.Tool{Name: "a", Declaration: declared(), Func: nop},
			tool: hosttools.Tool{Name: "a", Declaration: declared(), Func: nop}, wantErr: sandbox.ErrInvalid, wantAs: new(*hosttools.RegistrationError)},
		{name: "RequireDeclared refuses an undeclared tool", opts: []hosttools.Option{hosttools.WithRequireDeclared()},
			tool: hosttools.Tool{Name: "a", Func: nop}, wantErr: sandbox.ErrInvalid, wantAs: new(*sandbox.HostToolNotDeclaredError)},
		{name: "a user tool is refused by the default identities", tool: hosttools.Tool{Name: "a", Declaration: &hosttools.Declaration{Identity: &user}, Func: nop},
			wantErr: sandbox.ErrInvalid, wantAs: new(*sandbox.HostToolIdentityNotAllowedError)},
		{name: "an undeclared tool acts as app", opts: []hosttools.Option{hosttools.WithAllowedIdentities(user)},
			tool: hosttools.Tool{Name: "a", Func: nop}, wantErr: sandbox.ErrInvalid, wantAs: new(*sandbox.HostToolIdentityNotAllowedError)},
		{name: "a nil identity is always allowed", opts: []hosttools.Option{hosttools.WithAllowedIdentities()},
			tool: hosttools.Tool{Name: "a", Declaration: &hosttools.Declaration{}, Func: nop}},
		{name: "a user tool registers when allowed", opts: []hosttools.Option{hosttools.WithAllowedIdentities(app, user)},
			tool: hosttools.Tool{Name: "a", Declaration: &hosttools.Declaration{Identity: &user}, Func: nop}},
		{name: "an empty parameter name is refused", tool: hosttools.Tool{Name: "a", Declaration: declared(), Params: []hosttools.Param{{}}, Func: nop},
			wantErr: sandbox.ErrInvalid, wantAs: new(*hosttools.RegistrationError)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := hosttools.NewRegistry(append(tc.opts, hosttools.WithoutRegistrationWarning())...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.first != nil {
				if err := reg.Register(*tc.first); err != nil {
					t.Fatal(err)
				}
			}
			err = reg.Register(tc.tool)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Register = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !errors.As(err, tc.wantAs) {
				t.Fatalf("Register = %v (%T), want %v as %T", err, err, tc.wantErr, tc.wantAs)
			}
		})
	}
}

func TestAggregateSeals(t *testing.T) {
	reg, _ := hosttools.NewRegistry()
	if err := reg.Register(hosttools.Tool{Name: "a", Declaration: declared(), Func: nop}); err != nil {
		t.Fatal(err)
	}
	reg.Aggregate()
	err := reg.Register(hosttools.Tool{Name: "b", Declaration: declared(), Func: nop})
	if !errors.Is(err, hosttools.ErrSealed) || !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("Register after Aggregate = %v, want ErrSealed", err)
	}
	reg2, _ := hosttools.NewRegistry()
	reg2.NewRun()
	if err := reg2.Register(hosttools.Tool{Name: "b", Declaration: declared(), Func: nop}); !errors.Is(err, hosttools.ErrSealed) {
		t.Fatalf("Register after NewRun = %v, want ErrSealed", err)
	}
}

func TestAggregate(t *testing.T) {
	trusted, untrusted := sandbox.SourceTrusted, sandbox.SourceUntrusted
	app, user := sandbox.IdentityApp, sandbox.IdentityUser
	sinkA, sinkB := "internal", "public"
	reg, err := hosttools.NewRegistry(hosttools.WithAllowedIdentities(app, user), hosttools.WithMaxCallsPerRun(3),
		hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 10, MaxTotalBytes: 20, MaxFiles: 2}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []hosttools.Tool{
		{Name: "src", Declaration: &hosttools.Declaration{Source: &trusted, Identity: &app}, Func: nop},
		{Name: "sink", Declaration: &hosttools.Declaration{Sink: &sinkB, Identity: &user}, Func: nop},
		{Name: "sink2", Declaration: &hosttools.Declaration{Sink: &sinkA}, Func: nop},
	} {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	agg := reg.Aggregate()
	if agg.ResultIntegrity == nil || *agg.ResultIntegrity != trusted {
		t.Fatalf("ResultIntegrity = %v, want trusted (sinks do not drag it down)", agg.ResultIntegrity)
	}
	if !slices.Equal(agg.OutboundCaps, []string{"internal", "public"}) || !slices.Equal(agg.Identities, []sandbox.ToolIdentity{app, user}) ||
		!agg.RequiresApproval || agg.HasUndeclared || agg.MaxCallsPerRun != 3 || agg.ResponseLimits.MaxFiles != 2 {
		t.Fatalf("Aggregate = %+v", agg)
	}

	reg2, _ := hosttools.NewRegistry()
	_ = reg2.Register(hosttools.Tool{Name: "undeclared", Func: nop})
	_ = reg2.Register(hosttools.Tool{Name: "pure", Declaration: &hosttools.Declaration{}, Func: nop})
	agg = reg2.Aggregate()
	if agg.ResultIntegrity == nil || *agg.ResultIntegrity != untrusted || !agg.HasUndeclared || agg.RequiresApproval ||
		!slices.Equal(agg.Identities, []sandbox.ToolIdentity{app}) {
		t.Fatalf("Aggregate of an undeclared tool = %+v, want untrusted, app, undeclared", agg)
	}
	reg3, _ := hosttools.NewRegistry()
	_ = reg3.Register(hosttools.Tool{Name: "pure", Declaration: &hosttools.Declaration{}, Func: nop})
	if agg := reg3.Aggregate(); agg.ResultIntegrity != nil || len(agg.Identities) != 0 {
		t.Fatalf("Aggregate of a pure tool = %+v, want no integrity opinion and no identities", agg)
	}
	// The spec a registry's aggregate rides on must require the capability.
	if _, err := sandbox.NewSpec("k", sandbox.WithHostTools(agg)); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a spec with host tools but not the capability: %v, want invalid", err)
	}
}

func TestRegistryOptions(t *testing.T) {
	cases := []struct {
		name string
		opt  hosttools.Option
	}{
		{"zero calls", hosttools.WithMaxCallsPerRun(0)},
		{"a zero per-file leg", hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 0, MaxTotalBytes: 1, MaxFiles: 1})},
		{"a zero total leg", hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 0, MaxFiles: 1})},
		{"a zero files leg", hosttools.WithResponseLimits(sandbox.TransferLimits{MaxBytesPerFile: 1, MaxTotalBytes: 1, MaxFiles: 0})},
		{"an unknown identity", hosttools.WithAllowedIdentities("root")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := hosttools.NewRegistry(tc.opt); !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("NewRegistry = %v, want invalid", err)
			}
		})
	}
}
