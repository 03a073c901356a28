package files

import (
	"bytes"
	"errors"
	"github.com/mafsandbox/engine/actors"
	"io/fs"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/sandbox"
)

// Every hostile layout is planted by the guest itself, through the public surface, then
// attacked through the file calls.
func TestHostileLayoutsAreRefused(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.FilesSpec(t))
		ctx := itest.Context(t)
		itest.Sh(t, sb, `mkdir -p /maf-sandbox/work-outside/sub /maf-sandbox/work/real /maf-sandbox/work/wd && cd /maf-sandbox/work &&
		printf secret > ../work-outside/secret.txt && printf leaf > ../work-outside/sub/leaf.txt &&
		printf inside > real/inside.txt && printf plain > plain.txt &&
		ln -s /maf-sandbox/work-outside link-dir && ln -s /maf-sandbox/work-outside/secret.txt link-file &&
		ln -s /maf-sandbox/work-outside wd/linked && mkfifo fifo 2>/dev/null || true`)

		notConfined := func(t *testing.T, err error) {
			t.Helper()
			var nc *sandbox.NotConfinedError
			if !errors.As(err, &nc) || !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("err = %v (%T), want NotConfinedError", err, err)
			}
		}
		cases := []struct {
			name  string
			call  func() error
			check func(*testing.T, error)
		}{
			{"stat through a symlinked parent", func() error { _, err := sb.StatFile(ctx, "link-dir/secret.txt", "."); return err }, notConfined},
			{"read through a symlinked parent", func() error { _, err := sb.ReadFile(ctx, "link-dir/secret.txt", ".", 1024); return err }, notConfined},
			{"write through a symlinked parent", func() error { return sb.WriteFile(ctx, "link-dir/new.txt", []byte("x"), ".") }, notConfined},
			{"linked working directory", func() error { _, err := sb.ReadFile(ctx, "secret.txt", "link-dir", 1024); return err }, notConfined},
			{"linked ancestor of the working directory", func() error { _, err := sb.ReadFile(ctx, "leaf.txt", "link-dir/sub", 1024); return err }, notConfined},
			{"write into a linked working directory", func() error { return sb.WriteFile(ctx, "x.txt", []byte("x"), "wd/linked") }, notConfined},
			{"dot-dot escape", func() error { _, err := sb.ReadFile(ctx, "../work-outside/secret.txt", ".", 1024); return err }, notConfined},
			{"absolute escape", func() error { _, err := sb.StatFile(ctx, "/etc/passwd", "."); return err }, notConfined},
			{"backslash", func() error { return sb.WriteFile(ctx, `real\inside.txt`, []byte("x"), ".") }, notConfined},
			{"write over the working directory", func() error { return sb.WriteFile(ctx, ".", []byte("x"), ".") }, notConfined},
			{"remove the working directory", func() error { return sb.Remove(ctx, ".", ".", true) }, notConfined},
			{"remove through a linked parent", func() error { return sb.Remove(ctx, "link-dir/secret.txt", ".", false) }, notConfined},
			{"plain file as parent is ENOTDIR, not an escape", func() error { _, err := sb.StatFile(ctx, "plain.txt/deeper.txt", "."); return err },
				func(t *testing.T, err error) {
					var nd *sandbox.NotDirectoryError
					if !errors.As(err, &nd) || !errors.Is(err, syscall.ENOTDIR) || errors.Is(err, sandbox.ErrInvalid) {
						t.Fatalf("err = %v, want NotDirectoryError", err)
					}
				}},
			{"a link is never read", func() error { _, err := sb.ReadFile(ctx, "link-file", ".", 1024); return err },
				func(t *testing.T, err error) {
					var nr *sandbox.NotRegularError
					if !errors.As(err, &nr) || nr.Kind != sandbox.EntrySymlink {
						t.Fatalf("err = %v, want NotRegularError(symlink)", err)
					}
				}},
			{"a directory is not read", func() error { _, err := sb.ReadFile(ctx, "real", ".", 1024); return err },
				func(t *testing.T, err error) {
					if !errors.Is(err, sandbox.ErrIsDirectory) || !errors.Is(err, sandbox.ErrOS) {
						t.Fatalf("err = %v, want is-a-directory", err)
					}
				}},
			{"a missing file is not-exist", func() error { _, err := sb.ReadFile(ctx, "nope.txt", ".", 1024); return err },
				func(t *testing.T, err error) {
					if !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("err = %v, want not-exist", err)
					}
				}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { tc.check(t, tc.call()) })
		}

		t.Run("a link is named a link, with no size", func(t *testing.T) {
			st, err := sb.StatFile(ctx, "link-file", ".")
			if err != nil || st == nil || st.Kind != sandbox.EntrySymlink || st.Size != nil {
				t.Fatalf("stat = %+v, %v", st, err)
			}
		})
		t.Run("a linked destination is replaced, not followed", func(t *testing.T) {
			if err := sb.WriteFile(ctx, "link-file", []byte("x"), "."); err == nil {
				t.Fatal("write to a link must be refused")
			}
			if got := itest.Sh(t, sb, "cat /maf-sandbox/work-outside/secret.txt"); got != "secret" {
				t.Fatalf("the link's target changed: %q", got)
			}
		})
		t.Run("removing a link removes the link, never its target", func(t *testing.T) {
			if err := sb.Remove(ctx, "link-dir", ".", true); err != nil {
				t.Fatal(err)
			}
			if got := itest.Sh(t, sb, "cat /maf-sandbox/work-outside/sub/leaf.txt; test ! -e /maf-sandbox/work/link-dir && echo gone"); got != "leafgone\n" {
				t.Fatalf("after remove: %q", got)
			}
		})
	})
}

