package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

func TestCollectOutputsLandsInDeclarationOrder(t *testing.T) {
	sb := newSpy(newFake(t, map[string]string{
		"b.txt": "bee", "parsed.json": "{}", "dir/c.bin": "\x00\xff\r\n", "a.txt": "a", "late.txt": "late",
	}))
	typed := land("a.txt")
	typed.MediaType = "text/plain"
	spec := newSpec(t, sandbox.WithOutputsNamedAtCallTime(), sandbox.WithDeclaredOutputs(
		land("b.txt"), consume("parsed.json"), named(land("dir/c.bin"), "renamed/c.bin"), typed))
	rec := &recorder{}

	landed, err := sandbox.CollectOutputs(context.Background(), sb, spec, rec.sink(""), []sandbox.DeclaredOutput{land("late.txt")})
	if err != nil {
		t.Fatalf("CollectOutputs: %v", err)
	}

	want := []sandbox.Artifact{
		{Name: "b.txt", Content: []byte("bee"), Kind: "report"},
		{Name: "renamed/c.bin", Content: []byte("\x00\xff\r\n"), Kind: "report"},
		{Name: "a.txt", Content: []byte("a"), Kind: "report", MediaType: "text/plain"},
		{Name: "late.txt", Content: []byte("late"), Kind: "report"},
	}
	got := rec.Artifacts()
	if len(got) != len(want) {
		t.Fatalf("delivered %d artifacts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Content, want[i].Content) ||
			got[i].Kind != want[i].Kind || got[i].MediaType != want[i].MediaType {
			t.Fatalf("artifact %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(landed) != len(want) {
		t.Fatalf("landed %d, want %d", len(landed), len(want))
	}
	for i := range want {
		if landed[i].Name != want[i].Name {
			t.Fatalf("landed[%d] = %q, want %q", i, landed[i].Name, want[i].Name)
		}
	}

	// Every output is statted, in declaration order, relative to the storage base, before
	// anything is read; only landing outputs are read, each asking for its stat size.
	wantCalls := []call{
		{Op: "stat", Path: "b.txt", WorkDir: "."},
		{Op: "stat", Path: "parsed.json", WorkDir: "."},
		{Op: "stat", Path: "dir/c.bin", WorkDir: "."},
		{Op: "stat", Path: "a.txt", WorkDir: "."},
		{Op: "stat", Path: "late.txt", WorkDir: "."},
		{Op: "read", Path: "b.txt", WorkDir: ".", MaxBytes: 3},
		{Op: "read", Path: "dir/c.bin", WorkDir: ".", MaxBytes: 4},
		{Op: "read", Path: "a.txt", WorkDir: ".", MaxBytes: 1},
		{Op: "read", Path: "late.txt", WorkDir: ".", MaxBytes: 4},
	}
	if calls := sb.Calls(); !slices.Equal(calls, wantCalls) {
		t.Fatalf("sandbox calls:\n got %+v\nwant %+v", calls, wantCalls)
	}
}

func TestCollectOutputsToFileSystemSink(t *testing.T) {
	// The guest spells its file in NFD; it lands under the NFC spelling.
	sb := newFake(t, map[string]string{"out/report.pdf": "%PDF\r\n\x00", "cafe\u0301.txt": "c"})
	root := t.TempDir()
	sink := newSink(t, root)
	spec := newSpec(t, sandbox.WithDeclaredOutputs(land("out/report.pdf"), land("cafe\u0301.txt")))

	landed, err := sandbox.CollectOutputs(context.Background(), sb, spec, sink, nil)
	if err != nil {
		t.Fatalf("CollectOutputs: %v", err)
	}
	if len(landed) != 2 {
		t.Fatalf("landed %+v", landed)
	}
	if landed[0].Display != "out/report.pdf (7 bytes)" {
		t.Fatalf("Display = %q", landed[0].Display)
	}
	if b := readFile(t, *landed[0].Handle); string(b) != "%PDF\r\n\x00" {
		t.Fatalf("landed bytes %q", b)
	}
	if landed[1].Name != "caf\u00e9.txt" {
		t.Fatalf("NFD name landed as %q, want its NFC spelling", landed[1].Name)
	}
	if b := readFile(t, filepath.Join(root, "caf\u00e9.txt")); string(b) != "c" {
		t.Fatalf("landed bytes %q", b)
	}
}

// Each phase refuses before the next runs: the earlier refusal wins when a collection breaks
// several rules, and nothing before the stat phase touches the sandbox.
func TestCollectOutputsPhaseOrder(t *testing.T) {
	devanagari := strings.Repeat("\u0958", 85) // 255 bytes; NFC decomposes each rune: 510 bytes
	cases := []struct {
		name     string
		spec     []sandbox.SpecOption
		unbuilt  bool
		sink     func(*recorder) *sandbox.OutputSink
		callTime []sandbox.DeclaredOutput
		files    map[string]string
		nilSB    bool
		check    func(t *testing.T, err error)
		touches  bool // the sandbox is called
	}{
		{
			name:     "call-time outputs the spec does not allow, before the sink and names",
			callTime: []sandbox.DeclaredOutput{land("a//b")},
			check:    wantIs(sandbox.ErrInvalid, "does not name outputs at call time"),
		},
		{
			name:  "landing without a sink, before names",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(land("ok.txt"), consume("c.json"), land("a//b"))},
			check: wantSinkRequired([]string{"ok.txt", "a//b"}, false),
		},
		{
			name:     "call-time landing without a sink",
			spec:     []sandbox.SpecOption{sandbox.WithOutputsNamedAtCallTime()},
			callTime: []sandbox.DeclaredOutput{land("x.txt")},
			check:    wantSinkRequired([]string{"x.txt"}, true),
		},
		{
			name:    "consume outputs need no sink",
			spec:    []sandbox.SpecOption{sandbox.WithDeclaredOutputs(consume("c.json"))},
			files:   map[string]string{"c.json": "{}"},
			check:   wantNoError,
			touches: true,
		},
		{
			name:  "an invalid path, before any stat",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(land("ok.txt"), land("a/./b"))},
			sink:  nfcSink,
			check: wantInvalidName("a/./b"),
		},
		{
			name:  "an invalid consume path",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(consume("/etc/passwd"))},
			check: wantInvalidName("/etc/passwd"),
		},
		{
			name:  "every path before any delivered name",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(named(land("ok.txt"), "bad\x01"), land("a\\b"))},
			sink:  nfcSink,
			check: wantInvalidName("a\\b"),
		},
		{
			name:  "an invalid delivered name",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(named(land("ok.txt"), "bad\x01"))},
			sink:  nfcSink,
			check: wantInvalidName("bad\x01"),
		},
		{
			name:  "a delivered name that NFC lengthens past the limit",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(named(land("ok.txt"), devanagari))},
			sink:  nfcSink,
			check: wantInvalidName(strings.Repeat("\u0915\u093c", 85)),
		},
		{
			name:    "the same name is delivered as given without normalization",
			spec:    []sandbox.SpecOption{sandbox.WithDeclaredOutputs(named(land("ok.txt"), devanagari))},
			sink:    noneSink,
			files:   map[string]string{"ok.txt": "x"},
			check:   wantNoError,
			touches: true,
		},
		{
			name:  "a path that NFC lengthens fails as delivered",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(land(devanagari))},
			sink:  nfcSink,
			check: wantInvalidName(strings.Repeat("\u0915\u093c", 85)),
		},
		{
			name:     "an unknown disposition",
			spec:     []sandbox.SpecOption{sandbox.WithOutputsNamedAtCallTime()},
			callTime: []sandbox.DeclaredOutput{{Path: "x.txt", Disposition: "keep", Required: true}},
			sink:     nfcSink,
			check:    wantIs(sandbox.ErrInvalid, "keep"),
		},
		{
			name:     "an empty disposition lands",
			spec:     []sandbox.SpecOption{sandbox.WithOutputsNamedAtCallTime()},
			callTime: []sandbox.DeclaredOutput{{Path: "x.txt", Required: true}},
			check:    wantSinkRequired([]string{"x.txt"}, true),
		},
		{
			name:  "an unknown sink normalization",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(land("ok.txt"))},
			sink:  func(r *recorder) *sandbox.OutputSink { return r.sink("nfkc") },
			check: wantIs(sandbox.ErrInvalid, "nfkc"),
		},
		{
			name:  "a sink without Deliver",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(land("ok.txt"))},
			sink:  func(*recorder) *sandbox.OutputSink { return &sandbox.OutputSink{} },
			check: wantIs(sandbox.ErrInvalid, "Deliver"),
		},
		{
			name:    "a spec not built by NewSpec",
			unbuilt: true,
			check:   wantIs(sandbox.ErrInvalid, "NewSpec"),
		},
		{
			name:  "a nil sandbox",
			spec:  []sandbox.SpecOption{sandbox.WithDeclaredOutputs(land("ok.txt"))},
			sink:  nfcSink,
			nilSB: true,
			check: wantIs(sandbox.ErrInvalid, "sandbox is nil"),
		},
		{
			name:  "no outputs at all need no sandbox",
			nilSB: true,
			check: wantNoError,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := newSpy(newFake(t, tc.files))
			var sb sandbox.Sandbox = fake
			if tc.nilSB {
				sb = nil
			}
			spec := newSpec(t, tc.spec...)
			if tc.unbuilt {
				spec = sandbox.Spec{Kind: "report", FilesOut: sandbox.DefaultTransferLimits()}
			}
			rec := &recorder{}
			var sink *sandbox.OutputSink
			if tc.sink != nil {
				sink = tc.sink(rec)
			}
			landed, err := sandbox.CollectOutputs(context.Background(), sb, spec, sink, tc.callTime)
			tc.check(t, err)
			if err != nil && landed != nil {
				t.Fatalf("a refusal before delivery returned artifacts %+v", landed)
			}
			if touched := len(fake.Calls()) > 0; touched != tc.touches {
				t.Fatalf("sandbox touched = %v, want %v (calls %+v)", touched, tc.touches, fake.Calls())
			}
		})
	}
}

