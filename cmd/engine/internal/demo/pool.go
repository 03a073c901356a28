package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/sandbox"
)

// poolStep is the warm pool's step: once the engine's pool holds a member, a new key is
// acquired over NATS — the member is renamed to the key's name and bound, with no create and
// no start — and its first command runs; the times are printed, then the sandbox is
// disposed. It waits for the pool to fill (a condition; ctx bounds it).
func poolStep(ctx context.Context, step func(string, ...any), remote *client.Backend, b *actors.Backend, image string, key sandbox.Key) error {
	if b == nil || b.WarmPoolSpares() == nil {
		return nil
	}
	waited := time.Now()
	for b.WarmPoolSpares()[image] < 1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	step("the warm pool holds %d sandbox(es) of %s, made ahead in the background (%s until the first was ready)",
		b.WarmPoolSpares()[image], image, time.Since(waited).Round(time.Millisecond))
	spec, err := sandbox.NewSpec("pooled", sandbox.WithImage(image))
	if err != nil {
		return err
	}
	defer remote.Dispose(context.WithoutCancel(ctx), key, sandbox.DisposeOptions{})
	channelBefore, _ := b.ExecPaths()
	start := time.Now()
	sb, err := remote.Acquire(ctx, key, spec)
	if err != nil {
		return err
	}
	acquired := time.Since(start)
	res, err := sb.Exec(ctx, sandbox.Argv("true"), ".", 30*time.Second)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("exec true: exit %d", res.ExitCode)
	}
	first := time.Since(start)
	path := "through docker exec"
	if channel, _ := b.ExecPaths(); channel > channelBefore {
		path = "on the exec channel"
	}
	step("pooled acquire of a new key over NATS: %s (a member renamed to the key's name and bound; no create, no start); "+
		"its first command (exec true, %s) answered %s after the acquire began",
		acquired.Round(time.Millisecond), path, first.Round(time.Millisecond))
	if f := remote.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		return fmt.Errorf("dispose the pooled sandbox: %v", f)
	}
	return nil
}
