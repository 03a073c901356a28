package sandboxtest_test

import (
	"errors"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// The conformance layout of protocol §14.1.
const (
	work    = sandboxtest.DefaultStorageBase
	outside = work + "-outside"
)

var (
	secret   = []byte("secret bytes\x00\xff")
	errBoom  = errors.New("engine unreachable")
	oneMiB   = int64(sandbox.MiB)
	inside   = []byte("inside\r\n")
	plainTxt = []byte("plain")
)

// fixture builds a fake sandbox holding the §14.1 layout.
func fixture(t *testing.T, opts ...sandboxtest.SandboxOption) *sandboxtest.Sandbox {
	t.Helper()
	sb, err := sandboxtest.NewSandbox(opts...)
	if err != nil {
		t.Fatalf("NewSandbox: %v", err)
	}
	sb.AddFile(work+"/real/inside.txt", inside)
	sb.AddFile(work+"/plain.txt", plainTxt)
	sb.AddOther(work + "/fifo")
	sb.AddSymlink(work+"/link-dir", outside)
	sb.AddSymlink(work+"/link-file", outside+"/secret.txt")
	sb.AddFile(outside+"/secret.txt", secret)
	sb.AddFile(outside+"/sub/leaf.txt", secret)
	return sb
}

// checkErr fails unless err matches want: nil, a sentinel (errors.Is) or the type of one of
// the protocol's error structs (errors.As).
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	var ok bool
	switch want.(type) {
	case nil:
		ok = err == nil
	case *sandbox.NotConfinedError:
		var target *sandbox.NotConfinedError
		ok = errors.As(err, &target) && errors.Is(err, sandbox.ErrInvalid)
	case *sandbox.NotDirectoryError:
		var target *sandbox.NotDirectoryError
		ok = errors.As(err, &target) && errors.Is(err, sandbox.ErrOS)
	case *sandbox.NotRegularError:
		var target *sandbox.NotRegularError
		ok = errors.As(err, &target) && errors.Is(err, sandbox.ErrOS)
	case *sandbox.TransferCapExceededError:
		var target *sandbox.TransferCapExceededError
		ok = errors.As(err, &target)
	case *sandbox.InvalidArgumentError:
		var target *sandbox.InvalidArgumentError
		ok = errors.As(err, &target) && errors.Is(err, sandbox.ErrInvalid)
	case *sandbox.UnsupportedError:
		var target *sandbox.UnsupportedError
		ok = errors.As(err, &target) && errors.Is(err, sandbox.ErrUnsupported)
	default:
		ok = errors.Is(err, want)
	}
	if !ok {
		t.Fatalf("error = %v (%T), want %v (%T)", err, err, want, want)
	}
}
