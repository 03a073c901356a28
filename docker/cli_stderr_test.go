package docker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// Lines marked "captured" were provoked on the development machine: the docker 28.2.2 client
// against the 20.10.24 engine (API 1.41). The others are the wordings the spec quotes for older
// clients and newer engines.
const (
	capturedNoSuchContainer   = "Error response from daemon: No such container: nosuchctr\n"
	capturedNoSuchObject      = "Error: No such object: nosuchctr\n"
	capturedStartMissing      = "Error response from daemon: No such container: nosuchctr\nError: failed to start containers: nosuchctr\n"
	capturedNotPaused         = "Error response from daemon: Container 341ecf75771c7728707a587ed85e14dcb86447392a2122c51fffbdb1d2c43965 is not paused\n"
	capturedUnableToFreeze    = "Error response from daemon: Cannot pause container f8365a4cebc91ce12d6cb085152a6d08c59b117c563ffa35e1420339e0f97ee3: OCI runtime pause failed: unable to freeze: unknown\n"
	capturedAlreadyPaused     = "Error response from daemon: Container 341ecf75771c7728707a587ed85e14dcb86447392a2122c51fffbdb1d2c43965 is already paused\n"
	capturedNotRunning        = "Error response from daemon: Container 4adc9da174f2d7ff1ceea2fa3df76f5aaefdeb0a75e5c01e4a3a1f20d9986310 is not running\n"
	capturedConflict          = "docker: Error response from daemon: Conflict. The container name \"/capA\" is already in use by container \"341ecf75771c7728707a587ed85e14dcb86447392a2122c51fffbdb1d2c43965\". You have to remove (or rename) that container to be able to reuse that name.\n\nRun 'docker run --help' for more information\n"
	capturedNoSuchImage       = "Error response from daemon: no such image: nosuch/image:tag: No such image: nosuch/image:tag\n"
	capturedNetworkExists     = "Error response from daemon: network with name capnet already exists\n"
	capturedNetworkMissing    = "Error response from daemon: network capnet not found\nexit status 1\n"
	capturedNoDaemon          = "Cannot connect to the Docker daemon at unix:///tmp/capture/nosock.sock. Is the docker daemon running?\n"
	capturedRefusedTCP        = "Cannot connect to the Docker daemon at tcp://127.0.0.1:1. Is the docker daemon running?\n"
	capturedContextDeleted    = "Failed to initialize: unable to resolve docker endpoint: context \"capctx\": context not found: open /tmp/capture/cfg/contexts/meta/39cf7f3740c956685ef7d5bd357c0b77c9b31b270a7a83e473aada03acd0b13a/meta.json: no such file or directory\n"
	capturedRunStartFailed    = "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"nosuchcmd\": executable file not found in $PATH: unknown\n\nRun 'docker run --help' for more information\n"
	capturedPathMissing       = "Error response from daemon: Could not find the file /no/such/file in container capA\n"
	capturedPathUnderFile     = "Error response from daemon: lstat /var/lib/docker/fuse-overlayfs/7692f5bd49a407f1158ee32d55176bc77de5623ac1de4b5efdda62391a2a33a3/merged/etc/passwd/x: not a directory\n"
	capturedFrozenByName      = "Error response from daemon: Container capA is paused, unpause the container before exec\n"
	capturedFrozenByID        = "Error response from daemon: Container d3c673f31aa29d003e679d4f85d7ee92229cbbdb1fe244364755479488ba5076 is paused, unpause the container before exec\n"
	olderContextGone          = "context \"capctx\" does not exist\n"
	olderPathOrContainer      = "Error: No such container:path: capA:/no/such/file\n"
	newerPathMissing          = "Error response from daemon: Could not find the file /maf-sandbox/work/out in container maf-sandbox-docker-0123456789ab\n"
	socketNoSuchFile          = "error during connect: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.41/containers/capA/archive\": dial unix /var/run/docker.sock: connect: no such file or directory\n"
	permissionDeniedOnSocket  = "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.41/containers/json\": dial unix /var/run/docker.sock: connect: permission denied\n"
	otherContainerMissing     = "Error response from daemon: No such container: capB\n"
	containerRestartingAnswer = "Error response from daemon: Container capA is restarting, wait until the container is running\n"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		target string
		stderr string
		want   error
	}{
		{"container inspect, absent", []string{"container", "inspect"}, "nosuchctr", capturedNoSuchContainer, ErrNotFound},
		{"inspect, absent", []string{"inspect"}, "nosuchctr", capturedNoSuchObject, ErrNotFound},
		{"rm, absent", []string{"rm", "-f"}, "nosuchctr", capturedNoSuchContainer, ErrNotFound},
		{"start, absent", []string{"start"}, "nosuchctr", capturedStartMissing, ErrNotFound},
		{"pause, absent", []string{"pause"}, "nosuchctr", capturedNoSuchContainer, ErrNotFound},
		{"unpause, absent", []string{"unpause"}, "nosuchctr", capturedNoSuchContainer, ErrNotFound},
		{"unpause, not paused", []string{"unpause"}, "capA", capturedNotPaused, errNotPaused},
		{"pause, already paused", []string{"pause"}, "capA", capturedAlreadyPaused, ErrPaused},
		{"pause, stopped", []string{"pause"}, "capC", capturedNotRunning, ErrNotRunning},
		{"pause, the freezer gave up", []string{"pause"}, "capA", capturedUnableToFreeze, ErrFreezeFailed},
		{"run, name in use", []string{"run", "-d"}, "capA", capturedConflict, ErrConflict},
		{"create, name in use", []string{"create"}, "capA", capturedConflict, ErrConflict},
		{"run, start failed", []string{"run", "-d"}, "capC", capturedRunStartFailed, nil},
		{"image inspect, absent", []string{"image", "inspect"}, "nosuch/image:tag", capturedNoSuchImage, ErrNotFound},
		{"network create, exists", []string{"network", "create"}, "capnet", capturedNetworkExists, ErrNetworkExists},
		{"network rm, absent", []string{"network", "rm"}, "capnet", capturedNetworkMissing, ErrNotFound},
		{"daemon socket missing", []string{"rm", "-f"}, "capA", capturedNoDaemon, ErrUnreachable},
		{"daemon refusing TCP", []string{"container", "inspect"}, "capA", capturedRefusedTCP, ErrUnreachable},
		{"bound context deleted, named like the target", []string{"rm", "-f"}, "capctx", capturedContextDeleted, ErrUnreachable},
		{"older client, context gone", []string{"pause"}, "capA", olderContextGone, ErrUnreachable},
		{"socket no such file is never absence", []string{"rm", "-f"}, "capA", socketNoSuchFile, ErrUnreachable},
		{"socket permission denied", []string{"ps"}, "", permissionDeniedOnSocket, ErrUnreachable},
		{"another target's absence is not ours", []string{"rm", "-f"}, "capA", otherContainerMissing, nil},
		{"our target named without absence", []string{"pause"}, "capA", containerRestartingAnswer, nil},
		{"conflict wording outside run", []string{"start"}, "capA", capturedConflict, nil},
		{"no target, no absence", []string{"ps"}, "", capturedNoSuchContainer, nil},
		{"target match ignores case", []string{"container", "inspect"}, "NoSuchCtr", capturedNoSuchContainer, ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.args, tc.target, []byte(tc.stderr))
			if got != tc.want {
				t.Fatalf("classify = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPathAbsence(t *testing.T) {
	cases := []struct {
		name      string
		stderr    string
		target    string
		path      string
		wantNamed bool
		wantOlder bool
	}{
		{"captured, exact path", capturedPathMissing, "capA", "/no/such/file", true, false},
		{"newer wording", newerPathMissing, "maf-sandbox-docker-0123456789ab", "/maf-sandbox/work/out", true, false},
		{"a parent is not absent because its child is", capturedPathMissing, "capA", "/no/such", false, false},
		{"a child is not absent because its parent is", capturedPathMissing, "capA", "/no/such/file/x", false, false},
		{"path compared case-sensitively", capturedPathMissing, "capA", "/NO/such/file", false, false},
		{"under a file is not absence", capturedPathUnderFile, "capA", "/etc/passwd/x", false, false},
		{"container gone is not path absence", capturedNoSuchContainer, "nosuchctr", "/etc/passwd", false, false},
		{"socket no such file is not path absence", socketNoSuchFile, "capA", "/var/run/docker.sock", false, false},
		{"older client line", olderPathOrContainer, "capA", "/no/such/file", false, true},
		{"older client line, other target", olderPathOrContainer, "capB", "/no/such/file", false, false},
		{"older client line, other path", olderPathOrContainer, "capA", "/no/such", false, false},
		{"older client line with more text", "Error: No such container:path: capA:/no/such/file and more\n", "capA", "/no/such/file", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := isPathAbsentNamed([]byte(tc.stderr), tc.path); got != tc.wantNamed {
				t.Fatalf("form (a) = %v, want %v", got, tc.wantNamed)
			}
			if got := isPathAbsentOlderClient([]byte(tc.stderr), tc.target, tc.path); got != tc.wantOlder {
				t.Fatalf("form (b) = %v, want %v", got, tc.wantOlder)
			}
		})
	}
}

func TestFrozenRefusal(t *testing.T) {
	cases := []struct {
		name   string
		exit   int
		stdout string
		stderr string
		want   bool
	}{
		{"captured, by name", 1, "", capturedFrozenByName, true},
		{"captured, by ID", 1, "", capturedFrozenByID, true},
		{"leading whitespace", 1, "", "  \n" + capturedFrozenByName, true},
		{"the guest wrote stdout", 1, "x", capturedFrozenByName, false},
		{"exit zero", 0, "", capturedFrozenByName, false},
		{"without the daemon prefix", 1, "", "Container capA is paused, unpause the container before exec\n", false},
		{"prefix not at the start", 1, "", "guest says: " + capturedFrozenByName, false},
		{"other daemon answer", 1, "", capturedNotRunning, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := isFrozenRefusal(tc.exit, []byte(tc.stdout), []byte(tc.stderr)); got != tc.want {
				t.Fatalf("isFrozenRefusal = %v, want %v", got, tc.want)
			}
		})
	}
}