func TestCollectOutputsNameCollisions(t *testing.T) {
	cases := []struct {
		name      string
		outputs   []sandbox.DeclaredOutput
		norm      sandbox.NameNormalization
		collide   bool
		first     string
		second    string
		identical bool
	}{
		{name: "two outputs given one name", outputs: []sandbox.DeclaredOutput{named(land("a.txt"), "out.txt"), named(land("b.txt"), "out.txt")},
			collide: true, first: "a.txt", second: "b.txt", identical: true},
		{name: "a name equal to another's path", outputs: []sandbox.DeclaredOutput{land("out.txt"), land("x.txt"), named(land("b.txt"), "out.txt")},
			collide: true, first: "out.txt", second: "b.txt", identical: true},
		{name: "names differing by case", outputs: []sandbox.DeclaredOutput{land("Report.TXT"), land("report.txt")},
			collide: true, first: "Report.TXT", second: "report.txt"},
		{name: "directories differing by case", outputs: []sandbox.DeclaredOutput{land("Out/a.txt"), land("out/a.txt")},
			collide: true, first: "Out/a.txt", second: "out/a.txt"},
		{name: "NFC and NFD land as one name under an nfc sink", outputs: []sandbox.DeclaredOutput{land("caf\u00e9.txt"), land("cafe\u0301.txt")},
			collide: true, first: "caf\u00e9.txt", second: "cafe\u0301.txt", identical: true},
		{name: "NFC and NFD differ by Unicode form under a none sink", norm: sandbox.NormalizeNone,
			outputs: []sandbox.DeclaredOutput{land("caf\u00e9.txt"), land("cafe\u0301.txt")},
			collide: true, first: "caf\u00e9.txt", second: "cafe\u0301.txt"},
		{name: "case and Unicode form together", outputs: []sandbox.DeclaredOutput{land("CAF\u00c9.txt"), land("cafe\u0301.txt")},
			collide: true, first: "CAF\u00c9.txt", second: "cafe\u0301.txt"},
		{name: "capital sharp s lower-cases to ß", outputs: []sandbox.DeclaredOutput{land("STRA\u1e9eE.txt"), land("straße.txt")},
			collide: true, first: "STRA\u1e9eE.txt", second: "straße.txt"},
		{name: "ß and ss stay distinct (lower-casing, not folding)", outputs: []sandbox.DeclaredOutput{land("straße.txt"), land("strasse.txt")}},
		{name: "ß and SS stay distinct", outputs: []sandbox.DeclaredOutput{land("straße.txt"), land("STRASSE.txt")}},
		{name: "a consumed output does not collide", outputs: []sandbox.DeclaredOutput{land("a.txt"), consume("A.txt")}},
		{name: "distinct names", outputs: []sandbox.DeclaredOutput{land("a.txt"), land("b.txt"), land("a.txt.bak")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for _, o := range tc.outputs {
				files[o.Path] = o.Path
			}
			fake := newSpy(newFake(t, files))
			spec := newSpec(t, sandbox.WithDeclaredOutputs(tc.outputs...))
			rec := &recorder{}
			_, err := sandbox.CollectOutputs(context.Background(), fake, spec, rec.sink(tc.norm), nil)
			if !tc.collide {
				if err != nil {
					t.Fatalf("CollectOutputs: %v", err)
				}
				return
			}
			var collision *sandbox.ArtifactNameCollisionError
			if !errors.As(err, &collision) {
				t.Fatalf("CollectOutputs = %v, want *ArtifactNameCollisionError", err)
			}
			if collision.First != tc.first || collision.Second != tc.second || collision.Identical != tc.identical {
				t.Fatalf("collision = %+v, want first %q second %q identical %v", collision, tc.first, tc.second, tc.identical)
			}
			how := "differ only by case or Unicode form"
			if tc.identical {
				how = "identical name"
			}
			if msg := err.Error(); !strings.Contains(msg, how) || !strings.Contains(msg, tc.first) || !strings.Contains(msg, tc.second) {
				t.Fatalf("message %q should name both paths and say they %s", msg, how)
			}
			if len(fake.Calls()) > 0 {
				t.Fatalf("a name collision touched the sandbox: %+v", fake.Calls())
			}
		})
	}
}

