package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// envToolServer makes TestHelperToolServer serve tools on the NATS URL it holds, under the
// subject prefix of envToolPrefix: the "separate process" a tool is served by.
const (
	envToolServer = "MAF_SANDBOX_TEST_TOOL_SERVER"
	envToolPrefix = "MAF_SANDBOX_TEST_TOOL_PREFIX"
)

// TestHelperToolServer is not a test: run as a subprocess with envToolServer set, it serves
// <prefix>.search (a value) and <prefix>.broken (an error) until killed.
func TestHelperToolServer(t *testing.T) {
	url := os.Getenv(envToolServer)
	if url == "" {
		t.Skip("a helper process for the host-tools NATS tests")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	prefix := os.Getenv(envToolPrefix)
	if _, err := nc.Subscribe(prefix+".search", func(m *nats.Msg) {
		var call messages.APIHostToolCall
		_ = json.Unmarshal(m.Data, &call)
		var args struct{ Query string }
		_ = json.Unmarshal(call.Arguments, &args)
		v, _ := json.Marshal([]string{"pid " + fmt.Sprint(os.Getpid()) + " found " + args.Query, call.Tool, fmt.Sprint(call.Call),
			fmt.Sprint(strings.HasPrefix(call.RunDir, "/maf-sandbox/work/ht-"), call.Key != nil && call.Key.Scope != "")})
		b, _ := json.Marshal(messages.APIHostToolReply{Value: v})
		_ = m.Respond(b)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe(prefix+".broken", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"error": "the index at 10.1.2.3 is down"}`))
	}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	fmt.Println("serving")
	select {}
}

// startToolServer runs TestHelperToolServer in a subprocess against e's NATS server.
func startToolServer(t *testing.T, e *itest.NATSEngine, prefix string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperToolServer$")
	cmd.Env = append(os.Environ(), envToolServer+"="+e.Server.ClientURL(), envToolPrefix+"="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the tool server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "serving") {
		t.Fatalf("the tool server said %q", buf[:n])
	}
}

func pythonHostToolsSpec(t *testing.T, agg sandbox.HostToolAggregate) sandbox.Spec {
	t.Helper()
	spec, err := sandbox.NewSpec("codeact", sandbox.WithImage(dockertest.Python(t)),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.HostTools), sandbox.WithHostTools(agg))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestHostToolsRunProgramOverNATS: a remote host asks the engine to run a program whose tool
// is served by a separate process on NATS; the engine enforces the registry the request
// describes and the spec's caps.
func TestHostToolsRunProgramOverNATS(t *testing.T) {
	sb, prefix, calls := remoteToolsSandbox(t, 4)
	decl := appToolDeclaration()
	tools := []messages.APIHostTool{
		{Name: "search", Subject: prefix + ".search", Declaration: decl, Params: []messages.APIHostToolParam{{Name: "query", Required: true}}},
		{Name: "broken", Subject: prefix + ".broken", Declaration: decl, AnyArguments: true},
		{Name: "nobody", Subject: prefix + ".nobody", Declaration: decl, AnyArguments: true, TimeoutMS: 2000},
	}
	res, err := sb.RunProgram(itest.Context(t), messages.APIRunProgramRequest{TimeoutMS: 60000, PollMS: 50, MaxCallsPerRun: 4, Tools: tools, Source: `
import maf_host_tools as h
print(h.search(query="otters"))
for name in ("broken", "nobody"):
    try:
        getattr(h, name)()
    except h.HostToolError as e:
        print("refused:", e)
try:
    h.search(query="x", extra=1)
except h.HostToolError as e:
    print("refused:", e)
try:
    h.search(query="y")
except h.HostToolError as e:
    print("refused:", e)
`})
	if err != nil {
		t.Fatalf("run_program: %v", err)
	}
	out := string(res.Output)
	for _, want := range []string{"found otters', 'search', '1', 'true true']", `"broken" failed; the reason is in the host's log`, `"nobody" failed`,
		`unexpected keyword argument "extra"`, "cap (4) is exhausted"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "10.1.2.3") || strings.Contains(out, fmt.Sprint(os.Getpid())) || res.ExitCode != 0 || res.Calls != 5 {
		t.Fatalf("exit %d, %d calls, output:\n%s", res.ExitCode, res.Calls, out)
	}
	// One event per call, next to the egress events, refusals by code only.
	var codes []string
	for range res.Calls {
		select {
		case m := <-calls:
			var ev events.HostToolCalledEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil || m.Header.Get("Maf-Event-Type") != events.TypeHostToolCalled ||
				m.Header.Get("Nats-Msg-Id") != ev.ID || ev.Kind != "codeact" || ev.Key.Scope == "" || ev.RunDir != res.RunDir {
				t.Fatalf("event %s %s: %v", m.Subject, m.Data, err)
			}
			if strings.Contains(string(m.Data), "10.1.2.3") {
				t.Fatalf("an event carries the tool's detail: %s", m.Data)
			}
			codes = append(codes, ev.Tool+":"+ev.Refusal)
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far %v, want %d", codes, res.Calls)
		}
	}
	if want := "search: broken:failed nobody:failed search:binding search:cap"; strings.Join(codes, " ") != want {
		t.Fatalf("events %v, want %s", codes, want)
	}
	if st, err := sb.StatFile(itest.Context(t), res.RunDir, "/"); err != nil || st != nil {
		t.Fatalf("the run directory after run_program: %+v, %v; want it reclaimed", st, err)
	}

	// The spec admitted 4 calls a run; a run may not ask for more.
	_, err = sb.RunProgram(itest.Context(t), messages.APIRunProgramRequest{TimeoutMS: 10000, MaxCallsPerRun: 5, Tools: tools, Source: "print(1)"})
	var tl *sandbox.TransferLimitsNotPermittedError
	if !errors.As(err, &tl) || !errors.Is(err, sandbox.ErrRefused) {
		t.Fatalf("a run above the spec's cap: %v, want transfer limits not permitted", err)
	}
	// A user tool is refused at registration, as a Go registry refuses it.
	user := map[string]json.RawMessage{"source": json.RawMessage(`null`), "sink": json.RawMessage(`null`), "identity": json.RawMessage(`"user"`)}
	_, err = sb.RunProgram(itest.Context(t), messages.APIRunProgramRequest{TimeoutMS: 10000, Source: "print(1)", MaxCallsPerRun: 1,
		Tools: []messages.APIHostTool{{Name: "me", Subject: prefix + ".me", Declaration: user}}})
	if !errors.Is(err, sandbox.ErrInvalid) {
		t.Fatalf("a user tool: %v, want invalid", err)
	}
	// The run's bound crosses NATS as a program timeout with its fields.
	_, err = sb.RunProgram(itest.Context(t), messages.APIRunProgramRequest{TimeoutMS: 8000, PollMS: 50, Source: "import time\nprint('zzz', flush=True)\ntime.sleep(600)\n"})
	var pt *sandbox.ProgramTimeoutError
	if !errors.As(err, &pt) || pt.Signal != sandbox.SignalSent || pt.Reach != sandbox.ReachGroup || !strings.Contains(pt.Output, "zzz") {
		t.Fatalf("a program past its bound: %#v, want a program timeout", err)
	}
}

// TestHostToolsGoHostThroughNATSClient: a Go host runs the protocol itself over the NATS
// client's Sandbox, tools in its own process.
func TestHostToolsGoHostThroughNATSClient(t *testing.T) {
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	var calls atomic.Int64
	reg, err := hosttools.NewRegistry(hosttools.WithoutRegistrationWarning())
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(searchTool(&calls)); err != nil {
		t.Fatal(err)
	}
	sb := itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), pythonHostToolsSpec(t, reg.Aggregate()))
	res, err := runPython(t, sb, reg.NewRun(), searchProgram, time.Minute)
	if err != nil || res.ExitCode != 4 || !strings.Contains(res.Stdout(), "3 otters #1 otters #3") || calls.Load() != 1 {
		t.Fatalf("RunProgram through the client: %+v, %v, %d calls", res, err, calls.Load())
	}
}

