package label

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/sandbox"
)

func TestValue(t *testing.T) {
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
		{"separator digested", "a/b", Value("a/b")},
		{"space digested", "a b", Value("a b")},
		{"non-ASCII digested", "sköpe", Value("sköpe")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Value(tc.raw)
			if got != tc.want {
				t.Fatalf("Value(%q) = %q, want %q", tc.raw, got, tc.want)
			}
			if got != tc.raw && !digestLabelValue.MatchString(got) {
				t.Fatalf("Value(%q) = %q: transformed but not digest-shaped", tc.raw, got)
			}
		})
	}
}

func TestValueProperties(t *testing.T) {
	t.Run("digest-shaped input is digested again", func(t *testing.T) {
		forged := "sha256-" + strings.Repeat("a", 48)
		if got := Value(forged); got == forged {
			t.Fatalf("Value(%q) passed a hand-made digest through", forged)
		}
	})
	t.Run("shared long prefix stays apart", func(t *testing.T) {
		p := strings.Repeat("p", 80)
		if Value(p+"1") == Value(p+"2") {
			t.Fatal("two long scopes with a common prefix got one label value")
		}
	})
	t.Run("idempotent on its own output only for plain values", func(t *testing.T) {
		if Value("abc") != "abc" {
			t.Fatal("plain value changed")
		}
	})
}

func TestSandbox(t *testing.T) {
	key := sandbox.Key{Scope: strings.Repeat("s", 70), ThreadID: "t", AgentID: "a/b", CallID: "c1"}
	got, err := Workload(key, "python", map[string]string{"b": "2", "a": "x y"}, "/maf-sandbox/work")
	if err != nil {
		t.Fatal(err)
	}
	want := []Label{
		{Scope, Value(key.Scope)},
		{Thread, "t"},
		{Agent, Value("a/b")},
		{Kind, "python"},
		{Call, "c1"},
		{"maf-sandbox.label.a", Value("x y")},
		{"maf-sandbox.label.b", "2"},
		{WorkDir, "/maf-sandbox/work"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Workload =\n%v\nwant\n%v", got, want)
	}
	// The long scope's label is exactly Value of it: create and purge share the mapping.
	if f := KeyFilter(key, nil); f[Scope] != got[0].Value || f[Call] != "c1" {
		t.Fatalf("KeyFilter disagrees with the labels written: %v", f)
	}
}

func TestSandboxRefuse(t *testing.T) {
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
			_, err := Sandbox(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}, "k", tc.labels)
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
			map[string]string{Scope: "s", Thread: "t", Agent: "a"}},
		{"call key with kind", KeyFilter(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a", CallID: "c"}, &kind),
			map[string]string{Scope: "s", Thread: "t", Agent: "a", Call: "c", Kind: "bicep"}},
		{"scope", ScopeFilter("s s", "t"), map[string]string{Scope: Value("s s"), Thread: "t"}},
		{"identity, all scopes", IdentityFilter(""),
			map[string]string{Scope: "", Thread: "", Agent: "", Kind: ""}},
		{"identity, one scope", IdentityFilter("s"),
			map[string]string{Scope: "s", Thread: "", Agent: "", Kind: ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestValueVectors(t *testing.T) {
	// Vectors of docker-backend.md §6.3, which egresslog's attribution reads back.
	digest := func(s string) string { return Value(s) }
	cases := []struct {
		name, raw, want string
	}{
		{name: "short plain", raw: "tenant-1.a_b", want: "tenant-1.a_b"},
		{name: "63 bytes", raw: strings.Repeat("a", 63), want: strings.Repeat("a", 63)},
		{name: "64 bytes", raw: strings.Repeat("a", 64), want: "sha256-ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"[:55]},
		{name: "empty", raw: "", want: "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934c"},
		{name: "separator", raw: "a/b", want: digest("a/b")},
		{name: "digest-shaped", raw: "sha256-" + strings.Repeat("a", 48), want: digest("sha256-" + strings.Repeat("a", 48))},
		{name: "digest-shaped upper is plain", raw: "sha256-" + strings.Repeat("A", 48), want: "sha256-" + strings.Repeat("A", 48)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Value(tc.raw)
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if got != tc.raw && (!strings.HasPrefix(got, "sha256-") || len(got) != 55) {
				t.Fatalf("digest %q has the wrong shape", got)
			}
		})
	}
	if d := Value("sha256-" + strings.Repeat("a", 48)); d == "sha256-"+strings.Repeat("a", 48) {
		t.Fatal("a digest-shaped value passed through")
	}
}
