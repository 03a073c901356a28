package hosttools

import (
	"bytes"
	"context"
	_ "embed"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/mafsandbox/engine/sandbox"
)

// watcherSource is the guest's hint watcher: inotify through ctypes, in the python3 the
// image has. Busybox inotifyd would do as well, but no image this project builds has the
// applet, so no test could show it.
//
//go:embed maf_host_tools_watch.py
var watcherSource string

// Bounds of the built-in hint.
const (
	// hintOutputCap bounds what the watcher's exec may print in all: a guest that floods
	// it ends the hint (the poll remains), it cannot grow the host's memory.
	hintOutputCap = 1 << 20
	// hintLineCap is the longest line read as a name; longer lines are skipped whole.
	hintLineCap = 64
	// hintExecGrace keeps the watcher's exec bound past the watcher's own deadline, so the
	// exec always ends, or is abandoned, before a backend's exec timeout would discard the
	// sandbox.
	hintExecGrace = 30 * time.Second
	// hintReadyWait bounds how long the start gate waits for the watcher to watch.
	hintReadyWait = 2 * time.Second
)

// hintName is a request's file name, as a hint line says it.
var hintName = regexp.MustCompile(`^([0-9]{4,9})\.request\.json$`)

// WatcherHint is the built-in [Hint], chosen by [RunProgram] when the sandbox streams exec
// output ([sandbox.StreamingExec]) and no other hint is given: one exec of a small python3
// inotify watcher (maf_host_tools_watch.py) that prints the name of each file renamed into
// host_tools/host_tool_calls/ or host_tools/, and exits when host_tools/ is removed or the
// run's bound (plus grace) has passed. An image without python3 or inotify prints "none"
// and the run keeps the poll alone.
//
// Its lines are hints only: a line wakes the supervisor when it names a request file or the
// exit marker, and the supervisor then reads through the confined file plane as it would at
// its poll. Wakes are coalesced (one pending at a time), and a wake whose look found nothing
// spaces the next one out further (see [RunProgram]); garbage is skipped. The watcher's
// output is capped at 1 MiB: past it the hint ends and the poll remains. The channel is
// closed when the watcher's exec ends.
func WatcherHint(bound time.Duration) Hint {
	return func(ctx context.Context, sb sandbox.Sandbox, l Layout) <-chan struct{} {
		se, ok := sb.(sandbox.StreamingExec)
		if !ok {
			return nil
		}
		ch := make(chan struct{}, 1)
		secs := strconv.FormatFloat((bound + finalLookGrace + reclaimGrace).Seconds(), 'f', 1, 64)
		cmd := sandbox.Shell("command -v python3 >/dev/null 2>&1 && exec python3 -I -S -c " + shq(watcherSource) +
			" " + shq(l.Transport) + " " + secs + "; echo none")
		ready, readyOnce := make(chan struct{}), sync.Once{}
		say := func() { readyOnce.Do(func() { close(ready) }) }
		lines := &hintLines{wake: func() {
			select {
			case ch <- struct{}{}:
			default: // one wake pending is as good as many
			}
		}}
		go func() {
			defer close(ch) // emit is never called after ExecStreaming returns
			defer say()
			_, _ = se.ExecStreaming(ctx, cmd, "/", bound+finalLookGrace+reclaimGrace+hintExecGrace, hintOutputCap,
				func(stream string, p []byte) {
					if stream == "stdout" {
						say() // "ready" or "none": either way the watcher has had its say
						lines.feed(p)
					}
				})
		}()
		// The gate opens once the watcher watches (or said it cannot), so the program's
		// first request is hinted too; a watcher slower than hintReadyWait is not waited
		// for: the poll finds what it misses.
		t := time.NewTimer(hintReadyWait)
		defer t.Stop()
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
		}
		return ch
	}
}

// hintLines splits the watcher's stdout into lines and wakes on the ones that name a file
// the supervisor looks for. It keeps at most hintLineCap bytes of a partial line.
type hintLines struct {
	wake func()
	line []byte
	skip bool // the current line grew past hintLineCap
}

func (h *hintLines) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !h.skip && len(h.line)+len(chunk) <= hintLineCap {
			h.line = append(h.line, chunk...)
		} else {
			h.skip, h.line = true, h.line[:0]
		}
		if i < 0 {
			return
		}
		if !h.skip && wakesOn(h.line) {
			h.wake()
		}
		h.line, h.skip, p = h.line[:0], false, p[i+1:]
	}
}

// wakesOn reports whether a watcher line names a request file or the exit marker.
func wakesOn(line []byte) bool {
	s := string(bytes.TrimSpace(line))
	return s == ExitFile || hintName.MatchString(s)
}
