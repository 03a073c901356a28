package files

import (
	"context"
	"errors"
	"fmt"
	"github.com/mafsandbox/engine/actors"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// The reach rule (protocol §6.5) attacked on every removal path: a guest of uid 1000 that
// cannot delete /victim/file itself plants links to /victim at each depth under its storage
// base, then asks the host to delete through them. Nothing outside the guest's own reach may
// go, whatever the removal path and however the link is placed.

// reachSandbox acquires a sandbox on an image whose user is uid 1000 and which ships a
// root-owned /victim the guest cannot change.
func reachSandbox(t *testing.T, opts ...actors.Option) sandbox.Sandbox {
	t.Helper()
	image := itest.DerivedImage(t, "mkdir -p /victim/dir && echo keep > /victim/file && echo keep > /victim/dir/file && chmod -R go-w /victim", "USER sandbox")
	b := itest.NewBackend(t, opts...)
	spec := itest.BusyboxSpec(t, sandbox.WithImage(image),
		sandbox.WithRequires(sandbox.Exec, sandbox.FilesIn, sandbox.FilesDelete, sandbox.Reclaim))
	sb := itest.Acquire(t, b, itest.NewKey(t), spec)
	if got := itest.Sh(t, sb, "id -u; rm -f /victim/file 2>/dev/null; cat /victim/file"); got != "1000\nkeep\n" {
		t.Fatalf("premise: the guest is uid 1000 and cannot remove /victim/file, got %q", got)
	}
	return sb
}

func victimIntact(t *testing.T, sb sandbox.Sandbox, what string) {
	t.Helper()
	if got := itest.Sh(t, sb, "cat /victim/file /victim/dir/file 2>&1"); got != "keep\nkeep\n" {
		t.Fatalf("%s: /victim was changed by the host: %q", what, got)
	}
}

// Links planted at every depth below the base: the base's child, a grandchild, and a
// great-grandchild. Every removal path refuses the path through the link as not confined,
// and /victim is whole afterwards.
func TestRemovalsThroughPlantedLinksAreRefused(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		sb := reachSandbox(t, plane)
		ctx := itest.Context(t)
		layouts := []struct{ link, through string }{
			{"r1", "r1/file"},
			{"a2/r2", "a2/r2/file"},
			{"a3/b3/r3", "a3/b3/r3/file"},
			{"a4/r4", "a4/r4/dir"},
		}
		type removal struct {
			name string
			run  func(p string) error
		}
		removals := []removal{
			{"remove", func(p string) error { return sb.Remove(ctx, p, ".", false) }},
			{"remove recursive", func(p string) error { return sb.Remove(ctx, p, ".", true) }},
			{"reclaim", func(p string) error { return sb.Reclaim(ctx, p, ".", time.Minute) }},
		}
		for _, l := range layouts {
			itest.Sh(t, sb, fmt.Sprintf("cd /maf-sandbox/work && mkdir -p \"$(dirname %s)\" && ln -sfn /victim %s", l.link, l.link))
			for _, r := range removals {
				t.Run(r.name+" "+l.through, func(t *testing.T) {
					err := r.run(l.through)
					var nc *sandbox.NotConfinedError
					if !errors.As(err, &nc) {
						t.Fatalf("%s %s: err = %v, want NotConfinedError", r.name, l.through, err)
					}
					victimIntact(t, sb, r.name+" "+l.through)
				})
			}
		}
		// The link itself is the guest's and goes, without its target.
		for _, l := range layouts {
			if err := sb.Reclaim(ctx, l.link, ".", time.Minute); err != nil {
				t.Fatalf("reclaim the link %s itself: %v", l.link, err)
			}
		}
		victimIntact(t, sb, "reclaiming the links themselves")
		if got := itest.Sh(t, sb, "ls -A /maf-sandbox/work/r1 /maf-sandbox/work/a2/r2 /maf-sandbox/work/a3/b3/r3 2>&1 | grep -c 'No such file'"); strings.TrimSpace(got) != "3" {
			t.Fatalf("the links were not removed: %q", got)
		}
	})
}

// A guest that swaps a directory for a link to /victim while the host removes through it
// wins the race at most against itself: the removal runs with the guest's own authority, so
// whatever the interleaving /victim survives.
func TestRemovalRacingALinkSwapStaysInTheGuestsReach(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		sb := reachSandbox(t, plane)
		ctx := itest.Context(t)
		// The swapper runs in the background for a bounded time and alternates work/race between
		// a directory holding "file" and a link to /victim.
		itest.Sh(t, sb, `cd /maf-sandbox/work && (end=$(( $(date +%s) + 20 )); while [ $(date +%s) -lt $end ]; do
		rm -rf race.d; mkdir race.d; echo mine > race.d/file; mv -fT race.d race 2>/dev/null || { rm -rf race; mv race.d race; }
		ln -sfn /victim race.l; mv -fT race.l race 2>/dev/null || { rm -rf race; mv race.l race; }
	done) >/dev/null 2>&1 &`)
		deadline := time.Now().Add(15 * time.Second)
		for i := 0; time.Now().Before(deadline); i++ {
			var err error
			switch i % 3 {
			case 0:
				err = sb.Remove(ctx, "race/file", ".", false)
			case 1:
				err = sb.Remove(ctx, "race/dir", ".", true)
			default:
				err = sb.Reclaim(ctx, "race/dir", ".", time.Minute)
			}
			var nc *sandbox.NotConfinedError
			var pe *sandbox.PathError
			if err != nil && !errors.As(err, &nc) && !errors.As(err, &pe) && !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("removal %d: %v", i, err)
			}
		}
		victimIntact(t, sb, "after racing removals")
	})
}
