package docker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
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
	"go.uber.org/zap"
	"golang.org/x/net/http/httpproxy"
)

// inMemoryStore is what `docker context inspect` prints as the storage of the virtual default
// context: it has no metadata or TLS directory of its own.
const inMemoryStore = "<IN MEMORY>"

// apiBound is what binding fixes for the rest of an [apiDriver]'s life: the context and endpoint it
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

// contextDoc is the part of `context inspect --format {{json .}}` binding reads beyond what
// [parseContext] already checked (Name and Endpoints.docker.Host).
type contextDoc struct {
	Endpoints struct {
		Docker struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"docker"`
	} `json:"Endpoints"`
	TLSMaterial map[string][]string `json:"TLSMaterial"`
	Storage     struct {
		MetadataPath string `json:"MetadataPath"`
		TLSPath      string `json:"TLSPath"`
	} `json:"Storage"`
}

// Bind resolves the client's context and endpoint once, exactly as [cliDriver.Bind] does: `docker
// context inspect` run with the environment captured at construction, the same single flight
// and the same refusals. When the client binary cannot be found and the captured environment
// sets DOCKER_HOST (and no DOCKER_CONTEXT), the endpoint is that DOCKER_HOST under the default
// context, as the client itself would resolve it. The context's TLS material (its TLS store for
// a named context; DOCKER_CERT_PATH or the client's configuration directory for the default
// one) is loaded into memory here. Binding makes no daemon call. Errors: as [cliDriver.Bind], and
// [ErrUnreachable] for an endpoint the API driver cannot dial (ssh://, npipe://, fd://) or TLS
// material it cannot load.
func (a *apiDriver) Bind(ctx context.Context) (Binding, error) {
	b, err := a.ensureBound(ctx)
	if err != nil {
		return Binding{}, err
	}
	return b.Binding, nil
}

func (a *apiDriver) ensureBound(ctx context.Context) (*apiBound, error) {
	b, fresh, err := a.bound.get(ctx, a.bind)
	if err != nil || !fresh {
		return b, err
	}
	a.log.Info("docker context bound", zap.String("driver", DriverAPI), zap.String("context", b.Context),
		zap.String("endpoint", b.Endpoint))
	return b, nil
}

func (a *apiDriver) bind(ctx context.Context) (*apiBound, error) {
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
		return nil, fmt.Errorf("%w: docker context %q: %w", ErrUnreachable, name, err)
	}
	b := &apiBound{Binding: Binding{Context: name, Endpoint: host}, client: c, raw: raw, tls: tlsConf != nil, skipTLSVerify: doc.Endpoints.Docker.SkipTLSVerify}
	if name != "default" && doc.Storage.MetadataPath != "" && doc.Storage.MetadataPath != inMemoryStore {
		b.meta = filepath.Join(doc.Storage.MetadataPath, "meta.json")
	}
	return b, nil
}

// resolveContext asks the client binary which context and endpoint it resolves to, or, when
// there is no client binary, takes the captured DOCKER_HOST as the default context.
func (a *apiDriver) resolveContext(ctx context.Context) (string, contextDoc, error) {
	var doc contextDoc
	bin, err := lookPath(a.cfg.DockerPath, envValue(a.env, "PATH"))
	if err != nil {
		host := envValue(a.env, "DOCKER_HOST")
		if host == "" || envValue(a.env, "DOCKER_CONTEXT") != "" {
			return "", doc, err
		}
		doc.Endpoints.Docker.Host = host
		doc.Storage.MetadataPath, doc.Storage.TLSPath = inMemoryStore, inMemoryStore
		if tlsOn(a.env) {
			doc.TLSMaterial = map[string][]string{"docker": presentFiles(certDir(a.env), "ca.pem", "cert.pem", "key.pem")}
			doc.Endpoints.Docker.SkipTLSVerify = envValue(a.env, "DOCKER_TLS_VERIFY") == ""
		}
		return "default", doc, nil
	}
	args := []string{"context", "inspect", "--format", "{{json .}}"}
	res, err := a.cli.runWith(ctx, &bound{bin: bin, env: a.env}, invocation{args: args, timeout: a.cfg.CommandTimeout})
	if err != nil {
		return "", doc, err
	}
	if res.ExitCode != 0 {
		return "", doc, fmt.Errorf("the docker client could not resolve its context: %w",
			&CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrUnreachable})
	}
	name, _, err := parseContext(res.Stdout)
	if err != nil {
		return "", doc, err
	}
	if err := json.Unmarshal(res.Stdout, &doc); err != nil {
		return "", doc, fmt.Errorf("%w: the docker client did not resolve a context and endpoint: %v", ErrUnreachable, err)
	}
	return name, doc, nil
}

