package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/telemetry"
)

// serveMetrics starts the Prometheus endpoint at listen (a bare ":port" binds loopback: an
// operator opens metrics to the network by naming an address). With listen empty it returns a
// nil endpoint, whose nil instruments record nothing.
func serveMetrics(listen string, log *zap.Logger) (*telemetry.Prometheus, error) {
	if listen == "" {
		return nil, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("serve: --metrics-listen %q: %w", listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	p, err := telemetry.NewPrometheus(net.JoinHostPort(host, port), log.Named("metrics"))
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return p, nil
}

// closeMetrics stops the endpoint (nil: none), bounded.
func closeMetrics(p *telemetry.Prometheus, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		log.Warn("stop the metrics endpoint", zap.Error(err))
	}
}
