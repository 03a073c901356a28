package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"

	"github.com/mafsandbox/engine/egresslog"
)

// Config is the proxy process's configuration.
type Config struct {
	Allow        []string       // allowlist entries, in order
	PrivateCIDRs []netip.Prefix // the §2.3a allowance
	Port         int            // listen port on 0.0.0.0
}

// ConfigFromEnv reads the configuration from getenv (os.Getenv in the process). The allowlist
// is split on ",", each entry trimmed of white space, empty entries dropped; so is the
// allowance, each entry a CIDR block. It fails with [ErrInvalidConfig] for a block that does
// not parse and for a port that is not a number in 1–65535. An invalid setting stops the
// process rather than narrowing or widening the policy silently.
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
	all := append([]Option{WithDecisionLog(stdout), WithPrivateCIDRs(cfg.PrivateCIDRs...)}, opts...)
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
