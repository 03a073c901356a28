package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
)

// Help is not a failure: "engine -h", "--help", "help" and "engine <verb> -h" print help and
// exit 0, and no help text calls the Docker daemon "engine" (the engine is this program).
func TestHelpExitsZero(t *testing.T) {
	bin := buildEngine(t)
	cases := []struct {
		name string
		args []string
		want string // in the help printed
	}{
		{name: "-h", args: []string{"-h"}, want: "Usage:"},
		{name: "--help", args: []string{"--help"}, want: "Usage:"},
		{name: "help", args: []string{"help"}, want: "Usage:"},
		{name: "serve -h", args: []string{"serve", "-h"}, want: "Usage: engine serve"},
		{name: "serve --help", args: []string{"serve", "--help"}, want: "Usage: engine serve"},
		{name: "run -h", args: []string{"run", "-h"}, want: "Usage: engine run"},
		{name: "demo -h", args: []string{"demo", "-h"}, want: "-image"},
		{name: "bench -h", args: []string{"bench", "-h"}, want: "-reps"},
		{name: "images -h", args: []string{"images", "-h"}, want: "Usage: engine images build"},
		{name: "images build -h", args: []string{"images", "build", "-h"}, want: "Usage: engine images build"},
		{name: "reap -h", args: []string{"reap", "-h"}, want: "Usage: engine reap"},
		{name: "version -h", args: []string{"version", "-h"}, want: "Usage: engine version"},
	}
	daemonAsEngine := regexp.MustCompile(`(?i)docker engine|engine's docker|local engine|engine driver|on the engine is swept|bind the engine`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runEngine(t, bin, nil, tc.args...)
			if r.code != 0 {
				t.Fatalf("engine %s exited %d, want 0\nstderr: %s", strings.Join(tc.args, " "), r.code, r.stderr)
			}
			help := r.stdout + r.stderr
			if !strings.Contains(help, tc.want) {
				t.Fatalf("engine %s printed %q, want it to contain %q", strings.Join(tc.args, " "), help, tc.want)
			}
			if m := daemonAsEngine.FindString(help); m != "" {
				t.Fatalf("engine %s calls the Docker daemon the engine (%q):\n%s", strings.Join(tc.args, " "), m, help)
			}
		})
	}
	if r := runEngine(t, bin, nil, "no-such-verb"); r.code != 1 {
		t.Fatalf("an unknown verb exited %d, want 1", r.code)
	}
}

// The package comment names every verb the usage lists.
func TestPackageDocListsVerbs(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	verbs := regexp.MustCompile(`(?m)^  engine ([a-z]+( build)?)`).FindAllStringSubmatch(usage, -1)
	if len(verbs) < 7 {
		t.Fatalf("usage lists %d verbs, want at least 7", len(verbs))
	}
	for _, v := range verbs {
		if !strings.Contains(doc, "  - "+v[1]+" ") {
			t.Errorf("the package comment does not list %q", v[1])
		}
	}
}
