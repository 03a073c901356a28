package wire

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// The client and the service share this package so that neither imports the other: the Go
// client links no NATS server-side code (nats.go/micro) and no engine. This test keeps it so,
// and keeps this package free of any NATS client at all.
func TestClientAndWireLinkNoService(t *testing.T) {
	cases := []struct {
		pkg       string
		forbidden []string
	}{
		{"github.com/mafsandbox/engine/client", []string{"github.com/mafsandbox/engine/service", "nats.go/micro", "github.com/mafsandbox/engine/actors"}},
		{"github.com/mafsandbox/engine/wire", []string{"nats-io", "github.com/mafsandbox/engine/service", "github.com/mafsandbox/engine/client"}},
	}
	// go test puts the go command that runs it first on PATH, so this is the same toolchain.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.pkg, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), goTool, "list", "-deps", tc.pkg)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, stderr.Bytes())
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 || deps[len(deps)-1] != tc.pkg {
				t.Fatalf("go list -deps listed %d packages and not %s last: %q", len(deps), tc.pkg, out)
			}
			for _, dep := range deps {
				for _, f := range tc.forbidden {
					if strings.Contains(dep, f) {
						t.Errorf("%s links %s", tc.pkg, dep)
					}
				}
			}
		})
	}
}
