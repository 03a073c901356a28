package files

import (
	"context"
	"errors"
	"github.com/mafsandbox/engine/actors"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
)

// TestConformance runs the shared suites against the Docker backend, each on a fresh sandbox
// of its own key. EXEC runs last: its timeout probe discards the sandbox it runs on.
func TestConformance(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		declared := b.Declarations().Capabilities
		// The listing probes are the only ones allowed to skip: Docker does not declare
		// files_list (enumerating through docker cp would transfer whole subtrees).
		listing := map[string]bool{
			"listing-a-linked-directory":      true,
			"listing-through-a-linked-parent": true,
			"listing-under-a-linked-ancestor": true,
			"a-listing-names-its-links":       true,
		}
		cases := []struct {
			name     string
			requires []sandbox.Capability
			assert   func(context.Context, conformance.Subject) ([]conformance.Result, error)
			skips    map[string]bool
		}{
			{"FILES_OUT", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut},
				conformance.AssertFilesOutConformance, listing},
			{"FILES_IN", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn},
				conformance.AssertFilesInConformance, nil},
			{"FILES_DELETE", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesDelete},
				conformance.AssertFilesDeleteConformance, nil},
			{"RECLAIM", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.Reclaim},
				conformance.AssertReclaimConformance, nil},
			{"EXEC", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn},
				conformance.AssertExecConformance, nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(tc.requires...)))
				based, ok := sb.(interface{ WorkDir() string })
				if !ok {
					t.Fatalf("the sandbox %T does not say which storage base it is bound to", sb)
				}
				subject, err := conformance.NewPosixGuestSubject(sb, based.WorkDir(), declared)
				if err != nil {
					t.Fatalf("new subject: %v", err)
				}
				results, err := tc.assert(itest.Context(t), subject)
				for _, r := range results {
					t.Logf("%s: passed=%t skipped=%t %s", r.Name, r.Passed, r.Skipped, r.Reason)
				}
				var cf *sandbox.ConformanceFailure
				switch {
				case errors.As(err, &cf):
					t.Fatalf("%v", cf)
				case err != nil:
					t.Fatalf("run the %s suite: %v", tc.name, err)
				}
				for _, r := range results {
					if r.Skipped && !tc.skips[r.Name] {
						t.Errorf("%s was skipped (%s): only the listing probes may skip", r.Name, r.Reason)
					}
					if !r.Skipped && !r.Passed {
						t.Errorf("%s neither passed nor skipped: %s", r.Name, r.Reason)
					}
				}
			})
		}
	})
}

// TestStorageBaseConformance runs the storage-base suite on a fresh default and a fresh
// explicit base, then what one sandbox cannot show (protocol §14.6): a warm acquire keeps
// the base and its contents, a warm acquire asking for another base is refused, and a base
// the guest removed is restored by the next acquire.
func TestStorageBaseConformance(t *testing.T) {
	b := itest.NewBackend(t)
	declared := b.Declarations().Capabilities
	requires := sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete, sandbox.Reclaim)
	cases := []struct {
		name string
		base string
		opts []sandbox.SpecOption
	}{
		{"default", "/maf-sandbox/work", []sandbox.SpecOption{requires}},
		{"explicit", "/srv/maf-conformance/base", []sandbox.SpecOption{requires, sandbox.WithWorkDir("/srv/maf-conformance/base")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := itest.Context(t)
			key, spec := itest.NewKey(t), itest.BusyboxSpec(t, tc.opts...)
			sb := itest.Acquire(t, b, key, spec)
			assertStorageBase(t, sb, tc.base, declared)

			if err := sb.WriteFile(ctx, "kept.txt", []byte("warm"), "."); err != nil {
				t.Fatalf("write kept.txt: %v", err)
			}
			warm := itest.Acquire(t, b, key, spec)
			if warm.InstanceID() != sb.InstanceID() {
				t.Fatalf("warm acquire gave instance %s, want %s", warm.InstanceID(), sb.InstanceID())
			}
			if got, err := warm.ReadFile(ctx, "kept.txt", ".", 16); err != nil || string(got) != "warm" {
				t.Fatalf("kept.txt after a warm acquire = %q, %v", got, err)
			}

			other := itest.BusyboxSpec(t, requires, sandbox.WithWorkDir("/srv/maf-conformance/another"))
			if _, err := b.Acquire(ctx, key, other); !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("a warm acquire asking for another base: %v, want an invalid-argument refusal", err)
			}
			if got, err := sb.ReadFile(ctx, "kept.txt", ".", 16); err != nil || string(got) != "warm" {
				t.Fatalf("kept.txt after a refused retarget = %q, %v", got, err)
			}

			res, err := sb.Exec(ctx, sandbox.Argv("rm", "-rf", "--", tc.base), "/", time.Minute)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("the guest removing its base: %+v, %v", res, err)
			}
			restored := itest.Acquire(t, b, key, spec)
			if restored.InstanceID() != sb.InstanceID() {
				t.Fatalf("the acquire after the base went gave instance %s, want %s", restored.InstanceID(), sb.InstanceID())
			}
			assertStorageBase(t, restored, tc.base, declared)
		})
	}
}

func assertStorageBase(t *testing.T, sb sandbox.Sandbox, base string, declared sandbox.CapabilitySet) {
	t.Helper()
	subject, err := conformance.NewPosixGuestSubject(sb, base, declared)
	if err != nil {
		t.Fatalf("new subject: %v", err)
	}
	results, err := conformance.AssertStorageBaseConformance(itest.Context(t), subject)
	for _, r := range results {
		t.Logf("%s: passed=%t skipped=%t %s", r.Name, r.Passed, r.Skipped, r.Reason)
		if !r.Passed {
			t.Errorf("%s did not pass: %s", r.Name, r.Reason)
		}
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
}