// answers sets the fake client's answer to one subcommand.
func answers(sub string, exit int, stdout, stderr string) []string {
	return []string{
		"FAKE_" + sub + "_EXIT=" + strconv.Itoa(exit),
		"FAKE_" + sub + "_STDOUT=" + stdout,
		"FAKE_" + sub + "_STDERR=" + stderr,
	}
}

func TestRemoveOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		exit    int
		stdout  string
		stderr  string
		want    RemoveOutcome
		wantErr error
	}{
		{"removed", 0, "capA\n", "", Removed, nil},
		{"exit 0 naming nothing: absent (both clients)", 0, "", capturedNoSuchContainer, Absent, nil},
		{"non-zero absence", 1, "", "Error response from daemon: No such container: capA\n", Absent, nil},
		{"daemon unreachable", 1, "", capturedNoDaemon, 0, ErrUnreachable},
		{"already being removed", 1, "", "Error response from daemon: removal of container capA is already in progress\n", 0, errRemovalInProgress},
		{"refused", 1, "", "Error response from daemon: container capA: driver failed to remove root filesystem\n", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newFakeCLI(t, answers("rm", tc.exit, tc.stdout, tc.stderr)...)
			got, err := c.removeOnce(context.Background(), "capA") // one answer; Remove waits out "in progress"
			if tc.want == 0 && err == nil {
				t.Fatalf("Remove = %v, want an error", got)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.want != 0 && (err != nil || got != tc.want) {
				t.Fatalf("Remove = %v, %v; want %v", got, err, tc.want)
			}
			var ce *CommandError
			if tc.want == 0 && (!errors.As(err, &ce) || ce.ExitCode != tc.exit) {
				t.Fatalf("err = %#v, want a *CommandError", err)
			}
		})
	}
}

