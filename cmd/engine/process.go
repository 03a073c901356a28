package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// The process verbs, as docker's for containers: ps, logs, attach and kill reach the
// processes of the sandbox a key names, which "engine run --detach" started them in. They
// acquire that key (the same --scope, --thread, --agent, --kind and --image as the start)
// and so reach the sandbox on whichever engine holds it.

const psUsage = `Usage: engine ps [flags]

Lists the processes of the sandbox the key names (the flags of "engine run --detach" that
started them): ID, state, PID, transport, bytes of output, start, and the exit.

Flags:
`

const logsUsage = `Usage: engine logs [flags] PROCESS

Prints a process's output from --from (a byte sequence, default 0) to its current end, or
with --follow until the process ends. Output the engine no longer holds is reported on
stderr (where and how much), never skipped silently.

Flags:
`

const attachUsage = `Usage: engine attach [flags] PROCESS

Connects to a running process: its output from --from (default: what it writes from now on)
to this terminal, this terminal's input to its stdin. With a terminal on both sides the
local one is put in raw mode and its size follows. Ctrl-C on a process without a terminal
detaches, leaving it running. Exits with the process's exit code once it ends.

Flags:
`

const killUsage = `Usage: engine kill [flags] PROCESS

Sends a signal to a process's group: TERM by default, or --signal INT, KILL, HUP, QUIT,
USR1, USR2, or a number.

Flags:
`

// sandboxFlags name the sandbox of a process verb: the key and the spec that reach it.
type sandboxFlags struct {
	conn                              natsFlags
	logs                              logFlags
	image, kind, scope, thread, agent string
	workDir                           string
	callTimeout                       time.Duration
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	f.conn.register(fs)
	fs.StringVar(&f.image, "image", envOr("MAF_SANDBOX_IMAGE", images.BusyboxTag), "workload image (env MAF_SANDBOX_IMAGE)")
	fs.StringVar(&f.kind, "kind", "run", "workload kind")
	fs.StringVar(&f.scope, "scope", envOr("MAF_SANDBOX_SCOPE", "run"), "key scope (env MAF_SANDBOX_SCOPE)")
	fs.StringVar(&f.thread, "thread", "", "key thread (required: the one the start printed)")
	fs.StringVar(&f.agent, "agent", "run", "key agent")
	fs.StringVar(&f.workDir, "workdir", "", "the storage base in the sandbox (default: the engine's)")
	fs.DurationVar(&f.callTimeout, "call-timeout", 5*time.Minute, "bound on each call to the engine")
	f.logs.register(fs)
	_ = fs.Set("log-level", envOr("MAF_SANDBOX_LOG_LEVEL", "warn"))
}

// processSpec is the spec a detached start and the process verbs acquire with.
func processSpec(kind, image, workDir string) (sandbox.Spec, error) {
	opts := []sandbox.SpecOption{sandbox.WithImage(image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)}
	if workDir != "" {
		opts = append(opts, sandbox.WithWorkDir(workDir))
	}
	return sandbox.NewSpec(kind, opts...)
}

// open connects and acquires the key's sandbox; done closes the connection.
func (f *sandboxFlags) open(ctx context.Context, verb string) (*client.Sandbox, func(), error) {
	if f.thread == "" {
		return nil, nil, fmt.Errorf("%s: --thread is required: the thread the process was started under", verb)
	}
	spec, err := processSpec(f.kind, f.image, f.workDir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", verb, err)
	}
	log, err := f.logs.logger()
	if err != nil {
		return nil, nil, err
	}
	nc, err := f.conn.connect("maf-sandbox engine "+verb, log)
	if err != nil {
		return nil, nil, err
	}
	done := func() { nc.Close(); _ = log.Sync() }
	b, err := client.New(ctx, nc, client.WithPrefix(f.conn.prefix), client.WithLogger(log), client.WithCallTimeout(f.callTimeout))
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("%s: %w", verb, err)
	}
	key := sandbox.Key{Scope: f.scope, ThreadID: f.thread, AgentID: f.agent}
	sb, err := b.Acquire(ctx, key, spec)
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("%s: acquire %s: %w", verb, key, err)
	}
	log.Debug("acquired", zap.String("key", key.String()), zap.String("engine", sb.(*client.Sandbox).Engine()))
	return sb.(*client.Sandbox), done, nil
}

// processVerb is one of ps, logs, attach, kill.
type processVerb struct {
	sb     sandboxFlags
	name   string
	follow bool
	from   int64
	signal string
	args   []string
}

