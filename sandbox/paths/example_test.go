package paths_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/paths"
)

func ExampleConfineResolve() {
	for _, p := range []string{"out/report.csv", "/w/out/../a.txt", ".", "../w-outside/secret", `a\b`} {
		r, err := paths.ConfineResolve(p, "/w")
		var nc *sandbox.NotConfinedError
		switch {
		case errors.As(err, &nc):
			fmt.Printf("%-18s refused: %s\n", p, nc.Reason)
		default:
			fmt.Printf("%-18s %s\n", p, r)
		}
	}
	// Output:
	// out/report.csv     /w/out/report.csv
	// /w/out/../a.txt    /w/a.txt
	// .                  /w
	// ../w-outside/secret refused: resolves outside working directory
	// a\b                refused: the path contains a backslash, which is not a separator
}

func ExampleResolveRead() {
	// A guest that replaced its working directory's parent with a link to "/".
	stat := func(_ context.Context, abs string) (*sandbox.FileStat, error) {
		if abs == "/maf-sandbox" {
			return sandbox.NewFileStat("", sandbox.EntrySymlink, 0), nil
		}
		return sandbox.NewFileStat("", sandbox.EntryDirectory, 0), nil
	}
	_, err := paths.ResolveRead(context.Background(), stat, "etc/shadow", "/maf-sandbox/work")
	fmt.Println(errors.Is(err, sandbox.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// path "/maf-sandbox/work/etc/shadow" is not confined to working directory "/maf-sandbox/work": /maf-sandbox is a link, not a real directory, so a path through it does not stay inside the working directory
}

func ExampleQuoteArgv() {
	fmt.Println(paths.QuoteArgv([]string{"printf", "%s", "it's $HOME", ""}))
	// Output:
	// printf %s 'it'"'"'s $HOME' ''
}
