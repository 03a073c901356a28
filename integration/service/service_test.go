package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/conformance"
	"github.com/mafsandbox/engine/service"
)

// TestServiceEveryOperation drives every call of the API through the client against the
// Docker engine.
func TestServiceEveryOperation(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	ctx := itest.Context(t)
	if c.Name() != actors.BackendName || c.Isolation() != sandbox.IsolationContainer {
		t.Fatalf("remote backend %s at %s", c.Name(), c.Isolation())
	}
	key := itest.NewKey(t)
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete, sandbox.Reclaim),
		sandbox.WithDeclaredOutputs(sandbox.Output("out/report.txt")))
	sb := itest.AcquireRemote(t, c, e.Backend, key, spec)
	rsb := sb.(*client.Sandbox)
	if rsb.WorkDir() != actors.DefaultWorkDir || !rsb.Created() || len(sb.InstanceID()) != 64 {
		t.Fatalf("acquired %s in %s (created %t)", sb.InstanceID(), rsb.WorkDir(), rsb.Created())
	}
	if warm := itest.AcquireRemote(t, c, e.Backend, key, spec); warm.InstanceID() != sb.InstanceID() {
		t.Fatalf("a warm acquire gave %s, want %s", warm.InstanceID(), sb.InstanceID())
	}
	if err := sb.WriteFile(ctx, "prog.sh", []byte("mkdir -p out && echo \"$1\" > out/report.txt && echo done && echo oops >&2 && exit 4\n"), "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "prog.sh", "hello report"), ".", time.Minute)
	if err != nil || res.ExitCode != 4 || res.Stdout() != "done\n" || res.Stderr() != "oops\n" {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	st, err := sb.StatFile(ctx, "out/report.txt", ".")
	if err != nil || st == nil || st.Kind != sandbox.EntryFile || *st.Size != int64(len("hello report\n")) {
		t.Fatalf("stat: %+v, %v", st, err)
	}
	if got, err := sb.ReadFile(ctx, "out/report.txt", ".", 1024); err != nil || string(got) != "hello report\n" {
		t.Fatalf("read: %q, %v", got, err)
	}
	var landed []sandbox.Artifact
	sink := &sandbox.OutputSink{Deliver: func(_ context.Context, a sandbox.Artifact) (sandbox.LandedArtifact, error) {
		landed = append(landed, a)
		return sandbox.LandedArtifact{Name: a.Name, Display: a.Name}, nil
	}}
	if _, err := rsb.CollectOutputs(ctx, sink, nil); err != nil || len(landed) != 1 || string(landed[0].Content) != "hello report\n" {
		t.Fatalf("collect outputs: %+v, %v", landed, err)
	}
	if err := sb.Remove(ctx, "out", ".", true); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if st, err := sb.StatFile(ctx, "out", "."); err != nil || st != nil {
		t.Fatalf("stat after remove: %+v, %v", st, err)
	}
	if err := sb.Reclaim(ctx, "call-dir", ".", time.Minute); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if _, err := sb.ListDir(ctx, ".", "."); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("list dir on docker: %v, want unsupported", err)
	}
	if _, err := sb.RunCode(ctx, "print(1)", time.Minute); !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("run code on docker: %v, want unsupported", err)
	}
	before := sb.InstanceID()
	if err := sb.Reset(ctx, time.Minute); err != nil || sb.InstanceID() == before {
		t.Fatalf("reset: %v; instance %s, before %s", err, sb.InstanceID(), before)
	}
	if st, err := sb.StatFile(ctx, "prog.sh", "."); err != nil || st != nil {
		t.Fatalf("after the reset the guest's file is %+v, %v; want the image's baseline", st, err)
	}
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" || h.Backends[0] != actors.BackendName {
		t.Fatalf("health: %+v, %v", h, err)
	}
	if f := c.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		t.Fatalf("dispose: %v", f)
	}
	if _, err := sb.StatFile(ctx, ".", "."); !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a call after dispose: %v, want an unknown sandbox", err)
	}

	// A conversation of two agents goes in one purge.
	other := key
	other.AgentID = "second"
	itest.AcquireRemote(t, c, e.Backend, key, spec)
	itest.AcquireRemote(t, c, e.Backend, other, spec)
	if p := c.DisposeScope(ctx, key.Scope, key.ThreadID); p.Disposed != 2 || p.Undisposed != nil {
		t.Fatalf("dispose scope: %+v", p)
	}

	// Reap sweeps this test's scope only.
	itest.AcquireRemote(t, c, e.Backend, key, spec)
	r, err := c.Reap(ctx, time.Millisecond, key.Scope)
	switch {
	case errors.Is(err, sandbox.ErrUnsupported):
		// The engine seam in use cannot take an inventory: the refusal crossed as its family.
		t.Logf("reap through NATS: %v", err)
	case err != nil || r.Disposed != 1 || len(r.Failures) != 0:
		t.Fatalf("reap: %+v, %v", r, err)
	}
}

