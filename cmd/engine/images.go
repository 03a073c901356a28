package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/mafsandbox/engine/internal/images"
)

func imagesCmd(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "build" {
		return fmt.Errorf("usage: engine images build [--docker PATH] [--force]")
	}
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	dockerPath := fs.String("docker", "docker", "the Docker CLI binary")
	force := fs.Bool("force", false, "rebuild images that already exist")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	type build struct {
		tag            string
		ensure, always func(context.Context, string, string) error
	}
	for _, b := range []build{
		{images.BusyboxTag, images.EnsureBusybox, images.BuildBusybox},
		{images.ProxyTag, images.EnsureProxy, images.BuildProxy},
	} {
		fmt.Printf("building %s ... ", b.tag)
		do := b.ensure
		if *force {
			do = b.always
		}
		if err := do(ctx, *dockerPath, b.tag); err != nil {
			fmt.Println("failed")
			return err
		}
		fmt.Println("done")
	}
	return nil
}
