package main

import "testing"

func TestQuestion(t *testing.T) {
	// ID 0x1234, RD, one question: canary-1.maf-e2e.example. AAAA IN.
	q := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range []string{"canary-1", "maf-e2e", "example"} {
		q = append(append(q, byte(len(l))), l...)
	}
	q = append(q, 0, 0, 28, 0, 1)
	name, qtype, end, ok := question(q)
	if !ok || name != "canary-1.maf-e2e.example." || qtype != 28 || end != len(q) {
		t.Fatalf("question = %q %d %d %v", name, qtype, end, ok)
	}
	for _, bad := range [][]byte{q[:11], q[:len(q)-2], append(append([]byte(nil), q[:12]...), 70, 'a'),
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, _, _, ok := question(bad); ok {
			t.Errorf("question(%x) accepted", bad)
		}
	}
}
