package placement_test

import (
	"testing"

	"github.com/mafsandbox/engine/placement"
)

// TestPickIsTheLighterOfSelfAndOneOther: the cold acquire stays on self unless the member drawn
// is strictly lighter; draining members are never drawn, and a draining self hands on.
func TestPickIsTheLighterOfSelfAndOneOther(t *testing.T) {
	m := func(id string, held, cold int, draining bool) placement.Member {
		return placement.Member{Engine: id, Sandboxes: held, ColdInFlight: cold, Draining: draining}
	}
	first := func(int) int { return 0 }
	last := func(n int) int { return n - 1 }
	for _, tc := range []struct {
		name    string
		self    placement.Member
		members []placement.Member
		pick    func(int) int
		want    string
	}{
		{"alone", m("a", 9, 0, false), []placement.Member{m("a", 9, 0, false)}, first, "a"},
		{"no members listed", m("a", 9, 0, false), nil, first, "a"},
		{"the other is lighter", m("a", 5, 0, false), []placement.Member{m("a", 5, 0, false), m("b", 1, 0, false)}, first, "b"},
		{"a tie stays", m("a", 2, 0, false), []placement.Member{m("b", 2, 0, false)}, first, "a"},
		{"the other is heavier", m("a", 1, 0, false), []placement.Member{m("b", 4, 0, false)}, first, "a"},
		{"cold acquires count", m("a", 3, 0, false), []placement.Member{m("b", 0, 4, false)}, first, "a"},
		{"the one drawn decides", m("a", 3, 0, false), []placement.Member{m("b", 1, 0, false), m("c", 7, 0, false)}, last, "a"},
		{"draining members are not drawn", m("a", 3, 0, false), []placement.Member{m("b", 0, 0, true), m("c", 1, 0, false)}, first, "c"},
		{"only draining members", m("a", 3, 0, false), []placement.Member{m("b", 0, 0, true)}, first, "a"},
		{"a draining self hands on", m("a", 0, 0, true), []placement.Member{m("b", 8, 0, false)}, first, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := placement.Pick(tc.self, tc.members, tc.pick); got != tc.want {
				t.Fatalf("Pick = %s, want %s", got, tc.want)
			}
		})
	}
}
