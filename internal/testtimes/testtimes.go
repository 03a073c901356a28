package testtimes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Timing is how long one package, or one top-level test of it, took.
type Timing struct {
	Run     string // the stream's name: make test writes one per pass
	Package string
	Test    string // empty for the package itself
	Elapsed time.Duration
	Action  string // pass, fail or skip
}

// Times is one run's timings, read from one or more test2json streams.
type Times struct {
	Packages []Timing
	Tests    []Timing
	// Passed, Failed and Skipped count every test that ended, subtests included.
	Passed, Failed, Skipped int
}

// event is the part of a test2json event this package reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

// Read adds the stream r, named run, to t. Lines that are not test2json events (a build failure's text)
// are ignored; a package or test that never ended is not counted.
func (t *Times) Read(r io.Reader, run string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		if e.Test != "" {
			switch e.Action {
			case "pass":
				t.Passed++
			case "fail":
				t.Failed++
			default:
				t.Skipped++
			}
		}
		tm := Timing{Run: run, Package: e.Package, Test: e.Test, Elapsed: time.Duration(e.Elapsed * float64(time.Second)), Action: e.Action}
		switch {
		case e.Test == "":
			t.Packages = append(t.Packages, tm)
		case !strings.Contains(e.Test, "/"):
			t.Tests = append(t.Tests, tm)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read test events: %w", err)
	}
	return nil
}

// Report writes each package's time, slowest first, then the n slowest top-level tests, and
// last a line counting the tests that passed, failed and were skipped.
func (t *Times) Report(w io.Writer, n int) error {
	bySlowest := func(a, b Timing) int { return int(b.Elapsed - a.Elapsed) }
	pkgs := slices.Clone(t.Packages)
	slices.SortStableFunc(pkgs, bySlowest)
	tests := slices.Clone(t.Tests)
	slices.SortStableFunc(tests, bySlowest)
	if len(tests) > n {
		tests = tests[:n]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "packages, slowest first (%d):\n", len(pkgs))
	for _, p := range pkgs {
		fmt.Fprintf(&b, "  %9s  %-4s  %s%s\n", p.Elapsed.Round(100*time.Millisecond), p.Action, p.Package, p.pass())
	}
	fmt.Fprintf(&b, "the %d slowest tests:\n", len(tests))
	for _, tc := range tests {
		fmt.Fprintf(&b, "  %9s  %-4s  %s %s%s\n", tc.Elapsed.Round(100*time.Millisecond), tc.Action, tc.Package, tc.Test, tc.pass())
	}
	fmt.Fprintf(&b, "tests: %d passed, %d failed, %d skipped\n", t.Passed, t.Failed, t.Skipped)
	_, err := io.WriteString(w, b.String())
	return err
}

// pass names the run after a package or test, when the streams are named.
func (tm Timing) pass() string {
	if tm.Run == "" {
		return ""
	}
	return " [" + tm.Run + "]"
}