// remoteToolsSandbox serves a Docker backend on an embedded NATS server with host-tool calls
// on, starts the helper tool server under a prefix of its own, and acquires a Python sandbox
// through the client whose runs may make maxCalls tool calls. calls receives every
// host_tools.called event until the test ends.
func remoteToolsSandbox(t *testing.T, maxCalls int) (sb *client.Sandbox, prefix string, calls chan *nats.Msg) {
	t.Helper()
	b := itest.NewBackend(t)
	srv := natstest.Run(t)
	// The host-tool events go out through the sink the events hand out, as engine serve's do.
	ev, err := events.New(itest.Context(t), natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ev.Close(context.Background()) })
	svc, _ := itest.ServeObserved(t, srv, b, ev)
	e := &itest.NATSEngine{Server: srv, Backend: b, Service: svc}
	c := e.Remote(t)
	prefix = "tools." + itest.NewKey(t).Scope
	startToolServer(t, e, prefix)
	calls = make(chan *nats.Msg, 64)
	evSub, err := natstest.Connect(t, srv).ChanSubscribe("maf.sandbox.docker.host_tools.called.>", calls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = evSub.Unsubscribe() })
	agg := sandbox.HostToolAggregate{Identities: []sandbox.ToolIdentity{sandbox.IdentityApp}, MaxCallsPerRun: maxCalls,
		ResponseLimits: sandbox.DefaultTransferLimits()}
	sb = itest.AcquireRemote(t, c, e.Backend, itest.NewKey(t), pythonHostToolsSpec(t, agg)).(*client.Sandbox)
	return sb, prefix, calls
}

// appToolDeclaration declares a tool that reads untrusted data, writes nowhere and acts as
// the app.
func appToolDeclaration() map[string]json.RawMessage {
	return map[string]json.RawMessage{"source": json.RawMessage(`"untrusted"`), "sink": json.RawMessage(`null`), "identity": json.RawMessage(`"app"`)}
}
