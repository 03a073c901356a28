package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Binding is the client context and daemon endpoint an [Engine] resolved once and uses for the
// rest of its life.
type Binding struct {
	Context  string // the context's name
	Endpoint string // the daemon endpoint it resolved to (freeze records key on it)
}

// Bind resolves the client's context and endpoint once: `docker context inspect` run with the
// environment captured at construction. Concurrent first calls make one inspect; a failure
// leaves the engine unbound and the next call retries; once bound, the binding never changes.
// When the client binary cannot be found and the captured environment sets DOCKER_HOST (and
// no DOCKER_CONTEXT), the endpoint is that DOCKER_HOST under the default context, as the client
// itself would resolve it. The context's TLS material (its TLS store for a named context;
// DOCKER_CERT_PATH or the client's configuration directory for the default one) is loaded
// into memory here, and for an ssh:// endpoint the ssh binary is found on the captured PATH.
// Binding makes no daemon call. Every other method binds first.
//
// Errors: [ErrClientNotFound] (also [ErrUnreachable]) when the docker binary is missing and no
// DOCKER_HOST stands in for it, or an ssh:// endpoint has no ssh on PATH; [ErrUnreachable] when
// the client could not resolve its context, when its answer lacks a non-empty Name and
// Endpoints.docker.Host (the message then says it could not "resolve a context and
// endpoint"), for an endpoint the engine cannot dial (npipe://, fd://) and for TLS material it
// cannot load; [*TimeoutError]; the context's error when ctx ends.
func (a *Engine) Bind(ctx context.Context) (Binding, error) {
	b, err := a.ensureBound(ctx)
	if err != nil {
		return Binding{}, err
	}
	return b.Binding, nil
}

func (a *Engine) ensureBound(ctx context.Context) (*apiBound, error) {
	b, fresh, err := a.bound.get(ctx, a.bind)
	if err != nil || !fresh {
		return b, err
	}
	a.log.Info("docker context bound", zap.String("context", b.Context), zap.String("endpoint", b.Endpoint))
	return b, nil
}

// bindOnce is an engine's binding, made at most once and never changed: the first callers bind
// one at a time (concurrent first calls resolve the context once), a failure leaves it unbound
// for the next call to retry, later callers read it without waiting, and a caller waiting for
// another's binding can give up with its context.
type bindOnce[T any] struct {
	sem chan struct{}
	v   atomic.Pointer[T]
}

func newBindOnce[T any]() *bindOnce[T] { return &bindOnce[T]{sem: make(chan struct{}, 1)} }

// get returns the binding, made by bind if there is none yet; fresh says this call made it.
func (o *bindOnce[T]) get(ctx context.Context, bind func(context.Context) (*T, error)) (b *T, fresh bool, err error) {
	if b := o.v.Load(); b != nil {
		return b, false, nil
	}
	select {
	case o.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("bind docker context: %w", ctx.Err())
	}
	defer func() { <-o.sem }()
	if b := o.v.Load(); b != nil {
		return b, false, nil
	}
	if b, err = bind(ctx); err != nil {
		return nil, false, err
	}
	o.v.Store(b)
	return b, true, nil
}

// load is the binding, nil while there is none.
func (o *bindOnce[T]) load() *T { return o.v.Load() }

// contextDoc is the part of `context inspect --format {{json .}}` binding reads beyond what
// [parseContext] checks (Name and Endpoints.docker.Host).
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

// resolveContext asks the client binary which context and endpoint it resolves to, or, when
// there is no client binary, takes the captured DOCKER_HOST as the default context.
func (a *Engine) resolveContext(ctx context.Context) (string, contextDoc, error) {
	var doc contextDoc
	bin, err := lookPath(a.cfg.DockerPath, envValue(a.env, "PATH"), "Config.DockerPath to the Docker CLI binary")
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
	out, err := a.inspectContext(ctx, bin)
	if err != nil {
		return "", doc, err
	}
	name, _, err := parseContext(out)
	if err != nil {
		return "", doc, err
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return "", doc, fmt.Errorf("%w: the docker client did not resolve a context and endpoint: %v", ErrUnreachable, err)
	}
	return name, doc, nil
}

