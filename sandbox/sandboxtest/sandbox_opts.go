package sandboxtest

import (
	"errors"
	"fmt"
	"path"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

// DefaultStorageBase is the fake's storage base unless [WithStorageBase] says otherwise; it
// is the Docker backend's default.
const DefaultStorageBase = "/maf-sandbox/work"

// SandboxOption configures a [Sandbox] built by [NewSandbox].
type SandboxOption func(*sandboxOptions) error

type sandboxOptions struct {
	instanceID  string
	base        string
	backendName string
	scripts     []Script
	reclaimErr  error
	reset       bool
}

func defaultSandboxOptions() sandboxOptions {
	return sandboxOptions{base: DefaultStorageBase, backendName: DefaultName}
}

// WithInstanceID sets the instance ID instead of a generated one ("fake-1", "fake-2", …). An
// empty ID is refused: the router refuses a sandbox without one.
func WithInstanceID(id string) SandboxOption {
	return func(o *sandboxOptions) error {
		if id == "" {
			return errors.New("sandboxtest: an instance ID must not be empty")
		}
		o.instanceID = id
		return nil
	}
}

// WithStorageBase sets the storage base a relative working directory resolves beneath. It
// must be absolute; it is created, with its ancestors, when the sandbox is built.
func WithStorageBase(base string) SandboxOption {
	return func(o *sandboxOptions) error {
		if !path.IsAbs(base) {
			return fmt.Errorf("sandboxtest: storage base %q is not absolute", base)
		}
		o.base = paths.Normalize(base)
		return nil
	}
}

// WithBackendName sets the backend name that unsupported-method errors carry. [New] passes
// its own name to the sandbox it builds.
func WithBackendName(name string) SandboxOption {
	return func(o *sandboxOptions) error { o.backendName = name; return nil }
}

// WithScript appends scripts: Exec and RunCode answer with the first whose Match is a
// substring of the command text.
func WithScript(scripts ...Script) SandboxOption {
	return func(o *sandboxOptions) error { o.scripts = append(o.scripts, scripts...); return nil }
}

// WithStdout appends a script answering commands that contain match with stdout and exit
// code 0.
func WithStdout(match, stdout string) SandboxOption {
	return WithScript(Script{Match: match, Result: sandbox.ExecResultFromText(stdout, "", 0)})
}

// WithExecError appends a script failing commands that contain match with err; an empty
// match fails every command not answered by an earlier script.
func WithExecError(match string, err error) SandboxOption {
	return WithScript(Script{Match: match, Err: err})
}

// WithReclaimError makes every Reclaim that passes the path checks fail with err, removing
// nothing.
func WithReclaimError(err error) SandboxOption {
	return func(o *sandboxOptions) error { o.reclaimErr = err; return nil }
}

// WithReset makes Reset supported: it restores the baseline (see [Sandbox.SetBaseline]) and
// changes the instance ID. Without it Reset fails with [*sandbox.UnsupportedError].
func WithReset() SandboxOption {
	return func(o *sandboxOptions) error { o.reset = true; return nil }
}
