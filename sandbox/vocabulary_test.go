package sandbox

import (
	"errors"
	"testing"
)

// The ladder is data: every rung has a distinct rank equal to its position, and the rank
// table is the only ordering.
func TestLadderRanksAreExhaustive(t *testing.T) {
	want := map[Isolation]int{
		IsolationNone: 0, IsolationRuntime: 1, IsolationProcess: 2, IsolationContainer: 3,
		IsolationHardenedContainer: 4, IsolationMicroVM: 5, IsolationVM: 6,
	}
	if len(Ladder()) != len(want) {
		t.Fatalf("ladder has %d rungs, want %d", len(Ladder()), len(want))
	}
	for rung, rank := range want {
		if got := rung.Rank(); got != rank {
			t.Errorf("%s rank = %d, want %d", rung, got, rank)
		}
		if p, err := ParseIsolation(string(rung)); err != nil || p != rung {
			t.Errorf("ParseIsolation(%q) = %q, %v", rung, p, err)
		}
	}
	if Isolation("process").Rank() != -1 {
		t.Fatal("process must not be a rung")
	}
}

func TestParseIsolationRefusesProcess(t *testing.T) {
	_, err := ParseIsolation("process")
	var inv *InvalidArgumentError
	if !errors.As(err, &inv) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("ParseIsolation(process) = %v, want an invalid-argument error", err)
	}
}

func TestMeetsFloor(t *testing.T) {
	cases := []struct {
		name            string
		declared, floor Isolation
		want            bool
	}{
		{"equal", IsolationContainer, IsolationContainer, true},
		{"above", IsolationVM, IsolationMicroVM, true},
		{"below", IsolationContainer, IsolationMicroVM, false},
		{"unknown declared", "bogus", IsolationNone, false},
		{"unknown floor", IsolationVM, "bogus", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MeetsFloor(tc.declared, tc.floor); got != tc.want {
				t.Fatalf("MeetsFloor(%s, %s) = %v", tc.declared, tc.floor, got)
			}
		})
	}
}

// Every enumeration parses each of its values, and refuses anything else, including a
// differently cased value.
func TestEnumerationsParseStrictly(t *testing.T) {
	type parser struct {
		name   string
		values []string
		parse  func(string) error
	}
	strs := func(vs ...string) []string { return vs }
	p := func(f func(string) error) func(string) error { return f }
	cases := []parser{
		{"isolation scope", strs("conversation", "call"), p(func(s string) error { _, e := ParseIsolationScope(s); return e })},
		{"egress", strs("unrestricted", "allowlist", "closed"), p(func(s string) error { _, e := ParseEgress(s); return e })},
		{"capability", strs("exec", "run_code", "host_tools", "files_in", "files_out", "files_list", "files_delete",
			"snapshot", "reclaim", "attached_identity", "egress_methods", "processes", "snapshot_files", "fork"), p(func(s string) error { _, e := ParseCapability(s); return e })},
		{"os family", strs("posix", "windows"), p(func(s string) error { _, e := ParseOSFamily(s); return e })},
		{"entry kind", strs("file", "directory", "symlink", "other"), p(func(s string) error { _, e := ParseEntryKind(s); return e })},
		{"disposition", strs("land", "consume"), p(func(s string) error { _, e := ParseOutputDisposition(s); return e })},
		{"cleanup", strs("reclaim", "reset", "dispose"), p(func(s string) error { _, e := ParseCleanup(s); return e })},
		{"failed reclaim", strs("dispose", "keep"), p(func(s string) error { _, e := ParseFailedReclaimPolicy(s); return e })},
		{"selection", strs("fixed", "per_spec"), p(func(s string) error { _, e := ParseSelection(s); return e })},
		{"identity", strs("app", "user"), p(func(s string) error { _, e := ParseToolIdentity(s); return e })},
		{"source integrity", strs("untrusted", "trusted"), p(func(s string) error { _, e := ParseSourceIntegrity(s); return e })},
		{"normalization", strs("nfc", "none"), p(func(s string) error { _, e := ParseNameNormalization(s); return e })},
		{"disposal code", strs("unreachable", "timeout", "refused", "unlisted", "unknown"), p(func(s string) error { _, e := ParseDisposalCode(s); return e })},
		{"signal outcome", strs("sent", "refused", "absent", "unrecorded", "unknown"), p(func(s string) error { _, e := ParseSignalOutcome(s); return e })},
		{"signal reach", strs("group", "program", "nothing"), p(func(s string) error { _, e := ParseSignalReach(s); return e })},
		{"egress decision", strs("ALLOW", "DENY", "DENY-NONGLOBAL", "UNREACHABLE"), p(func(s string) error { _, e := ParseEgressDecisionCode(s); return e })},
		{"isolation", strs("none", "runtime", "os_process", "container", "hardened_container", "microvm", "vm"), p(func(s string) error { _, e := ParseIsolation(s); return e })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range tc.values {
				if err := tc.parse(v); err != nil {
					t.Errorf("parse %q: %v", v, err)
				}
			}
			for _, bad := range []string{"", "bogus", "X" + tc.values[0], swapCase(tc.values[0])} {
				if err := tc.parse(bad); !errors.Is(err, ErrInvalid) {
					t.Errorf("parse %q = %v, want invalid", bad, err)
				}
			}
		})
	}
	if len(Capabilities()) != 14 || len(EgressModes()) != 3 {
		t.Fatal("enumeration lists changed size without updating this test")
	}
}

func swapCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 32
		case c >= 'A' && c <= 'Z':
			b[i] = c + 32
		}
	}
	return string(b)
}

// Plain strings compare equal to the constants: backends written elsewhere may declare them.
func TestStringValuesCompareEqual(t *testing.T) {
	if Capability("exec") != Exec || Egress("closed") != EgressClosed || Isolation("container") != IsolationContainer {
		t.Fatal("string values must equal their constants")
	}
}

func TestRanks(t *testing.T) {
	if !(CleanupReclaim.Rank() < CleanupReset.Rank() && CleanupReset.Rank() < CleanupDispose.Rank()) {
		t.Fatal("cleanup ranks out of order")
	}
	if !(ScopeConversation.Rank() < ScopeCall.Rank()) || IsolationScope("x").Rank() != -1 {
		t.Fatal("scope ranks wrong")
	}
	if !(SourceUntrusted.Rank() < SourceTrusted.Rank()) {
		t.Fatal("integrity ranks wrong")
	}
}

func TestCapabilitySet(t *testing.T) {
	a := NewCapabilitySet(Exec, FilesIn, FilesOut)
	b := NewCapabilitySet(FilesOut, Reclaim)
	if got := a.Intersect(b).String(); got != "files_out" {
		t.Errorf("intersect = %q", got)
	}
	if got := a.Minus(b).String(); got != "exec, files_in" {
		t.Errorf("minus = %q", got)
	}
	if got := a.Union(b).String(); got != "exec, files_in, files_out, reclaim" {
		t.Errorf("union = %q", got)
	}
	c := a.Clone()
	delete(c, Exec)
	if !a.Has(Exec) {
		t.Fatal("clone shares storage")
	}
	if d := DefaultCapabilities(); !d.Has(Exec) || !d.Has(FilesIn) || len(d) != 2 {
		t.Fatalf("default capabilities = %s", d)
	}
}

func TestKey(t *testing.T) {
	k := Key{Scope: "s", ThreadID: "t", AgentID: "a"}
	if k.String() != "s/t/a" {
		t.Errorf("String = %q", k.String())
	}
	k.CallID = "c"
	if k.String() != "s/t/a/c" {
		t.Errorf("String = %q", k.String())
	}
	m := map[SandboxID]int{Identity(k, "x"): 1}
	if m[Identity(k, "x")] != 1 || m[Identity(k, "y")] != 0 {
		t.Fatal("identity must be comparable by key and kind")
	}
}
