package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

func TestConformanceNewPosixGuestSubject(t *testing.T) {
	g := newGuest(t)
	cases := []struct {
		name    string
		sb      sandbox.Sandbox
		wd      string
		wantErr error
	}{
		{"absolute", g, "/maf-sandbox/work", nil},
		{"no sandbox", nil, "/maf-sandbox/work", sandbox.ErrInvalid},
		{"relative", g, ".", sandbox.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPosixGuestSubject(tc.sb, tc.wd, everything())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestConformanceTheSubjectKeepsItsOwnCopyOfTheCapabilities(t *testing.T) {
	caps := everything()
	s := subjectOf(t, newGuest(t), caps)
	delete(caps, sandbox.FilesOut)
	got := s.Capabilities()
	delete(got, sandbox.Exec)
	if c := s.Capabilities(); !c.Has(sandbox.FilesOut) || !c.Has(sandbox.Exec) {
		t.Fatalf("capabilities = %s: a caller's set changed the subject's", c)
	}
}

func TestConformancePlantingGoesThroughTheSandboxAndTheGuest(t *testing.T) {
	g := newGuest(t)
	s := subjectOf(t, g, everything())
	if err := s.PlantFile(t.Context(), "/elsewhere/deep/file.txt", []byte("x")); err != nil {
		t.Fatalf("plant file: %v", err)
	}
	if b, ok := g.File("/elsewhere/deep/file.txt"); !ok || string(b) != "x" {
		t.Fatalf("planted file = %q, %t", b, ok)
	}
	if err := s.PlantSymlink(t.Context(), "/elsewhere/new/parent/link", "/elsewhere/deep"); err != nil {
		t.Fatalf("plant link: %v", err)
	}
	if target, ok := g.LinkTarget("/elsewhere/new/parent/link"); !ok || target != "/elsewhere/deep" {
		t.Fatalf("planted link -> %q, %t", target, ok)
	}
	calls := g.ExecCalls()
	if len(calls) != 1 || calls[0].WorkDir != "/" || calls[0].Timeout != PlantTimeout ||
		calls[0].Argv[0] != "sh" || calls[0].Argv[2] != plantLinkScript {
		t.Fatalf("exec calls = %+v, want one sh -c of the link script from / with the plant timeout", calls)
	}
	for _, abs := range []string{"relative/file", "./file"} {
		if err := s.PlantFile(t.Context(), abs, nil); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("plant file %q: %v, want an invalid-argument error", abs, err)
		}
		if err := s.PlantSymlink(t.Context(), abs, "/x"); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("plant link %q: %v, want an invalid-argument error", abs, err)
		}
	}
}

func TestConformanceAFailedLinkPlantSaysWhatTheGuestSaid(t *testing.T) {
	sb, err := sandboxtest.NewSandbox(sandboxtest.WithScript(sandboxtest.Script{Match: "ln -sfn",
		Result: sandbox.ExecResult{ExitCode: 127, StderrBytes: []byte("sh: ln: not found\n")}}))
	if err != nil {
		t.Fatal(err)
	}
	s := subjectOf(t, sb, everything())
	err = s.PlantSymlink(t.Context(), "/maf-sandbox/work/l", "/x")
	if err == nil || !strings.Contains(err.Error(), "exited 127") || !strings.Contains(err.Error(), "ln: not found") {
		t.Fatalf("err = %v, want the exit code and the guest's stderr", err)
	}
}

func TestConformanceExistsReadsTestsAnswer(t *testing.T) {
	cases := []struct {
		name    string
		exit    int
		want    bool
		wantErr bool
	}{
		{"there", 0, true, false},
		{"absent", 1, false, false},
		{"test missing", 127, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := sandboxtest.NewSandbox(sandboxtest.WithScript(sandboxtest.Script{Match: "test -e",
				Result: sandbox.ExecResult{ExitCode: tc.exit}}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := subjectOf(t, sb, everything()).Exists(t.Context(), "/p")
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("Exists = %t, %v; want %t, error %t", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
