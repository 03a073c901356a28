package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

//go:embed assets
var assets embed.FS

// maxActionBody bounds an action request's body.
const maxActionBody = 64 << 10

// Handler serves the page (GET /), its assets, the stream of updates (GET /events, server-sent
// events: a snapshot, then every change), the actions (POST /api/dispose, POST /api/purge,
// POST /api/lame_duck, JSON) and a sandbox's processes (POST /api/processes, and POST
// /api/process_output to tail one). It answers only requests addressed to a loopback name and forbids
// framing. An action must come from the page itself: a JSON body and the header
// X-Console-Action, which a page of another origin cannot send without a CORS preflight the
// console never answers, and no foreign Origin.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /events", c.events)
	mux.HandleFunc("POST /api/dispose", func(w http.ResponseWriter, r *http.Request) {
		var req DisposeRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.Dispose(ctx, req) })
	})
	mux.HandleFunc("POST /api/purge", func(w http.ResponseWriter, r *http.Request) {
		var req PurgeRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.Purge(ctx, req) })
	})
	mux.HandleFunc("POST /api/pause", func(w http.ResponseWriter, r *http.Request) { // lifecycle.go
		var req SandboxRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.Pause(ctx, req) })
	})
	mux.HandleFunc("POST /api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		var req SandboxRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.Snapshot(ctx, req) })
	})
	mux.HandleFunc("POST /api/lame_duck", func(w http.ResponseWriter, r *http.Request) {
		var req LameDuckRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.LameDuck(ctx, req) })
	})
	mux.HandleFunc("POST /api/processes", func(w http.ResponseWriter, r *http.Request) {
		var req ProcessesRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.Processes(ctx, req) })
	})
	mux.HandleFunc("POST /api/process_output", func(w http.ResponseWriter, r *http.Request) {
		var req ProcessOutputRequest
		c.act(w, r, &req, func(ctx context.Context) (any, error) { return c.ProcessOutput(ctx, req) })
	})
	return guard(mux)
}

// guard refuses a request whose Host is not a loopback name (a DNS-rebinding page names its
// own host, and would otherwise read the console and pass the same-origin check), and forbids
// framing the page (a page of another origin could otherwise lure clicks onto its buttons).
func guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": "the console answers loopback names only"})
			return
		}
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether host (a Host header, with or without a port) names loopback:
// localhost or a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// events streams the snapshot and then every update to one browser until it leaves.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	snap, watch := c.state.watch(c.o.identity, c.Actions())
	defer func() {
		c.state.mu.Lock()
		c.state.hub.remove(watch)
		c.state.mu.Unlock()
	}()
	first, err := sse("snapshot", snap)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	if _, err := w.Write(first); err != nil {
		return
	}
	flusher.Flush()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		var b []byte
		select {
		case <-r.Context().Done():
			return
		case <-c.stop:
			return
		case <-watch.gone:
			return // fell behind: the browser reconnects and starts from a snapshot
		case <-keepAlive.C:
			b = []byte(": keep-alive\n\n")
		case b = <-watch.ch:
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		flusher.Flush()
	}
}

// act decodes an action's body into req, runs do and writes its result or error as JSON.
func (c *Console) act(w http.ResponseWriter, r *http.Request, req any, do func(context.Context) (any, error)) {
	if r.Header.Get("X-Console-Action") == "" || r.Header.Get("Content-Type") != "application/json" || !sameOrigin(r) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "actions come from the console's own page"})
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody)).Decode(req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "malformed request: " + err.Error()})
		return
	}
	out, err := do(r.Context())
	var invalid *sandbox.InvalidArgumentError
	switch {
	case errors.Is(err, ErrForbidden): // the NATS server's refusal or an engine's with tenancy
		writeJSON(w, http.StatusForbidden, map[string]string{"error": err.Error(), "code": "forbidden"})
	case errors.As(err, &invalid):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// sameOrigin reports whether r carries no Origin, or one naming the host it was sent to.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
