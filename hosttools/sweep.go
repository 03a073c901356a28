package hosttools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/sandbox"
)

// ErrLeftoverProcesses says a sweep found processes it could not signal: a run does not start
// beside them, since one could forge its calls and its exit marker. Dispose the sandbox.
var ErrLeftoverProcesses = errors.New("hosttools: processes left in the sandbox could not be ended; dispose it")

// sweepGrace bounds one sweep.
const sweepGrace = 10 * time.Second

// sweepScript ends every process in the container that no live exec holds, but for the
// container's own (PID 1 and its session): what an earlier run or exec left running,
// however it detached. A process is held by a live exec when its parent chain reaches a
// process whose parent is outside the container (PPid 0: an exec's root, this sweep's shell
// among them); a detached one was reparented to PID 1, which no guest can undo, whereas a
// session or a group a guest chooses itself. Each round stops what it finds, so nothing
// found can fork past the sweep, and the rounds go on until one finds nothing new; then
// everything stopped is killed. A command the exec channel runs is a child of PID 1 (the
// channel's supervisor), as a leftover is; the engine names those roots, as held, before the
// script ($held: " pid pid "). It uses shell builtins only (no fork of its own), parses
// /proc/<pid>/stat after the last ") " (the command name is the guest's), and prints
// "swept <killed> <refused>".
const sweepScript = `stat_of() {
  { read -r l < "/proc/$1/stat"; } 2>/dev/null || return 1
  set -- ${l##*") "}
  ST=$1 PP=$2 SS=$4
}
left() {
  stat_of "$1" || return 1
  [ "$ST" = Z ] && return 1
  [ "$SS" = 1 ] && return 1
  case "$held" in *" $1 "*) return 1 ;; esac
  q=$PP
  while [ "$q" != 0 ]; do
    case "$held" in *" $q "*) return 1 ;; esac
    [ "$q" = 1 ] && return 0
    stat_of "$q" || { again=1; return 1; }
    q=$PP
  done
  return 1
}
stopped=' '
n=0
while [ $n -lt 64 ]; do
  n=$((n+1)) new=0 again=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$p" in 1|$$) continue ;; esac
    case "$stopped" in *" $p "*) continue ;; esac
    if left "$p"; then kill -STOP "$p" 2>/dev/null; stopped="$stopped$p " new=1; fi
  done
  [ $new = 0 ] && [ $again = 0 ] && break
done
killed=0 refused=0
for p in $stopped; do
  if kill -KILL "$p" 2>/dev/null; then killed=$((killed+1)); elif [ -e "/proc/$p" ]; then refused=$((refused+1)); fi
done
echo "swept $killed $refused"
`

// sweep ends what earlier runs and execs left running in the sandbox (see sweepScript) and
// returns how many processes it ended. The sandbox's exec user signals them, as it signals a
// timed-out program. It fails with [ErrLeftoverProcesses] when some could not be signalled.
func sweep(ctx context.Context, sb sandbox.Sandbox) (int, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepGrace)
	defer cancel()
	res, err := sb.Exec(sctx, sandbox.Shell(heldRoots(sb)+sweepScript), "/", sweepGrace)
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("the sweep exited %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr()))
	}
	f := strings.Fields(res.Stdout())
	if len(f) != 3 || f[0] != "swept" {
		return 0, nil // a sandbox whose exec is not a shell's (a fake) reports nothing
	}
	killed, _ := strconv.Atoi(f[1])
	if refused, _ := strconv.Atoi(f[2]); refused > 0 {
		return killed, fmt.Errorf("%w (%d could not be signalled)", ErrLeftoverProcesses, refused)
	}
	return killed, nil
}

// channelRooted is a sandbox whose commands may run under its own supervisor (the exec
// channel, actors.Sandbox) rather than docker exec: it names the roots of those running now.
type channelRooted interface{ LiveExecRoots() []int }

// heldRoots is the script's first line: the live channel commands' roots, which the sweep
// spares with their trees. Pids are numbers the engine holds, never the guest's words.
func heldRoots(sb sandbox.Sandbox) string {
	var b strings.Builder
	b.WriteString("held=' ")
	if r, ok := sb.(channelRooted); ok {
		for _, pid := range r.LiveExecRoots() {
			b.WriteString(strconv.Itoa(pid) + " ")
		}
	}
	b.WriteString("'\n")
	return b.String()
}

// sweepBefore clears the sandbox before a program is launched: nothing left by an earlier run
// or exec may answer for this one.
func (s *supervisor) sweepBefore(ctx context.Context) error {
	n, err := sweep(ctx, s.sb)
	if err != nil {
		return fmt.Errorf("host tools: end the processes left in the sandbox: %w", err)
	}
	if n > 0 {
		s.logger.Info("host tools: ended processes left in the sandbox before the run", zap.Int("processes", n))
	}
	return nil
}

// sweepAfter ends what the run left, whatever the run's outcome.
func (s *supervisor) sweepAfter(ctx context.Context) {
	n, err := sweep(ctx, s.sb)
	switch {
	case err != nil:
		s.logger.Warn("host tools: the processes the run left could not all be ended; the next run ends them or refuses", zap.Error(err))
	case n > 0:
		s.logger.Debug("host tools: ended processes the run left", zap.Int("processes", n))
	}
}