func TestCollectOutputsStatPhase(t *testing.T) {
	cases := []struct {
		name    string
		outputs []sandbox.DeclaredOutput
		seed    func(sb *spy)
		check   func(t *testing.T, err error)
		landed  []string
	}{
		{
			name:    "a required output is missing",
			outputs: []sandbox.DeclaredOutput{land("here.txt"), land("gone.txt")},
			check: func(t *testing.T, err error) {
				var missing *sandbox.OutputMissingError
				if !errors.As(err, &missing) || missing.Kind != "report" || missing.Path != "gone.txt" {
					t.Fatalf("err = %v, want *OutputMissingError for report/gone.txt", err)
				}
				if !strings.Contains(err.Error(), "Required=false") {
					t.Fatalf("message %q should hint at Required=false", err)
				}
			},
		},
		{
			name:    "a required consumed output is missing",
			outputs: []sandbox.DeclaredOutput{consume("gone.json")},
			check:   wantAs[*sandbox.OutputMissingError](),
		},
		{
			name:    "an optional output is missing",
			outputs: []sandbox.DeclaredOutput{optional(land("gone.txt")), land("here.txt"), optional(consume("gone.json"))},
			landed:  []string{"here.txt"},
		},
		{
			name:    "a link",
			outputs: []sandbox.DeclaredOutput{land("here.txt"), optional(land("link.txt"))},
			seed:    func(sb *spy) { sb.fake().AddSymlink(base+"/link.txt", "/etc/passwd") },
			check:   wantNotRegular("link.txt", sandbox.EntrySymlink),
		},
		{
			name:    "another kind of entry",
			outputs: []sandbox.DeclaredOutput{land("fifo")},
			seed:    func(sb *spy) { sb.fake().AddOther(base + "/fifo") },
			check:   wantNotRegular("fifo", sandbox.EntryOther),
		},
		{
			name:    "a directory",
			outputs: []sandbox.DeclaredOutput{consume("dir")},
			seed:    func(sb *spy) { sb.fake().AddDir(base + "/dir") },
			check:   wantNotRegular("dir", sandbox.EntryDirectory),
		},
		{
			name:    "a file of unknown size",
			outputs: []sandbox.DeclaredOutput{land("here.txt"), land("sizeless.txt")},
			seed: func(sb *spy) {
				sb.stat["sizeless.txt"] = func() (*sandbox.FileStat, error) {
					return &sandbox.FileStat{Path: "sizeless.txt", Kind: sandbox.EntryFile}, nil
				}
			},
			check: func(t *testing.T, err error) {
				var unknown *sandbox.OutputSizeUnknownError
				if !errors.As(err, &unknown) || unknown.Path != "sizeless.txt" {
					t.Fatalf("err = %v, want *OutputSizeUnknownError for sizeless.txt", err)
				}
			},
		},
		{
			name:    "a file of negative size",
			outputs: []sandbox.DeclaredOutput{land("here.txt")},
			seed: func(sb *spy) {
				sb.stat["here.txt"] = func() (*sandbox.FileStat, error) {
					return &sandbox.FileStat{Path: "here.txt", Kind: sandbox.EntryFile, Size: ptr(int64(-1))}, nil
				}
			},
			check: wantAs[*sandbox.OutputSizeUnknownError](),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSpy(newFake(t, map[string]string{"here.txt": "here"}))
			if tc.seed != nil {
				tc.seed(sb)
			}
			rec := &recorder{}
			spec := newSpec(t, sandbox.WithDeclaredOutputs(tc.outputs...))
			landed, err := sandbox.CollectOutputs(context.Background(), sb, spec, rec.sink(""), nil)
			if tc.check != nil {
				tc.check(t, err)
				if slices.ContainsFunc(sb.Calls(), func(c call) bool { return c.Op == "read" }) || len(rec.Artifacts()) > 0 {
					t.Fatalf("a stat-phase refusal read or delivered: calls %+v, delivered %+v", sb.Calls(), rec.Artifacts())
				}
				return
			}
			if err != nil {
				t.Fatalf("CollectOutputs: %v", err)
			}
			if names := landedNames(landed); !slices.Equal(names, tc.landed) {
				t.Fatalf("landed %v, want %v", names, tc.landed)
			}
		})
	}
}

