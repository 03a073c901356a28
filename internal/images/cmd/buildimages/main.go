// Command buildimages builds the images the tests run, unless the engine has them already:
// "make images" runs it, and "make test" runs that first.
//
// With -force it rebuilds them. When the Docker daemon does not answer it only warns, since
// the Docker tests then skip, unless MAF_SANDBOX_REQUIRE_DOCKER=1 makes that a failure.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/mafsandbox/engine/internal/images"
)

func main() {
	docker := flag.String("docker", "docker", "path of the docker CLI")
	force := flag.Bool("force", false, "rebuild images the engine already has")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	if err := daemonAnswers(ctx, *docker); err != nil {
		if os.Getenv("MAF_SANDBOX_REQUIRE_DOCKER") == "1" {
			fmt.Fprintf(os.Stderr, "buildimages: docker daemon does not answer (MAF_SANDBOX_REQUIRE_DOCKER=1): %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "buildimages: docker daemon does not answer, no image built (Docker tests will skip): %v\n", err)
		return
	}

	build := images.BuildBusybox
	if !*force {
		build = func(ctx context.Context, docker, tag string) error { return images.EnsureBusybox(ctx, docker, tag) }
	}
	if err := build(ctx, *docker, images.BusyboxTag); err != nil {
		fmt.Fprintf(os.Stderr, "buildimages: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("buildimages: %s ready\n", images.BusyboxTag)
}

// daemonAnswers asks the daemon, not the client, for its version.
func daemonAnswers(ctx context.Context, docker string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, docker, "version", "--format", "{{.Server.Version}}")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker version: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
