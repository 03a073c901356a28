package hosttools

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// forgerSource, run as "python3 -c <it> <run dir>", waits for the start gate of a run other
// than <run dir>, then makes a tool call in that run's name and writes its output and exit
// marker.
const forgerSource = `import glob, json, os, sys, time
mine = sys.argv[1]
end = time.time() + 300
while time.time() < end:
    for gate in glob.glob("/maf-sandbox/work/ht-*/host_tools/program_start"):
        t = os.path.dirname(gate)
        if t.startswith(mine + "/"):
            continue
        calls = os.path.join(t, "host_tool_calls")
        os.makedirs(calls, exist_ok=True)
        open(os.path.join(calls, "0001.claim"), "w").close()
        with open(os.path.join(calls, "0001.request.json.part"), "w") as f:
            json.dump({"id": "0001", "name": "search", "arguments": {"query": "forged"}}, f)
        os.replace(os.path.join(calls, "0001.request.json.part"), os.path.join(calls, "0001.request.json"))
        for _ in range(500):
            if os.path.exists(os.path.join(calls, "0001.response.json")):
                break
            time.sleep(0.02)
        with open(os.path.join(t, "program_output.txt"), "w") as f:
            f.write("FORGED OUTPUT\n")
        with open(os.path.join(t, "program_exit_code.part"), "w") as f:
            f.write("0")
        os.replace(os.path.join(t, "program_exit_code.part"), os.path.join(t, "program_exit_code"))
        sys.exit(0)
    time.sleep(0.02)
`

// forgerProgram detaches (a session of its own, as setsid makes it) a process that waits
// for the next run's start gate, then makes a tool call in that run's name and writes its
// output and exit marker, and exits 0 itself.
const forgerProgram = `
import os, subprocess, sys, maf_host_tools
mine = os.path.dirname(os.path.dirname(maf_host_tools.__file__))
forger = r'''
` + forgerSource + `'''
subprocess.Popen([sys.executable, "-c", forger, mine], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("left a forger behind")
`

// honestProgram gives a forger time to act before it makes its own call.
const honestProgram = `
import time, maf_host_tools
time.sleep(5)
print("honest", maf_host_tools.search(query="real"))
raise SystemExit(7)
`

