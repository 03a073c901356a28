package bench

import (
	"bytes"
	"strings"
	"testing"
)

// A row's note is set apart from its p95 column; a row without a note ends at p95.
func TestRowTableSeparatesTheNote(t *testing.T) {
	var out bytes.Buffer
	table := newRowTable(&out)
	table.add(Row{Op: "acquire_cold", N: 5, MinMS: 100, MedianMS: 120.5, P95MS: 130.25, Note: "created, not started"})
	table.add(Row{Op: "exec", N: 5, MinMS: 1, MedianMS: 2, P95MS: 3})
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("printed %q, want a header and two rows", out.String())
	}
	if !strings.HasSuffix(lines[1], "130.2  created, not started") {
		t.Fatalf("row %q: the note must follow p95 after two spaces", lines[1])
	}
	if !strings.HasSuffix(lines[2], "3.0") {
		t.Fatalf("row %q: a row without a note ends at p95", lines[2])
	}
	if !strings.Contains(lines[0], "p95_ms") {
		t.Fatalf("header %q", lines[0])
	}
}
