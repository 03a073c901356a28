package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
)

// TestConformance runs the shared suites against the Docker backend, each on a fresh sandbox
// of its own key. EXEC runs last: its timeout probe discards the sandbox it runs on.
func TestConformance(t *testing.T) {
	b := newBackend(t)
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
			sb := acquire(t, b, newKey(t), busyboxSpec(t, sandbox.WithRequires(tc.requires...)))
			based, ok := sb.(interface{ WorkDir() string })
			if !ok {
				t.Fatalf("the sandbox %T does not say which storage base it is bound to", sb)
			}
			subject, err := conformance.NewPosixGuestSubject(sb, based.WorkDir(), declared)
			if err != nil {
				t.Fatalf("new subject: %v", err)
			}
			results, err := tc.assert(ctxT(t), subject)
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
}
