// Command gate is the first process of an allowlisted workload (docs/architecture.md, "The
// workload gate"): run as "/maf-sandbox-gate RELEASE COMMAND...", it waits until the file
// RELEASE exists — the engine writes it once the seal proof of the sandbox's network passed
// — and then execve()s COMMAND in its place: the image's own entrypoint and command, with the
// environment, working directory and user the container gave the gate, unchanged. So the
// container can be started while its network is still being proved and no code of the image
// runs before the proof.
//
// COMMAND is resolved the way runc resolves a container's first process (a name without a
// slash is looked up in the container's PATH), and before the wait, so that an image whose
// command is absent fails at once, as its start would have. The program uses the standard
// library only and opens nothing: the image's process inherits its descriptors as runc
// left them.
package main

import (
	"os"
	"strings"
	"syscall"
	"time"
)

// poll is how often the release file is looked for: a stat on the container's own
// filesystem, cheap against the milliseconds a `docker cp` takes to write it.
const poll = 2 * time.Millisecond

func main() {
	if len(os.Args) < 3 {
		fail(2, "usage: maf-sandbox-gate RELEASE COMMAND [ARG...]")
	}
	release, argv := os.Args[1], os.Args[2:]
	path, err := lookPath(argv[0])
	if err != nil {
		fail(127, err.Error())
	}
	for {
		var st syscall.Stat_t
		if err := syscall.Lstat(release, &st); err == nil {
			break
		}
		time.Sleep(poll)
	}
	err = syscall.Exec(path, argv, os.Environ())
	fail(126, "exec "+argv[0]+": "+err.Error())
}

// lookPath is os/exec.LookPath as runc applies it to a container's first process: a name
// with a slash is taken as it is (relative to the working directory), any other is searched
// in PATH (an empty element meaning the working directory) for a regular file with an
// execute bit.
func lookPath(file string) (string, error) {
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", &os.PathError{Op: "exec", Path: file, Err: err}
		}
		return file, nil
	}
	env := os.Getenv("PATH")
	for _, dir := range strings.Split(env, ":") {
		if env == "" {
			break
		}
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", &os.PathError{Op: "exec", Path: file, Err: syscall.ENOENT}
}

func executable(p string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		return syscall.EISDIR
	case st.Mode&0o111 == 0:
		return syscall.EACCES
	}
	return nil
}

func fail(code int, msg string) {
	os.Stderr.WriteString("maf-sandbox-gate: " + msg + "\n")
	os.Exit(code)
}
