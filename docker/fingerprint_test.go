package docker

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/label"
)

func TestParseChanges(t *testing.T) {
	cases := []struct {
		name    string
		out     string
		want    []Change
		wantErr error
	}{
		{name: "empty", out: "", want: nil},
		{name: "three kinds", out: "C /etc\nA /etc/x y\nD /tmp/gone\n",
			want: []Change{{ChangeModified, "/etc"}, {ChangeAdded, "/etc/x y"}, {ChangeDeleted, "/tmp/gone"}}},
		{name: "unknown kind", out: "X /etc\n", wantErr: errMalformedAnswer},
		{name: "relative path", out: "A etc\n", wantErr: errMalformedAnswer},
		{name: "no separator", out: "A/etc\n", wantErr: errMalformedAnswer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseChanges([]byte(tc.out))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && !slices.Equal(got, tc.want)) {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestObserverSpec(t *testing.T) {
	id := strings.Repeat("a", 64)
	image := "sha256:" + strings.Repeat("b", 64)
	good := ObserverSpec{Name: "maf-fingerprint-0123", Image: image, Target: id, MaxOutputBytes: 1 << 20,
		Args: []string{"-max-bytes", "9"}, Labels: []label.Label{{Key: "maf-sandbox.role", Value: "observer"}}}
	cases := []struct {
		name   string
		mutate func(*ObserverSpec)
	}{
		{"an image by tag", func(s *ObserverSpec) { s.Image = "maf-sandbox/fingerprint-observer:local" }},
		{"a target by name", func(s *ObserverSpec) { s.Target = "maf-sandbox-docker-x" }},
		{"a dash-led name", func(s *ObserverSpec) { s.Name = "-x" }},
		{"no output bound", func(s *ObserverSpec) { s.MaxOutputBytes = 0 }},
		{"a label over the bound", func(s *ObserverSpec) {
			s.Labels = append(s.Labels, label.Label{Key: "k", Value: strings.Repeat("x", 5000)})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			s.Labels = slices.Clone(good.Labels)
			tc.mutate(&s)
			if _, err := s.withLabels(nil, 0); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
	s, err := good.withLabels(map[string]string{"maf-sandbox-test.session": "s1"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cliObserverRunArgs(s), " ")
	want := "run --rm --name maf-fingerprint-0123 --pull never --network none --read-only --cap-drop ALL --cap-add SYS_PTRACE " +
		"--security-opt no-new-privileges --user 0:0 --pid container:" + id + " --pids-limit 16 --memory 256m " +
		"--label maf-sandbox.role=observer --label maf-sandbox-test.session=s1 " + image + " -max-bytes 9"
	if got != want || s.Timeout != 7 {
		t.Fatalf("args\n%s\nwant\n%s (timeout %v)", got, want, s.Timeout)
	}
	opts, err := apiObserverCreateOptions(s)
	if err != nil {
		t.Fatal(err)
	}
	hc := opts.HostConfig
	if string(hc.NetworkMode) != "none" || !hc.ReadonlyRootfs || !slices.Equal(hc.CapDrop, []string{"ALL"}) ||
		!slices.Equal(hc.CapAdd, []string{"SYS_PTRACE"}) || string(hc.PidMode) != "container:"+id || hc.Privileged || !hc.AutoRemove ||
		opts.Config.User != "0:0" || *hc.PidsLimit != 16 || opts.Name != s.Name || opts.Config.Image != image {
		t.Fatalf("the API create options differ from the CLI's hardening: %+v %+v", opts.Config, hc)
	}
}