// The three caps, tallied per file in the spec's order (per-file, count, total), with consume
// outputs counting against every one.
func TestCollectOutputsCaps(t *testing.T) {
	limits := func(perFile, total, files int64) sandbox.TransferLimits {
		return sandbox.TransferLimits{MaxBytesPerFile: perFile, MaxTotalBytes: total, MaxFiles: files}
	}
	cases := []struct {
		name    string
		limits  sandbox.TransferLimits
		outputs []sandbox.DeclaredOutput
		files   map[string]string
		want    *sandbox.TransferCapExceededError // nil: collected
		mention []string
	}{
		{name: "exactly at every cap", limits: limits(4, 8, 2),
			outputs: []sandbox.DeclaredOutput{land("a"), land("b")}, files: map[string]string{"a": "aaaa", "b": "bbbb"}},
		{name: "one byte over the per-file cap", limits: limits(4, 100, 10),
			outputs: []sandbox.DeclaredOutput{land("a"), land("big")}, files: map[string]string{"a": "a", "big": "12345"},
			want:    &sandbox.TransferCapExceededError{Path: "big", Cap: "per-file cap", Limit: 4, Actual: 5},
			mention: []string{`"big"`, "per-file cap of 4", "5"}},
		{name: "one file over the count", limits: limits(4, 100, 2),
			outputs: []sandbox.DeclaredOutput{land("a"), land("b"), land("c")}, files: map[string]string{"a": "a", "b": "b", "c": "c"},
			want:    &sandbox.TransferCapExceededError{Path: "c", Cap: "file count cap", Limit: 2, Actual: 3},
			mention: []string{`"c"`, "file count cap of 2", "reached 3"}},
		{name: "one byte over the total", limits: limits(8, 15, 10),
			outputs: []sandbox.DeclaredOutput{land("a"), land("b")}, files: map[string]string{"a": "12345678", "b": "12345678"},
			want:    &sandbox.TransferCapExceededError{Path: "b", Cap: "total cap", Limit: 15, Actual: 16},
			mention: []string{`"b"`, "total cap of 15", "reached 16"}},
		{name: "per-file before count", limits: limits(4, 100, 1),
			outputs: []sandbox.DeclaredOutput{land("a"), land("big")}, files: map[string]string{"a": "a", "big": "12345"},
			want: &sandbox.TransferCapExceededError{Path: "big", Cap: "per-file cap", Limit: 4, Actual: 5}},
		{name: "per-file before total", limits: limits(4, 6, 10),
			outputs: []sandbox.DeclaredOutput{land("a"), land("big")}, files: map[string]string{"a": "aaaa", "big": "12345"},
			want: &sandbox.TransferCapExceededError{Path: "big", Cap: "per-file cap", Limit: 4, Actual: 5}},
		{name: "count before total", limits: limits(8, 10, 1),
			outputs: []sandbox.DeclaredOutput{land("a"), land("b")}, files: map[string]string{"a": "12345678", "b": "12345678"},
			want: &sandbox.TransferCapExceededError{Path: "b", Cap: "file count cap", Limit: 1, Actual: 2}},
		{name: "a consumed output counts against the total", limits: limits(8, 10, 10),
			outputs: []sandbox.DeclaredOutput{consume("parsed"), land("b")}, files: map[string]string{"parsed": "12345678", "b": "123"},
			want: &sandbox.TransferCapExceededError{Path: "b", Cap: "total cap", Limit: 10, Actual: 11}},
		{name: "a consumed output counts against the file count", limits: limits(8, 100, 1),
			outputs: []sandbox.DeclaredOutput{consume("parsed"), land("b")}, files: map[string]string{"parsed": "1", "b": "1"},
			want: &sandbox.TransferCapExceededError{Path: "b", Cap: "file count cap", Limit: 1, Actual: 2}},
		{name: "a consumed output is held to the per-file cap", limits: limits(2, 100, 10),
			outputs: []sandbox.DeclaredOutput{consume("parsed")}, files: map[string]string{"parsed": "123"},
			want: &sandbox.TransferCapExceededError{Path: "parsed", Cap: "per-file cap", Limit: 2, Actual: 3}},
		{name: "a missing optional output is not counted", limits: limits(8, 100, 1),
			outputs: []sandbox.DeclaredOutput{optional(land("gone")), land("b")}, files: map[string]string{"b": "1"}},
		{name: "zero caps refuse even an empty file", limits: sandbox.TransferLimits{},
			outputs: []sandbox.DeclaredOutput{land("empty")}, files: map[string]string{"empty": ""},
			want: &sandbox.TransferCapExceededError{Path: "empty", Cap: "file count cap", Limit: 0, Actual: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSpy(newFake(t, tc.files))
			rec := &recorder{}
			spec := newSpec(t, sandbox.WithFilesOut(tc.limits), sandbox.WithDeclaredOutputs(tc.outputs...))
			_, err := sandbox.CollectOutputs(context.Background(), sb, spec, rec.sink(""), nil)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CollectOutputs: %v", err)
				}
				return
			}
			var capErr *sandbox.TransferCapExceededError
			if !errors.As(err, &capErr) {
				t.Fatalf("CollectOutputs = %v, want *TransferCapExceededError", err)
			}
			if *capErr != *tc.want {
				t.Fatalf("cap error = %+v, want %+v", *capErr, *tc.want)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("message %q does not mention %q", err, m)
				}
			}
			if slices.ContainsFunc(sb.Calls(), func(c call) bool { return c.Op == "read" }) || len(rec.Artifacts()) > 0 {
				t.Fatalf("a cap breach read or delivered: calls %+v, delivered %+v", sb.Calls(), rec.Artifacts())
			}
		})
	}
}

