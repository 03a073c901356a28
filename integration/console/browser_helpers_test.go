package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/console"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
)

// The NATS users of the tests: the engine and the operator may do anything; the viewer may
// watch but not publish a dispose, a purge or a lame duck, on the shared subjects or any engine's.
const (
	engineUser   = "engine"
	operatorUser = "operator"
	viewerUser   = "viewer"
	password     = "s3cret-for-tests"
)

// pool is an engine on real Docker, recording the audit stream, served on an embedded NATS
// server with users.
type pool struct {
	srv    *server.Server
	engine *itest.NATSEngine
}

func startPool(t *testing.T) *pool { return startPoolWith(t, nil) }

// startPoolWith is startPool with a backend of cfg's (the test's labels and driver added), its
// egress windows published as events; nil cfg is itest's usual backend, given opts too.
func startPoolWith(t *testing.T, cfg *docker.Config, backendOpts ...actors.Option) *pool {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	all := &server.Permissions{}
	viewer := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"},
		Deny: []string{"maf.sandbox.api.v1.dispose", "maf.sandbox.api.v1.dispose_scope",
			"maf.sandbox.api.v1.engine.*.dispose", "maf.sandbox.api.v1.engine.*.dispose_scope", "maf.sandbox.api.v1.engine.*.lame_duck"}}}
	opts.Users = []*server.User{
		{Username: engineUser, Password: password, Permissions: all},
		{Username: operatorUser, Password: password, Permissions: all},
		{Username: viewerUser, Password: password, Permissions: viewer},
	}
	opts.NoAuthUser = engineUser // itest's helpers connect without credentials
	srv := natstest.RunWithOptions(t, opts)
	ctx := itest.Context(t)
	ev, err := events.New(ctx, natstest.Connect(t, srv), events.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("new events: %v", err)
	}
	t.Cleanup(func() { _ = ev.Close(context.Background()) })
	var b *actors.Backend
	if cfg == nil {
		store, err := events.NewSnapshots(ctx, natstest.Connect(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		b = itest.NewBackend(t, append([]actors.Option{actors.WithSnapshotStore(store)}, backendOpts...)...)
	} else {
		c := *cfg
		c.Labels, c.CommandTimeout = dockertest.Labels(), 30*time.Second
		var err error
		if b, err = actors.Create(context.Background(), c, actors.WithLogger(zaptest.NewLogger(t))); err != nil {
			t.Fatalf("create backend: %v", err)
		}
		t.Cleanup(func() { b.Close(context.Background()) })
	}
	svc, _ := itest.ServeObserved(t, srv, b, ev) // the router hands the events to b: its windows, its acts
	return &pool{srv: srv, engine: &itest.NATSEngine{Server: srv, Backend: b, Service: svc}}
}

// startConsole serves a console connected as user and returns its page's URL.
func (p *pool) startConsole(t *testing.T, user string) (*console.Console, string) {
	t.Helper()
	return serveConsole(t, natstest.Connect(t, p.srv, nats.UserInfo(user, password)), console.WithIdentity("NATS user "+user))
}

// serveConsole serves a console on nc, polling quickly, and returns its page's URL.
func serveConsole(t *testing.T, nc *nats.Conn, opts ...console.Option) (*console.Console, string) {
	t.Helper()
	c, err := console.New(nc, append([]console.Option{console.WithLogger(zaptest.NewLogger(t)),
		console.WithPoll(200*time.Millisecond, 5*time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("new console: %v", err)
	}
	web := httptest.NewServer(c.Handler())
	t.Cleanup(func() {
		_ = c.Close() // ends the page's event stream first, so the server's Close does not wait on it
		web.Close()
	})
	return c, web.URL + "/"
}

// browser starts a headless chromium for the test and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser tests need Debian's chromium (apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("headless", true), chromedp.DisableGPU)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Run(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// within runs actions in the browser with a deadline.
func within(t *testing.T, ctx context.Context, d time.Duration, actions ...chromedp.Action) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// pageAction sends the request a button of the page at pageURL would send to path (a JSON body
// with the page's action header) and returns the console's status code.
func pageAction(t *testing.T, pageURL, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, pageURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Console-Action", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
