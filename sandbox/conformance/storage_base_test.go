package conformance

import (
	"errors"
	"slices"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// guestAt builds the simulated guest over a fake whose storage base is base.
func guestAt(t testing.TB, base string) *guest {
	t.Helper()
	sb, err := sandboxtest.NewSandbox(sandboxtest.WithStorageBase(base))
	if err != nil {
		t.Fatalf("new fake sandbox: %v", err)
	}
	return &guest{Sandbox: sb, hostOwned: map[string]bool{}}
}

func TestConformanceStorageBasePassesOnTheFake(t *testing.T) {
	for _, base := range []string{sandboxtest.DefaultStorageBase, "/image/configured-base"} {
		t.Run(base, func(t *testing.T) {
			s, err := NewPosixGuestSubject(guestAt(t, base), base, everything())
			if err != nil {
				t.Fatal(err)
			}
			results, err := AssertStorageBaseConformance(t.Context(), s)
			mustPass(t, results, err)
			if len(results) != len(storageBaseSuite.probes) {
				t.Fatalf("%d results, want %d", len(results), len(storageBaseSuite.probes))
			}
		})
	}
}

func TestConformanceStorageBaseRunsWhatIsDeclared(t *testing.T) {
	results, err := AssertStorageBaseConformance(t.Context(), subjectOf(t, newGuest(t), sandbox.NewCapabilitySet(sandbox.Exec)))
	if err != nil {
		t.Fatalf("assert: %v", err)
	}
	var ran []string
	for _, r := range results {
		if r.Passed {
			ran = append(ran, r.Name)
		}
	}
	if want := []string{"dot-is-the-base", "a-relative-working-directory-lies-beneath-the-base"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %q with exec alone, want %q", ran, want)
	}
}

func TestConformanceStorageBaseRefusesARuntimeOnlySubject(t *testing.T) {
	g := newGuest(t)
	_, err := AssertStorageBaseConformance(t.Context(), subjectOf(t, g, sandbox.NewCapabilitySet(sandbox.RunCode, sandbox.Reclaim)))
	var invalid *sandbox.InvalidArgumentError
	if !errors.As(err, &invalid) {
		t.Fatalf("err = %v, want an invalid-argument refusal", err)
	}
	if len(g.ExecCalls()) != 0 {
		t.Fatalf("the refused run ran %d commands", len(g.ExecCalls()))
	}
}

func TestConformanceStorageBaseCatchesBrokenBackends(t *testing.T) {
	cases := []struct {
		name string
		sb   func(t *testing.T) sandbox.Sandbox
		want []string
	}{
		{"bound to another base", func(t *testing.T) sandbox.Sandbox { return guestAt(t, "/elsewhere") },
			sorted(storageBaseNames()...)},
		{"leaves the base to the caller", func(t *testing.T) sandbox.Sandbox {
			g := newGuest(t)
			if err := g.Sandbox.Remove(t.Context(), work, "/", true); err != nil {
				t.Fatal(err)
			}
			return g
		}, sorted("the-base-is-a-directory", "dot-is-the-base", "a-relative-working-directory-lies-beneath-the-base")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AssertStorageBaseConformance(t.Context(), subjectOf(t, tc.sb(t), everything()))
			if got := failedNames(t, err); !slices.Equal(got, tc.want) {
				t.Fatalf("failed = %q\nwant     %q\n%v", got, tc.want, err)
			}
		})
	}
}

func storageBaseNames() []string {
	var names []string
	for _, p := range storageBaseSuite.probes {
		names = append(names, p.name)
	}
	return names
}
