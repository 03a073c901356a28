package fingerprint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
)

// A sandbox on the storage base the acquire creates (the default /maf-sandbox/work, or a
// base under a directory of the image) can be proven: the baseline accepts that base and its
// ancestors already changed, as directories, and the final fingerprint names any change of
// their type, mode or owner, as it names every new path under them. Any other change at the
// baseline still refuses it.
func TestFingerprintStorageBase(t *testing.T) {
	b := itest.NewBackend(t)
	chowner, err := docker.NewEngine(docker.Config{Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const base = actors.DefaultWorkDir
	clean := func(ctx context.Context, sb *actors.Sandbox) error {
		if err := sb.WriteFile(ctx, "call-0a1b2c3d4e5f/input.txt", []byte("input\n"), "."); err != nil {
			return err
		}
		if _, err := sb.ReadFile(ctx, "call-0a1b2c3d4e5f/input.txt", ".", 1<<16); err != nil {
			return err
		}
		if err := run(ctx, sb, "mkdir /tmp/confined; echo x > /tmp/confined/f; rm -rf /tmp/confined"); err != nil {
			return err
		}
		return sb.Reclaim(ctx, "call-0a1b2c3d4e5f", ".", time.Minute)
	}
	cases := []struct {
		name    string
		workDir string // "" is the default base
		call    func(ctx context.Context, sb *actors.Sandbox) error
		want    string // the path probe's reason, exactly; "" means the probe passes
	}{
		{name: "the clean call on the default base passes", call: clean},
		{name: "the clean call on a base made under a directory of the image passes", workDir: fingerprintWorkDir + "/work", call: clean},
		{name: "a file written under the default base",
			call: func(ctx context.Context, sb *actors.Sandbox) error {
				return sb.WriteFile(ctx, "left-behind.txt", []byte("residue\n"), ".")
			}, want: changedSince(base + "/left-behind.txt")},
		{name: "a directory left under the default base",
			call: func(ctx context.Context, sb *actors.Sandbox) error { return run(ctx, sb, "mkdir "+base+"/left-dir") },
			want: changedSince(base + "/left-dir")},
		{name: "a chmod of the default base",
			call: func(ctx context.Context, sb *actors.Sandbox) error { return run(ctx, sb, "chmod 0705 "+base) },
			want: changedSince(base)},
		{name: "a setgid bit on the default base",
			call: func(ctx context.Context, sb *actors.Sandbox) error { return run(ctx, sb, "chmod g+s "+base) },
			want: changedSince(base)},
		{name: "a chown of the base's ancestor",
			call: func(ctx context.Context, sb *actors.Sandbox) error {
				// The guest holds no CAP_CHOWN (no workload holds a capability), so the
				// daemon's archive API sets the owner a guest with it would have set.
				tarball, err := docker.BuildTar(docker.DirEntry("/maf-sandbox", 0o755, 4321, 4321))
				if err != nil {
					return err
				}
				return chowner.CopyIn(ctx, sb.ContainerName(), tarball)
			},
			want: changedSince("/maf-sandbox")},
		{name: "the default base removed",
			call: func(ctx context.Context, sb *actors.Sandbox) error { return run(ctx, sb, "rmdir "+base) },
			want: changedSince(base)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noObserverOutlives(t)
			sb, s := freshSandboxOn(t, b, tc.workDir)
			ctx := itest.Context(t)
			start := time.Now()
			results, err := conformance.AssertNothingLeftBehind(ctx, s, func(ctx context.Context) error { return tc.call(ctx, sb) })
			t.Logf("probe took %v", time.Since(start).Round(time.Millisecond))
			if len(tc.want) == 0 {
				mustAllPass(t, results, err)
				return
			}
			var cf *sandbox.ConformanceFailure
			if !errors.As(err, &cf) {
				t.Fatalf("got %v (results %+v), want a conformance failure", err, results)
			}
			for _, r := range results {
				switch {
				case r.Name == "no-path-is-left-changed" && r.Reason != tc.want:
					t.Fatalf("the path probe says %q, want %q", r.Reason, tc.want)
				case r.Name != "no-path-is-left-changed" && !r.Passed:
					t.Fatalf("%s failed too: %s", r.Name, r.Reason)
				}
			}
		})
	}
	t.Run("another change at the baseline is still refused", func(t *testing.T) {
		noObserverOutlives(t)
		sb, s := freshSandboxOn(t, b, "")
		guestSh(t, itest.Context(t), sb, "echo before > /tmp/already-there")
		assertRefusedBeforeTheCall(t, s, "not pristine", "changed at /tmp, /tmp/already-there")
	})
	t.Run("an entry under the default base at the baseline is still refused", func(t *testing.T) {
		noObserverOutlives(t)
		sb, s := freshSandboxOn(t, b, "")
		guestSh(t, itest.Context(t), sb, "echo before > "+base+"/already-there")
		assertRefusedBeforeTheCall(t, s, "not pristine", "changed at "+base+"/already-there")
	})
}

// changedSince is the path probe's reason naming exactly these paths, sorted.
func changedSince(paths ...string) string {
	return "paths changed since the baseline: " + strings.Join(paths, ", ")
}
