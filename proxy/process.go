package proxy

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// Config is the proxy process's configuration.
type Config struct {
	Allow        []string               // allowlist entries, in order
	PrivateCIDRs []netip.Prefix         // the §2.3a allowance
	Port         int                    // listen port on 0.0.0.0
	Inspect      []sandbox.EgressRule   // inspecting rules (egresslog.EnvInspect); none: every host is a tunnel
	UpstreamCAs  *x509.CertPool         // roots for inspected hosts (egresslog.EnvUpstreamCAs); nil: the system roots
	Credentials  []egresslog.Credential // swapped in on inspected requests (egresslog.EnvCredentials)
}

// ConfigFromEnv reads the configuration from getenv (os.Getenv in the process). The allowlist
// is split on ",", each entry trimmed of white space, empty entries dropped; so is the
// allowance, each entry a CIDR block. It fails with [ErrInvalidConfig] for a block that does
// not parse, for a port that is not a number in 1–65535, for inspecting rules
// [egresslog.ParseInspect] refuses, and for an upstream bundle with no PEM certificate. An
// invalid setting stops the process rather than narrowing or widening the policy silently.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Allow: ParseAllowlist(getenv(egresslog.EnvAllow)), Port: egresslog.DefaultPort}
	for _, s := range splitList(getenv(egresslog.EnvPrivateCIDRs)) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, egresslog.EnvPrivateCIDRs, err)
		}
		cfg.PrivateCIDRs = append(cfg.PrivateCIDRs, p)
	}
	if s := strings.TrimSpace(getenv(egresslog.EnvPort)); s != "" {
		port, err := strconv.Atoi(s)
		if err != nil || port < 1 || port > 65535 {
			return Config{}, fmt.Errorf("%w: %s=%q: not a port", ErrInvalidConfig, egresslog.EnvPort, s)
		}
		cfg.Port = port
	}
	rules, err := egresslog.ParseInspect(getenv(egresslog.EnvInspect))
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, egresslog.EnvInspect, err)
	}
	cfg.Inspect = rules
	if cfg.Credentials, err = egresslog.ParseCredentials(getenv(egresslog.EnvCredentials)); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrInvalidConfig, egresslog.EnvCredentials, err)
	}
	if pemText := getenv(egresslog.EnvUpstreamCAs); strings.TrimSpace(pemText) != "" {
		cfg.UpstreamCAs = x509.NewCertPool()
		if !cfg.UpstreamCAs.AppendCertsFromPEM([]byte(pemText)) {
			return Config{}, fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalidConfig, egresslog.EnvUpstreamCAs)
		}
	}
	return cfg, nil
}

// ParseAllowlist reads the allowlist's environment form: split on ",", white space trimmed
// from each entry, empty entries dropped.
func ParseAllowlist(s string) []string { return splitList(s) }

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		// Python's str.strip(), which the reference uses, also strips 0x1C–0x1F.
		e = strings.TrimFunc(e, func(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f })
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Run is the proxy process: it listens on 0.0.0.0:cfg.Port, writes the readiness line to
// stdout once the listener is bound, serves with the decision log on stdout, and when ctx
// ends (SIGTERM, SIGINT) stops accepting, cuts every tunnel and returns nil. opts are applied
// after the configuration's own (tests use them). It fails when the listener cannot be bound
// or accepting fails.
func Run(ctx context.Context, cfg Config, stdout io.Writer, opts ...Option) error {
	all := []Option{WithDecisionLog(stdout), WithPrivateCIDRs(cfg.PrivateCIDRs...)}
	if len(cfg.Inspect) > 0 {
		all = append(all, WithInspect(cfg.Inspect...))
	}
	if cfg.UpstreamCAs != nil {
		all = append(all, WithUpstreamRoots(cfg.UpstreamCAs))
	}
	if len(cfg.Credentials) > 0 {
		all = append(all, WithCredentials(cfg.Credentials...))
	}
	all = append(all, opts...)
	p, err := New(cfg.Allow, all...)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(p.opts.listenHost, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := p.WriteReady(port); err != nil {
		ln.Close()
		return fmt.Errorf("write readiness line: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	select {
	case err = <-served:
		p.Close()
	case <-ctx.Done():
		p.Close()
		err = <-served
	}
	return err
}