// TestServiceConformance runs the shared suites through the client: a remote engine must
// refuse what an embedded one refuses.
func TestServiceConformance(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	declared := c.Declarations().Capabilities
	listing := map[string]bool{"listing-a-linked-directory": true, "listing-through-a-linked-parent": true,
		"listing-under-a-linked-ancestor": true, "a-listing-names-its-links": true}
	cases := []struct {
		name     string
		requires []sandbox.Capability
		assert   func(context.Context, conformance.Subject) ([]conformance.Result, error)
		skips    map[string]bool
	}{
		{"FILES_OUT", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut}, conformance.AssertFilesOutConformance, listing},
		{"FILES_IN", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn}, conformance.AssertFilesInConformance, nil},
		{"FILES_DELETE", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesDelete}, conformance.AssertFilesDeleteConformance, nil},
		{"RECLAIM", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.Reclaim}, conformance.AssertReclaimConformance, nil},
		{"STORAGE_BASE", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesDelete, sandbox.Reclaim},
			conformance.AssertStorageBaseConformance, nil},
		{"EXEC", []sandbox.Capability{sandbox.Exec, sandbox.FilesIn}, conformance.AssertExecConformance, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(tc.requires...)))
			subject, err := conformance.NewPosixGuestSubject(sb, sb.(*client.Sandbox).WorkDir(), declared)
			if err != nil {
				t.Fatalf("new subject: %v", err)
			}
			results, err := tc.assert(itest.Context(t), subject)
			for _, r := range results {
				t.Logf("%s: passed=%t skipped=%t %s", r.Name, r.Passed, r.Skipped, r.Reason)
				if r.Skipped && !tc.skips[r.Name] {
					t.Errorf("%s was skipped (%s)", r.Name, r.Reason)
				}
			}
			if err != nil {
				t.Fatalf("%v", err)
			}
		})
	}
}

// TestServiceConcurrentClients has 20 clients acquire and work at once, each on its own key,
// then 20 on one key: the second group shares one container.
func TestServiceConcurrentClients(t *testing.T) {
	e := itest.StartNATSEngine(t)
	const n = 20
	spec := itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut))
	run := func(t *testing.T, keyOf func(i int) sandbox.Key) []string {
		clients := make([]*client.Backend, n)
		for i := range clients {
			clients[i] = e.Remote(t)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if f := e.Backend.Dispose(ctx, keyOf(i), sandbox.DisposeOptions{}); f != nil {
					t.Errorf("dispose: %v", f)
				}
			})
		}
		ctx := itest.Context(t)
		// Every client acquires at once; then every client writes and execs at once. (An
		// acquire of a key overlapping an exec on it trips a data race in actors: the exec's
		// goroutine reads the actor's storage base, which the acquire writes. Until actors reads it before starting the goroutine, the two
		// phases stay apart.)
		var wg sync.WaitGroup
		ids := make([]string, n)
		sbs := make([]sandbox.Sandbox, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				sb, err := clients[i].Acquire(ctx, keyOf(i), spec)
				if err != nil {
					errs[i] = fmt.Errorf("acquire: %w", err)
					return
				}
				ids[i], sbs[i] = sb.InstanceID(), sb
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				continue
			}
			wg.Go(func() {
				name, want := fmt.Sprintf("client-%d.txt", i), fmt.Sprintf("written by client %d", i)
				if err := sbs[i].WriteFile(ctx, name, []byte(want), "."); err != nil {
					errs[i] = fmt.Errorf("write: %w", err)
					return
				}
				res, err := sbs[i].Exec(ctx, sandbox.Argv("cat", name), ".", time.Minute)
				if err != nil || res.Stdout() != want {
					errs[i] = fmt.Errorf("cat: %+v, %v", res, err)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("client %d: %v", i, err)
			}
		}
		return ids
	}
	t.Run("different keys", func(t *testing.T) {
		base := itest.NewKey(t)
		ids := run(t, func(i int) sandbox.Key { k := base; k.AgentID = fmt.Sprint("agent-", i); return k })
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("two keys shared instance %s", id)
			}
			seen[id] = true
		}
	})
	t.Run("one key", func(t *testing.T) {
		key := itest.NewKey(t)
		ids := run(t, func(int) sandbox.Key { return key })
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("one key got instances %s and %s: a double create", ids[0], id)
			}
		}
	})
}

