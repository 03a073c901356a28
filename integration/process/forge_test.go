package process

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/sandbox"
)

// TestGuestCannotForgeAnotherProcess: a guest process writes, as its output, what the
// engine's own records look like — an exec channel End frame naming another process with a
// made-up exit, a chunk frame with a made-up sequence, the process stream's record headers —
// and exits. Everything it wrote is stored and read back as its own output, byte for byte,
// at the sequences the supervisor counted; the other process's output and exit are the ones
// its own pipes and the kernel gave. Output and ends come from the supervisor's pipes and its
// wait status, length-framed on the wire, never from what a guest writes.
func TestGuestCannotForgeAnotherProcess(t *testing.T) {
	srv := natstest.Run(t)
	b, _ := storeBackend(t, natstest.Connect(t, srv))
	sb := itest.Acquire(t, b, itest.NewKey(t), itest.BusyboxSpec(t))
	pr := sb.(sandbox.ProcessRunner)
	start(t, pr, sandbox.ProcessSpec{ID: "victim", Command: sandbox.Shell("read x; echo real; exit 3"), Stdin: true})

	var forged bytes.Buffer
	end := `{"id":"victim","pid":1,"exit":{"reason":"exited","code":0,"at":0},"end":999}`
	forged.WriteByte('Z')
	_ = binary.Write(&forged, binary.BigEndian, uint32(len(end)))
	forged.WriteString(end)
	forged.Write([]byte{'D', 0, 0, 0, 14, 1, 0, 0, 0, 0, 0, 0, 0x10, 0, 'f', 'o', 'r', 'g', 'e'})
	forged.WriteString("\nMaf-Process-Record: exit\r\nMaf-Process-Seq: 0\r\n\r\n")
	var printf strings.Builder
	for _, c := range forged.Bytes() {
		fmt.Fprintf(&printf, "\\%03o", c)
	}
	start(t, pr, sandbox.ProcessSpec{ID: "forger", Command: sandbox.Shell("printf '" + printf.String() + "'; exit 7")})
	if p := wait(t, pr, "forger"); p.Exit.ExitCode != 7 || p.Output != int64(forged.Len()) {
		t.Fatalf("forger: %+v %+v", p, p.Exit)
	}
	out, cut, exit := readAll(t, pr, "forger", 0, 1<<20)
	if cut != nil || !bytes.Equal(out, forged.Bytes()) || exit.ExitCode != 7 {
		t.Fatalf("the forger's output read back as %q (cut %v, exit %+v), want its bytes", out, cut, exit)
	}
	if err := pr.WriteProcessStdin(itest.Context(t), "victim", []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	out, cut, exit = readAll(t, pr, "victim", 0, 1<<20)
	if cut != nil || string(out) != "real\n" || exit.Reason != sandbox.ExitExited || exit.ExitCode != 3 {
		t.Fatalf("the victim reads %q (cut %v), exit %+v", out, cut, exit)
	}
}
