package docker

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// The daemon's answer to an exec in a container that is gone, as Exec hands it over;
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
		{"another container", ExecOutput{ExitCode: 1, Stderr: []byte("Error response from daemon: No such container: capB\n")}, false},
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
	capturedExecNoWorkDir = "OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/nonexistent\") set in config.json failed: no such file or directory: unknown\r\n"
	capturedExecNoBinary  = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/nonexistent-binary\": stat /nonexistent-binary: no such file or directory: unknown\r\n"
	capturedExecNotOnPath = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"nosuchcmd\": executable file not found in $PATH: unknown\r\n"
	capturedExecNotExec   = "OCI runtime exec failed: exec failed: unable to start container process: exec: \"/etc/passwd\": permission denied: unknown\r\n"
	capturedExecNoUser    = "unable to find user nosuchuser: no matching entries in passwd file\r\n"
	olderExecNotOnPath    = "OCI runtime exec failed: exec failed: container_linux.go:380: starting container process caused: exec: \"nosuchcmd\": executable file not found in $PATH: unknown\r\n"
	capturedShellNotFound = "sh: nosuchcmd: not found\n" // sh -c nosuchcmd: stderr, exit 127
	capturedBaseWorkDir   = "OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (\"/maf-sandbox/work\") set in config.json failed: no such file or directory: unknown\r\n"
)

func TestExecStartFailure(t *testing.T) {
	cases := []struct {
		name           string
		code           int
		stdout, stderr string
		want           sandbox.StartFailure // "" for a result
	}{
		{"missing working directory", 126, capturedExecNoWorkDir, "", sandbox.StartWorkDir},
		{"the storage base", 126, capturedBaseWorkDir, "", sandbox.StartWorkDir},
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
