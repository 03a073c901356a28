// Command engine runs the sandbox engine and the tools around it:
//
//   - serve answers the sandbox API on NATS, with the local Docker daemon behind it;
//   - run is one shot through a serving engine: acquire, copy in, run, copy out, dispose; with
//     --detach it starts a process that lives on in the sandbox instead;
//   - ps lists the processes of a sandbox;
//   - logs prints a process's output, from a sequence, following it to its end if asked;
//   - attach connects this terminal to a process: its output here, this input its stdin;
//   - kill sends a process a signal;
//   - demo plays a scripted agent against an engine it starts itself;
//   - bench measures every operation against the local Docker daemon;
//   - images build builds the images the engine and its tests run, pulling nothing;
//   - reap removes the sandboxes, proxies and networks created before an age;
//   - console serves the operator's web page about the engine pool, as a NATS client;
//   - snapshot takes, lists, restores, forks and deletes snapshots through a serving engine;
//   - pause pauses a key's sandbox through a serving engine (the next call wakes it);
//   - version prints the version, taken from the build's module information.
//
// "engine -h", "engine help" and "engine <verb> -h" print help and exit 0. A failure exits 1;
// "engine run" exits with its command's status, or 124 when the command timed out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mafsandbox/engine/cmd/engine/internal/bench"
	"github.com/mafsandbox/engine/cmd/engine/internal/demo"
	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/cmd/engine/internal/version"
)

const usage = `engine — run AI agents' tool calls in Docker sandboxes (maf-sandbox protocol)

Usage:
  engine serve [flags]           answer the sandbox API on NATS (embedded loopback server unless --nats-url)
  engine run [flags] -- CMD ...  one shot through a serving engine: acquire, copy in, run, copy out, dispose
  engine run --detach [flags] -- CMD ...   start a process that lives on in the sandbox; print its ID
  engine ps [flags]              list the processes of a sandbox (the key's flags name it)
  engine logs [flags] PROCESS    print a process's output (--follow, --from SEQ)
  engine attach [flags] PROCESS  a process's output here, this input its stdin (a raw terminal when both have one)
  engine kill [flags] PROCESS    send a process a signal (--signal, default TERM)
  engine demo [flags]            acquire a sandbox, write a program, run it, read its output, dispose
  engine bench [flags]           measure every operation against the local Docker daemon
  engine images build [flags]    build the images the engine and its tests use (nothing is pulled)
  engine reap --older-than 24h [--scope S] [--dry-run] [--json]   remove sandboxes created before the age
  engine console [flags]         serve the operator console: a web page about the pool, a NATS client
  engine snapshot ACTION [flags] take, list, restore, fork or delete snapshots through a serving engine
  engine pause [flags]           pause a key's sandbox now; its next call that needs it running wakes it
  engine version                 print the version

Run "engine <command> -h" for a command's flags.
`

// exitTimeout is the status of an "engine run" whose command timed out, as timeout(1) exits.
const exitTimeout = 124

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command args name and returns the process's exit status: 0 for help, the
// command's status for "engine run", 1 after printing any other failure to stderr.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	code, err := dispatch(ctx, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag set has printed the command's help
	}
	if err != nil {
		fmt.Fprintln(stderr, "engine:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// dispatch runs the verb args[0] names with the rest of args. Each verb is a small type in
// the file named for it (serveVerb in serve.go, runVerb in run.go, …) holding its flags: parse
// fills them from the verb's arguments, run does its work. demo and bench are packages of
// their own under internal/, each entered by its Command.
func dispatch(ctx context.Context, args []string) (int, error) {
	if len(args) == 0 {
		fmt.Print(usage)
		return 0, nil
	}
	if err := refuseDriver(args[0], args[1:], os.LookupEnv); err != nil {
		return 0, err
	}
	switch args[0] {
	case "serve":
		return 0, serveCmd(ctx, args[1:])
	case "run":
		return runCmd(ctx, args[1:])
	case "ps", "logs", "attach", "kill":
		return processCmd(ctx, args[0], args[1:])
	case "demo":
		return 0, demo.Command(ctx, args[1:])
	case "bench":
		return 0, bench.Command(ctx, args[1:])
	case "images":
		return 0, imagesCmd(ctx, args[1:])
	case "reap":
		return 0, reapCmd(ctx, args[1:])
	case "console":
		return 0, consoleCmd(ctx, args[1:])
	case "snapshot":
		return 0, snapshotCmd(ctx, args[1:], false) // snapshot.go
	case "pause":
		return 0, snapshotCmd(ctx, args[1:], true)
	case "version":
		return 0, versionCmd(args[1:])
	}
	if isHelp(args[0]) {
		fmt.Print(usage)
		return 0, nil
	}
	return 0, fmt.Errorf("unknown command %q\n\n%s", args[0], usage)
}

// versionVerb is "engine version": prints [version.Build].
type versionVerb struct{}

// versionCmd parses args into a [versionVerb] and runs it.
func versionCmd(args []string) error {
	v := versionVerb{}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run()
}

func (versionVerb) parse(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: engine version\n\nPrints the version, from the build's module information "+
			"(the module version, or the VCS revision of a development build).\n")
	}
	if err := settings.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("version: unexpected arguments %q", fs.Args())
	}
	return nil
}

func (versionVerb) run() error {
	fmt.Println(version.Build())
	return nil
}