func TestUnpauseLifted(t *testing.T) {
	cases := []struct {
		name    string
		exit    int
		stderr  string
		wantErr error
	}{
		{"unpaused", 0, "", nil},
		{"not paused counts as lifted", 1, capturedNotPaused, nil},
		{"absent counts as lifted", 1, "Error response from daemon: No such container: capA\n", nil},
		{"unreachable is not lifted", 1, capturedNoDaemon, ErrUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newFakeCLI(t, answers("unpause", tc.exit, "", tc.stderr)...)
			if err := c.Unpause(context.Background(), "capA"); !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestExecClassification(t *testing.T) {
	cases := []struct {
		name     string
		exit     int
		stdout   string
		stderr   string
		wantErr  error
		wantExit int
	}{
		{"frozen refusal", 1, "", capturedFrozenByName, ErrPaused, 1},
		{"the guest's own failure is a result", 1, "", "Error: No such container: capA\n", nil, 1},
		{"a refusal wording with stdout is the guest's", 1, "out", capturedFrozenByName, nil, 1},
		{"exit code passes through", 42, "o", "e", nil, 42},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newFakeCLI(t, answers("exec", tc.exit, tc.stdout, tc.stderr)...)
			out, err := c.Exec(context.Background(), ExecRequest{Target: "capA", Argv: []string{"true"}})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if out.ExitCode != tc.wantExit || string(out.Stdout) != tc.stdout || string(out.Stderr) != tc.stderr {
				t.Fatalf("output %+v", out)
			}
		})
	}
}

func TestCopyOutAbsence(t *testing.T) {
	id := strings.Repeat("ab", 32)
	inspectOK := answers("container", 0, `{"Id":"`+id+`","Name":"/capA","State":{"Status":"running","Running":true}}`, "")
	inspectGone := answers("container", 1, "", "Error response from daemon: No such container: "+id+"\n")
	cases := []struct {
		name      string
		target    string
		path      string
		env       []string
		wantNil   bool // Stat: (nil, nil)
		wantErr   error
		notErr    error
		inspected bool
	}{
		{"form (a) is absence", "capA", "/no/such/file", answers("cp", 1, "", capturedPathMissing), true, nil, nil, false},
		{"form (b) by name is unconfirmed", "capA", "/no/such/file", answers("cp", 1, "", olderPathOrContainer), false, ErrPathAbsentUnconfirmed, ErrPathAbsent, false},
		{"form (b) by ID, instance confirmed", id, "/x",
			append(answers("cp", 1, "", "Error: No such container:path: "+id+":/x\n"), inspectOK...), true, nil, nil, true},
		{"form (b) by ID, container gone", id, "/x",
			append(answers("cp", 1, "", "Error: No such container:path: "+id+":/x\n"), inspectGone...), false, ErrNotFound, ErrPathAbsent, true},
		{"container gone (newer wording) is not path absence", "capA", "/etc/passwd",
			answers("cp", 1, "", "Error response from daemon: No such container: capA\n"), false, ErrNotFound, ErrPathAbsent, false},
		{"unreachable is not absence", "capA", "/etc/passwd", answers("cp", 1, "", socketNoSuchFile), false, ErrUnreachable, ErrPathAbsent, false},
		{"a parent's absence answer for a child path is a failure", "capA", "/no/such",
			answers("cp", 1, "", capturedPathMissing), false, nil, ErrPathAbsent, false},
		{"no header on success", "capA", "/x", answers("cp", 0, "", ""), false, errNoTarHeader, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, logPath := newFakeCLI(t, tc.env...)
			e, err := c.Stat(context.Background(), tc.target, tc.path)
			if tc.wantNil {
				if e != nil || err != nil {
					t.Fatalf("Stat = %v, %v; want absence", e, err)
				}
			} else if err == nil {
				t.Fatalf("Stat = %+v, want an error", e)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.notErr != nil && errors.Is(err, tc.notErr) {
				t.Fatalf("err = %v must not match %v", err, tc.notErr)
			}
			inspected := false
			for _, l := range readLog(t, logPath) {
				inspected = inspected || strings.Contains(l, " container inspect ")
			}
			if inspected != tc.inspected {
				t.Fatalf("inspected = %v, want %v", inspected, tc.inspected)
			}
			_, _, err = c.Read(context.Background(), tc.target, tc.path, 10)
			if tc.wantNil && !errors.Is(err, ErrPathAbsent) {
				t.Fatalf("Read err = %v, want ErrPathAbsent", err)
			}
		})
	}
}

// The daemon's answer to an exec in a container that is gone, as both drivers hand it over;
// only its exact shape qualifies, and the caller still confirms it with Inspect.
func TestExecAnswersAbsent(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	captured := "Error response from daemon: No such container: " + id + "\n" // captured: docker 28.2.2 exec, 20.10.24 engine
	cases := []struct {
		name string
		out  ExecOutput
		want bool
	}{
		{"captured", ExecOutput{ExitCode: 1, Stderr: []byte(captured)}, true},
		{"older client", ExecOutput{ExitCode: 1, Stderr: []byte("Error: No such container: " + id + "\n")}, true},
		{"another container", ExecOutput{ExitCode: 1, Stderr: []byte(otherContainerMissing)}, false},
		{"a prefix of the target", ExecOutput{ExitCode: 1, Stderr: []byte("Error response from daemon: No such container: " + id[:12] + "\n")}, false},
		{"stdout too", ExecOutput{ExitCode: 1, Stdout: []byte("x"), Stderr: []byte(captured)}, false},
		{"other exit code", ExecOutput{ExitCode: 2, Stderr: []byte(captured)}, false},
		{"more lines", ExecOutput{ExitCode: 1, Stderr: []byte("boom\n" + captured)}, false},
		{"success", ExecOutput{ExitCode: 0}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExecAnswersAbsent(tc.out, id); got != tc.want {
				t.Fatalf("ExecAnswersAbsent = %v, want %v", got, tc.want)
			}
		})
	}
}

