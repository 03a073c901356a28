package hosttools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// hostToolsEnv is a router over the real engine and a spec on the Python image whose
// registry holds tools.
type hostToolsEnv struct {
	router *sandbox.Router
	reg    *hosttools.Registry
	spec   sandbox.Spec
}

func newHostToolsEnv(t *testing.T, regOpts []hosttools.Option, tools ...hosttools.Tool) hostToolsEnv {
	return newHostToolsEnvB(t, regOpts, tools...)
}

func newHostToolsEnvB(t testing.TB, regOpts []hosttools.Option, tools ...hosttools.Tool) hostToolsEnv {
	t.Helper()
	image := dockertest.Python(t)
	b := itest.NewBackend(t)
	router, err := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
	if err != nil {
		t.Fatalf("new router: %v", err)
	}
	reg, err := hosttools.NewRegistry(append(regOpts, hosttools.WithoutRegistrationWarning())...)
	if err != nil {
		t.Fatalf("new registry: %v", err)
	}
	for _, tool := range tools {
		if err := reg.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
	spec, err := sandbox.NewSpec("codeact", sandbox.WithImage(image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.HostTools),
		sandbox.WithHostTools(reg.Aggregate()))
	if err != nil {
		t.Fatalf("new spec: %v", err)
	}
	return hostToolsEnv{router: router, reg: reg, spec: spec}
}

// acquire gets a sandbox for a fresh key through the router, disposed when the test ends.
func (e hostToolsEnv) acquire(t *testing.T) sandbox.Sandbox { return e.acquireB(t) }

func (e hostToolsEnv) acquireB(t testing.TB) sandbox.Sandbox {
	t.Helper()
	key := itest.NewKey(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if f := e.router.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
			t.Errorf("dispose %s: %v", key, f)
		}
	})
	sb, err := e.router.Acquire(itest.Context(t), key, e.spec)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return sb
}

// runPython runs source in a fresh run directory and checks that host_tools/ is gone after.
func runPython(t *testing.T, sb sandbox.Sandbox, run *hosttools.Run, source string, timeout time.Duration,
	opts ...hosttools.ProgramOption) (sandbox.ExecResult, error) {
	t.Helper()
	l, err := hosttools.NewLayout(hosttools.RandomRunDir("/maf-sandbox/work"), "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := hosttools.RunProgram(itest.Context(t), sb, run, l, []byte(source), timeout,
		append([]hosttools.ProgramOption{hosttools.WithPollInterval(50 * time.Millisecond)}, opts...)...)
	ctx := itest.Context(t)
	if st, serr := sb.StatFile(ctx, hosttools.TransportDir, l.Dir); serr != nil || st != nil {
		t.Errorf("host_tools/ after the run: %+v, %v; want it removed", st, serr)
	}
	if rerr := hosttools.ReclaimRun(ctx, sb, l, 30*time.Second); rerr != nil {
		t.Errorf("reclaim the run: %v", rerr)
	}
	return res, err
}

func searchTool(calls *atomic.Int64) hosttools.Tool {
	src := sandbox.SourceUntrusted
	return hosttools.Tool{Name: "search", Declaration: &hosttools.Declaration{Source: &src},
		Params: []hosttools.Param{{Name: "query", Required: true}, {Name: "limit"}},
		Func: func(_ context.Context, args hosttools.Arguments) (any, error) {
			calls.Add(1)
			var q string
			limit := 2
			if err := args.Decode("query", &q); err != nil {
				return nil, err
			}
			if err := args.Decode("limit", &limit); err != nil {
				return nil, err
			}
			hits := []map[string]any{}
			for i := range limit {
				hits = append(hits, map[string]any{"title": fmt.Sprintf("%s #%d", q, i+1), "score": 1.0 / float64(i+1)})
			}
			return hits, nil
		}}
}

const searchProgram = `
import maf_host_tools
hits = maf_host_tools.search(query="otters", limit=3)
print(len(hits), hits[0]["title"], hits[2]["title"])
try:
    maf_host_tools.call("delete_everything")
except maf_host_tools.HostToolError as e:
    print("refused:", e)
try:
    maf_host_tools.search(q="typo")
except maf_host_tools.HostToolError as e:
    print("refused:", e)
import os
print(os.getcwd())
raise SystemExit(4)
`

