package main

import (
	"maps"
	"testing"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
)

// TestWarmPoolFlag: --warm-pool IMAGE=N, repeatable and from the environment; the size
// follows the last "=", so an image keeps its own; off by default.
func TestWarmPoolFlag(t *testing.T) {
	cases := []struct {
		name    string
		env     string
		args    []string
		want    map[string]int
		wantErr bool
	}{
		{name: "off by default", want: map[string]int{}},
		{name: "one", args: []string{"--warm-pool", "busybox:1=20"}, want: map[string]int{"busybox:1": 20}},
		{name: "repeated", args: []string{"--warm-pool", "a=1", "--warm-pool", "b=2"}, want: map[string]int{"a": 1, "b": 2}},
		{name: "the environment", env: "a=1, b=3", want: map[string]int{"a": 1, "b": 3}},
		{name: "an image with =", args: []string{"--warm-pool", "reg/x=y=4"}, want: map[string]int{"reg/x=y": 4}},
		{name: "no size", args: []string{"--warm-pool", "busybox"}, wantErr: true},
		{name: "a negative size", args: []string{"--warm-pool", "busybox=-1"}, wantErr: true},
		{name: "a bad environment", env: "busybox", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MAF_SANDBOX_WARM_POOL", tc.env)
			v := &serveVerb{labels: settings.Labels{}}
			err := v.parse(tc.args)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parse %q = nil, want an error", tc.args)
				}
				return
			}
			if err != nil || !maps.Equal(map[string]int(v.pool.sizes), tc.want) {
				t.Fatalf("parse %q: %v, %v; want %v", tc.args, v.pool.sizes, err, tc.want)
			}
			if got := len(v.pool.options()); (got > 0) != (len(tc.want) > 0) {
				t.Fatalf("%d backend options for %v", got, tc.want)
			}
		})
	}
}
