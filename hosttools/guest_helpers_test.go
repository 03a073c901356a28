package hosttools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// fakeGuest is the in-memory fake with a scripted guest behind it: the launcher's Exec starts
// program on a goroutine (once the host opens the start gate) and answers with receipt; a
// kill Exec cancels it. Everything the guest does goes through the fake's file plane, the
// same one the host reads.
type fakeGuest struct {
	*sandboxtest.Sandbox
	t       *testing.T
	program func(ctx context.Context, g *guest) int
	receipt string
	// launchErr/launchResult replace the launcher's answer when set.
	launchErr    error
	launchResult *sandbox.ExecResult

	mu       sync.Mutex
	failReq  int   // fail this many host reads of request files with failErr; -1 fails them all
	failGate int   // fail this many host writes of the start gate with failErr
	failErr  error // what those calls fail with
	// slowRead holds each host read of a file with this base name for the duration given,
	// or until the read's context ends, which fails it.
	slowRead map[string]time.Duration
	kills    []string
	cancel   context.CancelFunc
	done     chan struct{}
	running  bool
}

func newFakeGuest(t *testing.T, program func(ctx context.Context, g *guest) int) *fakeGuest {
	t.Helper()
	sb, err := sandboxtest.NewSandbox()
	if err != nil {
		t.Fatalf("new fake sandbox: %v", err)
	}
	f := &fakeGuest{Sandbox: sb, t: t, program: program, receipt: "process-v1 4242 4242\n", done: make(chan struct{})}
	t.Cleanup(f.shutdown)
	return f
}

func (f *fakeGuest) shutdown() {
	f.mu.Lock()
	cancel, running := f.cancel, f.running
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if running {
		select {
		case <-f.done:
		case <-time.After(5 * time.Second):
			f.t.Errorf("the fake guest did not stop")
		}
	}
}

func (f *fakeGuest) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	switch {
	case strings.HasPrefix(cmd.Shell, "sh '") && strings.Contains(cmd.Shell, hosttools.LauncherFile):
		if _, err := f.Sandbox.Exec(ctx, cmd, wd, timeout); err != nil { // recorded
			return sandbox.ExecResult{}, err
		}
		if f.launchErr != nil {
			return sandbox.ExecResult{}, f.launchErr
		}
		if f.launchResult != nil {
			return *f.launchResult, nil
		}
		f.start(wd)
		return sandbox.ExecResultFromText(f.receipt, "", 0), nil
	case strings.HasPrefix(cmd.Shell, "kill -KILL "):
		f.mu.Lock()
		f.kills = append(f.kills, strings.TrimPrefix(cmd.Shell, "kill -KILL "))
		cancel := f.cancel
		f.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return sandbox.ExecResultFromText("", "", 0), nil
	}
	return f.Sandbox.Exec(ctx, cmd, wd, timeout)
}

// WriteFile fails the host's writes of the start gate as failGate says.
func (f *fakeGuest) WriteFile(ctx context.Context, p string, content []byte, wd string) error {
	if strings.HasSuffix(p, hosttools.GateFile) {
		f.mu.Lock()
		fail := f.failGate > 0
		if fail {
			f.failGate--
		}
		f.mu.Unlock()
		if fail {
			return f.failErr
		}
	}
	return f.Sandbox.WriteFile(ctx, p, content, wd)
}

// ReadFile holds the host's reads as slowRead says and fails its reads of request files as
// failReq says.
func (f *fakeGuest) ReadFile(ctx context.Context, p, wd string, maxBytes int64) ([]byte, error) {
	if d, ok := f.slowRead[path.Base(p)]; ok {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if strings.HasSuffix(p, ".request.json") {
		f.mu.Lock()
		fail := f.failReq != 0
		if f.failReq > 0 {
			f.failReq--
		}
		f.mu.Unlock()
		if fail {
			return nil, f.failErr
		}
	}
	return f.Sandbox.ReadFile(ctx, p, wd, maxBytes)
}

func (f *fakeGuest) start(dir string) {
	ctx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	f.cancel, f.running = cancel, true
	f.mu.Unlock()
	g := &guest{f: f, dir: dir, claimed: map[int]bool{}}
	go func() {
		defer close(f.done)
		// The start gate, as the launcher's detached shell waits for it.
		for {
			if st, _ := f.StatFile(ctx, "host_tools/"+hosttools.GateFile, dir); st != nil {
				break
			}
			if st, _ := f.StatFile(ctx, "host_tools", dir); st == nil || ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
		code := f.program(ctx, g)
		if ctx.Err() != nil {
			return // killed
		}
		g.write(hosttools.ExitFile, fmt.Sprint(code))
	}()
}

func (f *fakeGuest) killed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.kills...)
}

