package docker

import (
	"regexp"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// This file is the only place that reads the client's stderr to decide anything. Each rule
// below quotes the answers it was written against: the docker 28 client talking to a 20.10
// engine (captured on the development machines) and the wordings the spec quotes for other
// client/engine pairs.

// unreachableMarkers are answers that mean the daemon or the bound context could not be reached.
// They are tested first: such an answer can carry "no such file or directory" (a socket or a
// context's metadata file), which must never read as absence.
//
//	Cannot connect to the Docker daemon at unix:///tmp/x.sock. Is the docker daemon running?
//	Failed to initialize: unable to resolve docker endpoint: context "x": context not found: open …/meta.json: no such file or directory
//	error during connect: … (older clients, TCP and Windows endpoints)
//	permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: …
var unreachableMarkers = []string{
	"cannot connect to the docker daemon",
	"is the docker daemon running",
	"error during connect",
	"unable to resolve docker endpoint",
	"context not found",
	"permission denied while trying to connect to the docker daemon",
}

// contextGone is the older clients' answer for a deleted context: context "x" does not exist.
var contextGone = regexp.MustCompile(`context "[^"]*" does not exist`)

func isUnreachable(stderr []byte) bool {
	s := strings.ToLower(stderrText(stderr))
	for _, m := range unreachableMarkers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return contextGone.MatchString(s)
}

// isTargetAbsent: the answer names the exact target and says "not found" or "no such".
//
//	Error response from daemon: No such container: nosuchctr
//	Error: No such object: nosuchctr
//	Error response from daemon: no such image: nosuch/image:tag: No such image: nosuch/image:tag
//	Error response from daemon: network capnet not found
func isTargetAbsent(stderr []byte, target string) bool {
	if target == "" {
		return false
	}
	s := strings.ToLower(stderrText(stderr))
	return strings.Contains(s, strings.ToLower(target)) &&
		(strings.Contains(s, "not found") || strings.Contains(s, "no such"))
}

// isPathAbsentNamed is form (a) of path absence: the guest path as a whole token (case-sensitive,
// bounded by start/end of text or whitespace) in an answer that says "could not find".
//
//	Error response from daemon: Could not find the file /no/such/file in container capA
func isPathAbsentNamed(stderr []byte, guestPath string) bool {
	s := stderrText(stderr)
	if !strings.Contains(strings.ToLower(s), "could not find") {
		return false
	}
	return regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(guestPath) + `(\s|$)`).MatchString(s)
}

// isPathAbsentOlderClient is form (b): older clients (20.10) rewrite every "not found" answer of
// the archive endpoint into this one line, which is also what they print when the container is
// gone. It proves nothing until the instance is confirmed.
//
//	Error: No such container:path: <target>:<guestpath>
func isPathAbsentOlderClient(stderr []byte, target, guestPath string) bool {
	return strings.TrimSpace(stderrText(stderr)) == "Error: No such container:path: "+target+":"+guestPath
}

// isFrozenRefusal is the daemon refusing exec on a paused container: non-zero exit, nothing on
// stdout, and stderr (left-trimmed, lower-cased) starting "error response from daemon:" and
// saying "unpause the container before exec". The command never started.
//
//	Error response from daemon: Container capA is paused, unpause the container before exec
func isFrozenRefusal(exitCode int, stdout, stderr []byte) bool {
	if exitCode == 0 || len(stdout) != 0 {
		return false
	}
	s := strings.ToLower(strings.TrimLeft(stderrText(stderr), " \t\r\n"))
	return strings.HasPrefix(s, "error response from daemon:") &&
		strings.Contains(s, "unpause the container before exec")
}

// containsFold reports whether the answer contains phrase, ignoring case.
func containsFold(stderr []byte, phrase string) bool {
	return strings.Contains(strings.ToLower(stderrText(stderr)), phrase)
}

// classify returns the class of a failed lifecycle answer about target, or nil.
//
// Per command, the answers behind the phrases:
//
//	run, create: docker: Error response from daemon: Conflict. The container name "/capA" is already in use by container "341e…". …
//	network: Error response from daemon: network with name capnet already exists
//	pause:   Error response from daemon: Container 341e… is already paused
//	pause:   Error response from daemon: Container 4adc… is not running
//	pause:   Error response from daemon: Cannot pause container 4adc…: OCI runtime pause failed: unable to freeze: unknown
//	unpause: Error response from daemon: Container 341e… is not paused
//	rm:      Error response from daemon: removal of container capA is already in progress
func classify(args []string, target string, stderr []byte) error {
	if isUnreachable(stderr) {
		return ErrUnreachable
	}
	op := ""
	if len(args) > 0 {
		op = args[0]
		if op == "network" && len(args) > 1 {
			op += " " + args[1]
		}
	}
	switch op {
	case "run", "create", "rename":
		if containsFold(stderr, "already in use") {
			return ErrConflict
		}
	case "rm":
		if containsFold(stderr, "already in progress") {
			return errRemovalInProgress
		}
	case "network create":
		if containsFold(stderr, "already exists") {
			return ErrNetworkExists
		}
	case "pause":
		if containsFold(stderr, "is already paused") {
			return ErrPaused
		}
		if containsFold(stderr, "is not running") {
			return ErrNotRunning
		}
		if containsFold(stderr, "unable to freeze") {
			return ErrFreezeFailed
		}
	case "unpause":
		if containsFold(stderr, "is not paused") {
			return errNotPaused
		}
	}
	if isTargetAbsent(stderr, target) {
		return ErrNotFound
	}
	return nil
}

// ExecAnswersUnreachable reports whether a failed exec's output has the shape of the docker
// client's failure to reach the daemon: a non-zero exit, nothing on stdout, and stderr that
// reads as the unreachable class ("Cannot connect to the Docker daemon at …"). A guest program
// can print the same, so the caller confirms with a call to the daemon before believing it.
func ExecAnswersUnreachable(out ExecOutput) bool {
	return out.ExitCode != 0 && len(out.Stdout) == 0 && isUnreachable(out.Stderr)
}

// ExecAnswersAbsent reports whether a failed exec's output has the shape of the daemon's answer
// that the target container does not exist: exit 1, nothing on stdout, and stderr naming the
// target in a "no such container" line. The CLI prints it as the client got it, the API
// driver builds the same line from the exec create's 404.
//
//	Error response from daemon: No such container: 0123…cdef
//	Error: No such container: 0123…cdef (older clients)
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
// (a 20.10 daemon; later ones may say 127) and writes nothing on stderr; the CLI prints it as
// it came. Captured here (docker 28 client, 20.10 daemon, runc 1.1):
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
// the same line with printf and exit 126: the CLI driver cannot tell that apart and reports its
// own exec as not started (the API driver also requires the exec to have had no process).
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