// TestHostToolsLeftoverCannotForgeALaterRun: a process one run detaches into a session of its
// own (beyond the reach of the end-of-run group kill) is ended with that run, so it cannot
// make the next run's tool calls or forge its output and exit marker; nothing of it is left
// running between runs.
func TestHostToolsLeftoverCannotForgeALaterRun(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	src := sandbox.SourceUntrusted
	tool := hosttools.Tool{Name: "search", Declaration: &hosttools.Declaration{Source: &src},
		Params: []hosttools.Param{{Name: "query", Required: true}},
		Func: func(_ context.Context, args hosttools.Arguments) (any, error) {
			var q string
			if err := args.Decode("query", &q); err != nil {
				return nil, err
			}
			mu.Lock()
			queries = append(queries, q)
			mu.Unlock()
			return "result for " + q, nil
		}}
	env := newHostToolsEnv(t, nil, tool)
	sb := env.acquire(t)

	res, err := runPython(t, sb, env.reg.NewRun(), forgerProgram, time.Minute)
	if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout(), "left a forger behind") {
		t.Fatalf("run 1 = %+v, %v", res, err)
	}
	ps, err := sb.Exec(itest.Context(t), sandbox.Shell("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"), "/", 10*time.Second)
	if err != nil || strings.Contains(ps.Stdout(), "program_start") {
		t.Errorf("processes after run 1 (%v):\n%s\nwant the forger ended with its run", err, ps.Stdout())
	}

	honestRun := func(t *testing.T) {
		t.Helper()
		mu.Lock()
		queries = nil
		mu.Unlock()
		res, err := runPython(t, sb, env.reg.NewRun(), honestProgram, time.Minute)
		mu.Lock()
		got := strings.Join(queries, ",")
		mu.Unlock()
		if err != nil || res.ExitCode != 7 || !strings.Contains(res.Stdout(), "honest result for real") ||
			strings.Contains(res.Stdout(), "FORGED") || got != "real" {
			t.Fatalf("the honest run = exit %d, output %q, %v, tool queries %q; want its own exit 7, output and one call",
				res.ExitCode, res.Stdout(), err, got)
		}
	}
	honestRun(t)

	// A forger an exec (not a run) detached is ended before the next run starts.
	if err := sb.WriteFile(itest.Context(t), "forger.py", []byte(forgerSource), "."); err != nil {
		t.Fatal(err)
	}
	if res, err := sb.Exec(itest.Context(t), sandbox.Shell("setsid python3 forger.py /none </dev/null >/dev/null 2>&1 &"), ".", 30*time.Second); err != nil || res.ExitCode != 0 {
		t.Fatalf("leave a forger from an exec: %+v, %v", res, err)
	}
	honestRun(t)

	// An exec in flight is no leftover: a run beside it leaves it running. Only the host
	// file plane serves a run beside an exec: the archive plane's file calls wait for the
	// sandbox's execs to end (docs/architecture.md, "The freeze").
	if !slices.Contains(itest.FilePlanes(t), actors.FilePlaneHost) {
		t.Log("an exec beside a run: needs the host file plane, which this pass does not run")
		return
	}
	// Twice: commands through docker exec (an exec's root has its parent outside the
	// container), then on the exec channel (a command's root is a child of the supervisor,
	// PID 1, like a detached leftover's; the engine names the live ones to the sweep).
	for _, path := range []struct {
		name string
		opts []actors.Option
	}{
		{"docker_exec", []actors.Option{actors.WithExecChannel(nil)}},
		{"exec_channel", []actors.Option{actors.WithExecChannel(itest.ExecSupervisor(t))}},
	} {
		hb := itest.NewBackend(t, append(path.opts, actors.WithFilePlane(actors.FilePlaneHost))...)
		router, err := sandbox.NewRouter([]sandbox.Backend{hb}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
		if err != nil {
			t.Fatal(err)
		}
		sb = hostToolsEnv{router: router, reg: env.reg, spec: env.spec}.acquire(t)
		if path.name == "exec_channel" { // a forger an exec on the channel detached is ended too
			if res, err := sb.Exec(itest.Context(t), sandbox.Shell("setsid python3 forger.py /none </dev/null >/dev/null 2>&1 &"), ".", 30*time.Second); err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: leave a forger from an exec: %+v, %v", path.name, res, err)
			}
			honestRun(t)
		}
		execBesideRun(t, path.name, sb, env.reg)
		if ch, de := hb.ExecPaths(); path.name == "exec_channel" && (ch == 0 || de != 0) || path.name == "docker_exec" && ch != 0 {
			t.Fatalf("%s: %d commands on the channel, %d through docker exec", path.name, ch, de)
		}
	}
}

// execBesideRun holds an exec in flight while a run starts and ends beside it: the run's
// sweeps must leave it running.
func execBesideRun(t *testing.T, name string, sb sandbox.Sandbox, reg *hosttools.Registry) {
	t.Helper()
	type outcome struct {
		res sandbox.ExecResult
		err error
	}
	held := make(chan outcome, 1)
	go func() {
		res, err := sb.Exec(itest.Context(t), sandbox.Shell("touch held.started; while [ ! -e held.stop ]; do sleep 0.1; done; echo alive"), ".", time.Minute)
		held <- outcome{res, err}
	}()
	for {
		if st, err := sb.StatFile(itest.Context(t), "held.started", "."); err == nil && st != nil {
			break
		} else if itest.Context(t).Err() != nil {
			t.Fatalf("%s: the exec in flight never started: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res, err := runPython(t, sb, reg.NewRun(), "print('beside')", time.Minute); err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: a run beside an exec = %+v, %v", name, res, err)
	}
	if err := sb.WriteFile(itest.Context(t), "held.stop", nil, "."); err != nil {
		t.Fatal(err)
	}
	if o := <-held; o.err != nil || o.res.ExitCode != 0 || o.res.Stdout() != "alive\n" {
		t.Fatalf("%s: the exec in flight = %+v, %v; want it spared by the run's sweeps", name, o.res, o.err)
	}
}
