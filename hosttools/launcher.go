package hosttools

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// Shim is the guest module a program imports to call a tool (maf_host_tools.py). It grants
// nothing: every check is the host's.
//
//go:embed maf_host_tools.py
var Shim []byte

// ReceiptVersion opens the launcher's receipt line: "process-v1 <pid> <pgid>", pgid 0 when
// the launcher made no process group of its own.
const ReceiptVersion = "process-v1"

// Receipt is what the launcher announced on its own stdout, which nothing the program writes
// can reach: the detached shell's pid and, when setsid made one, its process group.
type Receipt struct {
	PID  int
	PGID int // 0: no group of the program's own, so only the pid may be signalled
}

// parseReceipt finds the receipt line in the launcher's stdout.
func parseReceipt(stdout string) (Receipt, bool) {
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != ReceiptVersion {
			continue
		}
		pid, err1 := strconv.Atoi(f[1])
		pgid, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || pid <= 1 || pgid < 0 || (pgid != 0 && pgid != pid) {
			return Receipt{}, false
		}
		return Receipt{PID: pid, PGID: pgid}, true
	}
	return Receipt{}, false
}

// shq single-quotes s for sh, always, so a quoted pattern matches only itself.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// launcherScript is run_program.sh: it enters work/, rebuilds PYTHONPATH with the shim's
// directory first (keeping inherited entries only when absolute, canonical and outside the
// run tree), starts the program detached (in a session of its own when setsid exists), and
// prints the receipt. The detached shell waits for the host's start gate before the program
// runs, and gives up when host_tools/ is removed first; it records the exit code through a
// .part file and a rename, so a reader never sees a half-written marker.
func launcherScript(l Layout, interpreter string, callTimeout float64) string {
	enclosing := shq(l.Dir)
	inner := fmt.Sprintf(
		`while [ ! -e %[1]s ]; do [ -d %[2]s ] || exit 0; sleep 0.02 2>/dev/null || sleep 1; done; `+
			`printf %%s $$ > %[3]s; mv %[3]s %[4]s; `+
			`%[5]s %[6]s < /dev/null > %[7]s 2>&1 & `+
			`wait $!; printf %%s $? > %[8]s; mv %[8]s %[9]s`,
		shq(l.Gate), shq(l.Transport), shq(l.PID+".part"), shq(l.PID),
		shq(interpreter), shq(l.Program), shq(l.Output), shq(l.ExitCode+".part"), shq(l.ExitCode))
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n")
	fmt.Fprintf(&b, "mkdir -p %s && cd %s || exit 1\n", shq(l.Work), shq(l.Work))
	b.WriteString("maf_kept=''\nset -f\nIFS=:\nfor maf_entry in ${PYTHONPATH:-}; do\n  case \"$maf_entry\" in\n")
	b.WriteString("    */./*|*/../*|*//*|*/.|*/..) ;;\n")
	fmt.Fprintf(&b, "    %s|%s/*) ;;\n", enclosing, enclosing)
	b.WriteString("    /*) maf_kept=\"${maf_kept:+$maf_kept:}$maf_entry\" ;;\n  esac\ndone\nunset IFS\nset +f\n")
	fmt.Fprintf(&b, "PYTHONPATH=%s\"${maf_kept:+:$maf_kept}\"\n", shq(l.Transport))
	fmt.Fprintf(&b, "PYTHONNOUSERSITE=1\nPYTHONUNBUFFERED=1\nMAF_HOST_TOOLS_CALL_TIMEOUT=%s\n", strconv.FormatFloat(callTimeout, 'f', 1, 64))
	b.WriteString("export PYTHONPATH PYTHONNOUSERSITE PYTHONUNBUFFERED MAF_HOST_TOOLS_CALL_TIMEOUT\nunset maf_kept maf_entry\n")
	fmt.Fprintf(&b, "maf_inner=%s\n", shq(inner))
	b.WriteString("if command -v setsid >/dev/null 2>&1; then\n")
	b.WriteString("  setsid nohup sh -c \"$maf_inner\" < /dev/null > /dev/null 2>&1 &\n")
	fmt.Fprintf(&b, "  printf '%s %%s %%s\\n' \"$!\" \"$!\"\n", ReceiptVersion)
	b.WriteString("else\n")
	b.WriteString("  nohup sh -c \"$maf_inner\" < /dev/null > /dev/null 2>&1 &\n")
	fmt.Fprintf(&b, "  printf '%s %%s 0\\n' \"$!\"\n", ReceiptVersion)
	b.WriteString("fi\n")
	return b.String()
}
