package lifecycle

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// stall is what a stallingUp holds back.
type stall int32

const (
	stallNothing stall = iota
	stallProbe         // the acquire-time sh probe's exec create
	stallStart         // every container start
)

// stallingUp carries a client's requests to the daemon one by one, holding back for good (until
// released) any request that mode says to stall: the daemon never sees it, as if it were too
// busy to answer. An upgraded request (an exec's stream) is followed by a plain copy.
type stallingUp struct {
	mode    atomic.Int32
	release chan struct{}
	once    sync.Once
}

func (s *stallingUp) stalls(req *http.Request, body []byte) bool {
	if req.Method != http.MethodPost {
		return false
	}
	switch stall(s.mode.Load()) {
	case stallProbe:
		return strings.HasSuffix(req.URL.Path, "/exec") && bytes.Contains(body, []byte(`["sh","-c","exit 0"]`))
	case stallStart:
		return strings.HasSuffix(req.URL.Path, "/start") && strings.Contains(req.URL.Path, "/containers/")
	}
	return false
}

func (s *stallingUp) up(dst io.Writer, src io.Reader) {
	br := bufio.NewReader(src)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if s.stalls(req, body) {
			<-s.release
			return
		}
		req.Body, req.ContentLength, req.TransferEncoding = http.NoBody, 0, nil
		if len(body) > 0 {
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		if err := req.Write(dst); err != nil {
			return
		}
		if req.Header.Get("Upgrade") != "" {
			_, _ = io.Copy(dst, br)
			return
		}
	}
}

func (s *stallingUp) free() { s.once.Do(func() { close(s.release) }) }

// A daemon too busy to answer an acquire's probe or start is reported as busy — a
// BackendUnavailableError, engine_unavailable on the wire, which the client retries — never as
// the image lacking a capability, nor as an untyped error; and the same acquire succeeds once
// the daemon answers. The relay in front of the daemon's socket holds the
// probe's exec, then the container's start, back for good; each call ends at its own budget.
func TestBusyDaemonAtAcquireIsRetryable(t *testing.T) {
	dockertest.Require(t)
	s := &stallingUp{release: make(chan struct{})}
	relay := newSocketRelay(t, "/var/run/docker.sock", s.up)
	t.Cleanup(s.free) // before the relay's cut, which waits for its connections
	t.Setenv("DOCKER_HOST", "unix://"+relay.ln.Addr().String())
	t.Setenv("DOCKER_CONTEXT", "")
	cfg := docker.Config{Labels: dockertest.Labels(), CommandTimeout: 15 * time.Second}
	b, err := actors.Create(context.Background(), cfg, actors.WithLogger(zaptest.NewLogger(t)), actors.WithFilePlane(actors.FilePlaneArchive))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	spec := itest.BusyboxSpec(t)
	for _, tc := range []struct {
		name    string
		mode    stall
		timeout bool // the engine's own command budget is inside
	}{
		{"probe", stallProbe, false},
		{"start", stallStart, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.mode.Store(int32(tc.mode))
			key := itest.NewKey(t)
			_, err := b.Acquire(itest.Context(t), key, spec)
			var ua *sandbox.BackendUnavailableError
			if !errors.As(err, &ua) || errors.Is(err, sandbox.ErrUnsupported) {
				t.Fatalf("acquire on a stalled %s = %v; want BackendUnavailableError, never a capability refusal", tc.name, err)
			}
			if tc.timeout && !errors.Is(err, docker.ErrTimeout) {
				t.Fatalf("acquire on a stalled start = %v; want docker.ErrTimeout inside", err)
			}
			if code := messages.EncodeError(err).Code; code != messages.CodeEngineUnavailable {
				t.Fatalf("wire code %s, want engine_unavailable (retryable)", code)
			}
			s.mode.Store(int32(stallNothing))
			sb := itest.Acquire(t, b, key, spec) // the retry
			if res, err := sb.Exec(itest.Context(t), sandbox.Argv("echo", "ok"), ".", time.Minute); err != nil || res.Stdout() != "ok\n" {
				t.Fatalf("exec after the retry = %+v, %v", res, err)
			}
		})
	}
}
