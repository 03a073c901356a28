package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// pipeGrace is how long a stopped child's stderr and a leftover pipe holder are waited for.
const pipeGrace = 3 * time.Second

// CLI is the [Engine] over the docker client binary. Every operation spawns one client process
// (never through a shell) with the environment captured at construction. It is safe for
// concurrent use.
type CLI struct {
	cfg     Config
	log     *zap.Logger
	env     []string
	bindSem chan struct{}
	bound   atomic.Pointer[bound]
}

var _ Engine = (*CLI)(nil)

type options struct {
	log *zap.Logger
}

// Option configures a [CLI].
type Option func(*options) error

// WithLogger sets the logger (default zap.NewNop()). Commands log at Debug, binding at Info.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("with logger: %w: nil logger", ErrInvalid)
		}
		o.log = l
		return nil
	}
}

// NewCLI returns a CLI for cfg (zero fields take their defaults) and snapshots the process
// environment: every child it spawns gets that snapshot, never the live environment. It makes
// no engine call; the daemon is bound on first use. It fails with [ErrInvalid] for a
// configuration no command could honour (for example a label under [LabelPrefix]).
func NewCLI(cfg Config, opts ...Option) (*CLI, error) {
	o := options{log: zap.NewNop()}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &CLI{
		cfg:     cfg,
		log:     o.log.Named("docker"),
		env:     os.Environ(),
		bindSem: make(chan struct{}, 1),
	}, nil
}

// Config returns the configuration the CLI runs with, defaults filled in.
func (c *CLI) Config() Config { return c.cfg.withDefaults() }

// ---------------------------------------------------------------------------------------------
// The runner.

// invocation is one run of the client.
type invocation struct {
	args    []string
	stdin   []byte        // nil: the null device
	timeout time.Duration // > 0: the invocation's own budget, reported as *TimeoutError
	// readLimit > 0 keeps at most this many stdout bytes; reaching it stops the child.
	readLimit int
	// consume, when set, reads stdout itself; if it returns before EOF the child is stopped.
	consume func(io.Reader) error
	// maxOutput > 0 is the budget of stdout and stderr together.
	maxOutput int64
	// output, when set, sees each piece of stdout (1) and stderr (2) as it is read, within
	// maxOutput; the runner collects both readers before it returns.
	output func(stream int, p []byte)
}

// result is what the client returned. When Stopped, the runner killed the child after it had
// read what it needed, and ExitCode means nothing.
type result struct {
	ExitCode   int
	Stdout     []byte // with consume set: nil
	Stderr     []byte
	StdoutRead int64 // bytes read from stdout, whoever read them
	Stopped    bool
}

// run invokes the bound client: argv is the binary, the bound context, then inv.args.
func (c *CLI) run(ctx context.Context, inv invocation) (result, error) {
	b, err := c.ensureBound(ctx)
	if err != nil {
		return result{}, err
	}
	return c.runWith(ctx, b, inv)
}

// child is one started client process.
type child struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	reaping bool
	waited  chan error
}

// kill stops the child and its process group. Before the child is being reaped its pid cannot
// have been reused, so the whole group is signalled; after that only the process itself is,
// through its handle.
func (ch *child) kill() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.reaping {
		_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	_ = ch.cmd.Process.Kill()
}

// reap starts waiting for the child (once).
func (ch *child) reap() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.reaping {
		return
	}
	ch.reaping = true
	go func() { ch.waited <- ch.cmd.Wait() }()
}

type readOutcome struct {
	data []byte
	err  error
}

// errOverBudget ends a reader whose output budget is spent.
var errOverBudget = errors.New("output budget spent")

