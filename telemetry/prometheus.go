package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
)

// Prometheus serves the engine's metrics for a Prometheus server to scrape: an OpenTelemetry
// meter provider whose reader is the Prometheus exporter, on a registry of its own (never the
// process-wide default one), behind GET /metrics on one listener.
type Prometheus struct {
	provider *sdkmetric.MeterProvider
	metrics  *Metrics
	ln       net.Listener
	srv      *http.Server
	done     chan error
}

// NewPrometheus listens on addr (host:port; port 0 picks one) and serves /metrics there until
// Close, its instruments made with opts ([NewMetrics]). The listener is bound before it
// returns, so [Prometheus.Addr] is scrapeable at once.
func NewPrometheus(addr string, log *zap.Logger, opts ...MetricsOpt) (*Prometheus, error) {
	if log == nil {
		log = zap.NewNop()
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	m, err := NewMetrics(mp, opts...)
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, fmt.Errorf("telemetry: metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(log)}))
	p := &Prometheus{provider: mp, metrics: m, ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { p.done <- p.srv.Serve(ln) }()
	log.Info("metrics", zap.String("listen", ln.Addr().String()), zap.String("path", "/metrics"))
	return p, nil
}

// Metrics is the instruments that record into this endpoint; nil on a nil *Prometheus (no
// endpoint: metrics off).
func (p *Prometheus) Metrics() *Metrics {
	if p == nil {
		return nil
	}
	return p.metrics
}

// Addr is the address the endpoint listens on.
func (p *Prometheus) Addr() string { return p.ln.Addr().String() }

// Close stops serving and shuts the meter provider down. On a nil *Prometheus it does nothing.
func (p *Prometheus) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	err := p.srv.Shutdown(ctx)
	if serr := <-p.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, p.provider.Shutdown(ctx))
}
