package conformance

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// guest is the in-memory fake with a guest behind its Exec: a Go reading of exactly the
// commands the suites and PosixGuestSubject issue (ln, mkdir, test, cat, printf, pwd, sleep,
// rm, exit and the suites' sh -c lines), run against the fake's own store. It is a
// simulator, not a shell: what it proves is the probes' behaviour, and nothing about any real
// guest.
//
// The guest resolves links as a kernel would (the fake itself never does), so the links the
// probes plant do lead somewhere for the guest's cat and test, and a broken backend that
// follows them can be caught. With nonRoot set, the guest cannot append to a file or empty a
// directory marked hostOwned: the shape of a non-root guest facing what a write made at more
// authority than its own. mkdir and ln ignore the marks.
type guest struct {
	*sandboxtest.Sandbox

	mu        sync.Mutex
	nonRoot   bool
	hostOwned map[string]bool
}

var _ sandbox.Sandbox = (*guest)(nil)

func newGuest(t testing.TB) *guest {
	t.Helper()
	sb, err := sandboxtest.NewSandbox()
	if err != nil {
		t.Fatalf("new fake sandbox: %v", err)
	}
	return &guest{Sandbox: sb, hostOwned: map[string]bool{}}
}

// work is the fake's storage base, the working directory the tests attack.
const work = sandboxtest.DefaultStorageBase

// everything is every capability the suites require, files_list included.
func everything() sandbox.CapabilitySet {
	return sandbox.NewCapabilitySet(sandbox.Exec, sandbox.FilesIn, sandbox.FilesOut, sandbox.FilesList,
		sandbox.FilesDelete, sandbox.Reclaim)
}

// subjectOf builds the POSIX subject over sb at the fake's base with caps.
func subjectOf(t testing.TB, sb sandbox.Sandbox, caps sandbox.CapabilitySet) *PosixGuestSubject {
	t.Helper()
	s, err := NewPosixGuestSubject(sb, work, caps)
	if err != nil {
		t.Fatalf("new subject: %v", err)
	}
	return s
}

// resolve follows every link in abs as the guest's kernel would; the final component is
// followed too unless keepLeaf is set.
func (g *guest) resolve(abs string, keepLeaf bool) string {
	p := paths.Normalize(abs)
	for range 40 {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		changed := false
		cur := "/"
		for i, part := range parts {
			if part == "" {
				continue
			}
			cur = paths.Join(cur, part)
			if keepLeaf && i == len(parts)-1 {
				break
			}
			if target, ok := g.LinkTarget(cur); ok {
				rest := strings.Join(parts[i+1:], "/")
				p = paths.Join(paths.Join(path.Dir(cur), target), rest)
				changed = true
				break
			}
		}
		if !changed {
			return p
		}
	}
	return p
}

// exists reports whether the guest's test -e (follow=true) or test -L would succeed.
func (g *guest) exists(abs string, follow bool) bool {
	if follow {
		_, ok := g.Kind(g.resolve(abs, false))
		return ok
	}
	k, ok := g.Kind(g.resolve(abs, true))
	return ok && k == sandbox.EntrySymlink
}

func exit(code int, stderr string) sandbox.ExecResult {
	return sandbox.ExecResult{ExitCode: code, StderrBytes: []byte(stderr)}
}

func out(stdout string) sandbox.ExecResult { return sandbox.ExecResult{StdoutBytes: []byte(stdout)} }

// Exec records the call in the fake and then interprets it.
func (g *guest) Exec(ctx context.Context, cmd sandbox.Command, wd string, timeout time.Duration) (sandbox.ExecResult, error) {
	if _, err := g.Sandbox.Exec(ctx, cmd, wd, timeout); err != nil {
		return sandbox.ExecResult{}, err
	}
	wd = paths.ResolveWorkDir(g.StorageBase(), wd)
	if k, _ := g.Kind(g.resolve(wd, false)); k != sandbox.EntryDirectory {
		// What docker exec -w answers for a working directory that is not there.
		return exit(126, "chdir to cwd ("+wd+") set in config.json failed: no such file or directory"), nil
	}
	at := func(p string) string { return paths.Join(wd, p) }
	if cmd.Shell != "" {
		if code, ok := strings.CutPrefix(cmd.Shell, "exit "); ok {
			n, err := strconv.Atoi(code)
			if err != nil {
				return exit(2, "sh: bad exit"), nil
			}
			return exit(n, ""), nil
		}
		return exit(127, "simulator: unsupported shell line "+cmd.Shell), nil
	}
	argv := cmd.Argv
	switch {
	case len(argv) >= 3 && argv[0] == "sh" && argv[1] == "-c":
		return g.script(argv[2], argv[3:], at)
	case len(argv) == 2 && argv[0] == "printf":
		return out(argv[1]), nil
	case len(argv) == 1 && argv[0] == "pwd":
		return out(wd + "\n"), nil
	case len(argv) == 2 && argv[0] == "sleep":
		n, _ := strconv.Atoi(argv[1])
		d := time.Duration(n) * time.Second
		if d > timeout {
			time.Sleep(timeout + 10*time.Millisecond)
			return sandbox.ExecResult{}, &sandbox.TimeoutError{Op: "exec", Timeout: timeout}
		}
		time.Sleep(d)
		return out(""), nil
	case len(argv) == 3 && argv[0] == "test":
		var ok bool
		switch argv[1] {
		case "-e":
			ok = g.exists(at(argv[2]), true)
		case "-L":
			ok = g.exists(at(argv[2]), false)
		case "-f":
			k, found := g.Kind(g.resolve(at(argv[2]), false))
			ok = found && k == sandbox.EntryFile
		default:
			return exit(2, "test: unsupported flag"), nil
		}
		if ok {
			return out(""), nil
		}
		return exit(1, ""), nil
	case len(argv) == 2 && argv[0] == "cat":
		b, ok := g.File(g.resolve(at(argv[1]), false))
		if !ok {
			return exit(1, "cat: can't open '"+argv[1]+"': No such file or directory"), nil
		}
		return sandbox.ExecResult{StdoutBytes: b}, nil
	case len(argv) == 3 && argv[0] == "mkdir" && argv[1] == "-p":
		return g.mkdirP(at(argv[2])), nil
	case len(argv) == 4 && argv[0] == "rm" && argv[1] == "-rf" && argv[2] == "--":
		return g.rmRF(ctx, at(argv[3])), nil
	}
	return exit(127, "simulator: unsupported command "+paths.QuoteArgv(argv)), nil
}