func (c *CLI) runWith(ctx context.Context, b *bound, inv invocation) (res result, err error) {
	if inv.maxOutput > 0 && (inv.stdin != nil || inv.readLimit > 0 || inv.consume != nil) {
		panic("docker: maxOutput is exclusive with stdin, readLimit and consume")
	}
	op := "docker"
	if len(inv.args) > 0 {
		op = inv.args[0]
	}
	if err := ctx.Err(); err != nil {
		return result{}, fmt.Errorf("docker %s: %w", op, err)
	}
	start := time.Now()
	defer func() {
		c.log.Debug("docker command", zap.String("op", op), zap.Strings("args", firstArgs(inv.args)),
			zap.Int("exit_code", res.ExitCode), zap.Duration("elapsed", time.Since(start)), zap.Error(err))
	}()

	outR, outW, err := os.Pipe()
	if err != nil {
		return result{}, fmt.Errorf("docker %s: stdout pipe: %w", op, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return result{}, fmt.Errorf("docker %s: stderr pipe: %w", op, err)
	}
	argv := append(append([]string(nil), b.contextArgs...), inv.args...)
	cmd := exec.Command(b.bin, argv...)
	cmd.Env = b.env
	cmd.Stdout, cmd.Stderr = outW, errW
	if inv.stdin != nil {
		cmd.Stdin = bytes.NewReader(inv.stdin)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return result{}, fmt.Errorf("%w: %w: %q could not be started (%v); set Config.DockerPath to the Docker CLI binary",
				ErrUnreachable, ErrClientNotFound, b.bin, err)
		}
		return result{}, fmt.Errorf("%w: start docker %s: %w", ErrUnreachable, op, err)
	}
	outW.Close()
	errW.Close()
	ch := &child{cmd: cmd, waited: make(chan error, 1)}

	var budget *outputBudget
	if inv.maxOutput > 0 {
		budget = &outputBudget{max: inv.maxOutput}
	}
	outTrack := &trackReader{r: tap(budget.wrap(outR), StreamStdout, inv.output)}
	outDone := make(chan readOutcome, 1)
	errDone := make(chan readOutcome, 1)
	go func() {
		data, err := readStdout(outTrack, inv)
		outDone <- readOutcome{data, err}
	}()
	go func() {
		data, err := io.ReadAll(tap(budget.wrap(errR), StreamStderr, inv.output))
		errDone <- readOutcome{data, err}
	}()

	var timer <-chan time.Time
	if inv.timeout > 0 {
		t := time.NewTimer(inv.timeout)
		defer t.Stop()
		timer = t.C
	}

	type decision int
	const (
		undecided decision = iota
		exited             // both pipes reached EOF
		stopped            // stdout's reader is done before EOF
		overBudget
		timedOut
		cancelled
	)
	var (
		d          decision
		out, serr  *readOutcome
		abnormalAt = func() decision {
			if ctx.Err() != nil {
				return cancelled
			}
			return timedOut
		}
	)
	for d == undecided {
		select {
		case o := <-outDone:
			out = &o
			switch {
			case errors.Is(o.err, errOverBudget):
				d = overBudget
			case !outTrack.eof.Load():
				d = stopped
			case serr != nil:
				d = exited
			}
		case o := <-errDone:
			serr = &o
			switch {
			case errors.Is(o.err, errOverBudget):
				d = overBudget
			case out != nil:
				d = exited
			}
		case <-timer:
			d = abnormalAt()
		case <-ctx.Done():
			d = cancelled
		}
	}

	// finish kills the child unless it exited on its own, closes both pipes so no reader can
	// block, collects the readers and reaps the child.
	finish := func(kill bool) error {
		if kill {
			ch.kill()
		}
		outR.Close()
		errR.Close()
		if out == nil {
			o := <-outDone
			out = &o
		}
		if serr == nil {
			o := <-errDone
			serr = &o
		}
		ch.reap()
		return <-ch.waited
	}

	switch d {
	case exited:
		ch.reap()
		select {
		case <-ch.waited:
			ch.waited <- nil // finish reads it again
		case <-timer:
			d = abnormalAt()
		case <-ctx.Done():
			d = cancelled
		}
		if d == exited {
			_ = finish(false)
			res = result{ExitCode: cmd.ProcessState.ExitCode(), Stdout: out.data, Stderr: serr.data, StdoutRead: outTrack.n.Load()}
			return res, nil
		}
	case stopped:
		ch.kill()
		outR.Close()
		grace := time.NewTimer(pipeGrace)
		select {
		case o := <-errDone:
			serr = &o
		case <-grace.C:
		case <-timer:
		case <-ctx.Done():
		}
		grace.Stop()
		_ = finish(false)
		return result{ExitCode: -1, Stdout: out.data, Stderr: serr.data, StdoutRead: outTrack.n.Load(), Stopped: true}, nil
	}
	_ = finish(true)
	switch d {
	case overBudget:
		return result{}, &OutputLimitError{Limit: inv.maxOutput}
	case timedOut:
		return result{}, &TimeoutError{Args: inv.args, Timeout: inv.timeout}
	}
	return result{}, fmt.Errorf("docker %s: %w", op, ctx.Err())
}