func TestCollectOutputsNothingToLand(t *testing.T) {
	cases := []struct {
		name    string
		outputs []sandbox.DeclaredOutput
	}{
		{"no outputs", nil},
		{"consume outputs only", []sandbox.DeclaredOutput{consume("parsed.json")}},
		{"every landing output optional and missing", []sandbox.DeclaredOutput{optional(land("gone.txt")), consume("parsed.json")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSpy(newFake(t, map[string]string{"parsed.json": "{}"}))
			rec := &recorder{}
			spec := newSpec(t, sandbox.WithDeclaredOutputs(tc.outputs...))
			landed, err := sandbox.CollectOutputs(context.Background(), sb, spec, rec.sink(""), nil)
			if err != nil {
				t.Fatalf("CollectOutputs: %v", err)
			}
			if len(landed) != 0 || len(rec.Artifacts()) != 0 {
				t.Fatalf("landed %+v, delivered %+v; want nothing and no sink call", landed, rec.Artifacts())
			}
			if slices.ContainsFunc(sb.Calls(), func(c call) bool { return c.Op == "read" }) {
				t.Fatalf("read with nothing to land: %+v", sb.Calls())
			}
		})
	}
}

func TestCollectOutputsReadPhase(t *testing.T) {
	grown := &sandbox.TransferCapExceededError{Path: "a.txt", Cap: "max bytes", Limit: 3, Actual: 9}
	cases := []struct {
		name  string
		seed  func(sb *spy)
		check func(t *testing.T, err error)
	}{
		{
			name: "a file that grew after its stat is refused by the backend, error unchanged",
			seed: func(sb *spy) {
				sb.fake().AddFile(base+"/a.txt", []byte("grown 9 b"))
				sb.stat["a.txt"] = statSize("a.txt", 3)
			},
			check: func(t *testing.T, err error) {
				var capErr *sandbox.TransferCapExceededError
				if !errors.As(err, &capErr) || capErr.Cap != "max bytes" || capErr.Limit != 3 {
					t.Fatalf("err = %v, want the backend's max bytes refusal", err)
				}
			},
		},
		{
			name: "a cap refusal passes through as returned",
			seed: func(sb *spy) {
				sb.read["a.txt"] = func(int64) ([]byte, error) { return nil, grown }
			},
			check: func(t *testing.T, err error) {
				if err != grown { // unchanged: the very value
					t.Fatalf("err = %v (%T), want the backend's error unchanged", err, err)
				}
			},
		},
		{
			name: "a wrapped cap refusal passes through as returned",
			seed: func(sb *spy) {
				sb.read["a.txt"] = func(int64) ([]byte, error) { return nil, fmt.Errorf("read a.txt: %w", grown) }
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, grown) || err.Error() != "read a.txt: "+grown.Error() {
					t.Fatalf("err = %v, want the backend's wrapped error unchanged", err)
				}
			},
		},
		{
			name: "a backend handing back more than asked is refused, never truncated",
			seed: func(sb *spy) {
				sb.read["a.txt"] = func(int64) ([]byte, error) { return []byte("too long"), nil }
			},
			check: func(t *testing.T, err error) {
				var capErr *sandbox.TransferCapExceededError
				if !errors.As(err, &capErr) || *capErr != (sandbox.TransferCapExceededError{Path: "a.txt", Cap: "max bytes", Limit: 3, Actual: 8}) {
					t.Fatalf("err = %v, want max bytes 3 reached 8", err)
				}
			},
		},
		{
			name: "a file that vanished after its stat is unreachable",
			seed: func(sb *spy) { sb.stat["gone.txt"] = statSize("gone.txt", 1) },
			check: func(t *testing.T, err error) {
				var unreachable *sandbox.OutputUnreachableError
				if !errors.As(err, &unreachable) || unreachable.Path != "gone.txt" || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want *OutputUnreachableError caused by fs.ErrNotExist", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSpy(newFake(t, map[string]string{"a.txt": "aaa", "b.txt": "b"}))
			tc.seed(sb)
			rec := &recorder{}
			outputs := []sandbox.DeclaredOutput{land("a.txt"), land("b.txt")}
			if _, ok := sb.stat["gone.txt"]; ok {
				outputs = append(outputs, land("gone.txt"))
			}
			spec := newSpec(t, sandbox.WithDeclaredOutputs(outputs...))
			landed, err := sandbox.CollectOutputs(context.Background(), sb, spec, rec.sink(""), nil)
			tc.check(t, err)
			if landed != nil || len(rec.Artifacts()) > 0 {
				t.Fatalf("a read-phase refusal delivered %+v", rec.Artifacts())
			}
		})
	}
}

