package hosttools

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// The run directory's layout (protocol §11.4). Everything the transport owns is under
// TransportDir, beside the program's working directory WorkDir, so no name a model chooses
// for a file in work/ can reach the transport's own.
const (
	WorkDir      = "work"
	TransportDir = "host_tools"
	ShimFile     = "maf_host_tools.py"
	LauncherFile = "run_program.sh"
	CallsDir     = "host_tool_calls"
	OutputFile   = "program_output.txt"
	ExitFile     = "program_exit_code"
	PIDFile      = "program_pid"     // diagnostic only: the guest can write it
	SessionFile  = "program_session" // diagnostic only
	GateFile     = "program_start"   // host-written: the program starts only once it exists
	// DefaultProgram is the program's file name unless NewLayout is given another.
	DefaultProgram = "program.py"
)

// transportNames are the names the layout uses in TransportDir, a program may not take them.
var transportNames = []string{ShimFile, LauncherFile, CallsDir, OutputFile, ExitFile, ExitFile + ".part",
	PIDFile, PIDFile + ".part", SessionFile, SessionFile + ".part", GateFile}

// shimImports are the modules the shim imports: a program named for one would be what the
// shim's import finds, since the two share a directory first on the path.
var shimImports = []string{"json", "os", "time"}

// startupModules are what CPython imports on its way up from a directory already on the path;
// a program named for one runs, or breaks the interpreter, before it is the script.
var startupModules = []string{"encodings", "site", "sitecustomize", "usercustomize", "abc", "codecs",
	"genericpath", "io", "posixpath", "stat", "_collections_abc", "_sitebuiltins", "_bootlocale"}

// loaderSuffixes are the one-dot suffixes some import loader answers to.
var loaderSuffixes = []string{"py", "pyc", "pyw", "so", "pyd"}

// Layout is where one run's files live, as absolute guest paths.
type Layout struct {
	Dir       string // the run directory, fresh per run
	Work      string // the program's working directory: the only place model-named files go
	Transport string // host_tools/, removed on every path
	Program   string
	Shim      string
	Launcher  string
	Calls     string
	Output    string
	ExitCode  string
	PID       string
	Session   string
	Gate      string
}

// NewLayout derives a run's layout from its directory, which must be absolute, free of ':'
// (PYTHONPATH cannot quote it) and of backslashes, more than one component deep, and fresh per
// run: a stale exit marker ends the next run at its first look. program ("" for
// [DefaultProgram]) must be a plain file name that is not one of the layout's own names,
// does not answer to the shim's module, a module the shim imports, or one CPython imports at
// startup. Refusals are [*sandbox.InvalidArgumentError].
func NewLayout(runDir, program string) (Layout, error) {
	if program == "" {
		program = DefaultProgram
	}
	switch {
	case !path.IsAbs(runDir):
		return Layout{}, invalid("run directory %q must be an absolute guest path", runDir)
	case strings.Contains(runDir, ":"):
		return Layout{}, invalid("run directory %q must not contain ':': the shim's directory reaches the guest through PYTHONPATH, which cannot quote it", runDir)
	case strings.Contains(runDir, `\`):
		return Layout{}, invalid("run directory %q must not contain a backslash", runDir)
	}
	dir := paths.Normalize(runDir)
	if strings.Count(dir, "/") < 2 {
		return Layout{}, invalid("run directory %q is too close to the root to be removed recursively", runDir)
	}
	if program != path.Base(program) || program == "." || program == ".." || strings.ContainsAny(program, `/\`) {
		return Layout{}, invalid("program %q must be a plain file name", program)
	}
	if slices.Contains(transportNames, program) {
		return Layout{}, invalid("program %q is a name the host-tools layout uses itself", program)
	}
	switch stem := moduleOf(program); {
	case stem == strings.TrimSuffix(ShimFile, ".py"):
		return Layout{}, invalid("program %q answers to the shim's own module name", program)
	case slices.Contains(shimImports, stem):
		return Layout{}, invalid("program %q answers to %q, a module the shim imports: the shim would import the program instead", program, stem)
	case slices.Contains(startupModules, stem):
		return Layout{}, invalid("program %q answers to %q, a module CPython imports at startup", program, stem)
	}
	t := path.Join(dir, TransportDir)
	return Layout{
		Dir: dir, Work: path.Join(dir, WorkDir), Transport: t,
		Program: path.Join(t, program), Shim: path.Join(t, ShimFile), Launcher: path.Join(t, LauncherFile),
		Calls: path.Join(t, CallsDir), Output: path.Join(t, OutputFile), ExitCode: path.Join(t, ExitFile),
		PID: path.Join(t, PIDFile), Session: path.Join(t, SessionFile), Gate: path.Join(t, GateFile),
	}, nil
}

// moduleOf is the module name an import from the program's directory would reach it by, or
// "" when no loader claims it.
func moduleOf(program string) string {
	head, suffix, dotted := strings.Cut(program, ".")
	switch {
	case !dotted:
		return ""
	case strings.Contains(suffix, "."):
		if strings.HasSuffix(suffix, ".so") || strings.HasSuffix(suffix, ".pyd") {
			return head // a tagged extension module
		}
		return ""
	case slices.Contains(loaderSuffixes, suffix):
		return head
	}
	return ""
}

// RandomRunDir is a fresh run directory under base: base/ht-<12 hex characters>.
func RandomRunDir(base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return path.Join(base, "ht-"+hex.EncodeToString(b[:]))
}

// rel is p relative to the run directory, for the file-plane calls that run with the run
// directory as their working directory.
func (l Layout) rel(p string) string {
	r, _ := paths.RelativeTo(p, l.Dir)
	return r
}

func invalid(format string, args ...any) error {
	return &sandbox.InvalidArgumentError{Reason: fmt.Sprintf("hosttools: "+format, args...)}
}