// readStdout reads the child's stdout the way inv asks.
func readStdout(r io.Reader, inv invocation) ([]byte, error) {
	if inv.consume != nil {
		return nil, inv.consume(r)
	}
	if inv.readLimit > 0 {
		buf := make([]byte, inv.readLimit)
		n, err := io.ReadFull(r, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = nil
		}
		return buf[:n], err
	}
	return io.ReadAll(r)
}

// trackReader counts bytes and notes whether the stream reached EOF.
type trackReader struct {
	r   io.Reader
	n   atomic.Int64
	eof atomic.Bool
}

func (t *trackReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.n.Add(int64(n))
	if errors.Is(err, io.EOF) {
		t.eof.Store(true)
	}
	return n, err
}

// tap hands what r reads to output (nil: r itself), leaving out a read that overran the
// output budget.
func tap(r io.Reader, stream int, output func(int, []byte)) io.Reader {
	if output == nil {
		return r
	}
	return tapReader{r: r, stream: stream, output: output}
}

type tapReader struct {
	r      io.Reader
	stream int
	output func(int, []byte)
}

func (t tapReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && !errors.Is(err, errOverBudget) {
		t.output(t.stream, p[:n])
	}
	return n, err
}

// outputBudget is one byte budget shared by stdout and stderr.
type outputBudget struct {
	max  int64
	used atomic.Int64
}

func (b *outputBudget) wrap(r io.Reader) io.Reader {
	if b == nil {
		return r
	}
	return budgetReader{r: r, b: b}
}

type budgetReader struct {
	r io.Reader
	b *outputBudget
}

func (br budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if br.b.used.Add(int64(n)) > br.b.max {
		return n, errOverBudget
	}
	return n, err
}

func firstArgs(args []string) []string {
	if len(args) > 6 {
		return args[:6]
	}
	return args
}

// ---------------------------------------------------------------------------------------------
// The engine seam over the client.

// fail builds the error of a non-zero answer to args about target.
func fail(args []string, target string, res result) error {
	return failure(args, target, res)
}

func failure(args []string, target string, res result) *CommandError {
	return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: classify(args, target, res.Stderr)}
}

// control runs a short control command under Config.CommandTimeout.
func (c *CLI) control(ctx context.Context, args ...string) (result, error) {
	return c.run(ctx, invocation{args: args, timeout: c.cfg.CommandTimeout})
}

func checkTarget(target string) error {
	if target == "" || strings.HasPrefix(target, "-") || strings.ContainsAny(target, ":\x00") {
		return fmt.Errorf("%w: container reference %q", ErrInvalid, target)
	}
	return nil
}

// ServerOS implements [Engine].
func (c *CLI) ServerOS(ctx context.Context) (string, error) {
	args := []string{"version", "--format", "{{.Server.Os}}"}
	res, err := c.control(ctx, args...)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fail(args, "", res)
	}
	return strings.ToLower(strings.TrimSpace(string(res.Stdout))), nil
}