// script interprets the sh -c lines the suites and the subject run; args[0] is $0.
func (g *guest) script(line string, args []string, at func(string) string) (sandbox.ExecResult, error) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch line {
	case plantLinkScript:
		if res := g.mkdirP(at(arg(1))); res.ExitCode != 0 {
			return res, nil
		}
		link := g.resolve(at(arg(3)), true)
		if k, _ := g.Kind(link); k == sandbox.EntryDirectory {
			return exit(1, "ln: "+arg(3)+" is a directory"), nil
		}
		g.AddSymlink(link, arg(2))
		return out(""), nil
	case existsScript:
		if g.exists(at(arg(1)), true) || g.exists(at(arg(1)), false) {
			return out(""), nil
		}
		return exit(1, ""), nil
	case `printf '%s' "$1"`:
		return out(arg(1)), nil
	case `printf %s appended >> "$1"`:
		p := g.resolve(at(arg(1)), false)
		b, ok := g.File(p)
		if !ok {
			return exit(1, "sh: can't open "+arg(1)), nil
		}
		if g.denied(p) {
			return exit(1, "sh: can't create "+arg(1)+": Permission denied"), nil
		}
		g.AddFile(p, append(b, "appended"...))
		return out(""), nil
	case "printf %s " + outMarker + "; printf %s " + errMarker + " >&2":
		return sandbox.ExecResult{StdoutBytes: []byte(outMarker), StderrBytes: []byte(errMarker)}, nil
	case byteScript:
		return sandbox.ExecResult{StdoutBytes: []byte(byteStdout), StderrBytes: []byte(byteStderr)}, nil
	}
	return exit(127, "simulator: unsupported script "+line), nil
}

func (g *guest) mkdirP(abs string) sandbox.ExecResult {
	p := g.resolve(abs, false)
	for cur := p; cur != "/"; cur = path.Dir(cur) {
		if k, ok := g.Kind(cur); ok && k != sandbox.EntryDirectory {
			return exit(1, "mkdir: can't create directory '"+abs+"': Not a directory")
		}
	}
	g.AddDir(p)
	return out("")
}

func (g *guest) rmRF(ctx context.Context, abs string) sandbox.ExecResult {
	p := g.resolve(abs, true)
	if _, ok := g.Kind(p); !ok {
		return out("")
	}
	for _, q := range g.Paths() {
		if strings.HasPrefix(q, p+"/") && g.denied(path.Dir(q)) {
			return exit(1, "rm: can't remove '"+q+"': Permission denied")
		}
	}
	if err := g.Sandbox.Remove(ctx, p, "/", true); err != nil {
		return exit(1, "rm: "+err.Error())
	}
	return out("")
}

// denied reports whether a non-root guest cannot change abs.
func (g *guest) denied(abs string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nonRoot && g.hostOwned[abs]
}

// markHostOwned records abs as made at more authority than the guest's.
func (g *guest) markHostOwned(abs string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hostOwned[abs] = true
}

// failedNames lists the failed probes of err, a ConformanceFailure, sorted.
func failedNames(t testing.TB, err error) []string {
	t.Helper()
	var cf *sandbox.ConformanceFailure
	if !errors.As(err, &cf) {
		t.Fatalf("error = %v, want a *sandbox.ConformanceFailure", err)
	}
	var names []string
	for _, f := range cf.Failures {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return names
}

// mustPass fails the test unless every result passed, listing the ones that did not.
func mustPass(t testing.TB, results []Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("suite failed: %v", err)
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("%s: passed=%t skipped=%t reason=%q", r.Name, r.Passed, r.Skipped, r.Reason)
		}
	}
}

// sorted returns a sorted copy of names.
func sorted(names ...string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}

// boom is an error type a sandbox under test raises unexpectedly.
type boom struct{ what string }

func (b *boom) Error() string { return fmt.Sprintf("the provider fell over during %s", b.what) }
