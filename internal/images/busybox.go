package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"
)

// BusyboxTag is the tag of the busybox workload image that tests run.
const BusyboxTag = "maf-sandbox-test/busybox:local"

// LabelTestImage is the label carried by every image this package builds; its value names
// the image ("busybox"), so the images can be listed or removed together.
const LabelTestImage = "maf-sandbox.test-image"

// busyboxPath is where Debian's busybox-static package installs its binary.
const busyboxPath = "/bin/busybox"

// sandboxID is the uid and gid of the image's non-root user, "sandbox".
const sandboxID = 1000

// rootfsTime is the modification time of every file in the image (2024-01-01 UTC): a fixed
// time keeps the archive the same from one build to the next.
const rootfsTime = 1704067200

// applets returns the commands the image offers, each a link to busybox: those the engine
// uses or checks in a guest (sh, mkdir, mv, nohup, setsid, printf, rm, kill, ...) and those
// tests use to look around.
func applets() []string {
	return []string{
		"sh", "ash", "cat", "printf", "echo", "mkdir", "mv", "rm", "rmdir", "ln", "ls",
		"nohup", "setsid", "kill", "sleep", "id", "pwd", "true", "false", "test", "[",
		"env", "chmod", "chown", "touch", "stat", "head", "tail", "wc", "dd", "seq", "od",
		"tr", "sed", "grep", "find", "ps", "wget", "nc", "nslookup", "date", "expr", "yes",
		"cp", "readlink", "uname", "whoami", "sync",
		"awk", "sort", "uniq", "cut", "xargs", "basename", "dirname", "tee", "timeout",
		"sha256sum", "base64", "hostname", "mktemp", "realpath", "du", "df", "mkfifo",
		"truncate", "usleep", "cmp", "diff", "which", "tar", "gzip",
	}
}

// shims returns scripts that stand in for applets a busybox build may lack. Debian's
// busybox-static (1.35) has no nohup, yet the engine requires nohup in a guest.
func shims() map[string]string {
	return map[string]string{"nohup": nohupScript}
}

// nohupScript is nohup as a shell script: an ignored signal stays ignored across exec.
const nohupScript = `#!/bin/sh
# nohup for a busybox built without the applet: ignore SIGHUP, then run the command.
if [ $# -eq 0 ]; then
	echo "usage: nohup COMMAND [ARG]..." >&2
	exit 125
fi
trap '' HUP
exec "$@"
`

// EnsureBusybox builds the busybox image under tag with [BuildBusybox] unless the engine
// already has an image of that name ([WithBuildNotice] hears of a build); processes that ensure it at once build it once. It fails when the engine cannot be asked (a daemon that
// does not answer) and with any error of [BuildBusybox].
func EnsureBusybox(ctx context.Context, dockerPath, tag string, opts ...EnsureOpt) error {
	o := ensureOpts(opts)
	return exclusive(ctx, tag, func() error {
		if have, err := imagePresent(ctx, dockerPath, tag); err != nil || have {
			return err
		}
		o.notice()
		return BuildBusybox(ctx, dockerPath, tag)
	})
}

