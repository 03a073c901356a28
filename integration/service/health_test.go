package service

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// deadSocket is a unix socket path that exists and refuses every connection: a daemon that
// has gone away.
func deadSocket(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dead.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawCall sends body on subject and decodes the reply into out; it returns the reply's
// error (nil for none).
func rawCall(t *testing.T, nc *nats.Conn, subject string, body any, out any) *messages.APIError {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(subject, b, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var resp messages.APIResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatalf("reply %s: %v", msg.Data, err)
	}
	if out != nil {
		if err := json.Unmarshal(msg.Data, out); err != nil {
			t.Fatalf("reply %s: %v", msg.Data, err)
		}
	}
	return resp.Error
}

func healthOf(t *testing.T, nc *nats.Conn) messages.APIHealthResponse {
	t.Helper()
	var h messages.APIHealthResponse
	if e := rawCall(t, nc, messages.SubjectHealth, messages.APIHealthRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIHealthRequestType}}, &h); e != nil {
		t.Fatalf("health: %+v", e)
	}
	return h
}

func acquireBody(key sandbox.Key, image string) messages.APIAcquireRequest {
	return messages.APIAcquireRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIAcquireRequestType, Key: messages.KeyToWire(key)},
		Spec: messages.APISpec{Kind: "shell", Image: image}}
}

// checkUnavailable: health says engine_unavailable with the daemon's error, an acquire
// fails as engine_unavailable, and health then names it as the last engine error.
func checkUnavailable(t *testing.T, nc *nats.Conn, image string) {
	t.Helper()
	h := healthOf(t, nc)
	if h.Status != service.HealthEngineUnavailable || h.Daemon == nil || h.Daemon.Reachable ||
		h.Daemon.Error == nil || h.Daemon.Error.Code != messages.CodeEngineUnavailable {
		t.Fatalf("health with the daemon away: %+v (daemon %+v)", h, h.Daemon)
	}
	e := rawCall(t, nc, messages.SubjectAcquire, acquireBody(itest.NewKey(t), image), nil)
	if e == nil || e.Code != messages.CodeEngineUnavailable {
		t.Fatalf("acquire with the daemon away: %+v, want %s", e, messages.CodeEngineUnavailable)
	}
	h = healthOf(t, nc)
	if h.LastError == nil || h.LastError.Op != "acquire" || h.LastError.Error.Code != messages.CodeEngineUnavailable {
		t.Fatalf("health's last engine error: %+v", h.LastError)
	}
}

// The service over a Docker backend whose DOCKER_HOST is a dead unix socket: health says so
// and acquires fail as engine_unavailable (not internal); the Go client's error is
// messages.ErrUnavailable.
func TestServiceDaemonUnreachable(t *testing.T) {
	spec := itest.BusyboxSpec(t) // its image is built while the daemon is still in reach
	t.Setenv("DOCKER_HOST", "unix://"+deadSocket(t))
	t.Setenv("DOCKER_CONTEXT", "")
	b, err := actors.Create(context.Background(), docker.Config{Labels: dockertest.Labels(), CommandTimeout: 10 * time.Second},
		actors.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatalf("create backend: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	if err := b.CheckHealth(itest.Context(t)); !errors.As(err, new(*sandbox.BackendUnavailableError)) {
		t.Fatalf("CheckHealth = %v, want a BackendUnavailableError", err)
	}
	if _, err := b.Acquire(itest.Context(t), itest.NewKey(t), spec); !errors.As(err, new(*sandbox.BackendUnavailableError)) {
		t.Fatalf("embedded acquire = %v, want a BackendUnavailableError", err)
	}
	srv := natstest.Run(t)
	itest.ServeBackend(t, srv, b)
	nc := natstest.Connect(t, srv) // not the service's own: its stop waits for its subscriptions to drain
	checkUnavailable(t, nc, spec.Image)
	// The Go client retries engine_unavailable (another engine of the pool may reach its
	// daemon) for its retry wait, then returns it.
	c := (&itest.NATSEngine{Server: srv}).Remote(t, client.WithRetryWait(time.Second))
	if _, err := c.Acquire(itest.Context(t), itest.NewKey(t), spec); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("client acquire = %v, want messages.ErrUnavailable", err)
	}
}

// engine serve with DOCKER_HOST at a dead unix socket: it serves, and its health and
// acquires say engine_unavailable.
func TestServeDaemonUnreachable(t *testing.T) {
	image := dockertest.Busybox(t)
	url := itest.StartServe(t, []string{"DOCKER_HOST=unix://" + deadSocket(t), "DOCKER_CONTEXT="}, "--engine-id", "dead-daemon")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	checkUnavailable(t, nc, image)
}

// A workload image the daemon does not have is image_missing over NATS (and an
// *sandbox.ImageMissingError embedded), while health stays ok: the daemon answers.
func TestServiceImageMissing(t *testing.T) {
	e := itest.StartNATSEngine(t)
	const image = "maf-sandbox-test/absent:never-built"
	key := itest.NewKey(t)
	t.Cleanup(func() { e.Backend.Dispose(context.Background(), key, sandbox.DisposeOptions{}) })
	if _, err := e.Backend.Acquire(itest.Context(t), key, itest.BusyboxSpec(t, sandbox.WithImage(image))); !errors.As(err, new(*sandbox.ImageMissingError)) {
		t.Fatalf("embedded acquire = %v, want an ImageMissingError", err)
	}
	nc := natstest.Connect(t, e.Server)
	er := rawCall(t, nc, messages.SubjectAcquire, acquireBody(key, image), nil)
	if er == nil || er.Code != messages.CodeImageMissing {
		t.Fatalf("acquire of a missing image: %+v, want %s", er, messages.CodeImageMissing)
	}
	c := e.Remote(t)
	var missing *sandbox.ImageMissingError
	if _, err := c.Acquire(itest.Context(t), key, itest.BusyboxSpec(t, sandbox.WithImage(image))); !errors.As(err, &missing) || missing.Image != image {
		t.Fatalf("client acquire = %v, want an ImageMissingError naming %s", err, image)
	}
	h := healthOf(t, nc)
	if h.Status != service.HealthOK || h.Daemon == nil || !h.Daemon.Reachable {
		t.Fatalf("health with the daemon in reach: %+v (daemon %+v)", h, h.Daemon)
	}
	if h.LastError == nil || h.LastError.Error.Code != messages.CodeImageMissing {
		t.Fatalf("health's last engine error: %+v", h.LastError)
	}
}
