package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
)

// drivers are the engine seam implementations every test here runs against, so that the two
// cannot drift.
var drivers = []string{docker.DriverCLI, docker.DriverAPI}

// newDriverBackend is newBackend with the engine driver named.
func newDriverBackend(t testing.TB, driver string) *actors.Backend {
	t.Helper()
	dockertest.Require(t)
	cfg := docker.Config{Driver: driver, Labels: dockertest.Labels(), CommandTimeout: 30 * time.Second}
	b, err := actors.Create(context.Background(), cfg, actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("create backend (%s driver): %v", driver, err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

// TestDriverConformance runs the shared suites on a backend of each driver, each suite on a
// fresh sandbox of its own key; EXEC last, since its timeout probe discards its sandbox.
func TestDriverConformance(t *testing.T) {
	listing := map[string]bool{ // Docker declares no files_list: only these may skip
		"listing-a-linked-directory":      true,
		"listing-through-a-linked-parent": true,
		"listing-under-a-linked-ancestor": true,
		"a-listing-names-its-links":       true,
	}
	suites := []struct {
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
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			b := newDriverBackend(t, driver)
			declared := b.Declarations().Capabilities
			for _, tc := range suites {
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
		})
	}
}

// TestDriverLifecycle drives one backend of each driver through the lifecycle: acquire, exec,
// the file plane, warm reuse, a container paused or removed behind the engine's back, a
// cancelled exec, execs under a storm of freezes, and disposal that leaves nothing behind.
func TestDriverLifecycle(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			b := newDriverBackend(t, driver)
			spec := filesSpec(t)

			t.Run("acquire, exec, files, dispose", func(t *testing.T) {
				key := newKey(t)
				sb := acquire(t, b, key, spec)
				ctx := ctxT(t)
				res, err := sb.Exec(ctx, sandbox.Shell("pwd; echo err >&2; exit 3"), ".", 30*time.Second)
				if err != nil || res.ExitCode != 3 || res.Stdout() != "/maf-sandbox/work\n" || res.Stderr() != "err\n" {
					t.Fatalf("exec = %+v, %v", res, err)
				}
				content := []byte("hello\x00\xff world\r\n")
				if err := sb.WriteFile(ctx, "out/deep/a.bin", content, "."); err != nil {
					t.Fatalf("write: %v", err)
				}
				st, err := sb.StatFile(ctx, "out/deep/a.bin", ".")
				if err != nil || st == nil || st.Kind != sandbox.EntryFile || *st.Size != int64(len(content)) {
					t.Fatalf("stat = %+v, %v", st, err)
				}
				got, err := sb.ReadFile(ctx, "out/deep/a.bin", ".", 1024)
				if err != nil || !bytes.Equal(got, content) {
					t.Fatalf("read = %q, %v", got, err)
				}
				if _, err := sb.ReadFile(ctx, "out/deep/a.bin", ".", 4); err == nil {
					t.Fatal("a read over its cap succeeded")
				}
				if err := sb.Remove(ctx, "out", ".", true); err != nil {
					t.Fatalf("remove: %v", err)
				}
				if st, err := sb.StatFile(ctx, "out", "."); err != nil || st != nil {
					t.Fatalf("stat after remove = %+v, %v", st, err)
				}
				if again := acquire(t, b, key, spec); again.InstanceID() != sb.InstanceID() {
					t.Fatal("warm acquire gave a new instance")
				}
				if f := b.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
					t.Fatalf("dispose: %v", f)
				}
				out := dockertest.Docker(t, "ps", "-aq", "--filter", "label="+docker.LabelScope+"="+docker.LabelValue(key.Scope))
				if strings.TrimSpace(out) != "" {
					t.Fatalf("containers left after dispose: %s", out)
				}
			})

			t.Run("paused behind the engine's back", func(t *testing.T) {
				key := newKey(t)
				sb := acquire(t, b, key, spec)
				dockertest.Docker(t, "pause", sb.InstanceID())
				t.Cleanup(func() { dockertest.DockerErr(context.Background(), "unpause", sb.InstanceID()) })
				if _, err := sb.StatFile(ctxT(t), "x", "."); err == nil || !strings.Contains(err.Error(), "could not freeze") {
					t.Fatalf("stat of a container paused by someone else = %v, want a freeze refusal", err)
				}
				res, err := sb.Exec(ctxT(t), sandbox.Argv("true"), ".", 10*time.Second)
				if err != nil || res.ExitCode == 0 || !strings.Contains(strings.ToLower(res.Stderr()), "paused") {
					t.Fatalf("exec on a foreign-paused container = %+v, %v", res, err)
				}
				again := acquire(t, b, key, spec)
				if again.InstanceID() != sb.InstanceID() {
					t.Fatal("recovery must keep the container")
				}
				sh(t, again, "true")
			})

			t.Run("removed behind the engine's back", func(t *testing.T) {
				key := newKey(t)
				sb := acquire(t, b, key, spec)
				dockertest.Docker(t, "rm", "-f", sb.InstanceID())
				if _, err := sb.ReadFile(ctxT(t), "x", ".", 10); err == nil || errors.Is(err, sandbox.ErrOS) {
					t.Fatalf("read from a removed container = %v, want an engine failure (never absence)", err)
				}
				if st, err := sb.StatFile(ctxT(t), "x", "."); err == nil {
					t.Fatalf("stat of a removed container = %+v, want an error (never absent)", st)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					again := acquire(t, b, key, spec)
					if again.InstanceID() != sb.InstanceID() {
						sh(t, again, "true")
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("acquire kept handing out the removed instance")
					}
					time.Sleep(100 * time.Millisecond)
				}
			})

			t.Run("cancelled exec keeps the sandbox", func(t *testing.T) {
				sb := acquire(t, b, newKey(t), spec)
				ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
				defer cancel()
				_, err := sb.Exec(ctx, sandbox.Argv("sleep", "30"), ".", time.Minute)
				if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sandbox.ErrTimeout) {
					t.Fatalf("err = %v, want the context's own error, not a timeout", err)
				}
				sh(t, sb, "true")
			})

			t.Run("execs under freezes are never refused", func(t *testing.T) {
				sb := acquire(t, b, newKey(t), spec)
				ctx := ctxT(t)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := sb.StatFile(ctx, "x", "."); err != nil {
							t.Errorf("stat: %v", err)
							return
						}
					}
				}()
				for i := range 15 {
					res, err := sb.Exec(ctx, sandbox.Argv("echo", "ok"), ".", 30*time.Second)
					if err != nil || res.ExitCode != 0 || res.Stdout() != "ok\n" {
						t.Errorf("exec %d under freezes = %+v, %v", i, res, err)
					}
				}
				close(stop)
				wg.Wait()
			})
		})
	}
}
