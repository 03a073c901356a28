package execchan

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestExecChannelAnswersABackgroundChild: a command that leaves a child running with its
// output still open answers as docker exec answers, with its own exit and output, once the
// pipes' grace after its exit is spent; the child runs on, and the sandbox stays usable. Each
// case's child sleeps a distinct time, so the check finds it by its command line.
func TestExecChannelAnswersABackgroundChild(t *testing.T) {
	sb, eng := channelSandbox(t)
	eng.Reset()
	// The output the command writes just before it exits, a background child holding both
	// pipes: every byte of it is delivered.
	const lines = 20000 // about 230 KB, more than a pipe and a socket buffer together
	var want bytes.Buffer
	for i := range lines {
		want.WriteString("line ")
		want.WriteString(itoa(i))
		want.WriteByte('\n')
	}
	for _, tc := range []struct {
		name, shell    string
		stdout, stderr string
		code           int
		child          string
	}{
		{"echo", "sleep 301 & echo done", "done\n", "", 0, "sleep 301"},
		{"exit code and stderr", "sleep 302 & echo out; echo err >&2; exit 3", "out\n", "err\n", 3, "sleep 302"},
		{"output up to the exit", "sleep 303 & i=0; while [ $i -lt " + itoa(lines) + " ]; do echo line $i; i=$((i+1)); done; echo last >&2",
			want.String(), "last\n", 0, "sleep 303"},
		{"a child in a session of its own", "setsid sleep 304 & echo detached", "detached\n", "", 0, "sleep 304"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sb.Exec(itest.Context(t), sandbox.Shell(tc.shell), "", 15*time.Second)
			if err != nil {
				t.Fatalf("exec with a background child: %v; want its result as docker exec gives it", err)
			}
			if r.ExitCode != tc.code || string(r.StdoutBytes) != tc.stdout || string(r.StderrBytes) != tc.stderr {
				t.Fatalf("got exit %d, %d bytes of stdout (%q…), stderr %q; want exit %d, %d bytes, %q",
					r.ExitCode, len(r.StdoutBytes), head(r.StdoutBytes), r.StderrBytes, tc.code, len(tc.stdout), tc.stderr)
			}
			// The sandbox answers the next command, and the child still runs.
			ps := run(t, sb, sandbox.Shell(`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done`))
			if !strings.Contains(ps.Stdout(), tc.child+" ") {
				t.Fatalf("the background child %q is not running after the answer:\n%s", tc.child, ps.Stdout())
			}
		})
	}
	onChannel(t, eng)
}

func head(b []byte) []byte { return b[:min(len(b), 40)] }
