package docker_test

import (
	"context"
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/docker/enginetest"
	"github.com/mafsandbox/engine/internal/dockertest"
)

// The benchmarks measure what one client process costs against the real engine: each
// operation below is exactly one docker process (two for pause+unpause).

func benchCLI(b *testing.B) (docker.Driver, string) {
	b.Helper()
	image := dockertest.Busybox(b)
	c, err := docker.NewEngine(docker.Config{Driver: docker.DriverCLI, Labels: dockertest.Labels()})
	if err != nil {
		b.Fatal(err)
	}
	name, _ := enginetest.Workload(b, c, image, enginetest.Key(b))
	ctx := context.Background()
	if _, err := c.Exec(ctx, docker.ExecRequest{Target: name, Argv: []string{"sh", "-c", "head -c 4096 /dev/zero > /f4k"}}); err != nil {
		b.Fatal(err)
	}
	return c, name
}

func BenchmarkCLI(b *testing.B) {
	c, name := benchCLI(b)
	ctx := context.Background()
	cases := []struct {
		name string
		op   func() error
	}{
		{"ServerOS", func() error { _, err := c.ServerOS(ctx); return err }},
		{"Inspect", func() error { _, err := c.Inspect(ctx, name); return err }},
		{"StatFile", func() error { _, err := c.Stat(ctx, name, "/f4k"); return err }},
		{"StatAbsent", func() error { _, err := c.Stat(ctx, name, "/absent"); return err }},
		{"Read4KiB", func() error { _, _, err := c.Read(ctx, name, "/f4k", 4096); return err }},
		{"ExecTrue", func() error {
			_, err := c.Exec(ctx, docker.ExecRequest{Target: name, Argv: []string{"true"}})
			return err
		}},
		{"PauseUnpause", func() error {
			if err := c.Pause(ctx, name); err != nil {
				return err
			}
			return c.Unpause(ctx, name)
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := tc.op(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