// TestServiceBadInput sends raw requests a careless or hostile client might send, checks
// each gets a clear error reply, and that the sandbox did not change.
func TestServiceBadInput(t *testing.T) {
	b := itest.NewBackend(t)
	srv := natstest.Run(t)
	svc, _ := itest.ServeBackend(t, srv, b, service.WithMaxRequestBytes(256*1024))
	e := &itest.NATSEngine{Server: srv, Backend: b, Service: svc}
	c := e.Remote(t)
	ctx := itest.Context(t)
	key := itest.NewKey(t)
	sb := itest.AcquireRemote(t, c, e.Backend, key, itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)))
	handle := sb.(*client.Sandbox).Handle()
	subject := func(template string) string {
		return messages.Engine(template, messages.DefaultPrefix, e.Service.EngineID())
	}
	wkey := messages.KeyToWire(key)
	write := func(path string, content []byte, k *messages.APIKey) []byte {
		b, _ := json.Marshal(&messages.APIWriteFileRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIWriteFileRequestType,
			Key: k, Sandbox: handle}, Path: path, WorkDir: ".", Content: content})
		return b
	}
	cases := []struct {
		name, subject string
		body          []byte
		code          string
	}{
		{"malformed JSON", subject(messages.SubjectWriteFileT), []byte(`{"type":`), messages.CodeBadRequest},
		{"unknown operation", subject(messages.SubjectWriteFileT), []byte(`{"type":"maf.sandbox.api.v1.chmod_request"}`), messages.CodeBadRequest},
		{"missing key", subject(messages.SubjectWriteFileT), write("victim.txt", []byte("x"), nil), messages.CodeBadRequest},
		{"someone else's key", subject(messages.SubjectWriteFileT), write("victim.txt", []byte("x"), &messages.APIKey{Scope: "x", ThreadID: "y", AgentID: "z"}), messages.CodeBadRequest},
		{"oversized payload", subject(messages.SubjectWriteFileT), write("victim.txt", make([]byte, 300*1024), wkey), messages.CodeBadRequest},
		{"refused path", subject(messages.SubjectWriteFileT), write("../../../etc/victim.txt", []byte("x"), wkey), messages.CodeNotConfined},
		{"refused absolute path", subject(messages.SubjectWriteFileT), write("/etc/victim.txt", []byte("x"), wkey), messages.CodeNotConfined},
	}
	nc := natstest.Connect(t, e.Server)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := nc.Request(tc.subject, tc.body, time.Minute)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			var resp messages.APIResponse
			if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error == nil {
				t.Fatalf("reply %s: %v", msg.Data, err)
			}
			if resp.Error.Code != tc.code {
				t.Fatalf("code %s (%s), want %s", resp.Error.Code, resp.Error.Message, tc.code)
			}
		})
	}
	res, err := sb.Exec(ctx, sandbox.Shell("ls /etc/victim.txt victim.txt 2>&1; true"), ".", time.Minute)
	if err != nil || strings.Count(res.Stdout(), "No such file") != 2 {
		t.Fatalf("the bad input left something: %q, %v", res.Stdout(), err)
	}
}

// TestServiceStreamsExecOutput streams an exec's output through the client: every chunk, in
// order per stream, matching the result; TestServiceStreamsBeforeTheCommandEnds shows them
// arriving while the command runs.
func TestServiceStreamsExecOutput(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	sb := itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), itest.BusyboxSpec(t))
	var mu sync.Mutex
	var stdout, stderr bytes.Buffer
	res, err := sb.(*client.Sandbox).ExecStream(itest.Context(t), sandbox.Shell("for i in 1 2 3; do echo out $i; echo err $i >&2; done"), ".", time.Minute,
		func(stream string, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			if stream == service.StreamStdout {
				stdout.Write(p)
			} else {
				stderr.Write(p)
			}
		})
	if err != nil {
		t.Fatalf("exec stream: %v", err)
	}
	if stdout.String() != "out 1\nout 2\nout 3\n" || stderr.String() != "err 1\nerr 2\nerr 3\n" {
		t.Fatalf("streamed %q and %q", stdout.String(), stderr.String())
	}
	if res.Stdout() != stdout.String() || res.Stderr() != stderr.String() {
		t.Fatalf("result %+v differs from the stream", res)
	}
}

// TestServiceTenMiBRoundTrip writes 10 MiB of random bytes through the client, checks the
// guest's own sha256 of them, and reads them back byte-exact.
func TestServiceTenMiBRoundTrip(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	ctx := itest.Context(t)
	sb := itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), itest.BusyboxSpec(t, sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut),
		sandbox.WithFilesIn(sandbox.TransferLimits{MaxBytesPerFile: 16 * sandbox.MiB, MaxTotalBytes: 32 * sandbox.MiB, MaxFiles: 8})))
	content := make([]byte, 10*sandbox.MiB)
	_, _ = rand.Read(content)
	sum := sha256.Sum256(content)
	if err := sb.WriteFile(ctx, "big.bin", content, "."); err != nil {
		t.Fatalf("write: %v", err)
	}
	res, err := sb.Exec(ctx, sandbox.Argv("sha256sum", "big.bin"), ".", time.Minute)
	if err != nil || !strings.HasPrefix(res.Stdout(), hex.EncodeToString(sum[:])) {
		t.Fatalf("the guest's sha256: %q, %v", res.Stdout(), err)
	}
	got, err := sb.ReadFile(ctx, "big.bin", ".", int64(len(content)))
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes that differ from the %d written", len(got), len(content))
	}
}

