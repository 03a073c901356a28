package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// firstCommand measures time_to_first_command: the acquire of a new key and `exec true` in
// it, as a caller sees it. With a warm pool of the image on the backend (engine bench
// --warm-pool N) it runs twice: pool warm (each run waits, untimed, until the pool is full
// again) and cold (the same spec with one spec label, which a pool never serves, so the
// cold path runs with the pool's members idle beside it). Without a pool, only the cold row.
func (r *runner) firstCommand(ctx context.Context, files, _ sandbox.Spec, report func(Row)) error {
	first := func(spec sandbox.Spec) error {
		sb, err := r.b.Acquire(ctx, r.key("first"), spec)
		if err != nil {
			return err
		}
		res, err := sb.Exec(ctx, sandbox.Argv("true"), ".", time.Minute)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr())
		}
		return err
	}
	if r.b.WarmPoolSpares() != nil {
		want := r.cfg.PoolSize
		full := func() error {
			for r.b.WarmPoolSpares()[r.cfg.Image] < want {
				if err := ctx.Err(); err != nil {
					return err
				}
				time.Sleep(10 * time.Millisecond)
			}
			return nil
		}
		paths := r.execPaths()
		row, err := r.time(ctx, "time_to_first_command_pool_warm", full, func() error { return first(files) })
		if err != nil {
			return err
		}
		row.Note = fmt.Sprintf("pool of %d, refilled before each run; %s", want, paths())
		report(row)
		row, err = r.time(ctx, "acquire_pool_warm", full, func() error {
			_, err := r.b.Acquire(ctx, r.key("first"), files)
			return err
		})
		if err != nil {
			return err
		}
		row.Note = "the pool's half alone: a member renamed, bound and handed out"
		report(row)
	}
	cold, err := sandbox.NewSpec(files.Kind, sandbox.WithImage(r.cfg.Image), sandbox.WithRequires(files.Requires.Sorted()...),
		sandbox.WithLabels(map[string]string{"bench": "cold"}))
	if err != nil {
		return err
	}
	paths := r.execPaths()
	row, err := r.time(ctx, "time_to_first_command_cold", nil, func() error { return first(cold) })
	if err != nil {
		return err
	}
	row.Note = "cold path (a spec label: no pool serves it); " + paths()
	report(row)
	return nil
}

// execPaths starts counting the backend's commands by path and returns what says, when
// called, how many took which since: the note of a row that times an exec.
func (r *runner) execPaths() func() string {
	ch0, de0 := r.b.ExecPaths()
	return func() string {
		ch, de := r.b.ExecPaths()
		return fmt.Sprintf("execs: %d through the exec channel, %d through docker exec", ch-ch0, de-de0)
	}
}