// maxContextAnswer bounds what binding keeps of the client's answer and of its complaint.
const maxContextAnswer = 1 << 20

// inspectContext runs `docker context inspect --format {{json .}}`, the one command the engine
// runs with the client binary, in a process group of its own with the captured environment and
// under Config.CommandTimeout; the group is killed and the client reaped on every path.
func (a *Engine) inspectContext(ctx context.Context, bin string) ([]byte, error) {
	args := []string{"context", "inspect", "--format", "{{json .}}"}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("docker context inspect: %w", err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, a.cfg.CommandTimeout, errControlBudget)
	defer cancel()
	stdout, stderr := &capBuffer{max: maxContextAnswer}, &capBuffer{max: maxContextAnswer}
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = a.env, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a grandchild holding the pipes cannot hold binding up
	start := time.Now()
	err := cmd.Run()
	a.log.Debug("docker context inspect", zap.String("client", bin), zap.Duration("elapsed", time.Since(start)), zap.Error(err))
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return stdout.buf.Bytes(), nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("docker context inspect: %w", ctx.Err())
	case errors.Is(context.Cause(cctx), errControlBudget):
		return nil, &TimeoutError{Args: args, Timeout: a.cfg.CommandTimeout}
	case errors.As(err, &exitErr):
		return nil, fmt.Errorf("the docker client could not resolve its context: %w",
			&CommandError{Args: args, ExitCode: exitErr.ExitCode(), Stderr: stderr.buf.Bytes(), Class: ErrUnreachable})
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w: %w: %q could not be started (%v); set Config.DockerPath to the Docker CLI binary",
			ErrUnreachable, ErrClientNotFound, bin, err)
	}
	return nil, fmt.Errorf("%w: docker context inspect: %w", ErrUnreachable, err)
}

// capBuffer keeps the first max bytes written to it and drops the rest.
type capBuffer struct {
	buf bytes.Buffer
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// parseContext reads `context inspect --format {{json .}}`: one JSON object with a non-empty
// string Name and Endpoints.docker.Host. Anything else is refused.
func parseContext(out []byte) (name, host string, err error) {
	refuse := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: the docker client did not resolve a context and endpoint: %s", ErrUnreachable, why)
	}
	var doc any
	if err := json.Unmarshal(out, &doc); err != nil {
		return refuse("its answer is not one JSON object")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return refuse("its answer is not a JSON object")
	}
	name, ok = obj["Name"].(string)
	if !ok || name == "" {
		return refuse("no context name")
	}
	eps, _ := obj["Endpoints"].(map[string]any)
	dock, _ := eps["docker"].(map[string]any)
	host, ok = dock["Host"].(string)
	if !ok || host == "" {
		return refuse("no docker endpoint host")
	}
	return name, host, nil
}

// lookPath finds a binary the way exec.LookPath would, but against the PATH of the environment
// snapshot rather than the live one. setting says, in the refusal, what the user can set.
func lookPath(file, pathEnv, setting string) (string, error) {
	notFound := func(err error) (string, error) {
		return "", fmt.Errorf("%w: %w: %q was not found on PATH (%v); set %s",
			ErrUnreachable, ErrClientNotFound, file, err, setting)
	}
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return notFound(err)
		}
		return file, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			if !filepath.IsAbs(p) {
				if abs, err := filepath.Abs(p); err == nil {
					p = abs
				}
			}
			return p, nil
		}
	}
	return notFound(fs.ErrNotExist)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func firstEnv(env []string, keys ...string) string {
	for _, k := range keys {
		if v := envValue(env, k); v != "" {
			return v
		}
	}
	return ""
}