// The runtime's refusals to start an exec's process, captured (docker 28.2.2 client, 20.10.24
// engine, runc 1.1): each was the whole of the exec's stdout, status 126, stderr empty.
const (
	capturedExecNoWorkDir  = "OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/nonexistent\") set in config.json failed: no such file or directory: unknown\r\n"
	capturedExecNoBinary   = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/nonexistent-binary\": stat /nonexistent-binary: no such file or directory: unknown\r\n"
	capturedExecNotOnPath  = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"nosuchcmd\": executable file not found in $PATH: unknown\r\n"
	capturedExecNotExec    = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/etc/passwd\": permission denied: unknown\r\n"
	capturedExecNoUser     = "unable to find user nosuchuser: no matching entries in passwd file\r\n"
	olderExecNotOnPath     = "OCI runtime exec failed: exec failed: container_linux.go:380: starting container process caused: exec: \"nosuchcmd\": executable file not found in $PATH: unknown\r\n"
	capturedShellNotFound  = "sh: nosuchcmd: not found\n" // sh -c nosuchcmd: stderr, exit 127
	capturedIssue29WorkDir = "OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/maf-sandbox/work\") set in config.json failed: no such file or directory: unknown\r\n"
)

func TestExecStartFailure(t *testing.T) {
	cases := []struct {
		name           string
		code           int
		stdout, stderr string
		want           sandbox.StartFailure // "" for a result
	}{
		{"missing working directory", 126, capturedExecNoWorkDir, "", sandbox.StartWorkDir},
		{"issue 29's storage base", 126, capturedIssue29WorkDir, "", sandbox.StartWorkDir},
		{"missing binary by path", 126, capturedExecNoBinary, "", sandbox.StartNoProgram},
		{"missing binary on PATH", 126, capturedExecNotOnPath, "", sandbox.StartNoProgram},
		{"older runc wording", 126, olderExecNotOnPath, "", sandbox.StartNoProgram},
		{"a later daemon's 127", 127, capturedExecNotOnPath, "", sandbox.StartNoProgram},
		{"not executable", 126, capturedExecNotExec, "", sandbox.StartPermission},
		{"unknown user", 126, capturedExecNoUser, "", sandbox.StartUser},
		{"sh's own not found is the program's", 127, "", capturedShellNotFound, ""},
		{"exit 127 with nothing is the program's", 127, "", "", ""},
		{"exit 126 with nothing is the program's", 126, "", "", ""},
		{"the line echoed (LF) is the program's", 126, strings.TrimSuffix(capturedExecNotOnPath, "\r\n") + "\n", "", ""},
		{"the line and more output is the program's", 126, "first\n" + capturedExecNotOnPath, "", ""},
		{"the line with stderr is the program's", 126, capturedExecNotOnPath, "x\n", ""},
		{"another status is the program's", 1, capturedExecNotOnPath, "", ""},
		{"an unmarked CRLF line is the program's", 126, "no such file or directory\r\n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, cause, ok := execStartFailure(tc.code, []byte(tc.stdout), []byte(tc.stderr))
			if ok != (tc.want != "") || cause != tc.want {
				t.Fatalf("execStartFailure = %q, %q, %v; want %q", msg, cause, ok, tc.want)
			}
			if ok && (msg != strings.TrimSuffix(tc.stdout, "\r\n")) {
				t.Fatalf("message %q", msg)
			}
		})
	}
}