// The reader refuses on the tar header: an oversized file is never buffered.
func TestOversizedReadRefusedOnHeader(t *testing.T) {
	itest.OnEveryPlane(t, func(t *testing.T, plane actors.Option) {
		b := itest.NewBackend(t, plane)
		sb := itest.Acquire(t, b, itest.NewKey(t), itest.FilesSpec(t))
		itest.Sh(t, sb, "dd if=/dev/zero of=/maf-sandbox/work/big bs=1048576 count=8 2>/dev/null")
		_, err := sb.ReadFile(itest.Context(t), "big", ".", 1024)
		var ce *sandbox.TransferCapExceededError
		if !errors.As(err, &ce) || ce.Actual != 8<<20 || ce.Limit != 1024 {
			t.Fatalf("err = %v, want a cap error naming 8 MiB and 1024", err)
		}
		if got, err := sb.ReadFile(itest.Context(t), "big", ".", 8<<20); err != nil || len(got) != 8<<20 {
			t.Fatalf("read at the cap: %d bytes, %v", len(got), err)
		}
	})
}

func TestExecFidelity(t *testing.T) {
	b := itest.NewBackend(t)
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.FilesSpec(t))
	ctx := itest.Context(t)
	t.Run("argv is delivered literally", func(t *testing.T) {
		const hostile = `a b$(echo injected)c'"; rm -rf /`
		res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", `printf '%s' "$1"`, "probe", hostile), ".", 30*time.Second)
		if err != nil || res.Stdout() != hostile {
			t.Fatalf("got %q, %v", res.Stdout(), err)
		}
	})
	t.Run("exit codes", func(t *testing.T) {
		for _, code := range []int{0, 1, 7, 126, 127, 255} {
			res, err := sb.Exec(ctx, sandbox.Shell("exit "+strconv.Itoa(code)), ".", 30*time.Second)
			if err != nil || res.ExitCode != code {
				t.Fatalf("exit %d: got %d, %v", code, res.ExitCode, err)
			}
		}
	})
	t.Run("bytes survive, streams stay apart", func(t *testing.T) {
		res, err := sb.Exec(ctx, sandbox.Shell(`printf 'ok\377\376\000\r\n'; printf 'e\342\202' >&2`), ".", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(res.StdoutBytes, []byte("ok\xff\xfe\x00\r\n")) || !bytes.Equal(res.StderrBytes, []byte("e\xe2\x82")) {
			t.Fatalf("bytes = %q / %q", res.StdoutBytes, res.StderrBytes)
		}
		if res.Stdout() != "ok\uFFFD\uFFFD\x00\r\n" || res.Stderr() != "e\uFFFD" {
			t.Fatalf("views = %q / %q", res.Stdout(), res.Stderr())
		}
	})
	t.Run("working directory", func(t *testing.T) {
		itest.Sh(t, sb, "mkdir -p /maf-sandbox/work/sub")
		res, err := sb.Exec(ctx, sandbox.Argv("pwd"), "sub", 30*time.Second)
		if err != nil || strings.TrimSpace(res.Stdout()) != "/maf-sandbox/work/sub" {
			t.Fatalf("pwd = %q, %v", res.Stdout(), err)
		}
	})
}

// A timeout removes the container: nothing else reaches the process inside.
func TestExecTimeoutDiscardsTheSandbox(t *testing.T) {
	b := itest.NewBackend(t)
	key := itest.NewKey(t)
	sb := itest.Acquire(t, b, key, itest.FilesSpec(t))
	start := time.Now()
	_, err := sb.Exec(itest.Context(t), sandbox.Argv("sleep", "30"), ".", time.Second)
	elapsed := time.Since(start)
	var te *sandbox.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if elapsed < 500*time.Millisecond || elapsed > 4*time.Second {
		t.Fatalf("timeout arrived after %s, want within [0.5s, 4s]", elapsed)
	}
	if out := dockertest.Docker(t, "ps", "-aq", "--filter", "id="+sb.InstanceID()); strings.TrimSpace(out) != "" {
		t.Fatalf("container still there after the timeout")
	}
	again := itest.Acquire(t, b, key, itest.FilesSpec(t))
	if again.InstanceID() == sb.InstanceID() {
		t.Fatal("the next acquire must create a fresh container")
	}
}
