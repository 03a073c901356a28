package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/text/unicode/norm"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

const runUsage = `Usage: engine run [flags] -- COMMAND [ARG...]
       engine run [flags] --shell 'COMMAND LINE'

Runs one command in a fresh sandbox of a serving engine ("engine serve", found at
--nats-url, by default the embedded server on 127.0.0.1:4222), like docker run with every
guarantee of the protocol: it acquires a sandbox, copies each --file in, runs the command
(its output streams here as the engine publishes it), copies each declared --output out to
--out-dir, and disposes the sandbox whatever happened. It exits with the command's exit
code, 124 when the command timed out (as timeout(1) exits), or 1 when the run itself
failed. The flags, files and outputs are checked before anything runs.

Paths in the sandbox are relative to its storage base and confined to it.

Flags:
`

// defaultRetryWait is how long a call of engine run waits for an engine to take it (one
// restarting, or at its limit), as the client waits by default, unless --call-timeout is shorter.
const defaultRetryWait = 30 * time.Second

// runVerb is "engine run": one shot through a serving engine — acquire, copy in, exec, copy
// out, dispose.
type runVerb struct {
	conn                                              natsFlags
	logs                                              logFlags
	image, kind, scope, thread, agent, shell, workDir string
	outDir, streamPrefix                              string
	replace                                           bool
	timeout, callTimeout                              time.Duration
	files, outputs, allow                             listFlag
	cmd                                               sandbox.Command // from the arguments after the flags
}

// runCmd parses args into a [runVerb] and runs it. It returns the command's exit code.
func runCmd(ctx context.Context, args []string) (int, error) {
	v := &runVerb{}
	if err := v.parse(args); err != nil {
		return 0, err
	}
	return v.run(ctx)
}

func (v *runVerb) parse(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	v.conn.register(fs)
	fs.StringVar(&v.image, "image", envOr("MAF_SANDBOX_IMAGE", images.BusyboxTag), "workload image, which the Docker daemon of the serving engine must have (env MAF_SANDBOX_IMAGE)")
	fs.StringVar(&v.kind, "kind", "run", "workload kind")
	fs.StringVar(&v.scope, "scope", envOr("MAF_SANDBOX_SCOPE", "run"), "key scope (env MAF_SANDBOX_SCOPE)")
	fs.StringVar(&v.thread, "thread", "", "key thread; default a fresh one, so each run gets its own sandbox")
	fs.StringVar(&v.agent, "agent", "run", "key agent")
	fs.StringVar(&v.shell, "shell", "", "a command line for sh -c, instead of COMMAND [ARG...]")
	fs.DurationVar(&v.timeout, "timeout", 60*time.Second, "the command's timeout")
	fs.StringVar(&v.workDir, "workdir", "", "the storage base in the sandbox (default: the engine's)")
	fs.StringVar(&v.outDir, "out-dir", ".", "local directory the outputs land in")
	fs.BoolVar(&v.replace, "replace", false, "let an output replace a local file of its name")
	fs.DurationVar(&v.callTimeout, "call-timeout", 5*time.Minute, "bound on each call to the engine besides the command")
	fs.StringVar(&v.streamPrefix, "stream-prefix", envOr("MAF_SANDBOX_STREAM_PREFIX", ""), "subject prefix the command's output streams to (default a fresh inbox); on an engine with tenancy, maf.sandbox.stream.<your account> (docs/operations.md#tenancy; env MAF_SANDBOX_STREAM_PREFIX)")
	fs.Var(&v.files, "file", "LOCAL[:GUEST] file to copy in before the command (GUEST defaults to LOCAL's name); repeatable")
	fs.Var(&v.outputs, "output", "GUEST[:NAME] output to copy out after the command, landing as NAME in --out-dir; repeatable")
	fs.Var(&v.allow, "allow", "host the sandbox may reach (allowlist egress; needs an engine with an egress proxy); repeatable")
	v.logs.register(fs)
	_ = fs.Set("log-level", envOr("MAF_SANDBOX_LOG_LEVEL", "warn"))
	fs.Usage = func() { fmt.Fprint(fs.Output(), runUsage); fs.PrintDefaults() }
	if err := settings.ParseFlags(fs, args); err != nil {
		return err
	}
	v.cmd = sandbox.Command{Argv: fs.Args(), Shell: v.shell}
	return nil
}

