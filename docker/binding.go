package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
)

// Binding is the client context and daemon endpoint a driver resolved once and names on every
// later command.
type Binding struct {
	Context  string // the context's name; every command carries --context Context
	Endpoint string // the daemon endpoint it resolved to (freeze records key on it)
}

// bound is what binding fixes for the rest of the CLI's life.
type bound struct {
	Binding
	bin         string   // the client binary, resolved against the snapshot PATH
	env         []string // the snapshot, with DOCKER_HOST pinned for the default context
	contextArgs []string
}

// Bind resolves the client's context and endpoint once: `docker context inspect` with the
// environment captured at construction. Concurrent first calls make one inspect; a failure
// leaves the CLI unbound and the next call retries; once bound, the binding never changes.
// Every other method binds first. Errors: [ErrClientNotFound] (also [ErrUnreachable]) when the
// binary is missing; [ErrUnreachable] when the client could not resolve its context, or when its
// answer lacks a non-empty Name and Endpoints.docker.Host (the message then says it could not
// "resolve a context and endpoint"); [*TimeoutError]; the context's error when ctx ends.
func (c *cliDriver) Bind(ctx context.Context) (Binding, error) {
	b, err := c.ensureBound(ctx)
	if err != nil {
		return Binding{}, err
	}
	return b.Binding, nil
}

// bindOnce is a driver's binding, made at most once and never changed: the first callers bind
// one at a time (concurrent first calls resolve the context once), a failure leaves it unbound
// for the next call to retry, later callers read it without waiting, and a caller waiting for
// another's binding can give up with its context. Both drivers bind through it.
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

func (c *cliDriver) ensureBound(ctx context.Context) (*bound, error) {
	b, fresh, err := c.bound.get(ctx, c.bind)
	if err != nil || !fresh {
		return b, err
	}
	c.log.Info("docker context bound", zap.String("context", b.Context), zap.String("endpoint", b.Endpoint))
	return b, nil
}

func (c *cliDriver) bind(ctx context.Context) (*bound, error) {
	bin, err := lookPath(c.cfg.DockerPath, envValue(c.env, "PATH"))
	if err != nil {
		return nil, err
	}
	pre := &bound{bin: bin, env: c.env}
	args := []string{"context", "inspect", "--format", "{{json .}}"}
	res, err := c.runWith(ctx, pre, invocation{args: args, timeout: c.cfg.CommandTimeout})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("the docker client could not resolve its context: %w",
			&CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrUnreachable})
	}
	name, host, err := parseContext(res.Stdout)
	if err != nil {
		return nil, err
	}
	env := c.env
	if name == "default" {
		// The virtual default context reads DOCKER_HOST even under --context default; pinning it
		// keeps the endpoint that was resolved.
		env = setEnv(env, "DOCKER_HOST", host)
	}
	return &bound{
		Binding:     Binding{Context: name, Endpoint: host},
		bin:         bin,
		env:         env,
		contextArgs: []string{"--context", name},
	}, nil
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

// lookPath finds the client binary the way exec.LookPath would, but against the PATH of the
// environment snapshot rather than the live one.
func lookPath(file, pathEnv string) (string, error) {
	notFound := func(err error) (string, error) {
		return "", fmt.Errorf("%w: %w: %q was not found on PATH (%v); set Config.DockerPath to the Docker CLI binary",
			ErrUnreachable, ErrClientNotFound, file, err)
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

// setEnv returns a copy of env with key set to value (every earlier entry for key dropped).
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
