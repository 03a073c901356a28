package hosttools

import (
	"strings"
	"testing"
)

// TestHintLines: only whole lines naming a request file or the exit marker wake; garbage,
// paths, over-long lines (even one ending in a good name) and split writes do not fool it.
func TestHintLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []string
		wakes  int
	}{
		{"a request", []string{"0001.request.json\n"}, 1},
		{"the marker", []string{ExitFile + "\n"}, 1},
		{"split across writes", []string{"0001.req", "uest.json", "\n"}, 1},
		{"no newline yet", []string{"0001.request.json"}, 0},
		{"garbage", []string{"\x00\xff\n", "ready\n", "none\n", "0001.response.json\n", "1.request.json\n"}, 0},
		{"a path", []string{"../0001.request.json\n", "/etc/passwd\n"}, 0},
		{"over-long then a name", []string{strings.Repeat("x", 5000) + "0001.request.json\n"}, 0},
		{"over-long in pieces", []string{strings.Repeat("x", 40), strings.Repeat("x", 40), "0001.request.json\n0002.request.json\n"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			h := &hintLines{wake: func() { n++ }}
			for _, c := range tc.chunks {
				h.feed([]byte(c))
			}
			if n != tc.wakes {
				t.Fatalf("%d wakes, want %d", n, tc.wakes)
			}
			if len(h.line) > hintLineCap {
				t.Fatalf("kept %d bytes of a partial line", len(h.line))
			}
		})
	}
}
