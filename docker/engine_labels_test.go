package docker_test

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/label"
)

// TestEngineLabelsSelect pins both directions of the label contract: a long scope's label is
// label.Value of it, and a real listing by that value selects the container.
func TestEngineLabelsSelect(t *testing.T) {
	image := dockertest.Busybox(t)
	e := newEngine(t)
	key := testKey(t)
	key.Scope = strings.Repeat("scope/with separators and length ", 4)
	key.CallID = "call 1"
	name, _ := workload(t, e, image, key)
	info, err := e.Inspect(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.Labels[label.Scope], label.Value(key.Scope); got != want || !strings.HasPrefix(got, "sha256-") {
		t.Fatalf("scope label %q, want %q", got, want)
	}
	kind := "busybox"
	other := "python"
	cases := []struct {
		name    string
		filters map[string]string
		nameF   string
		want    []string
	}{
		{"key", label.KeyFilter(key, nil), "", []string{name}},
		{"key and kind", label.KeyFilter(key, &kind), "", []string{name}},
		{"other kind", label.KeyFilter(key, &other), "", nil},
		{"conversation", label.ScopeFilter(key.Scope, key.ThreadID), "", []string{name}},
		{"identity presence, narrowed by name", label.IdentityFilter(""), name, []string{name}},
		{"identity with scope", label.IdentityFilter(key.Scope), "", []string{name}},
		{"other thread", label.ScopeFilter(key.Scope, key.ThreadID+"x"), "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.ListNames(testCtx(t), tc.filters, tc.nameF)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("ListNames = %v, want %v", got, tc.want)
			}
		})
	}
}
