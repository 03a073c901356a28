package paths

import (
	"fmt"
	"path"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// Linux's limits on a path handed to the kernel: a component is at most NameMax bytes and the
// whole path, with its terminating NUL, at most PathMax.
const (
	NameMax = 255
	PathMax = 4096
)

// CheckGrammar refuses a guest path no Linux call could take, before anything is asked of an
// engine: a NUL byte (the kernel's terminator), a component longer than [NameMax] bytes, or a
// path longer than [PathMax] bytes with its terminator. The refusal is an
// [*sandbox.InvalidArgumentError] whose message names the rule. [ConfineResolve] runs it on
// every path it resolves; exec's working directory is checked with it too.
func CheckGrammar(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return grammarError(p, "contains a NUL byte, which no POSIX path can hold")
	}
	if len(p)+1 > PathMax {
		return grammarError(p, fmt.Sprintf("is %d bytes; Linux takes at most %d including the terminating NUL (PATH_MAX)", len(p), PathMax))
	}
	for _, c := range strings.Split(p, "/") {
		if len(c) > NameMax {
			return grammarError(p, fmt.Sprintf("has a %d-byte component; Linux allows at most %d bytes a component (NAME_MAX)", len(c), NameMax))
		}
	}
	return nil
}

// checkFileName refuses a path whose spelling names a directory where a regular file is meant:
// a trailing "/", or a last element "." or "..". Normalising would silently drop it.
func checkFileName(p, verb string) error {
	if strings.HasSuffix(p, "/") || path.Base(p) == "." || path.Base(p) == ".." {
		return grammarError(p, fmt.Sprintf("ends in %q, which names a directory; only a regular file can be %s", trailer(p), verb))
	}
	return nil
}

func trailer(p string) string {
	if strings.HasSuffix(p, "/") {
		return "/"
	}
	return path.Base(p)
}

// grammarError names the path (shortened: it may be kilobytes long) and the rule it breaks.
func grammarError(p, rule string) error {
	const show = 64
	shown := fmt.Sprintf("%q", p)
	if len(p) > show {
		shown = fmt.Sprintf("%q… (%d bytes)", p[:show], len(p))
	}
	return &sandbox.InvalidArgumentError{Reason: "guest path " + shown + " " + rule}
}