// run checks everything it can before any call (the command, the outputs, the spec, the
// inputs), then acquires, runs and disposes. It returns the command's exit code.
func (v *runVerb) run(ctx context.Context) (int, error) {
	if err := v.cmd.Validate(); err != nil {
		return 0, fmt.Errorf("run: %w (give COMMAND [ARG...] after --, or --shell)", err)
	}
	declared, err := parseOutputs(v.outputs, v.outDir, v.replace)
	if err != nil {
		return 0, err
	}
	log, err := v.logs.logger()
	if err != nil {
		return 0, err
	}
	defer func() { _ = log.Sync() }()
	spec, sink, err := v.spec(declared)
	if err != nil {
		return 0, err
	}
	inputs, err := readInputs(v.files)
	if err != nil {
		return 0, err
	}
	nc, err := v.conn.connect("maf-sandbox engine run", log)
	if err != nil {
		return 0, fmt.Errorf("run: %w", v.conn.noEngine(err))
	}
	defer nc.Close()
	// No call waits longer for an engine to take it than --call-timeout lets it run.
	copts := []client.Option{client.WithPrefix(v.conn.prefix), client.WithLogger(log), client.WithCallTimeout(v.callTimeout),
		client.WithRetryWait(min(v.callTimeout, defaultRetryWait))}
	if v.streamPrefix != "" {
		copts = append(copts, client.WithStreamPrefix(v.streamPrefix))
	}
	backend, err := client.New(ctx, nc, copts...)
	if err != nil {
		return 0, fmt.Errorf("run: %w", v.conn.noEngine(err))
	}
	key := v.key()
	sb, err := backend.Acquire(ctx, key, spec)
	if err != nil {
		return 0, fmt.Errorf("run: acquire: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.callTimeout)
		defer cancel()
		if f := backend.Dispose(dctx, key, sandbox.DisposeOptions{}); f != nil {
			fmt.Fprintf(os.Stderr, "engine run: the sandbox of %s may remain (%s): %s\n", key, f.Code, f.Detail)
		}
	}()
	rsb := sb.(*client.Sandbox)
	log.Info("acquired", zap.String("key", key.String()), zap.String("engine", rsb.Engine()), zap.String("instance", sb.InstanceID()))
	return v.inSandbox(ctx, rsb, inputs, sink, log)
}

// spec builds the sandbox's spec, and the sink its declared outputs land in (nil when none).
func (v *runVerb) spec(declared []sandbox.DeclaredOutput) (sandbox.Spec, *sandbox.OutputSink, error) {
	specOpts := []sandbox.SpecOption{sandbox.WithImage(v.image), sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut)}
	if v.workDir != "" {
		specOpts = append(specOpts, sandbox.WithWorkDir(v.workDir))
	}
	if len(v.allow) > 0 {
		specOpts = append(specOpts, sandbox.WithAllowlist(sandbox.Hosts(v.allow...)...))
	}
	if len(declared) > 0 {
		specOpts = append(specOpts, sandbox.WithDeclaredOutputs(declared...))
	}
	spec, err := sandbox.NewSpec(v.kind, specOpts...)
	if err != nil {
		return sandbox.Spec{}, nil, fmt.Errorf("run: %w", err)
	}
	if len(declared) == 0 {
		return spec, nil, nil
	}
	var sinkOpts []sandbox.SinkOption
	if v.replace {
		sinkOpts = append(sinkOpts, sandbox.WithReplaceExisting())
	}
	sink, err := sandbox.FileSystemSink(v.outDir, sinkOpts...)
	if err != nil {
		return sandbox.Spec{}, nil, fmt.Errorf("run: --out-dir: %w", err)
	}
	return spec, sink, nil
}

// key is the run's sandbox key; without --thread, a fresh thread so each run gets its own
// sandbox.
func (v *runVerb) key() sandbox.Key {
	thread := v.thread
	if thread == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		thread = "run-" + hex.EncodeToString(b)
	}
	return sandbox.Key{Scope: v.scope, ThreadID: thread, AgentID: v.agent}
}

