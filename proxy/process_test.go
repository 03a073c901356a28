package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

func TestConfigFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr error
	}{
		{name: "unset", env: nil, want: Config{Port: 3128}},
		{name: "allowlist trimmed, empties dropped", env: map[string]string{egresslog.EnvAllow: " a.example ,, *.b.example,\t,c\x1f"},
			want: Config{Allow: []string{"a.example", "*.b.example", "c"}, Port: 3128}},
		{name: "private blocks", env: map[string]string{egresslog.EnvPrivateCIDRs: "10.213.0.0/24, fd12::/16,"},
			want: Config{PrivateCIDRs: []netip.Prefix{netip.MustParsePrefix("10.213.0.0/24"), netip.MustParsePrefix("fd12::/16")}, Port: 3128}},
		{name: "port", env: map[string]string{egresslog.EnvPort: "8443"}, want: Config{Port: 8443}},
		{name: "empty port is the default", env: map[string]string{egresslog.EnvPort: " "}, want: Config{Port: 3128}},
		{name: "bad block", env: map[string]string{egresslog.EnvPrivateCIDRs: "10.213.0.0"}, wantErr: ErrInvalidConfig},
		{name: "bad port", env: map[string]string{egresslog.EnvPort: "http"}, wantErr: ErrInvalidConfig},
		{name: "port zero", env: map[string]string{egresslog.EnvPort: "0"}, wantErr: ErrInvalidConfig},
		{name: "port too large", env: map[string]string{egresslog.EnvPort: "65536"}, wantErr: ErrInvalidConfig},
		{name: "inspecting rules", env: map[string]string{egresslog.EnvInspect: "api.example methods=GET paths=/v1/**"},
			want: Config{Port: 3128, Inspect: []sandbox.EgressRule{{Host: "api.example", Methods: []string{"GET"}, Paths: []string{"/v1/**"}}}}},
		{name: "bad inspecting rule", env: map[string]string{egresslog.EnvInspect: "api.example methods=GET"}, wantErr: ErrInvalidConfig},
		{name: "inspecting rule the grammar refuses", env: map[string]string{egresslog.EnvInspect: "10.0.0.1 methods=GET paths="}, wantErr: ErrInvalidConfig},
		{name: "upstream bundle without a certificate", env: map[string]string{egresslog.EnvUpstreamCAs: "not pem"}, wantErr: ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func withListenHost(h string) Option {
	return func(o *options) error { o.listenHost = h; return nil }
}

// TestRun runs the process contract in-process: readiness line after listen, decisions on
// the same output, and a stop on cancellation that cuts tunnels and returns within a second.
func TestRun(t *testing.T) {
	echo := startEcho(t)
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := Config{Allow: []string{"echo.test", "*.b.test"}, Port: 0}
	opts := append(loopbackTarget(echo, map[string][]string{"echo.test": {"127.0.0.1"}}), withListenHost("127.0.0.1"), withLoopbackOnlyGuard(t))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, out, opts...) }()

	ready := regexp.MustCompile(`^listening on (\d+); allowing: echo\.test, \*\.b\.test\n`)
	var port string
	for deadline := time.Now().Add(5 * time.Second); ; {
		if m := ready.FindStringSubmatch(out.String()); m != nil {
			port = m[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no readiness line: %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "CONNECT echo.test:443 HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len(established)); got != established {
		t.Fatalf("answer %q", got)
	}

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return")
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("stop took %v", el)
	}
	if _, err := io.ReadAll(c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("tunnel not cut: %v", err)
	}
	lines := strings.SplitAfter(out.String(), "\n")
	if len(lines) != 3 || lines[1] != "ALLOW echo.test:443\n" || lines[2] != "" {
		t.Fatalf("output %q", out.String())
	}
}

func TestRunListenFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out := &syncBuffer{}
	err = Run(t.Context(), Config{Port: ln.Addr().(*net.TCPAddr).Port}, out, withListenHost("127.0.0.1"))
	if err == nil {
		t.Fatal("Run bound a port in use")
	}
	if out.String() != "" {
		t.Fatalf("readiness before listen: %q", out.String())
	}
}