// guest is the scripted program's view: files relative to host_tools/.
type guest struct {
	f       *fakeGuest
	dir     string
	mu      sync.Mutex
	claimed map[int]bool
	out     strings.Builder
}

func (g *guest) write(name, body string) {
	if err := g.f.WriteFile(context.Background(), path.Join("host_tools", name), []byte(body), g.dir); err != nil {
		g.f.t.Errorf("guest write %s: %v", name, err)
	}
}

func (g *guest) print(s string) {
	g.mu.Lock()
	g.out.WriteString(s)
	text := g.out.String()
	g.mu.Unlock()
	g.write(hosttools.OutputFile, text)
}

// claim takes the lowest free number, as the shim does.
func (g *guest) claim() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 1
	for g.claimed[n] {
		n++
	}
	g.claimed[n] = true
	return n
}

func (g *guest) publish(n int, body string) {
	g.write(fmt.Sprintf("%s/%04d.request.json", hosttools.CallsDir, n), body)
}

// response waits for the answer to n; nil when ctx ends first.
func (g *guest) response(ctx context.Context, n int) map[string]any {
	p := fmt.Sprintf("host_tools/%s/%04d.response.json", hosttools.CallsDir, n)
	for ctx.Err() == nil {
		b, err := g.f.ReadFile(ctx, p, g.dir, 1<<20)
		if err == nil {
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				return m
			}
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// call is the shim's call: claim, publish, wait.
func (g *guest) call(ctx context.Context, name string, args map[string]any) map[string]any {
	n := g.claim()
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%04d", n), "name": name, "arguments": args})
	g.publish(n, string(b))
	return g.response(ctx, n)
}

// hasResponse reports whether n has been answered.
func (g *guest) hasResponse(n int) bool {
	st, _ := g.f.StatFile(context.Background(), fmt.Sprintf("host_tools/%s/%04d.response.json", hosttools.CallsDir, n), g.dir)
	return st != nil
}

// newRun builds a sealed run over tools.
func newRun(t *testing.T, opts []hosttools.Option, tools ...hosttools.Tool) *hosttools.Run {
	t.Helper()
	reg, err := hosttools.NewRegistry(opts...)
	if err != nil {
		t.Fatalf("new registry: %v", err)
	}
	for _, tool := range tools {
		if err := reg.Register(tool); err != nil {
			t.Fatalf("register %s: %v", tool.Name, err)
		}
	}
	return reg.NewRun()
}

func declared() *hosttools.Declaration {
	src := sandbox.SourceTrusted
	return &hosttools.Declaration{Source: &src}
}

// echoTool returns its "x" argument.
func echoTool(calls *[]string, mu *sync.Mutex) hosttools.Tool {
	return hosttools.Tool{Name: "echo", Declaration: declared(), Params: []hosttools.Param{{Name: "x"}},
		Func: func(_ context.Context, args hosttools.Arguments) (any, error) {
			var x any
			_ = args.Decode("x", &x)
			if calls != nil {
				mu.Lock()
				*calls = append(*calls, fmt.Sprint(x))
				mu.Unlock()
			}
			return x, nil
		}}
}

// layoutFor is a fresh layout under the fake's storage base.
func layoutFor(t *testing.T) hosttools.Layout {
	t.Helper()
	l, err := hosttools.NewLayout(hosttools.RandomRunDir(sandboxtest.DefaultStorageBase), "")
	if err != nil {
		t.Fatalf("new layout: %v", err)
	}
	return l
}

// assertTransportGone checks host_tools/ was removed.
func assertTransportGone(t *testing.T, sb sandbox.Sandbox, l hosttools.Layout) {
	t.Helper()
	st, err := sb.StatFile(context.Background(), hosttools.TransportDir, l.Dir)
	if err != nil || st != nil {
		t.Fatalf("host_tools/ after the run: %+v, %v; want it removed", st, err)
	}
}

var fast = hosttools.WithPollInterval(2 * time.Millisecond)