// Backend errors from stat and read are translated by class, keeping the original as cause.
func TestCollectOutputsTranslatesBackendErrors(t *testing.T) {
	hiccup := errors.New("engine hiccup")
	cases := []struct {
		name   string
		output string
		seed   func(sb *spy)
		as     func(error) bool
		is     []error
		isNot  []error
	}{
		{
			name: "stat through a linked parent", output: "link-dir/secret.txt",
			seed: func(sb *spy) { sb.fake().AddSymlink(base+"/link-dir", "/outside") },
			as:   asError[*sandbox.OutputNotConfinedError], is: []error{sandbox.ErrOutput},
		},
		{
			name: "stat under a plain file", output: "plain.txt/deeper.txt",
			seed: func(sb *spy) { sb.fake().AddFile(base+"/plain.txt", nil) },
			as:   asError[*sandbox.OutputUnreachableError], is: []error{sandbox.ErrOutput, syscall.ENOTDIR},
		},
		{
			name: "stat timing out", output: "slow.txt",
			seed: func(sb *spy) { sb.fake().FailStat(base+"/slow.txt", &sandbox.TimeoutError{Op: "stat"}) },
			as:   asError[*sandbox.OutputUnreachableError], is: []error{sandbox.ErrOutput, sandbox.ErrTimeout},
		},
		{
			name: "stat refused permission", output: "locked.txt",
			seed: func(sb *spy) { sb.fake().FailStat(base+"/locked.txt", fs.ErrPermission) },
			as:   asError[*sandbox.OutputUnreachableError], is: []error{sandbox.ErrOutput, fs.ErrPermission},
		},
		{
			name: "stat failing for an unclassified reason", output: "odd.txt",
			seed: func(sb *spy) { sb.fake().FailStat(base+"/odd.txt", hiccup) },
			as:   func(error) bool { return true }, is: []error{hiccup}, isNot: []error{sandbox.ErrOutput},
		},
		{
			name: "stat abandoned by its context", output: "late.txt",
			seed: func(sb *spy) { sb.fake().FailStat(base+"/late.txt", context.DeadlineExceeded) },
			as:   func(error) bool { return true }, is: []error{context.DeadlineExceeded}, isNot: []error{sandbox.ErrOutput},
		},
		{
			name: "read refused as not confined", output: "a.txt",
			seed: func(sb *spy) { sb.read["a.txt"] = failRead(&sandbox.NotConfinedError{Path: "a.txt", WorkDir: "."}) },
			as:   asError[*sandbox.OutputNotConfinedError], is: []error{sandbox.ErrOutput, sandbox.ErrInvalid},
		},
		{
			name: "read of a link swapped in after the stat", output: "a.txt",
			seed: func(sb *spy) {
				sb.read["a.txt"] = failRead(&sandbox.NotRegularError{Path: "a.txt", Kind: sandbox.EntrySymlink})
			},
			as: asError[*sandbox.OutputUnreachableError], is: []error{sandbox.ErrOutput, sandbox.ErrOS},
		},
		{
			name: "read of a directory swapped in after the stat", output: "a.txt",
			seed: func(sb *spy) {
				sb.read["a.txt"] = failRead(&sandbox.PathError{Op: "read", Path: "a.txt", Err: sandbox.ErrIsDirectory})
			},
			as: asError[*sandbox.OutputUnreachableError], is: []error{sandbox.ErrOutput, sandbox.ErrIsDirectory},
		},
		{
			name: "read failing with a host I/O error", output: "a.txt",
			seed: func(sb *spy) { sb.read["a.txt"] = failRead(&fs.PathError{Op: "read", Path: "a.txt", Err: syscall.EIO}) },
			as:   asError[*sandbox.OutputUnreachableError], is: []error{sandbox.ErrOutput, syscall.EIO},
		},
		{
			name: "read failing for an unclassified reason", output: "a.txt",
			seed: func(sb *spy) { sb.read["a.txt"] = failRead(hiccup) },
			as:   func(error) bool { return true }, is: []error{hiccup}, isNot: []error{sandbox.ErrOutput},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSpy(newFake(t, map[string]string{"a.txt": "a"}))
			tc.seed(sb)
			spec := newSpec(t, sandbox.WithDeclaredOutputs(land(tc.output)))
			_, err := sandbox.CollectOutputs(context.Background(), sb, spec, (&recorder{}).sink(""), nil)
			if err == nil || !tc.as(err) {
				t.Fatalf("CollectOutputs = %v (%T)", err, err)
			}
			for _, target := range tc.is {
				if !errors.Is(err, target) {
					t.Fatalf("err %v is not %v", err, target)
				}
			}
			for _, target := range tc.isNot {
				if errors.Is(err, target) {
					t.Fatalf("err %v should not be %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), tc.output) {
				t.Fatalf("message %q does not name the output", err)
			}
		})
	}
}

// A Deliver error propagates; the deliveries before it stand and are returned, and no later
// output is delivered.
func TestCollectOutputsPartialDelivery(t *testing.T) {
	files := map[string]string{"a.txt": "a", "b.txt": "b", "c.txt": "c"}
	outputs := []sandbox.DeclaredOutput{land("a.txt"), land("b.txt"), land("c.txt")}

	t.Run("recording sink", func(t *testing.T) {
		rec := &recorder{failAt: 2, failErr: errSinkRefused}
		landed, err := sandbox.CollectOutputs(context.Background(), newFake(t, files), newSpec(t, sandbox.WithDeclaredOutputs(outputs...)), rec.sink(""), nil)
		if !errors.Is(err, errSinkRefused) || !strings.Contains(err.Error(), "b.txt") {
			t.Fatalf("err = %v, want the sink's refusal for b.txt", err)
		}
		if names := landedNames(landed); !slices.Equal(names, []string{"a.txt"}) {
			t.Fatalf("landed %v, want [a.txt]", names)
		}
		if got := rec.Artifacts(); len(got) != 2 {
			t.Fatalf("sink saw %d deliveries, want 2 (none after the refusal)", len(got))
		}
	})

	t.Run("file system sink", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "b.txt"), []byte("theirs"), 0o644); err != nil {
			t.Fatal(err)
		}
		landed, err := sandbox.CollectOutputs(context.Background(), newFake(t, files), newSpec(t, sandbox.WithDeclaredOutputs(outputs...)), newSink(t, root), nil)
		var exists *sandbox.LandingExistsError
		if !errors.As(err, &exists) || exists.Name != "b.txt" {
			t.Fatalf("err = %v, want *LandingExistsError for b.txt", err)
		}
		if names := landedNames(landed); !slices.Equal(names, []string{"a.txt"}) {
			t.Fatalf("landed %v, want [a.txt]", names)
		}
		if b := readFile(t, filepath.Join(root, "a.txt")); string(b) != "a" {
			t.Fatalf("a.txt holds %q", b)
		}
		if b := readFile(t, filepath.Join(root, "b.txt")); string(b) != "theirs" {
			t.Fatalf("b.txt was overwritten with %q", b)
		}
		if _, err := os.Stat(filepath.Join(root, "c.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("c.txt landed after the refusal: %v", err)
		}
	})
}

