package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/internal/images"
)

const imagesUsage = `Usage: engine images build [flags]

Builds, on the local Docker daemon, the images the engine and its tests use, pulling nothing:
the busybox workload image (from Debian's busybox-static at /bin/busybox), the egress proxy
image and the fingerprint observer image (each FROM scratch around one static binary). An
engine built with "make engine" carries those binaries for the daemon's platform, so it
needs neither the source tree nor a Go toolchain; any other build (go build, go install)
compiles them with the Go toolchain from the source it was built from, wherever it is run.
This one embeds the proxy for: %s; the observer for: %s.
An image that is already current is left alone unless --force.

Flags:
`

// imagesVerb is "engine images build": the images the engine and its tests use, built on
// the local daemon, pulling nothing.
type imagesVerb struct {
	dockerPath, busyboxTag, proxyTag, observerTag string
	force                                         bool
}

// imagesCmd parses args into an [imagesVerb] and runs it.
func imagesCmd(ctx context.Context, args []string) error {
	v := &imagesVerb{}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *imagesVerb) parse(args []string) error {
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	fs.StringVar(&v.dockerPath, "docker", "docker", "the Docker CLI binary")
	fs.BoolVar(&v.force, "force", false, "rebuild images that already exist")
	fs.StringVar(&v.busyboxTag, "busybox-tag", images.BusyboxTag, "tag of the busybox workload image")
	fs.StringVar(&v.proxyTag, "proxy-tag", images.ProxyTag, "tag of the egress proxy image")
	fs.StringVar(&v.observerTag, "observer-tag", images.ObserverTag, "tag of the fingerprint observer image")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), imagesUsage, platforms(images.EmbeddedProxyPlatforms()),
			platforms(images.EmbeddedObserverPlatforms()))
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "build" {
		if len(args) > 0 && isHelp(args[0]) {
			fs.Usage()
			return flag.ErrHelp
		}
		return fmt.Errorf("images: want the verb build\n(run \"engine images build -h\" for its flags)")
	}
	if err := settings.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("images build: unexpected arguments %q", fs.Args())
	}
	return nil
}

// run builds each image that is missing or stale (every one with --force).
func (v *imagesVerb) run(ctx context.Context) error {
	type build struct {
		tag            string
		ensure, always func(context.Context, string, string) error
	}
	for _, b := range []build{
		{v.busyboxTag, func(ctx context.Context, docker, tag string) error { return images.EnsureBusybox(ctx, docker, tag) }, images.BuildBusybox},
		{v.proxyTag, images.EnsureProxy, images.BuildProxy},
		{v.observerTag, images.EnsureObserver, images.BuildObserver},
	} {
		fmt.Printf("building %s ... ", b.tag)
		do := b.ensure
		if v.force {
			do = b.always
		}
		if err := do(ctx, v.dockerPath, b.tag); err != nil {
			fmt.Println("failed")
			return err
		}
		fmt.Println("done")
	}
	return nil
}

// platforms lists embedded platforms for the usage text.
func platforms(p []string) string {
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ", ")
}

// isHelp reports whether arg asks for help, as the flag package spells it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}
