package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mafsandbox/engine/egresslog"
)

// The workload gate's release (docs/architecture.md, "The workload gate"). An allowlisted
// workload starts with the gate as its first process, which waits, dialling the proxy's
// address on the internal network, until the proxy hands it the release token. The proxy
// listens for that only once its seal probe passed, so no code of the image runs on a
// network before its proof — and no `docker cp` is on the acquire's path.

const (
	// gateWriteBudget bounds one hand-over: the gate reads a line from a host on its segment.
	gateWriteBudget = time.Second
)

// GateConfig reads the release's address and token from the environment; ok is false when
// no release is asked for.
func GateConfig(getenv func(string) string) (listen netip.AddrPort, token string, ok bool, err error) {
	s := getenv(egresslog.EnvGateListen)
	if s == "" {
		return netip.AddrPort{}, "", false, nil
	}
	listen, err = netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, "", false, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, egresslog.EnvGateListen, err)
	}
	token = getenv(egresslog.EnvGateToken)
	if len(token) < 32 {
		return netip.AddrPort{}, "", false, fmt.Errorf("%w: %s: a release token of at least 32 characters is required", ErrInvalidConfig, egresslog.EnvGateToken)
	}
	return listen, token, true, nil
}

// ListenGate binds the release's listener. The proxy binds it before it writes its seal
// verdict: the engine connects the outbound leg only after reading that verdict, so the
// listener is on the internal network alone.
func ListenGate(ctx context.Context, addr netip.AddrPort) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr.String())
	if err != nil {
		return nil, fmt.Errorf("gate release: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// ServeGate hands token, with a newline, to every connection on ln, one at a time, until ctx
// ends or ln fails; it closes ln. A gate restarted later is released again the same way. One
// connection at a time bounds what a released guest can make the proxy hold.
func ServeGate(ctx context.Context, ln net.Listener, token string) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	line := []byte(token + "\n")
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("gate release: accept: %w", err)
		}
		_ = c.SetWriteDeadline(time.Now().Add(gateWriteBudget))
		_, _ = c.Write(line)
		c.Close()
	}
}
