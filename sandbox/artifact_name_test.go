package sandbox_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

// Each rule of ValidateArtifactName, and which one wins when a name breaks several: the spec
// fixes the order.
func TestValidateArtifactName(t *testing.T) {
	long := strings.Repeat("a", sandbox.MaxArtifactNameBytes)
	cases := []struct {
		name     string
		in       string
		wantRule string // substring of the rule; "" = valid
	}{
		{"plain", "report.pdf", ""},
		{"nested", "out/charts/a.png", ""},
		{"dot file", ".hidden", ""},
		{"dots inside a segment", "a..b/c...", ""},
		{"DEL is allowed", "a\x7fb", ""},
		{"unicode", "résumé/日本.txt", ""},
		{"exactly the limit", long, ""},
		{"multi-byte at the limit", strings.Repeat("é", 127) + "a", ""}, // 255 bytes

		{"empty", "", "empty"},
		{"backslash", `a\b`, "backslash"},
		{"backslash before a leading slash", `/a\b`, "backslash"},
		{"absolute", "/etc/passwd", `starts with "/"`},
		{"root alone", "/", `starts with "/"`},
		{"absolute before dotdot", "/../x", `starts with "/"`},
		{"dotdot alone", "..", `".." segment`},
		{"dotdot inside", "a/../b", `".." segment`},
		{"dotdot before an empty segment", "a//../b", `".." segment`},
		{"double slash", "a//b", `empty or "." segment`},
		{"dot segment", "a/./b", `empty or "." segment`},
		{"dot alone", ".", `empty or "." segment`},
		{"trailing slash", "a/", `empty or "." segment`},
		{"empty segment before a control code", "a//\x01", `empty or "." segment`},
		{"NUL", "a\x00b", "codes 0)"},
		{"newline and tab listed once each, ascending", "a\n\tb\nc", "codes 9, 10)"},
		{"unit separator", "a\x1f", "codes 31)"},
		{"control before invalid UTF-8", "\x01\xff", "control characters"},
		{"invalid UTF-8", "a\xffb", "not valid UTF-8"},
		{"truncated sequence", "caf\xc3", "not valid UTF-8"},
		{"invalid UTF-8 before length", strings.Repeat("a", 300) + "\xff", "not valid UTF-8"},
		{"one byte too long", long + "a", "256 bytes long, above the 255-byte limit"},
		{"multi-byte over the limit", strings.Repeat("é", 128), "256 bytes long"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := sandbox.ValidateArtifactName(tc.in)
			if tc.wantRule == "" {
				if err != nil {
					t.Fatalf("ValidateArtifactName(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			var invalid *sandbox.ArtifactNameInvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("ValidateArtifactName(%q) = %v, want *ArtifactNameInvalidError", tc.in, err)
			}
			if !errors.Is(err, sandbox.ErrOutput) {
				t.Fatalf("error %v is not in the output family", err)
			}
			if invalid.Name != tc.in {
				t.Fatalf("Name = %q, want %q", invalid.Name, tc.in)
			}
			if !strings.Contains(invalid.Rule, tc.wantRule) {
				t.Fatalf("Rule = %q, want it to mention %q", invalid.Rule, tc.wantRule)
			}
			if !strings.Contains(err.Error(), invalid.Rule) {
				t.Fatalf("message %q does not state the rule %q", err, invalid.Rule)
			}
		})
	}
}

func TestPortableName(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"untouched", "out/report.pdf", "out/report.pdf"},
		{"forbidden characters", `a<b>c:d"e|f?g*h`, "a_b_c_d_e_f_g_h"},
		{"control characters", "a\x00b\x1fc\x7f", "a_b_c\x7f"},
		{"trailing dots and spaces", "name. . ", "name"},
		{"trailing dots per segment", "dir./file.", "dir/file"},
		{"leading dots kept", ".hidden", ".hidden"},
		{"only dots becomes _", "...", "_"},
		{"empty segments become _", "a//b/", "a/_/b/_"},
		{"empty name", "", "_"},
		{"CON", "CON", "CON_"},
		{"con lower case", "con", "con_"},
		{"con with extension", "con.txt", "con_.txt"},
		{"con with two extensions", "Con.tar.gz", "Con_.tar.gz"},
		{"PRN", "prn.log", "prn_.log"},
		{"AUX", "aux", "aux_"},
		{"NUL in a directory", "out/nul.bin", "out/nul_.bin"},
		{"COM1", "COM1", "COM1_"},
		{"com9", "com9.dat", "com9_.dat"},
		{"LPT1", "lpt1", "lpt1_"},
		{"LPT9", "LPT9.txt", "LPT9_.txt"},
		{"COM superscript one", "COM¹", "COM¹_"},
		{"com superscript two", "com².txt", "com²_.txt"},
		{"LPT superscript three", "LPT³", "LPT³_"},
		{"COM0 is not reserved", "COM0", "COM0"},
		{"COM10 is not reserved", "COM10", "COM10"},
		{"COM alone is not reserved", "COM", "COM"},
		{"LPT superscript four is not reserved", "LPT⁴", "LPT⁴"},
		{"reserved only before the first dot", "file.con", "file.con"},
		{"console is not CON", "console.txt", "console.txt"},
		{"reserved after stripping", "con. ", "con_"},
		{"reserved after replacing", "aux.<x>", "aux_._x_"},
		{"a space before the dot keeps the stem unreserved", "con .txt", "con .txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sandbox.PortableName(tc.in); got != tc.want {
				t.Fatalf("PortableName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func ExampleValidateArtifactName() {
	for _, name := range []string{"out/report.pdf", "out//report.pdf", "../report.pdf", "tab\there"} {
		fmt.Println(sandbox.ValidateArtifactName(name))
	}
	// Output:
	// <nil>
	// artifact name "out//report.pdf" is invalid: it has an empty or "." segment
	// artifact name "../report.pdf" is invalid: it has a ".." segment
	// artifact name "tab\there" is invalid: it contains ASCII control characters (codes 9)
}

func ExamplePortableName() {
	fmt.Println(sandbox.PortableName("logs/con.txt"))
	fmt.Println(sandbox.PortableName(`what? "now".`))
	fmt.Println(sandbox.PortableName("COM¹/a//b"))
	// Output:
	// logs/con_.txt
	// what_ _now_
	// COM¹_/a/_/b
}