func TestCollectOutputsCancellation(t *testing.T) {
	files := map[string]string{"a.txt": "a", "b.txt": "b"}
	outputs := []sandbox.DeclaredOutput{land("a.txt"), land("b.txt")}

	t.Run("before the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		sb := newSpy(newFake(t, files))
		rec := &recorder{}
		landed, err := sandbox.CollectOutputs(ctx, sb, newSpec(t, sandbox.WithDeclaredOutputs(outputs...)), rec.sink(""), nil)
		wantCanceled(t, err)
		if landed != nil || len(sb.Calls()) > 0 || len(rec.Artifacts()) > 0 {
			t.Fatalf("a cancelled collection went on: landed %+v, calls %+v", landed, sb.Calls())
		}
	})

	t.Run("between stat and read", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sb := newSpy(newFake(t, files))
		sb.stat["b.txt"] = func() (*sandbox.FileStat, error) {
			cancel()
			return sandbox.NewFileStat("b.txt", sandbox.EntryFile, 1), nil
		}
		rec := &recorder{}
		_, err := sandbox.CollectOutputs(ctx, sb, newSpec(t, sandbox.WithDeclaredOutputs(outputs...)), rec.sink(""), nil)
		wantCanceled(t, err)
		if slices.ContainsFunc(sb.Calls(), func(c call) bool { return c.Op == "read" }) || len(rec.Artifacts()) > 0 {
			t.Fatalf("read or delivered after cancellation: %+v", sb.Calls())
		}
	})

	t.Run("while reading", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sb := newSpy(newFake(t, files))
		sb.read["a.txt"] = func(int64) ([]byte, error) { cancel(); return []byte("a"), nil }
		rec := &recorder{}
		_, err := sandbox.CollectOutputs(ctx, sb, newSpec(t, sandbox.WithDeclaredOutputs(outputs...)), rec.sink(""), nil)
		wantCanceled(t, err)
		if len(rec.Artifacts()) > 0 {
			t.Fatalf("delivered after cancellation: %+v", rec.Artifacts())
		}
	})

	t.Run("between deliveries", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := &recorder{onDeliver: cancel}
		landed, err := sandbox.CollectOutputs(ctx, newFake(t, files), newSpec(t, sandbox.WithDeclaredOutputs(outputs...)), rec.sink(""), nil)
		wantCanceled(t, err)
		if names := landedNames(landed); !slices.Equal(names, []string{"a.txt"}) {
			t.Fatalf("landed %v, want the delivery made before cancellation", names)
		}
	})
}