// processCmd parses args for the verb name and runs it; it returns the exit code attach
// gives (the process's).
func processCmd(ctx context.Context, name string, args []string) (int, error) {
	v := &processVerb{name: name, from: -1}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	v.sb.register(fs)
	usage := map[string]string{"ps": psUsage, "logs": logsUsage, "attach": attachUsage, "kill": killUsage}[name]
	switch name {
	case "logs":
		fs.BoolVar(&v.follow, "follow", false, "follow the output until the process ends")
		fs.Int64Var(&v.from, "from", 0, "the byte sequence to start from")
	case "attach":
		fs.Int64Var(&v.from, "from", -1, "the byte sequence to start from (default: the output's current end)")
	case "kill":
		fs.StringVar(&v.signal, "signal", "TERM", "the signal: TERM, INT, KILL, HUP, QUIT, USR1, USR2 or a number")
	}
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	v.args = fs.Args()
	switch {
	case name == "ps" && len(v.args) != 0:
		return 0, fmt.Errorf("ps: no arguments: the flags name the sandbox")
	case name != "ps" && len(v.args) != 1:
		return 0, fmt.Errorf("%s: name one process", name)
	}
	sb, done, err := v.sb.open(ctx, name)
	if err != nil {
		return 0, err
	}
	defer done()
	switch name {
	case "ps":
		return 0, v.ps(ctx, sb, os.Stdout)
	case "logs":
		return 0, v.logs(ctx, sb)
	case "attach":
		return v.attach(ctx, sb)
	}
	return 0, v.kill(ctx, sb)
}

func (v *processVerb) ps(ctx context.Context, sb *client.Sandbox, out io.Writer) error {
	ps, err := sb.ListProcesses(ctx)
	if err != nil {
		return fmt.Errorf("ps: %w", err)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATE\tPID\tTRANSPORT\tOUTPUT\tSTARTED\tCOMMAND\tEXIT")
	for _, p := range ps {
		started := ""
		if !p.StartedAt.IsZero() {
			started = p.StartedAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.State, p.PID, p.Transport, p.Output, started,
			truncateCommand(strings.Join(p.Argv, " ")), exitText(p.Exit))
	}
	return w.Flush()
}

func truncateCommand(s string) string {
	if len(s) > 40 {
		return s[:39] + "…"
	}
	return s
}

// exitText is how ps and attach show an end.
func exitText(e *sandbox.ProcessExit) string {
	if e == nil {
		return ""
	}
	switch e.Reason {
	case sandbox.ExitExited:
		return "exited " + strconv.Itoa(e.ExitCode)
	case sandbox.ExitLost:
		return "lost"
	}
	if e.Signal != 0 {
		return string(e.Reason) + " (SIG" + e.Signal.String() + ")"
	}
	return string(e.Reason)
}

// logs prints the output from --from to its end, or with --follow to the process's end.
func (v *processVerb) logs(ctx context.Context, sb *client.Sandbox) error {
	wait := time.Duration(0)
	if v.follow {
		wait = 10 * time.Second
	}
	seq := v.from
	for {
		out, err := sb.ReadProcessOutput(ctx, v.args[0], seq, sandbox.ReadOptions{Wait: wait})
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		printCut(out.Cut)
		for _, c := range out.Chunks {
			writeChunk(c)
		}
		seq = out.Next
		if out.Exit != nil || (!v.follow && len(out.Chunks) == 0 && out.Cut == nil) {
			return nil
		}
	}
}

func printCut(c *sandbox.OutputCut) {
	if c != nil {
		fmt.Fprintf(os.Stderr, "[engine: %d bytes of output, %d to %d, are no longer held (%s)]\n", c.Bytes(), c.From, c.To, c.Reason)
	}
}

func writeChunk(c sandbox.OutputChunk) {
	w := io.Writer(os.Stdout)
	if c.Stream == sandbox.StreamStderr {
		w = os.Stderr
	}
	_, _ = w.Write(c.Data)
}

func (v *processVerb) kill(ctx context.Context, sb *client.Sandbox) error {
	sig, err := sandbox.ParseSignal(v.signal)
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if err := sb.SignalProcess(ctx, v.args[0], sig); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

// attach streams the process's output here and this input there until the process ends; it
// returns the process's exit code (1 when it was lost or killed by the engine).
func (v *processVerb) attach(ctx context.Context, sb *client.Sandbox) (int, error) {
	id := v.args[0]
	p, err := v.find(ctx, sb, id)
	if err != nil {
		return 0, err
	}
	from := v.from
	if from < 0 {
		from = p.Output
	}
	if p.Exit == nil && p.Stdin {
		restore := attachInput(ctx, sb, id, p.Terminal != nil)
		defer restore()
	}
	exit, err := client.FollowProcess(ctx, sb, id, from, 10*time.Second, writeChunk, func(c sandbox.OutputCut) { printCut(&c) })
	if errors.Is(err, context.Canceled) {
		return 0, nil // detached
	}
	if err != nil {
		return 0, fmt.Errorf("attach: %w", err)
	}
	if exit.Reason == sandbox.ExitExited || exit.ExitCode > 0 {
		return exit.ExitCode, nil
	}
	return 1, nil
}

func (v *processVerb) find(ctx context.Context, sb *client.Sandbox, id string) (sandbox.Process, error) {
	ps, err := sb.ListProcesses(ctx)
	if err != nil {
		return sandbox.Process{}, fmt.Errorf("attach: %w", err)
	}
	for _, p := range ps {
		if p.ID == id {
			return p, nil
		}
	}
	return sandbox.Process{}, fmt.Errorf("attach: %w", &sandbox.ProcessNotFoundError{ID: id})
}