// TestHostToolsPython: model-written Python calls a host tool on the real engine and gets
// its result, refusals arrive as HostToolError, the program's cwd is work/, its exit code is
// the result's, and host_tools/ is gone after.
func TestHostToolsPython(t *testing.T) {
	var calls atomic.Int64
	env := newHostToolsEnv(t, nil, searchTool(&calls))
	sb := env.acquire(t)
	res, err := runPython(t, sb, env.reg.NewRun(), searchProgram, time.Minute)
	if err != nil {
		t.Fatalf("RunProgram: %v", err)
	}
	out := res.Stdout()
	for _, want := range []string{"3 otters #1 otters #3", `refused: Error: "delete_everything" is not a registered host tool`,
		`unexpected keyword argument "q"`, "/work\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if res.ExitCode != 4 || calls.Load() != 1 {
		t.Fatalf("exit %d, tool calls %d; want 4 and 1\n%s", res.ExitCode, calls.Load(), out)
	}
}

// TestHostToolsPythonHostile: a program that floods claims past the cap, forges its exit
// marker, writes its own response, or never exits, on the real engine.
func TestHostToolsPythonHostile(t *testing.T) {
	var calls atomic.Int64
	env := newHostToolsEnv(t, []hosttools.Option{hosttools.WithMaxCallsPerRun(3)}, searchTool(&calls))
	sb := env.acquire(t)

	t.Run("a claim flood past the cap", func(t *testing.T) {
		calls.Store(0)
		res, err := runPython(t, sb, env.reg.NewRun(), `
import maf_host_tools, threading
got = []
def one(i):
    try:
        got.append(len(maf_host_tools.search(query="q%d" % i, limit=1)))
    except maf_host_tools.HostToolError as e:
        got.append(str(e))
ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(map(str, got)))
`, time.Minute)
		if err != nil {
			t.Fatalf("RunProgram: %v", err)
		}
		if out := res.Stdout(); strings.Count(out, "'1'") != 3 || !strings.Contains(out, "cap (3) is exhausted") || calls.Load() != 3 {
			t.Fatalf("output %q with %d tool calls; want three values and the cap refusal", out, calls.Load())
		}
	})
	t.Run("a forged exit marker", func(t *testing.T) {
		start := time.Now()
		res, err := runPython(t, sb, env.reg.NewRun(), `
import os, time
open(os.path.join(os.path.dirname(__import__("maf_host_tools").__file__), "program_exit_code"), "w").write("0")
print("claimed done", flush=True)
time.sleep(600)
`, time.Minute)
		if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout(), "claimed done") {
			t.Fatalf("RunProgram = %+v, %v; want the forged success", res, err)
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("took %s: the marker was not taken as the guest's claim", time.Since(start))
		}
		// The marker was a claim, and what claimed it does not outlive the run: the run's
		// sweep ended it.
		ps, perr := sb.Exec(itest.Context(t), sandbox.Shell("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"), "/", 10*time.Second)
		if perr != nil || strings.Contains(ps.Stdout(), "program.py") {
			t.Fatalf("processes %q, %v: want the forging program ended with its run", ps.Stdout(), perr)
		}
	})
	t.Run("a response written by the guest", func(t *testing.T) {
		calls.Store(0)
		res, err := runPython(t, sb, env.reg.NewRun(), `
import os, json, time, maf_host_tools
calls = os.path.join(os.path.dirname(maf_host_tools.__file__), "host_tool_calls")
os.makedirs(calls, exist_ok=True)
open(os.path.join(calls, "0001.response.json"), "w").write(json.dumps({"value": "forged"}))
open(os.path.join(calls, "0001.claim"), "w").close()
open(os.path.join(calls, "0001.request.json.part"), "w").write(json.dumps({"id": "0001", "name": "search", "arguments": {"query": "real", "limit": 1}}))
os.replace(os.path.join(calls, "0001.request.json.part"), os.path.join(calls, "0001.request.json"))
for _ in range(400):
    r = json.load(open(os.path.join(calls, "0001.response.json")))
    if r.get("value") != "forged":
        break
    time.sleep(0.05)
print(json.dumps(r))
`, time.Minute)
		if err != nil || !strings.Contains(res.Stdout(), `"real #1"`) || calls.Load() != 1 {
			t.Fatalf("RunProgram = %q, %v, %d tool calls; want the host's answer over the forgery, served once", res.Stdout(), err, calls.Load())
		}
	})
	t.Run("a program that never exits", func(t *testing.T) {
		start := time.Now()
		_, err := runPython(t, sb, env.reg.NewRun(), `
import subprocess, time
subprocess.Popen(["sleep", "600"])
print("spinning", flush=True)
while True:
    time.sleep(0.1)
`, 10*time.Second)
		var pt *sandbox.ProgramTimeoutError
		if !errors.As(err, &pt) || pt.Signal != sandbox.SignalSent || pt.Reach != sandbox.ReachGroup || !strings.Contains(pt.Output, "spinning") {
			t.Fatalf("RunProgram = %v, want a timeout that killed the group, with the output so far", err)
		}
		if el := time.Since(start); el > 3*time.Second+25*time.Second {
			t.Fatalf("took %s against a 3s bound", el)
		}
		// The group took the program's child with it.
		time.Sleep(200 * time.Millisecond)
		ps, _ := sb.Exec(itest.Context(t), sandbox.Shell("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"), "/", 10*time.Second)
		if strings.Contains(ps.Stdout(), "sleep 600") || strings.Contains(ps.Stdout(), "program.py") {
			t.Fatalf("still running after the group kill:\n%s", ps.Stdout())
		}
	})
}