// tlsOn reports whether the captured environment turns TLS on for the default context, as the
// client's --tls and --tlsverify defaults do.
func tlsOn(env []string) bool {
	return envValue(env, "DOCKER_TLS_VERIFY") != "" || envValue(env, "DOCKER_TLS") != ""
}

// certDir is where the default context's TLS files live: DOCKER_CERT_PATH, else the client's
// configuration directory (DOCKER_CONFIG, else ~/.docker), all from the captured environment.
func certDir(env []string) string {
	if d := envValue(env, "DOCKER_CERT_PATH"); d != "" {
		return d
	}
	if d := envValue(env, "DOCKER_CONFIG"); d != "" {
		return d
	}
	return filepath.Join(envValue(env, "HOME"), ".docker")
}

func presentFiles(dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// loadTLS builds the TLS configuration of the resolved endpoint the way the docker client does
// for a context endpoint: none unless the context has TLS material or skips verification; the
// context's CA as the only root when it has one; its key pair when it has both halves.
func loadTLS(name string, doc contextDoc, env []string) (*tls.Config, error) {
	files := doc.TLSMaterial["docker"]
	skip := doc.Endpoints.Docker.SkipTLSVerify
	if len(files) == 0 && !skip {
		return nil, nil
	}
	dir := certDir(env)
	if name != "default" {
		dir = filepath.Join(doc.Storage.TLSPath, "docker")
	}
	read := func(n string) ([]byte, error) {
		for _, f := range files {
			if f == n {
				return os.ReadFile(filepath.Join(dir, n))
			}
		}
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skip} //nolint:gosec // the context asked for it
	ca, err := read("ca.pem")
	if err != nil {
		return nil, err
	}
	if ca != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("ca.pem holds no certificate")
		}
		conf.RootCAs = pool
	}
	cert, err := read("cert.pem")
	if err != nil {
		return nil, err
	}
	key, err := read("key.pem")
	if err != nil {
		return nil, err
	}
	if cert != nil && key != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

// newAPIClient builds a Moby client for host that reads nothing from the live environment: the
// dialer is pinned to the endpoint, TLS is what binding loaded, and a tcp endpoint's proxy comes
// from the captured environment. Keep-alives are off, so no connection outlives the call that
// opened it. The plain HTTP client it also returns uses a transport configured the same way.
func newAPIClient(host string, tlsConf *tls.Config, env []string) (*client.Client, *http.Client, error) {
	u, err := client.ParseHostURL(host)
	if err != nil {
		return nil, nil, err
	}
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: tlsConf, ResponseHeaderTimeout: 0}
	dialer := &net.Dialer{Timeout: 30 * time.Second}
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
	default:
		return nil, nil, fmt.Errorf("the api driver cannot dial %s:// endpoints; use Config.Driver %q", u.Scheme, DriverCLI)
	}
	raw := &http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}
	c, err := client.New(
		client.WithHost(host),      // first: it sets the host and configures a transport replaced below
		client.WithHTTPClient(raw), // cloned: raw keeps a transport of its own
	)
	if err != nil {
		return nil, nil, err
	}
	return c, raw, nil
}

func firstEnv(env []string, keys ...string) string {
	for _, k := range keys {
		if v := envValue(env, k); v != "" {
			return v
		}
	}
	return ""
}

// stillBound refuses when the named context the API bound to was deleted or now points at
// another endpoint: like the CLI, which names the context on every command, the API never
// serves a context that is gone; unlike it, it never follows a context that was changed.
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
func (a *apiDriver) ready(ctx context.Context) (*apiBound, error) {
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
