// Command engine runs the sandbox engine: bench measures it against the local Docker engine,
// demo plays a scripted agent, images builds the images the engine and its tests run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `engine — run AI agents' tool calls in Docker sandboxes (maf-sandbox protocol)

Usage:
  engine serve [flags]           answer the sandbox API on NATS (embedded loopback server unless --nats-url)
  engine run [flags] -- CMD ...  one shot through a serving engine: acquire, copy in, run, copy out, dispose
  engine demo [flags]            acquire a sandbox, write a program, run it, read its output, dispose
  engine bench [flags]           measure every operation against the local Docker engine
  engine images build [flags]    build the images the engine and its tests use (nothing is pulled)
  engine reap --older-than 24h [--scope S] [--dry-run] [--json]   remove sandboxes created before the age
  engine version                 print the version

Run "engine <command> -h" for a command's flags.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "engine:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Print(usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return serveCmd(ctx, args[1:])
	case "run":
		code, err := runCmd(ctx, args[1:])
		if err == nil && code != 0 {
			os.Exit(code)
		}
		return err
	case "demo":
		return demoCmd(ctx, args[1:])
	case "bench":
		return benchCmd(ctx, args[1:])
	case "images":
		return imagesCmd(ctx, args[1:])
	case "reap":
		return reapCmd(ctx, args[1:])
	case "version":
		fmt.Println(version)
		return nil
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n\n%s", args[0], usage)
}
