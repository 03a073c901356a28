package main

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/docker"
)

// TestServePrivateCIDRs: --egress-private-cidrs (or its environment variable, which the flag
// overrides) reaches the Docker configuration; a block that does not parse or admits every
// non-global address stops serve with a typed error.
func TestServePrivateCIDRs(t *testing.T) {
	cases := []struct {
		name    string
		env     string
		args    []string
		want    []netip.Prefix
		wantErr bool
	}{
		{name: "unset admits none"},
		{name: "the flag", args: []string{"--egress-private-cidrs", "172.30.1.0/24, fd00:1::/64"},
			want: []netip.Prefix{netip.MustParsePrefix("172.30.1.0/24"), netip.MustParsePrefix("fd00:1::/64")}},
		{name: "the environment", env: "10.20.0.0/16", want: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}},
		{name: "the flag over the environment", env: "10.20.0.0/16", args: []string{"--egress-private-cidrs", "192.168.9.0/24"},
			want: []netip.Prefix{netip.MustParsePrefix("192.168.9.0/24")}},
		{name: "not a block", args: []string{"--egress-private-cidrs", "db.internal"}, wantErr: true},
		{name: "everything", args: []string{"--egress-private-cidrs", "0.0.0.0/0"}, wantErr: true},
		{name: "everything, from the environment", env: "::/0", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MAF_SANDBOX_EGRESS_PRIVATE_CIDRS", tc.env)
			v := &serveVerb{labels: settings.Labels{}}
			if err := v.parse(tc.args); err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			cfg, err := v.config()
			var pe *docker.PrivateCIDRError
			if tc.wantErr {
				if !errors.As(err, &pe) || !errors.Is(err, docker.ErrInvalid) {
					t.Fatalf("config() = %v, want a *docker.PrivateCIDRError", err)
				}
				return
			}
			if err != nil || !slices.Equal(cfg.EgressPrivateCIDRs, tc.want) {
				t.Fatalf("config() = %v, %v; want %v", cfg.EgressPrivateCIDRs, err, tc.want)
			}
		})
	}
}

// TestServeUpstreamCAs: --egress-upstream-cas (or its environment variable) names a PEM file
// the backend gets; a missing file or one without a PEM block stops serve, and an empty flag
// adds nothing.
func TestServeUpstreamCAs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "roots.pem")
	bad := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(good, []byte("-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		args      []string
		wantOpt   bool
		wantErr   bool
	}{
		{name: "unset"},
		{name: "the flag", args: []string{"--egress-upstream-cas", good}, wantOpt: true},
		{name: "the environment", env: good, wantOpt: true},
		{name: "a missing file", args: []string{"--egress-upstream-cas", filepath.Join(dir, "absent.pem")}, wantErr: true},
		{name: "no PEM block", args: []string{"--egress-upstream-cas", bad}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MAF_SANDBOX_EGRESS_UPSTREAM_CAS", tc.env)
			v := &serveVerb{labels: settings.Labels{}}
			if err := v.parse(tc.args); err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			opt, err := v.upstreamOption()
			if (err != nil) != tc.wantErr || (opt != nil) != tc.wantOpt {
				t.Fatalf("upstreamOption() = %v, %v; want an option %v, an error %v", opt != nil, err, tc.wantOpt, tc.wantErr)
			}
		})
	}
}

// TestServeExecChannelDefault: the exec channel is on unless turned off, and a start fails
// for a missing supervisor only when the flag or its variable asked for the channel.
func TestServeExecChannelDefault(t *testing.T) {
	cases := []struct {
		name      string
		env       *string
		args      []string
		on, asked bool
	}{
		{name: "default", on: true},
		{name: "empty env", env: ptr(""), on: true},
		{name: "flag off", args: []string{"--exec-channel=false"}, asked: true},
		{name: "flag on", args: []string{"--exec-channel"}, on: true, asked: true},
		{name: "env off", env: ptr("0"), asked: true},
		{name: "env false", env: ptr("false"), asked: true},
		{name: "env on", env: ptr("1"), on: true, asked: true},
		{name: "flag over env", env: ptr("0"), args: []string{"--exec-channel=true"}, on: true, asked: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != nil {
				t.Setenv("MAF_SANDBOX_EXEC_CHANNEL", *tc.env)
			} else {
				t.Setenv("MAF_SANDBOX_EXEC_CHANNEL", "")
				os.Unsetenv("MAF_SANDBOX_EXEC_CHANNEL") // restored by Setenv's cleanup
			}
			v := &serveVerb{labels: settings.Labels{}}
			if err := v.parse(tc.args); err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			if v.execChannel != tc.on || v.execChannelAsked != tc.asked {
				t.Fatalf("exec channel on %v, asked %v; want %v, %v", v.execChannel, v.execChannelAsked, tc.on, tc.asked)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestServeLimits: --memory, --cpus, --pids-limit and --cap-add (or their environment
// variables) reach the Docker configuration; a value no create could take, or a capability
// outside the allow-list, stops serve before anything starts.
func TestServeLimits(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    docker.Bounds
		wantCap []string
		wantErr bool
	}{
		{name: "defaults: 512 pids, no capability", want: docker.Bounds{Pids: 512}},
		{name: "every flag", args: []string{"--memory", "1g", "--cpus", "1.5", "--pids-limit", "100", "--cap-add", "kill, setuid"},
			want: docker.Bounds{MemoryBytes: 1 << 30, CPUs: 1.5, Pids: 100}, wantCap: []string{"KILL", "SETUID"}},
		{name: "the environment", env: map[string]string{"MAF_SANDBOX_MEMORY": "256m", "MAF_SANDBOX_PIDS_LIMIT": "64", "MAF_SANDBOX_CAP_ADD": "CHOWN"},
			want: docker.Bounds{MemoryBytes: 256 << 20, Pids: 64}, wantCap: []string{"CHOWN"}},
		{name: "a capability outside the allow-list", args: []string{"--cap-add", "NET_RAW"}, wantErr: true},
		{name: "memory that does not parse", args: []string{"--memory", "lots"}, wantErr: true},
		{name: "cpus that do not parse", args: []string{"--cpus", "two"}, wantErr: true},
		{name: "no process", args: []string{"--pids-limit", "0"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"MAF_SANDBOX_MEMORY", "MAF_SANDBOX_CPUS", "MAF_SANDBOX_PIDS_LIMIT", "MAF_SANDBOX_CAP_ADD"} {
				t.Setenv(k, tc.env[k])
			}
			v := &serveVerb{labels: settings.Labels{}}
			if err := v.parse(tc.args); err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			cfg, err := v.config()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("config() = %+v, want an error", cfg)
				}
				return
			}
			if err != nil || cfg.Bounds() != tc.want {
				t.Fatalf("config() bounds %+v, %v; want %+v", cfg.Bounds(), err, tc.want)
			}
			spec := docker.NewCreateSpec("N", "img", cfg.WorkloadOpts()...)
			if !spec.CapDropAll || !slices.Equal(spec.CapAdd, tc.wantCap) {
				t.Fatalf("workloads get cap-drop %v cap-add %v, want ALL and %v", spec.CapDropAll, spec.CapAdd, tc.wantCap)
			}
		})
	}
}