// inspectDoc is the part of `container inspect` this package reads.
type inspectDoc struct {
	ID      string `json:"Id"`
	Name    string `json:"Name"`
	Image   string `json:"Image"`
	Created string `json:"Created"`
	State   struct {
		Status   string `json:"Status"`
		Running  bool   `json:"Running"`
		Paused   bool   `json:"Paused"`
		ExitCode int    `json:"ExitCode"`
	} `json:"State"`
	Config struct {
		Image  string            `json:"Image"`
		User   string            `json:"User"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig struct {
		CapDrop []string `json:"CapDrop"`
	} `json:"HostConfig"`
	NetworkSettings struct {
		Networks map[string]struct {
			NetworkID string `json:"NetworkID"`
		} `json:"Networks"`
	} `json:"NetworkSettings"`
}

// Inspect implements [Engine].
func (c *CLI) Inspect(ctx context.Context, target string) (ContainerInfo, error) {
	if err := checkTarget(target); err != nil {
		return ContainerInfo{}, fmt.Errorf("inspect: %w", err)
	}
	args := []string{"container", "inspect", "--format", "{{json .}}", target}
	res, err := c.control(ctx, args...)
	if err != nil {
		return ContainerInfo{}, err
	}
	if res.ExitCode != 0 {
		return ContainerInfo{}, fail(args, target, res)
	}
	var doc inspectDoc
	if err := json.Unmarshal(res.Stdout, &doc); err != nil {
		return ContainerInfo{}, fmt.Errorf("inspect %s: unreadable answer: %w", target, err)
	}
	if doc.ID == "" {
		return ContainerInfo{}, fmt.Errorf("inspect %s: answer without an ID", target)
	}
	info := ContainerInfo{
		ID:       doc.ID,
		Name:     strings.TrimPrefix(doc.Name, "/"),
		Image:    doc.Config.Image,
		ImageID:  doc.Image,
		Status:   doc.State.Status,
		Running:  doc.State.Running,
		Paused:   doc.State.Paused,
		ExitCode: doc.State.ExitCode,
		Labels:   doc.Config.Labels,
		User:     strings.TrimSpace(doc.Config.User),
		CapDrop:  doc.HostConfig.CapDrop,
		Networks: make(map[string]string, len(doc.NetworkSettings.Networks)),
	}
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	for name, n := range doc.NetworkSettings.Networks {
		info.Networks[name] = n.NetworkID
	}
	if t, err := time.Parse(time.RFC3339Nano, doc.Created); err == nil {
		info.Created = t
	}
	return info, nil
}

// ImageExists implements [Engine].
func (c *CLI) ImageExists(ctx context.Context, image string) (bool, error) {
	if image == "" || strings.HasPrefix(image, "-") {
		return false, fmt.Errorf("image exists: %w: image reference %q", ErrInvalid, image)
	}
	args := []string{"image", "inspect", "--format", "{{.Id}}", image}
	res, err := c.control(ctx, args...)
	if err != nil {
		return false, err
	}
	if res.ExitCode == 0 {
		return true, nil
	}
	if err := fail(args, image, res); !errors.Is(err, ErrNotFound) {
		return false, err
	}
	return false, nil
}

// Run implements [Engine]. Config.Labels are appended after the spec's labels.
func (c *CLI) Run(ctx context.Context, spec CreateSpec) (string, error) {
	return c.make(ctx, spec, cliRunArgs)
}

// Create implements [Engine].
func (c *CLI) Create(ctx context.Context, spec CreateSpec) (string, error) {
	return c.make(ctx, spec, cliCreateArgs)
}

func (c *CLI) make(ctx context.Context, spec CreateSpec, render func(CreateSpec) []string) (string, error) {
	labels, err := MergeLabels(spec.Labels, c.cfg.Labels)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", spec.Name, err)
	}
	spec.Labels = labels
	if err := spec.validate(); err != nil {
		return "", err
	}
	args := render(spec)
	res, err := c.control(ctx, args...)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fail(args, spec.Name, res)
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) == 0 {
		return "", fmt.Errorf("create container %s: the client printed no container ID", spec.Name)
	}
	return lines[len(lines)-1], nil
}

// Start implements [Engine].
func (c *CLI) Start(ctx context.Context, target string) error {
	return c.simple(ctx, "start", target)
}

// Pause implements [Engine].
func (c *CLI) Pause(ctx context.Context, target string) error {
	return c.simple(ctx, "pause", target)
}

// Unpause implements [Engine].
func (c *CLI) Unpause(ctx context.Context, target string) error {
	err := c.simple(ctx, "unpause", target)
	if errors.Is(err, ErrNotPaused) || errors.Is(err, ErrNotFound) {
		c.log.Debug("unpause found nothing to lift", zap.String("container", target), zap.Error(err))
		return nil
	}
	return err
}

func (c *CLI) simple(ctx context.Context, verb, target string) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("%s: %w", verb, err)
	}
	args := []string{verb, target}
	res, err := c.control(ctx, args...)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fail(args, target, res)
	}
	return nil
}

// Remove implements [Engine]. Both the 20.10 client and current ones exit 0 for a missing
// target (printing "No such container" on stderr); only stdout echoing the target proves a
// removal.
func (c *CLI) Remove(ctx context.Context, target string) (RemoveOutcome, error) {
	if err := checkTarget(target); err != nil {
		return 0, fmt.Errorf("remove: %w", err)
	}
	args := []string{"rm", "-f", target}
	res, err := c.control(ctx, args...)
	if err != nil {
		return 0, err
	}
	if res.ExitCode == 0 {
		if strings.TrimSpace(string(res.Stdout)) == target {
			return Removed, nil
		}
		return Absent, nil
	}
	if err := fail(args, target, res); !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	return Absent, nil
}

// Exec implements [Engine].
func (c *CLI) Exec(ctx context.Context, req ExecRequest) (ExecOutput, error) {
	if err := checkTarget(req.Target); err != nil {
		return ExecOutput{}, fmt.Errorf("exec: %w", err)
	}
	if len(req.Argv) == 0 {
		return ExecOutput{}, fmt.Errorf("exec in %s: %w: empty argv", req.Target, ErrInvalid)
	}
	if req.MaxOutputBytes < 0 {
		return ExecOutput{}, fmt.Errorf("exec in %s: %w: negative output budget", req.Target, ErrInvalid)
	}
	args := []string{"exec"}
	if req.User != "" {
		args = append(args, "--user", req.User)
	}
	if req.WorkDir != "" {
		args = append(args, "-w", req.WorkDir)
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return ExecOutput{}, fmt.Errorf("exec in %s: %w: environment entry %q is not K=V", req.Target, ErrInvalid, kv)
		}
		args = append(args, "-e", kv)
	}
	args = append(args, req.Target)
	args = append(args, req.Argv...)
	res, err := c.run(ctx, invocation{args: args, maxOutput: req.MaxOutputBytes, output: req.Output})
	if err != nil {
		return ExecOutput{}, err
	}
	out := ExecOutput{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr}
	if isFrozenRefusal(res.ExitCode, res.Stdout, res.Stderr) {
		return out, &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPaused}
	}
	return out, nil
}

// Stat implements [Engine]. It reads the header only: the client is stopped as soon as the
// header is in hand, so a directory's subtree or a file's body never crosses the pipe.
func (c *CLI) Stat(ctx context.Context, target, guestPath string) (*Entry, error) {
	e, _, err := c.copyOut(ctx, target, guestPath, -1)
	if errors.Is(err, ErrPathAbsent) {
		return nil, nil
	}
	return e, err
}

// Read implements [Engine].
func (c *CLI) Read(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error) {
	if maxBytes < 0 {
		return nil, nil, fmt.Errorf("read %s: %w: negative byte cap", guestPath, ErrInvalid)
	}
	return c.copyOut(ctx, target, guestPath, maxBytes)
}

// fullID matches a full container ID: the one target that confirms the older client's ambiguous
// absence answer by itself.
var fullID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// copyOut runs `cp <target>:<guestPath> -` and reads the first entry of the archive as it
// streams: the header (bounded metadata) and, when maxBytes >= 0 and the entry is a regular file
// no larger than maxBytes, its body. The client is stopped as soon as that is read.
func (c *CLI) copyOut(ctx context.Context, target, guestPath string, maxBytes int64) (*Entry, []byte, error) {
	verb := "read"
	if maxBytes < 0 {
		verb = "stat"
	}
	if err := checkTarget(target); err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", verb, guestPath, err)
	}
	if !strings.HasPrefix(guestPath, "/") || strings.ContainsRune(guestPath, 0) {
		return nil, nil, fmt.Errorf("%s %s: %w: guest path must be absolute", verb, guestPath, ErrInvalid)
	}
	var (
		entry *Entry
		body  []byte
		rerr  error
	)
	consume := func(r io.Reader) error {
		if maxBytes < 0 {
			entry, rerr = ReadHeader(r)
		} else {
			entry, body, rerr = ReadEntry(r, maxBytes)
		}
		return rerr
	}
	args := []string{"cp", target + ":" + guestPath, "-"}
	res, err := c.run(ctx, invocation{args: args, timeout: c.cfg.CommandTimeout, consume: consume})
	if err != nil {
		return nil, nil, err
	}
	if res.StdoutRead == 0 && !res.Stopped && res.ExitCode != 0 {
		return nil, nil, c.copyOutFailure(ctx, verb, target, guestPath, args, res)
	}
	var capErr *CapExceededError
	var shortErr *ShortBodyError
	switch {
	case rerr == nil:
		return entry, body, nil
	case errors.As(rerr, &capErr):
		capErr.Path = guestPath
		return entry, nil, capErr
	case errors.As(rerr, &shortErr):
		shortErr.Path = guestPath
		return entry, nil, shortErr
	case errors.Is(rerr, ErrNoTarHeader) && res.ExitCode != 0 && !res.Stopped:
		return nil, nil, fmt.Errorf("%s %s: docker returned no tar header: %w", verb, guestPath, fail(args, target, res))
	}
	return nil, nil, fmt.Errorf("%s %s: docker returned an unusable archive: %w", verb, guestPath, rerr)
}

// copyOutFailure classifies a copy that failed before any byte of archive: path absence (both
// forms), the container's absence, or a failure.
func (c *CLI) copyOutFailure(ctx context.Context, verb, target, guestPath string, args []string, res result) error {
	if isPathAbsentNamed(res.Stderr, guestPath) {
		return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPathAbsent}
	}
	if isPathAbsentOlderClient(res.Stderr, target, guestPath) {
		if !fullID.MatchString(target) {
			return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPathAbsentUnconfirmed}
		}
		info, err := c.Inspect(ctx, target)
		if err != nil {
			return fmt.Errorf("%s %s: confirm instance: %w", verb, guestPath, err)
		}
		if info.ID != target {
			return fmt.Errorf("%s %s: confirm instance: %s answered as %s", verb, guestPath, target, info.ID)
		}
		return &CommandError{Args: args, ExitCode: res.ExitCode, Stderr: res.Stderr, Class: ErrPathAbsent}
	}
	return fmt.Errorf("docker could not %s %s: %w", verb, guestPath, fail(args, target, res))
}

// CopyIn implements [Engine].
func (c *CLI) CopyIn(ctx context.Context, target string, tarball []byte) error {
	if err := checkTarget(target); err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	if len(tarball) == 0 {
		return fmt.Errorf("copy into %s: %w: empty archive", target, ErrInvalid)
	}
	args := []string{"cp", "-", target + ":/"}
	res, err := c.run(ctx, invocation{args: args, stdin: tarball, timeout: c.cfg.CommandTimeout})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		ce := failure(args, target, res)
		if ce.Class == nil {
			// The docker 28 client answers a missing container here with `destination
			// "<target>:/" must be a directory`, naming no absence; ask the engine instead.
			if _, err := c.Inspect(ctx, target); errors.Is(err, ErrNotFound) {
				ce.Class = ErrNotFound
			}
		}
		return fmt.Errorf("copy into %s: %w", target, ce)
	}
	return nil
}

