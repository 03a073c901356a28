// Command testtimes prints where a test run's time went, from the go test -json streams make
// test writes: each package's time, then the slowest top-level tests, each named after the
// stream (the file's base name, which names make test's pass) it came from.
//
//	testtimes [-n 10] FILE...
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mafsandbox/engine/internal/testtimes"
)

func main() {
	n := flag.Int("n", 10, "how many of the slowest tests to list")
	flag.Parse()
	if err := run(*n, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
}

func run(n int, files []string) error {
	var times testtimes.Times
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = times.Read(f, strings.TrimSuffix(filepath.Base(name), ".json"))
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return times.Report(os.Stdout, n)
}
