package egresslog

import (
	"bytes"
	"testing"
)

func TestSealLines(t *testing.T) {
	ts := "2026-12-01T10:00:00.000000000Z "
	log := []byte(ts + FormatReady(3128, nil) + ts + FormatSealed(42))
	if v, d := ParseSeal(log); v != Sealed || d != "42 attempts" {
		t.Fatalf("sealed: %v %q", v, d)
	}
	log = []byte(ts + FormatBreach("tcp 10.0.0.1:22 answered\nwith a reset"))
	if v, d := ParseSeal(log); v != SealBreached || d != "tcp 10.0.0.1:22 answered with a reset" {
		t.Fatalf("breach: %v %q", v, d)
	}
	if v, _ := ParseSeal([]byte("ALLOW a:1\n")); v != SealUnknown {
		t.Fatal("a decision read as a seal line")
	}
	// The seal lines are not decisions.
	ds, _, err := ParseLog(bytes.NewReader([]byte(FormatSealed(1)+FormatBreach("x"))), WithTimestamps())
	if err != nil || len(ds) != 0 {
		t.Fatalf("ParseLog read %v, %v", ds, err)
	}
}
