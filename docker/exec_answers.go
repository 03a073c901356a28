package docker

import (
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// This file reads the two exec answers whose meaning the engine gives only in words: the
// daemon's refusal of an exec in a container that is gone (which Exec hands over as a result,
// exit 1, the way the docker client prints it), and the runtime's failure to start an exec's
// process (which the daemon writes where the program's output would be). Each rule quotes the
// answers it was written against (a 20.10 engine, runc 1.1); nothing else in the package
// reads an answer's text to decide anything, except the subnet overlap of a network create
// (api_network.go).

// ExecAnswersAbsent reports whether a failed exec's output has the shape of the daemon's answer
// that the target container does not exist: exit 1, nothing on stdout, and stderr naming the
// target in a "no such container" line, which [Engine.Exec] builds from the exec create's 404
// as the docker client prints it (older clients print the second form).
//
//	Error response from daemon: No such container: 0123…cdef
//	Error: No such container: 0123…cdef
//
// A guest program can print the same line and exit 1, so it proves nothing by itself: the
// caller treats the container as gone only once Inspect of the target answers [ErrNotFound].
func ExecAnswersAbsent(out ExecOutput, target string) bool {
	if out.ExitCode != 1 || len(out.Stdout) != 0 || target == "" {
		return false
	}
	s := strings.ToLower(strings.TrimSpace(stderrText(out.Stderr)))
	for _, prefix := range []string{"error response from daemon: ", "error: "} {
		if s == prefix+"no such container: "+strings.ToLower(target) {
			return true
		}
	}
	return false
}

// execStartMarkers are the runtime's words for a process it could not start. The daemon
// writes the runtime's error as one CRLF-terminated line on the exec's stdout, exits it 126
// (a 20.10 daemon; later ones may say 127) and writes nothing on stderr. Captured here (20.10
// daemon, runc 1.1):
//
//	OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd ("/nonexistent") set in config.json failed: no such file or directory: unknown
//	OCI runtime exec failed: exec failed: unable to start container process: exec: "/nonexistent-binary": stat /nonexistent-binary: no such file or directory: unknown
//	OCI runtime exec failed: exec failed: unable to start container process: exec: "nosuchcmd": executable file not found in $PATH: unknown
//	OCI runtime exec failed: exec failed: unable to start container process: exec: "/etc/passwd": permission denied: unknown
//	unable to find user nosuchuser: no matching entries in passwd file
//
// and older runc's "OCI runtime exec failed: exec failed: container_linux.go:380: starting
// container process caused: …".
var execStartMarkers = []string{
	"oci runtime exec failed",
	"unable to start container process",
	"starting container process caused",
	"unable to find user",
	"unable to find group",
}

// execStartFailure reports whether an exec's output has the shape of the runtime's failure to
// start its process: status 126 or 127, nothing on stderr, and stdout exactly one
// CRLF-terminated line carrying a runtime marker. A program's own 126/127 (sh's "not found"
// goes to stderr; echo ends its line with LF alone) does not have it. A program can still print
// the same line with printf and exit 126, so [Engine.Exec] also requires the exec to have had
// no process.
func execStartFailure(exitCode int, stdout, stderr []byte) (msg string, cause sandbox.StartFailure, ok bool) {
	if exitCode != 126 && exitCode != 127 || len(stderr) != 0 {
		return "", "", false
	}
	line, found := strings.CutSuffix(stderrText(stdout), "\r\n")
	if !found || line == "" || strings.ContainsAny(line, "\r\n") {
		return "", "", false
	}
	s := strings.ToLower(line)
	marked := false
	for _, m := range execStartMarkers {
		marked = marked || strings.Contains(s, m)
	}
	if !marked {
		return "", "", false
	}
	switch {
	case strings.Contains(s, "chdir to cwd"):
		cause = sandbox.StartWorkDir
	case strings.Contains(s, "unable to find user"), strings.Contains(s, "unable to find group"):
		cause = sandbox.StartUser
	case strings.Contains(s, "executable file not found"), strings.Contains(s, "exec: \"") && strings.Contains(s, "no such file or directory"):
		cause = sandbox.StartNoProgram
	case strings.Contains(s, "exec: \"") && strings.Contains(s, "permission denied"):
		cause = sandbox.StartPermission
	default:
		cause = sandbox.StartRuntime
	}
	return line, cause, true
}