func wantCanceled(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if errors.Is(err, sandbox.ErrOutput) || errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("cancellation %v was reported as an output or timeout error", err)
	}
}

func landedNames(landed []sandbox.LandedArtifact) []string {
	var names []string
	for _, l := range landed {
		names = append(names, l.Name)
	}
	return names
}

func statSize(p string, size int64) func() (*sandbox.FileStat, error) {
	return func() (*sandbox.FileStat, error) { return sandbox.NewFileStat(p, sandbox.EntryFile, size), nil }
}

func failRead(err error) func(int64) ([]byte, error) {
	return func(int64) ([]byte, error) { return nil, err }
}

func nfcSink(r *recorder) *sandbox.OutputSink  { return r.sink("") }
func noneSink(r *recorder) *sandbox.OutputSink { return r.sink(sandbox.NormalizeNone) }

func wantNoError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("CollectOutputs: %v", err)
	}
}

func wantIs(target error, mention string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, target) || !strings.Contains(err.Error(), mention) {
			t.Fatalf("err = %v, want %v mentioning %q", err, target, mention)
		}
	}
}

func wantAs[T error]() func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if !asError[T](err) {
			var zero T
			t.Fatalf("err = %v (%T), want %T", err, err, zero)
		}
	}
}

func wantSinkRequired(paths []string, atCallTime bool) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var required *sandbox.OutputSinkRequiredError
		if !errors.As(err, &required) || !slices.Equal(required.Paths, paths) || required.AtCallTime != atCallTime {
			t.Fatalf("err = %v (%+v), want *OutputSinkRequiredError for %v, at call time %v", err, required, paths, atCallTime)
		}
		for _, p := range paths {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("message %q does not name %q", err, p)
			}
		}
	}
}

func wantInvalidName(name string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var invalid *sandbox.ArtifactNameInvalidError
		if !errors.As(err, &invalid) || invalid.Name != name {
			t.Fatalf("err = %v, want *ArtifactNameInvalidError for %q", err, name)
		}
	}
}

func wantNotRegular(p string, kind sandbox.EntryKind) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var notRegular *sandbox.OutputNotRegularError
		if !errors.As(err, &notRegular) || notRegular.Path != p || notRegular.Kind != kind {
			t.Fatalf("err = %v, want *OutputNotRegularError for %s (%s)", err, p, kind)
		}
		if !strings.Contains(err.Error(), string(kind)) {
			t.Fatalf("message %q does not name the entry kind", err)
		}
	}
}

// A running total that would overflow int64 is reported as the largest total, not a negative.
func TestCollectOutputsTotalNeverOverflows(t *testing.T) {
	sb := newSpy(newFake(t, nil))
	sb.stat["a"] = statSize("a", math.MaxInt64)
	sb.stat["b"] = statSize("b", 1)
	unbounded := sandbox.TransferLimits{MaxBytesPerFile: math.MaxInt64, MaxTotalBytes: math.MaxInt64, MaxFiles: 10}
	spec := newSpec(t, sandbox.WithFilesOut(unbounded), sandbox.WithDeclaredOutputs(consume("a"), consume("b")))
	_, err := sandbox.CollectOutputs(context.Background(), sb, spec, nil, nil)
	var capErr *sandbox.TransferCapExceededError
	if !errors.As(err, &capErr) || capErr.Cap != "total cap" || capErr.Path != "b" || capErr.Actual != math.MaxInt64 {
		t.Fatalf("err = %v, want the total cap reached at the largest total", err)
	}
}

func ExampleCollectOutputs() {
	ctx := context.Background()
	sb, _ := sandboxtest.NewSandbox()
	sb.AddFile(sandboxtest.DefaultStorageBase+"/out/chart.png", []byte("\x89PNG"))
	sb.AddFile(sandboxtest.DefaultStorageBase+"/result.json", []byte(`{"ok":true}`))

	chart := sandbox.Output("out/chart.png")
	chart.MediaType = "image/png"
	parsed := sandbox.Output("result.json")
	parsed.Disposition = sandbox.DispositionConsume // statted and capped, never delivered
	spec, _ := sandbox.NewSpec("plot", sandbox.WithDeclaredOutputs(chart, parsed))

	root, _ := os.MkdirTemp("", "landing")
	defer os.RemoveAll(root)
	sink, _ := sandbox.FileSystemSink(root)

	landed, err := sandbox.CollectOutputs(ctx, sb, spec, sink, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range landed {
		fmt.Println(a.Display)
	}
	// Output:
	// out/chart.png (4 bytes)
}
