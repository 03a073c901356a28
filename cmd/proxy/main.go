// Command proxy is the egress proxy process: the image's entrypoint, run as
// "/maf-egress-proxy proxy". Everything it does is [proxy.Run]; configuration comes from the
// environment (MAF_SANDBOX_ALLOW, MAF_SANDBOX_PRIVATE_CIDRS, MAF_SANDBOX_PROXY_PORT).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mafsandbox/engine/proxy"
)

func main() {
	// The image runs "/maf-egress-proxy proxy", the engine binary's subcommand form.
	if args := os.Args[1:]; len(args) > 1 || len(args) == 1 && args[0] != "proxy" {
		fmt.Fprintln(os.Stderr, "usage: maf-egress-proxy [proxy]")
		os.Exit(2)
	}
	cfg, err := proxy.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "maf-egress-proxy:", err)
		os.Exit(2)
	}
	// As PID 1 the process gets no default signal handling; stop on SIGTERM and SIGINT.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := proxy.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "maf-egress-proxy:", err)
		os.Exit(1)
	}
}
