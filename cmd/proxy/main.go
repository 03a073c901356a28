// Command proxy is the egress proxy process: the image's entrypoint, run as
// "/maf-egress-proxy proxy". Everything it does is [proxy.Run]; configuration comes from the
// environment (MAF_SANDBOX_ALLOW, MAF_SANDBOX_PRIVATE_CIDRS, MAF_SANDBOX_PROXY_PORT; the seal
// probe's and the workload gate's release variables of package proxy). It sets
// the Go runtime's soft memory limit to [proxy.MemoryLimit], below the container's, unless
// GOMEMLIMIT is in the environment.
package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/mafsandbox/engine/egresslog"
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
	if limit, ok := memoryLimit(os.LookupEnv); ok {
		debug.SetMemoryLimit(limit)
	}
	// As PID 1 the process gets no default signal handling; stop on SIGTERM and SIGINT.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	gateAddr, token, gated, err := proxy.GateConfig(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "maf-egress-proxy:", err)
		os.Exit(2)
	}
	if targets, probe := os.LookupEnv(egresslog.EnvSealTargets); probe {
		verdict, sealed := proveSeal(ctx, targets)
		if sealed && gated {
			// Bound before the verdict is written: the outbound leg comes only after it.
			ln, err := proxy.ListenGate(ctx, gateAddr)
			if err != nil {
				fmt.Fprintln(os.Stderr, "maf-egress-proxy:", err)
				os.Exit(1)
			}
			go func() {
				if err := proxy.ServeGate(ctx, ln, token); err != nil {
					fmt.Fprintln(os.Stderr, "maf-egress-proxy:", err)
				}
			}()
		}
		fmt.Fprint(os.Stdout, verdict)
		if !sealed {
			os.Exit(3)
		}
	}
	if err := proxy.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "maf-egress-proxy:", err)
		os.Exit(1)
	}
}

// proveSeal runs the seal probe before the proxy listens (the engine connects the outbound
// leg only after reading "sealed") and returns its line; false means a breach or a probe that
// could not run, and the process stops without serving. Only a sealed proxy releases the
// workload gate.
func proveSeal(ctx context.Context, targets string) (string, bool) {
	addrs, err := proxy.SealTargetsFromEnv(targets)
	var skip []netip.Addr
	if err == nil {
		skip, err = proxy.SealTargetsFromEnv(os.Getenv(egresslog.EnvSealSkip))
	}
	if err == nil {
		var rep proxy.SealReport
		if rep, err = proxy.ProbeSeal(ctx, proxy.SealConfig{Targets: addrs, Skip: skip}); err == nil {
			if rep.Sealed() {
				return egresslog.FormatSealed(rep.Attempts), true
			}
			return egresslog.FormatBreach(strings.Join(rep.Breaches, "; ")), false
		}
	}
	return egresslog.FormatBreach("the probe could not run: " + err.Error()), false
}

// memoryLimit returns the soft memory limit to set: [proxy.MemoryLimit], which keeps the
// garbage collector ahead of the container's memory limit under a flood of connections; or
// nothing when GOMEMLIMIT is set, which the runtime has applied already.
func memoryLimit(lookupEnv func(string) (string, bool)) (int64, bool) {
	if _, set := lookupEnv("GOMEMLIMIT"); set {
		return 0, false
	}
	return proxy.MemoryLimit, true
}