// filterArgs renders label filters in key order; an empty value means "present".
func filterArgs(labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		if v := labels[k]; v != "" {
			args = append(args, "--filter", "label="+k+"="+v)
		} else {
			args = append(args, "--filter", "label="+k)
		}
	}
	return args
}

func checkFilters(labels map[string]string) error {
	for k, v := range labels {
		if err := checkLabel(Label{k, v}); err != nil {
			return err
		}
	}
	return nil
}

// ListNames implements [Engine].
func (c *CLI) ListNames(ctx context.Context, labelFilters map[string]string, nameFilter string) ([]string, error) {
	if err := checkFilters(labelFilters); err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	args := []string{"ps", "-a", "--format", "{{.Names}}"}
	args = append(args, filterArgs(labelFilters)...)
	if nameFilter != "" {
		args = append(args, "--filter", "name="+nameFilter)
	}
	res, err := c.control(ctx, args...)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("list containers: %w", fail(args, "", res))
	}
	var names []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	return names, nil
}

// eventDoc is one line of `docker events --format {{json .}}`.
type eventDoc struct {
	Type   string `json:"Type"`
	Action string `json:"Action"`
	Actor  struct {
		ID         string            `json:"ID"`
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	TimeNano int64 `json:"timeNano"`
}

// maxEventLine bounds one event line (labels travel in the attributes).
const maxEventLine = 1 << 20

// Events implements [Engine]. The stream starts from the moment of the call (--since), so events
// that happen while the client is still connecting are not lost.
func (c *CLI) Events(ctx context.Context, filter EventFilter) (<-chan Event, error) {
	if err := checkFilters(filter.Labels); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	b, err := c.ensureBound(ctx)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	args := []string{"events", "--format", "{{json .}}",
		"--since", strconv.FormatInt(since.Unix(), 10) + "." + fmt.Sprintf("%09d", since.Nanosecond()),
		"--filter", "type=container"}
	args = append(args, filterArgs(filter.Labels)...)
	for _, n := range filter.Containers {
		args = append(args, "--filter", "container="+n)
	}
	for _, a := range filter.Actions {
		args = append(args, "--filter", "event="+a)
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("events: stdout pipe: %w", err)
	}
	cmd := exec.Command(b.bin, append(append([]string(nil), b.contextArgs...), args...)...)
	cmd.Env = b.env
	cmd.Stdout = outW
	var stderr limitedBuffer
	stderr.max = 64 << 10
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%w: start docker events: %w", ErrUnreachable, err)
	}
	outW.Close()
	ch := &child{cmd: cmd, waited: make(chan error, 1)}
	events := make(chan Event)
	stopWatch := make(chan struct{})
	go func() {
		// Whoever ends first, ctx or the stream, the child is killed and reaped here.
		select {
		case <-ctx.Done():
			ch.kill()
			outR.Close()
		case <-stopWatch:
		}
	}()
	go func() {
		defer close(events)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
		for sc.Scan() {
			var doc eventDoc
			if err := json.Unmarshal(sc.Bytes(), &doc); err != nil || doc.Type != "container" {
				continue
			}
			ev := Event{Action: doc.Action, ID: doc.Actor.ID, Name: doc.Actor.Attributes["name"],
				Attributes: doc.Actor.Attributes, Time: time.Unix(0, doc.TimeNano)}
			select {
			case events <- ev:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
		}
		scanErr := sc.Err()
		close(stopWatch)
		ch.kill()
		outR.Close()
		ch.reap()
		<-ch.waited
		if ctx.Err() != nil {
			return
		}
		end := fmt.Errorf("docker events ended: exit %d: %s", cmd.ProcessState.ExitCode(), strings.TrimSpace(stderr.String()))
		if cls := classify(args, "", stderr.Bytes()); cls != nil {
			end = fmt.Errorf("%w: %w", cls, end)
		}
		if scanErr != nil {
			end = fmt.Errorf("%w (read: %v)", end, scanErr)
		}
		select {
		case events <- Event{Err: end}:
		case <-ctx.Done():
		}
	}()
	return events, nil
}

// limitedBuffer keeps the first max bytes written to it and discards the rest.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.buf.Bytes()...)
}

func (l *limitedBuffer) String() string { return string(l.Bytes()) }