// inSandbox copies the inputs in, runs the command with its output streamed here, and
// collects the outputs into sink. It returns the command's exit code; a failed collection
// turns a zero one into 1.
func (v *runVerb) inSandbox(ctx context.Context, rsb *client.Sandbox, inputs []input, sink *sandbox.OutputSink, log *zap.Logger) (int, error) {
	for _, in := range inputs {
		if err := rsb.WriteFile(ctx, in.guest, in.content, "."); err != nil {
			return 0, fmt.Errorf("run: copy %s in: %w", in.local, err)
		}
	}
	res, err := rsb.ExecStream(ctx, v.cmd, ".", v.timeout, func(stream string, p []byte) {
		w := io.Writer(os.Stdout)
		if stream == service.StreamStderr {
			w = os.Stderr
		}
		_, _ = w.Write(p)
	})
	if errors.Is(err, sandbox.ErrTimeout) {
		fmt.Fprintf(os.Stderr, "engine run: %v\n", err)
		return exitTimeout, nil
	}
	if err != nil {
		return 0, fmt.Errorf("run: %w", err)
	}
	if sink == nil {
		return res.ExitCode, nil
	}
	landed, err := rsb.CollectOutputs(ctx, sink, nil)
	for _, l := range landed {
		log.Info("output landed", zap.String("name", l.Name), zap.String("display", l.Display))
	}
	if err != nil {
		code := res.ExitCode
		if code == 0 {
			code = 1
		}
		fmt.Fprintf(os.Stderr, "engine run: copy the outputs out: %v\n", err)
		return code, nil
	}
	return res.ExitCode, nil
}

// parseOutputs turns each GUEST[:NAME] --output into a declared output and checks, before
// anything runs, what would otherwise fail only after the command: each guest path and landing
// name is a valid artifact name ([sandbox.ValidateArtifactName]), no two outputs land as one
// file (names compared as the collector compares them, ignoring case), and, without
// --replace, no output would land on a file that exists in outDir.
func parseOutputs(specs []string, outDir string, replace bool) ([]sandbox.DeclaredOutput, error) {
	var declared []sandbox.DeclaredOutput
	seen := map[string]string{} // collision key -> the --output that took it
	for _, o := range specs {
		guest, name, named := strings.Cut(o, ":")
		if err := sandbox.ValidateArtifactName(guest); err != nil {
			return nil, fmt.Errorf("run: --output %q: %w", o, err)
		}
		out := sandbox.Output(guest)
		if named {
			if err := sandbox.ValidateArtifactName(name); err != nil {
				return nil, fmt.Errorf("run: --output %q: landing name: %w", o, err)
			}
			out.Name = &name
		}
		landing := out.LandingName()
		key := path.Clean(strings.ToLower(norm.NFC.String(landing)))
		if first, ok := seen[key]; ok {
			return nil, fmt.Errorf("run: --output %q and --output %q would land as one file", first, o)
		}
		seen[key] = o
		if !replace {
			if _, err := os.Lstat(filepath.Join(outDir, filepath.FromSlash(landing))); err == nil {
				return nil, fmt.Errorf("run: --output %q: %s exists in --out-dir (give --replace to replace it)", o, landing)
			}
		}
		declared = append(declared, out)
	}
	return declared, nil
}

// input is one file to copy in.
type input struct {
	local, guest string
	content      []byte
}

// readInputs reads each LOCAL[:GUEST] file, refusing one above the transfer limit.
func readInputs(specs []string) ([]input, error) {
	var out []input
	for _, s := range specs {
		local, guest, named := strings.Cut(s, ":")
		if !named || guest == "" {
			guest = filepath.Base(local)
		}
		fi, err := os.Stat(local)
		if err != nil {
			return nil, fmt.Errorf("run: --file %s: %w", local, err)
		}
		if fi.Size() > service.MaxFileBytes {
			return nil, fmt.Errorf("run: --file %s: %d bytes is above the %d-byte transfer limit", local, fi.Size(), int64(service.MaxFileBytes))
		}
		content, err := os.ReadFile(local)
		if err != nil {
			return nil, fmt.Errorf("run: --file %s: %w", local, err)
		}
		out = append(out, input{local: local, guest: path.Clean(guest), content: content})
	}
	return out, nil
}

// listFlag collects a repeated flag.
type listFlag []string

func (f *listFlag) String() string { return strings.Join(*f, ",") }

func (f *listFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty value")
	}
	*f = append(*f, s)
	return nil
}