// TestServiceEngineRestart stops the engine while one client's exec is in flight and
// another waits to acquire: the exec gets its answer (the drain), the acquire is retried
// until a new engine on the same NATS server answers it, and the first engine's sandbox
// handle fails as unavailable. Then an engine dies with an exec in flight: the client is
// told at once, without waiting out its timeout.
func TestServiceEngineRestart(t *testing.T) {
	b := itest.NewBackend(t)
	srv := natstest.Run(t)
	first, _ := itest.ServeBackend(t, srv, b)
	c, err := client.New(itest.Context(t), natstest.Connect(t, srv), client.WithLivenessInterval(200*time.Millisecond))
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	ctx := itest.Context(t)
	spec := itest.BusyboxSpec(t)
	sb := itest.AcquireRemote(t, c, b, itest.NewKey(t), spec)
	execDone := make(chan error, 1)
	go func() {
		res, err := sb.Exec(ctx, sandbox.Shell("sleep 2; echo finished"), ".", time.Minute)
		if err == nil && res.Stdout() != "finished\n" {
			err = fmt.Errorf("exec answered %+v", res)
		}
		execDone <- err
	}()
	waitInFlight(t, c, 1)
	if err := first.Stop(ctx); err != nil {
		t.Fatalf("stop the first engine: %v", err)
	}
	if err := <-execDone; err != nil {
		t.Fatalf("the exec in flight during the drain: %v", err)
	}
	acquired := make(chan error, 1)
	key := itest.NewKey(t)
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b.Dispose(dctx, key, sandbox.DisposeOptions{})
	})
	go func() {
		_, err := c.Acquire(ctx, key, spec)
		acquired <- err
	}()
	_, secondConn := itest.ServeBackend(t, srv, b)
	if err := <-acquired; err != nil {
		t.Fatalf("an acquire waiting through the restart: %v", err)
	}
	if _, err := sb.StatFile(ctx, ".", "."); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call on the stopped engine's sandbox: %v, want engine unavailable", err)
	}

	// The second engine dies (its connection goes) with an exec in flight.
	sb2 := itest.AcquireRemote(t, c, b, itest.NewKey(t), spec)
	go func() {
		_, err := sb2.Exec(ctx, sandbox.Shell("sleep 3"), ".", time.Minute)
		execDone <- err
	}()
	waitInFlight(t, c, 1)
	secondConn.Close()
	var ue *messages.EngineUnavailableError
	if err := <-execDone; !errors.As(err, &ue) {
		t.Fatalf("an exec on an engine that died: %v, want engine unavailable", err)
	}
}

// waitInFlight asks the pool until it reports n calls in flight.
func waitInFlight(t *testing.T, c *client.Backend, n int) {
	t.Helper()
	ctx := itest.Context(t)
	for {
		h, err := c.Health(ctx)
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		if h.InFlight >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the engine never had %d calls in flight", n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestEngineRunCommand builds the engine binary, starts "engine serve" on an embedded
// server and runs "engine run" against it: files in, output streamed, outputs out, the
// command's exit code, nothing left behind.
func TestEngineRunCommand(t *testing.T) {
	image := dockertest.Busybox(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "engine")
	build := exec.Command("go", "build", "-o", bin, "github.com/mafsandbox/engine/cmd/engine")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url := itest.Serve(t, bin, nil, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")).URL

	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("shout this\n"), 0o600); err != nil {
		t.Fatalf("write input: %v", err)
	}
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o700); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	scope := "it-run-" + hex.EncodeToString(sum(dir)[:4])
	run := exec.Command(bin, "run", "--nats-url", url, "--image", image, "--scope", scope,
		"--file", in+":data/in.txt", "--output", "result.txt:loud.txt", "--out-dir", outDir,
		"--shell", "cat data/in.txt; echo to-stderr >&2; tr a-z A-Z < data/in.txt > result.txt; exit 7")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err := run.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("engine run: %v (want exit status 7)\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if stdout.String() != "shout this\n" || !strings.Contains(stderr.String(), "to-stderr") {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(outDir, "loud.txt"))
	if err != nil || string(got) != "SHOUT THIS\n" {
		t.Fatalf("landed output: %q, %v", got, err)
	}
	out := dockertest.Docker(t, "ps", "-a", "--quiet", "--filter", "label="+label.Scope+"="+label.Value(scope))
	if strings.TrimSpace(string(out)) != "" {
		t.Fatalf("engine run left containers behind: %s", out)
	}
}

func sum(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
