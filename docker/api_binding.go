package docker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/net/http/httpproxy"
)

// inMemoryStore is what `docker context inspect` prints as the storage of the virtual default
// context: it has no metadata or TLS directory of its own.
const inMemoryStore = "<IN MEMORY>"

// apiBound is what binding fixes for the rest of an [Engine]'s life: the context and endpoint it
// resolved, the client built for that endpoint with the TLS material loaded at binding time,
// and, for a named context, where to check that the context still says what it said then.
type apiBound struct {
	Binding
	client *client.Client
	// raw sends the few requests the Moby client cannot shape, over the same dialer and TLS.
	raw *http.Client
	tls bool
	// meta is the named context's meta.json; "" for the default context, which cannot be
	// deleted. Every call re-reads it and refuses when it is gone or points elsewhere.
	meta          string
	skipTLSVerify bool

	negotiateMu sync.Mutex
	negotiated  atomic.Bool
}

func (a *Engine) bind(ctx context.Context) (*apiBound, error) {
	name, doc, err := a.resolveContext(ctx)
	if err != nil {
		return nil, err
	}
	host := doc.Endpoints.Docker.Host
	tlsConf, err := loadTLS(name, doc, a.env)
	if err != nil {
		return nil, fmt.Errorf("%w: load the TLS material of docker context %q: %w", ErrUnreachable, name, err)
	}
	c, raw, err := newAPIClient(host, tlsConf, a.env)
	if err != nil {
		return nil, fmt.Errorf("docker context %q: %w", name, err)
	}
	b := &apiBound{Binding: Binding{Context: name, Endpoint: host}, client: c, raw: raw, tls: tlsConf != nil, skipTLSVerify: doc.Endpoints.Docker.SkipTLSVerify}
	if name != "default" && doc.Storage.MetadataPath != "" && doc.Storage.MetadataPath != inMemoryStore {
		b.meta = filepath.Join(doc.Storage.MetadataPath, "meta.json")
	}
	return b, nil
}

// sshAPIHost is the host the Moby client writes into requests sent over an ssh:// endpoint's
// stream, which has no address of its own to name.
const sshAPIHost = "http://" + client.DummyHost

// newAPIClient builds a Moby client for host that reads nothing from the live environment: the
// dialer is pinned to the endpoint (a unix socket, a tcp address, or an ssh command found on
// the captured PATH), TLS is what binding loaded, and a tcp endpoint's proxy comes from the
// captured environment. Keep-alives are off, so no connection (and no ssh process) outlives
// the call that opened it. The plain HTTP client it also returns uses a transport configured
// the same way. An endpoint of another scheme is [ErrUnreachable].
func newAPIClient(host string, tlsConf *tls.Config, env []string) (*client.Client, *http.Client, error) {
	u, err := client.ParseHostURL(host)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConf, ResponseHeaderTimeout: 0}
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	clientHost := host
	switch u.Scheme {
	case "unix":
		addr := u.Host
		tr.DisableCompression = true
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", addr)
		}
	case "tcp":
		proxy := (&httpproxy.Config{
			HTTPProxy:  firstEnv(env, "HTTP_PROXY", "http_proxy"),
			HTTPSProxy: firstEnv(env, "HTTPS_PROXY", "https_proxy"),
			NoProxy:    firstEnv(env, "NO_PROXY", "no_proxy"),
		}).ProxyFunc()
		tr.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
		tr.DialContext = dialer.DialContext
	case "ssh":
		d, err := newSSHDialer(host, env)
		if err != nil {
			return nil, nil, err
		}
		tr.DialContext, clientHost = d.dial, sshAPIHost
	default:
		return nil, nil, fmt.Errorf("%w: the engine cannot dial %s:// endpoints; it dials unix://, tcp:// and ssh://", ErrUnreachable, u.Scheme)
	}
	raw := &http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}
	c, err := client.New(
		client.WithHost(clientHost), // first: it sets the host and configures a transport replaced below
		client.WithHTTPClient(raw),  // cloned: raw keeps a transport of its own
	)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return c, raw, nil
}

// stillBound refuses when the named context the engine bound to was deleted or now points at
// another endpoint: the engine never serves a context that is gone, and never follows a
// context that was changed.
func (b *apiBound) stillBound() error {
	if b.meta == "" {
		return nil
	}
	data, err := os.ReadFile(b.meta)
	if err != nil {
		return fmt.Errorf("%w: docker context %q is gone: %w", ErrUnreachable, b.Context, err)
	}
	var doc contextDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: docker context %q is unreadable: %w", ErrUnreachable, b.Context, err)
	}
	if doc.Endpoints.Docker.Host != b.Endpoint || doc.Endpoints.Docker.SkipTLSVerify != b.skipTLSVerify {
		return fmt.Errorf("%w: docker context %q now points at %s; this engine stays bound to %s and refuses",
			ErrUnreachable, b.Context, doc.Endpoints.Docker.Host, b.Endpoint)
	}
	return nil
}

// negotiate fixes the API version once, with one ping, for every later request: the highest
// version both the client and the daemon speak (1.41 for a 20.10 engine). A failure leaves it
// unfixed and the next call pings again.
func (b *apiBound) negotiate(ctx context.Context) error {
	if b.negotiated.Load() {
		return nil
	}
	b.negotiateMu.Lock()
	defer b.negotiateMu.Unlock()
	if b.negotiated.Load() {
		return nil
	}
	if _, err := b.client.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true, ForceNegotiate: true}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		if class := apiClass(err); class != nil {
			return fmt.Errorf("%w: ping %s: %w", class, b.Endpoint, err)
		}
		return fmt.Errorf("%w: negotiate an API version with %s (minimum %s): %w", ErrUnreachable, b.Endpoint, client.MinAPIVersion, err)
	}
	b.negotiated.Store(true)
	return nil
}

// ready binds, checks the binding still holds and fixes the API version.
func (a *Engine) ready(ctx context.Context) (*apiBound, error) {
	b, err := a.ensureBound(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.stillBound(); err != nil {
		return nil, err
	}
	if err := b.negotiate(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// host is the Host header of a request written by hand: the endpoint's address for tcp, the
// client's placeholder for a socket.
func (b *apiBound) host() string {
	if u, err := client.ParseHostURL(b.Endpoint); err == nil && u.Scheme == "tcp" {
		return u.Host
	}
	return client.DummyHost
}

// rawURL is the URL of API path p for a request the API writes itself.
func (b *apiBound) rawURL(p string) string {
	scheme := "http"
	if b.tls {
		scheme = "https"
	}
	return scheme + "://" + b.host() + b.apiPath(p)
}

// postJSON POSTs body to API path p as a request the API writes itself (the Moby client no
// longer sends some fields older engines need) and decodes a 2xx answer into out. Any other
// status is an [*apiAnswer]; a failed exchange is [ErrUnreachable]; ctx's end is ctx's error.
func (b *apiBound) postJSON(ctx context.Context, p string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.rawURL(p), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.raw.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: POST %s: %w", ErrUnreachable, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readAnswer(resp)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("POST %s: unreadable answer: %w", p, err)
	}
	return nil
}

// apiPath is the versioned request path of p, for the calls the API makes without the Moby
// client's helpers (the hijacked exec start).
func (b *apiBound) apiPath(p string) string {
	base := ""
	if u, err := client.ParseHostURL(b.Endpoint); err == nil {
		base = u.Path
	}
	return strings.TrimSuffix(base, "/") + "/v" + b.client.ClientVersion() + p
}