// BuildBusybox builds the busybox workload image and tags it tag, replacing any image of that
// name. The image holds /bin/busybox from Debian's busybox-static package, a link per
// applet, root (uid 0) and the user sandbox (uid and gid 1000, home /home/sandbox), and /tmp
// with mode 1777; its command is /bin/sh and it carries [LabelTestImage]=busybox.
//
// It fails, naming the package to install, when /bin/busybox is missing or is not a static
// binary; it fails when that busybox lacks an applet the image needs, and when docker import
// fails.
func BuildBusybox(ctx context.Context, dockerPath, tag string) error {
	have, err := busyboxApplets(ctx, busyboxPath)
	if err != nil {
		return err
	}
	var missing []string
	for _, a := range applets() {
		if !have[a] && shims()[a] == "" {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks applets %s", busyboxPath, strings.Join(missing, ", "))
	}

	// The archive is written here rather than copied from a directory, so ownership and modes
	// are exact without root on the host; it streams to docker import's stdin.
	cmd := exec.CommandContext(ctx, dockerPath, "import",
		"--change", `CMD ["/bin/sh"]`,
		"--change", "LABEL "+LabelTestImage+"=busybox",
		"-", tag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("import %s: %w", tag, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("import %s: %w", tag, err)
	}
	werr := writeRootfs(stdin, rootfs(busyboxPath, have))
	if werr != nil && !errors.Is(werr, syscall.EPIPE) {
		// Our side failed. Kill docker before closing its input, so that a truncated archive
		// never becomes an image.
		_ = cmd.Process.Kill()
		_ = stdin.Close()
		_ = cmd.Wait()
		return fmt.Errorf("import %s: write root filesystem: %w", tag, werr)
	}
	// A broken pipe means docker stopped reading: its exit status and stderr say why.
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("import %s: %w: %s", tag, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if werr != nil {
		return fmt.Errorf("import %s: write root filesystem: %w", tag, werr)
	}
	return nil
}

// busyboxApplets checks that the busybox at path can run in an empty image and returns the
// applets it was built with.
func busyboxApplets(ctx context.Context, path string) (map[string]bool, error) {
	const install = "install Debian's busybox-static (apt-get install busybox-static)"
	f, err := elf.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s not found: %s", path, install)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		// A program interpreter means shared libraries, which the image does not have.
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("%s is dynamically linked: %s", path, install)
		}
	}
	out, err := exec.CommandContext(ctx, path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list applets of %s: %w", path, err)
	}
	have := make(map[string]bool)
	for _, a := range strings.Fields(string(out)) {
		have[a] = true
	}
	return have, nil
}

// entry is one file of the image's root filesystem: its tar header and its body, or for
// busybox the host file to copy.
type entry struct {
	hdr  tar.Header
	body string
	src  string
}

// rootfs lists the image's root filesystem, parents before children: the host file busybox
// as /bin/busybox, a link for each applet in have and a shim for each one missing.
func rootfs(busybox string, have map[string]bool) []entry {
	dir := func(name string, mode int64, owner int) entry {
		return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner}}
	}
	file := func(name string, mode int64, body string) entry {
		return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, body: body}
	}
	link := func(name, target string) entry {
		return entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}}
	}

	es := []entry{
		dir("bin", 0o755, 0),
		{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, src: busybox},
	}
	for _, a := range applets() {
		if have[a] {
			es = append(es, link(path.Join("bin", a), "busybox"))
		} else {
			es = append(es, file(path.Join("bin", a), 0o755, shims()[a]))
		}
	}
	return append(es,
		dir("etc", 0o755, 0),
		file("etc/passwd", 0o644, "root:x:0:0:root:/root:/bin/sh\n"+
			"sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"),
		file("etc/group", 0o644, "root:x:0:\nsandbox:x:1000:\n"),
		dir("home", 0o755, 0),
		dir("home/sandbox", 0o755, sandboxID),
		dir("root", 0o700, 0),
		dir("tmp", 0o1777, 0),
		// Scripts that start "#!/usr/bin/env sh" find env where they look for it.
		dir("usr", 0o755, 0),
		dir("usr/bin", 0o755, 0),
		link("usr/bin/env", "/bin/busybox"),
	)
}

// writeRootfs writes es to w as a tar archive.
func writeRootfs(w io.Writer, es []entry) error {
	tw := tar.NewWriter(w)
	for _, e := range es {
		if err := writeEntry(tw, e); err != nil {
			return fmt.Errorf("write %s: %w", e.hdr.Name, err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, e entry) error {
	h := e.hdr
	h.ModTime = time.Unix(rootfsTime, 0)
	var body io.Reader = strings.NewReader(e.body)
	if h.Typeflag == tar.TypeReg {
		h.Size = int64(len(e.body))
	}
	if e.src != "" {
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		h.Size, body = st.Size(), f
	}
	if err := tw.WriteHeader(&h); err != nil {
		return err
	}
	_, err := io.Copy(tw, body)
	return err
}
