package paths_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox/paths"
)

// The wants are Python's shlex.join on the same input.
func TestQuoteArgv(t *testing.T) {
	cases := []struct {
		name  string
		input []string
		want  string
	}{
		{"nothing", nil, ""},
		{"safe words stay bare", []string{"printf", "ok-ran"}, "printf ok-ran"},
		{"the whole safe set", []string{"@%+=:,./_-azAZ09"}, "@%+=:,./_-azAZ09"},
		{"a flag", []string{"--flag=x"}, "--flag=x"},
		{"the empty word", []string{""}, "''"},
		{"a space", []string{"a b"}, "'a b'"},
		{"a single quote", []string{"it's"}, `'it'"'"'s'`},
		{"two single quotes", []string{"a''b"}, `'a'"'"''"'"'b'`},
		{"a variable", []string{"$HOME"}, "'$HOME'"},
		{"a glob", []string{"*"}, "'*'"},
		{"a tilde", []string{"~"}, "'~'"},
		{"a newline", []string{"a\nb"}, "'a\nb'"},
		{"non-ASCII is quoted", []string{"naïve"}, "'naïve'"},
		{"the argv-is-quoted probe", []string{"sh", "-c", `printf '%s' "$1"`, "probe", "a b$(echo injected)c"},
			`sh -c 'printf '"'"'%s'"'"' "$1"' probe 'a b$(echo injected)c'`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := paths.QuoteArgv(tc.input); got != tc.want {
				t.Fatalf("QuoteArgv(%q) = %q, want %q", tc.input, got, tc.want)
			}
		})
	}
}

// TestQuoteArgvThroughShell hands the quoted words to a real POSIX shell and checks that each
// element comes back as exactly one argument, unaltered.
func TestQuoteArgvThroughShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	argv := []string{"", " ", "a b", "it's", `"`, `\`, "$(echo injected)", "`id`", "$HOME", "*", "~",
		"a\nb", "\t", ";", "&&", "|", ">x", "naïve", "'", "''", `'"'"'`, "-n", "--", "!", "#", "{a,b}"}
	cmd := exec.Command(sh, "-c", `printf '%s\0' `+paths.QuoteArgv(argv))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, argv) {
		t.Fatalf("the shell saw %q, want %q", got, argv)
	}
}