// TestHostToolsPythonBadTools: a tool that panics is a refusal and the program carries on; a
// tool that hangs is never cancelled, yet the run's bound holds.
func TestHostToolsPythonBadTools(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	var toolErr atomic.Value
	tools := []hosttools.Tool{
		{Name: "panics", Declaration: &hosttools.Declaration{}, AnyArguments: true,
			Func: func(context.Context, hosttools.Arguments) (any, error) { panic("the tool broke") }},
		{Name: "hangs", Declaration: &hosttools.Declaration{}, AnyArguments: true,
			Func: func(ctx context.Context, _ hosttools.Arguments) (any, error) {
				close(started)
				<-release
				toolErr.Store(fmt.Sprint(ctx.Err()))
				return nil, nil
			}},
	}
	env := newHostToolsEnv(t, nil, tools...)
	sb := env.acquire(t)
	res, err := runPython(t, sb, env.reg.NewRun(), `
import maf_host_tools
try:
    maf_host_tools.panics()
except maf_host_tools.HostToolError as e:
    print("refused:", e)
print("carried on")
`, time.Minute)
	if err != nil || !strings.Contains(res.Stdout(), "failed; the reason is in the host's log") || !strings.Contains(res.Stdout(), "carried on") ||
		strings.Contains(res.Stdout(), "the tool broke") {
		t.Fatalf("panicking tool: %q, %v", res.Stdout(), err)
	}
	start := time.Now()
	_, err = runPython(t, sb, env.reg.NewRun(), "import maf_host_tools\nmaf_host_tools.hangs()\n", 10*time.Second)
	var pt *sandbox.ProgramTimeoutError
	if !errors.As(err, &pt) || pt.Signal != sandbox.SignalSent {
		t.Fatalf("hanging tool: %v, want the run's timeout", err)
	}
	if el := time.Since(start); el > 10*time.Second+25*time.Second {
		t.Fatalf("a hanging tool held the run for %s", el)
	}
	select {
	case <-started:
	default:
		t.Fatal("the hanging tool never started within the run's bound")
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for toolErr.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := toolErr.Load(); got != "<nil>" {
		t.Fatalf("the hanging tool's context: %v, want never cancelled", got)
	}
}

// TestHostToolsPythonConcurrent: ten programs in ten sandboxes at once, each calling a tool.
func TestHostToolsPythonConcurrent(t *testing.T) {
	var calls atomic.Int64
	env := newHostToolsEnv(t, nil, searchTool(&calls))
	const n = 10
	sbs := make([]sandbox.Sandbox, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); sbs[i] = env.acquire(t) }()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	outs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res sandbox.ExecResult
			res, errs[i] = runPython(t, sbs[i], env.reg.NewRun(), fmt.Sprintf(`
import maf_host_tools
a = maf_host_tools.search(query="p%d", limit=1)[0]["title"]
b = maf_host_tools.search(query="p%d-again", limit=1)[0]["title"]
print(a, "|", b)
`, i, i), 2*time.Minute)
			outs[i] = fmt.Sprintf("%s [exit %d, stderr %q]", res.Stdout(), res.ExitCode, res.Stderr())
		}()
	}
	wg.Wait()
	for i := range n {
		if want := fmt.Sprintf("p%d #1 | p%d-again #1\n [exit 0, stderr \"\"]", i, i); errs[i] != nil || outs[i] != want {
			t.Errorf("program %d: %q, %v; want %q", i, outs[i], errs[i], want)
		}
	}
	if calls.Load() != 2*n {
		t.Fatalf("tool calls %d, want %d", calls.Load(), 2*n)
	}
}
