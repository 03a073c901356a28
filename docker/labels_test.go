package docker

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestLabelValue(t *testing.T) {
	long64 := strings.Repeat("x", 64)
	cases := []struct {
		name string
		raw  string
		want string
	}{
		{"short plain passes", "scope-1.a_b", "scope-1.a_b"},
		{"63 bytes passes", strings.Repeat("x", 63), strings.Repeat("x", 63)},
		{"64 bytes digested, never truncated", long64, "sha256-7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d"},
		{"empty digested", "", "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"},
		{"separator digested", "a/b", LabelValue("a/b")},
		{"space digested", "a b", LabelValue("a b")},
		{"non-ASCII digested", "sköpe", LabelValue("sköpe")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := LabelValue(tc.raw)
			if got != tc.want {
				t.Fatalf("LabelValue(%q) = %q, want %q", tc.raw, got, tc.want)
			}
			if got != tc.raw && !digestLabelValue.MatchString(got) {
				t.Fatalf("LabelValue(%q) = %q: transformed but not digest-shaped", tc.raw, got)
			}
		})
	}
}

func TestLabelValueProperties(t *testing.T) {
	t.Run("digest-shaped input is digested again", func(t *testing.T) {
		forged := "sha256-" + strings.Repeat("a", 48)
		if got := LabelValue(forged); got == forged {
			t.Fatalf("LabelValue(%q) passed a hand-made digest through", forged)
		}
	})
	t.Run("shared long prefix stays apart", func(t *testing.T) {
		p := strings.Repeat("p", 80)
		if LabelValue(p+"1") == LabelValue(p+"2") {
			t.Fatal("two long scopes with a common prefix got one label value")
		}
	})
	t.Run("idempotent on its own output only for plain values", func(t *testing.T) {
		if LabelValue("abc") != "abc" {
			t.Fatal("plain value changed")
		}
	})
}

func TestSandboxLabels(t *testing.T) {
	key := sandbox.Key{Scope: strings.Repeat("s", 70), ThreadID: "t", AgentID: "a/b", CallID: "c1"}
	got, err := WorkloadLabels(key, "python", map[string]string{"b": "2", "a": "x y"}, "/maf-sandbox/work")
	if err != nil {
		t.Fatal(err)
	}
	want := []Label{
		{LabelScope, LabelValue(key.Scope)},
		{LabelThread, "t"},
		{LabelAgent, LabelValue("a/b")},
		{LabelKind, "python"},
		{LabelCall, "c1"},
		{"maf-sandbox.label.a", LabelValue("x y")},
		{"maf-sandbox.label.b", "2"},
		{LabelWorkDir, "/maf-sandbox/work"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WorkloadLabels =\n%v\nwant\n%v", got, want)
	}
	// The long scope's label is exactly LabelValue of it: create and purge share the mapping.
	if f := KeyFilter(key, nil); f[LabelScope] != got[0].Value || f[LabelCall] != "c1" {
		t.Fatalf("KeyFilter disagrees with the labels written: %v", f)
	}
}

// TestEmptyKeyPartsAreDigested: an empty thread or agent is written and selected as the
// digest of the empty string, as the reference writes it, never as an empty filter value
// (which would mean "any value" and reach every conversation of the scope).
func TestEmptyKeyPartsAreDigested(t *testing.T) {
	const empty = "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c" // sha256("")[:48]
	key := sandbox.Key{Scope: "s"}
	got, err := SandboxLabels(key, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Label{{LabelScope, "s"}, {LabelThread, empty}, {LabelAgent, empty}, {LabelKind, "k"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SandboxLabels =\n%v\nwant\n%v", got, want)
	}
	if f := KeyFilter(key, nil); !reflect.DeepEqual(f, map[string]string{LabelScope: "s", LabelThread: empty, LabelAgent: empty}) {
		t.Fatalf("KeyFilter = %v", f)
	}
	if f := ScopeFilter("s", ""); !reflect.DeepEqual(f, map[string]string{LabelScope: "s", LabelThread: empty}) {
		t.Fatalf("ScopeFilter = %v", f)
	}
}

func TestSandboxLabelsRefuse(t *testing.T) {
	cases := []struct {
		name    string
		labels  map[string]string
		wantErr error
	}{
		{"equals in key", map[string]string{"a=b": "c"}, ErrInvalid},
		{"newline in key", map[string]string{"a\nb": "c"}, ErrInvalid},
		{"empty key is fine under the prefix", map[string]string{"": "c"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SandboxLabels(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}, "k", tc.labels)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestFilters(t *testing.T) {
	kind := "bicep"
	cases := []struct {
		name string
		got  map[string]string
		want map[string]string
	}{
		{"conversation key", KeyFilter(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}, nil),
			map[string]string{LabelScope: "s", LabelThread: "t", LabelAgent: "a"}},
		{"call key with kind", KeyFilter(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a", CallID: "c"}, &kind),
			map[string]string{LabelScope: "s", LabelThread: "t", LabelAgent: "a", LabelCall: "c", LabelKind: "bicep"}},
		{"scope", ScopeFilter("s s", "t"), map[string]string{LabelScope: LabelValue("s s"), LabelThread: "t"}},
		{"identity, all scopes", IdentityFilter(""),
			map[string]string{LabelScope: "", LabelThread: "", LabelAgent: "", LabelKind: ""}},
		{"identity, one scope", IdentityFilter("s"),
			map[string]string{LabelScope: "s", LabelThread: "", LabelAgent: "", LabelKind: ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestMergeLabels(t *testing.T) {
	base := []Label{{LabelScope, "s"}}
	cases := []struct {
		name    string
		user    map[string]string
		want    []Label
		wantErr error
	}{
		{"appends in key order", map[string]string{"z": "1", "a": "2"},
			[]Label{{LabelScope, "s"}, {"a", "2"}, {"z", "1"}}, nil},
		{"refuses the reserved prefix", map[string]string{"maf-sandbox.scope": "x"}, nil, ErrInvalid},
		{"refuses a reserved key even when new", map[string]string{"maf-sandbox.mine": "x"}, nil, ErrInvalid},
		{"refuses equals in key", map[string]string{"a=b": "x"}, nil, ErrInvalid},
		{"refuses empty key", map[string]string{"": "x"}, nil, ErrInvalid},
		{"refuses oversized", map[string]string{"k": strings.Repeat("v", 5000)}, nil, ErrInvalid},
		{"nothing to add", nil, []Label{{LabelScope, "s"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MergeLabels(base, tc.user)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
