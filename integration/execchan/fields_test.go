package execchan

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// probe prints, section by section, everything a process inherits from whoever started it:
// identity, directory, umask, environment, rlimits, the status fields (ids, groups,
// capabilities, no_new_privs, seccomp, signal masks), its descriptors, cgroup, LSM label,
// session and process group, OOM score and its parent's view of it.
const probe = `
echo "== id"; id
echo "== pwd"; pwd
echo "== umask"; umask
echo "== env"; env | sort
echo "== limits"; cat /proc/self/limits
echo "== status"; grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Seccomp_filters|SigBlk|SigIgn|SigCgt|Umask|CoreDumping)' /proc/$$/status
echo "== fds"; for f in /proc/$$/fd/*; do echo "${f##*/} $(readlink $f)"; done
echo "== cgroup"; cat /proc/self/cgroup
echo "== lsm"; cat /proc/self/attr/current 2>&1
echo "== session"; set -- $(sed 's/.*) //' /proc/$$/stat); [ "$3" = "$$" ] && echo "leads its group"; [ "$4" = "$$" ] && echo "leads its session"
echo "== oom"; cat /proc/self/oom_score_adj
echo "== tty"; [ -t 0 ] && echo tty0; [ -t 1 ] && echo tty1
echo "== end"
`

// pipeIDs are the inode numbers of pipes and sockets, different in every run.
var pipeIDs = regexp.MustCompile(`(pipe|socket):\[\d+\]`)

// TestExecChannelGivesWhatDockerExecGives runs the probe through the channel and through
// docker exec in the same sandbox and directory, and compares every section.
func TestExecChannelGivesWhatDockerExecGives(t *testing.T) {
	sb, eng := channelSandbox(t)
	eng.Reset()
	r := run(t, sb, sandbox.Shell(probe))
	onChannel(t, eng)
	if r.ExitCode != 0 {
		t.Fatalf("probe on the channel exited %d: %s", r.ExitCode, r.StderrBytes)
	}
	got := sections(string(r.StdoutBytes))
	wd := strings.TrimSpace(got["pwd"])
	want := sections(dockertest.Docker(t, "exec", "-w", wd, sb.ContainerName(), "sh", "-c", probe))
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("section %s missing on the channel", name)
		case norm(g) != norm(w):
			t.Errorf("section %s differs\nchannel:\n%s\ndocker exec:\n%s", name, g, w)
		}
	}
	if len(got) != len(want) || len(want) < 13 {
		t.Errorf("sections: channel %d, docker exec %d", len(got), len(want))
	}
	t.Logf("compared %d sections; the channel's:\n%s", len(want), r.StdoutBytes)
}

// norm drops what differs between any two runs: pipe inode numbers, and the trailing newline
// the test's docker helper trims.
func norm(s string) string { return strings.TrimSpace(pipeIDs.ReplaceAllString(s, "$1")) }

func sections(out string) map[string]string {
	m := map[string]string{}
	name := ""
	for line := range strings.SplitSeq(out, "\n") {
		if n, ok := strings.CutPrefix(line, "== "); ok {
			name = n
			m[name] = ""
			continue
		}
		if name != "" {
			m[name] += line + "\n"
		}
	}
	return m
}

// TestExecChannelReportsWhatDockerExecReports: exit codes, output on both streams, a
// process killed by a signal, and the start failures docker exec types.
func TestExecChannelReportsWhatDockerExecReports(t *testing.T) {
	sb, eng := channelSandbox(t)
	eng.Reset()
	r := run(t, sb, sandbox.Shell("echo out; echo err >&2; exit 7"))
	if string(r.StdoutBytes) != "out\n" || string(r.StderrBytes) != "err\n" || r.ExitCode != 7 {
		t.Errorf("got %q %q %d", r.StdoutBytes, r.StderrBytes, r.ExitCode)
	}
	if r := run(t, sb, sandbox.Shell("kill -9 $$")); r.ExitCode != 137 {
		t.Errorf("a process killed by SIGKILL exited %d, want 137 as docker exec says", r.ExitCode)
	}
	if r := run(t, sb, sandbox.Argv("true")); r.ExitCode != 0 {
		t.Errorf("true exited %d", r.ExitCode)
	}
	for _, c := range []struct {
		cmd   sandbox.Command
		wd    string
		cause sandbox.StartFailure
		code  int
	}{
		{sandbox.Argv("no-such-program"), "", sandbox.StartNoProgram, 127},
		{sandbox.Argv("/etc/passwd"), "", sandbox.StartPermission, 126},
		{sandbox.Argv("true"), "/no/such/dir", sandbox.StartWorkDir, 126},
	} {
		r, err := sb.Exec(itest.Context(t), c.cmd, c.wd, 30e9)
		if err != nil || r.NotStarted != c.cause || r.ExitCode != c.code || len(r.StdoutBytes) != 0 || len(r.StderrBytes) == 0 {
			t.Errorf("%v in %q: got %+v, %v; want exit %d with the supervisor's words on stderr, not started (%s)", c.cmd, c.wd, r, err, c.code, c.cause)
		}
	}
	onChannel(t, eng)
}

// TestExecChannelCallerGoneLeavesTheCommandRunning: a caller that stops waiting (its context
// cancelled, as a NATS wait_ms ends the wait) gets its context's error, and the command runs
// on, as a docker exec whose client went away does; only the exec's own timeout or the output
// budget kills (revision 1 of the protocol killed on the connection's close).
func TestExecChannelCallerGoneLeavesTheCommandRunning(t *testing.T) {
	sb, eng := channelSandbox(t)
	eng.Reset()
	ctx, cancel := context.WithTimeout(itest.Context(t), 500*time.Millisecond)
	defer cancel()
	if _, err := sb.Exec(ctx, sandbox.Shell("sleep 2; echo ran > /tmp/caller-gone"), "", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec past its caller's wait: %v, want the caller's context error", err)
	}
	for i := 0; ; i++ {
		r := run(t, sb, sandbox.Shell("cat /tmp/caller-gone 2>/dev/null; true"))
		if string(r.StdoutBytes) == "ran\n" {
			break
		}
		if i > 100 {
			t.Fatal("the command was stopped with its caller's wait; want it left running as docker exec leaves it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	onChannel(t, eng)
}
