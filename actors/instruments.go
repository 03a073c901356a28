package actors

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mafsandbox/engine/telemetry"
)

// The spans the backend starts, each a child of the span the call's context carries (the API
// call's, under engine serve); the daemon calls made for them are their children
// (docker.WithTracerProvider).
const (
	// SpanFreeze is one freeze of a container on the archive plane: pause, the checks and the
	// copy made frozen, and the thaw.
	SpanFreeze = "freeze"
	// SpanFilePrefix begins a file call's span on its plane: "file stat", "file read",
	// "file write", "file remove", "file reclaim".
	SpanFilePrefix = "file "
	// SpanExec is one command run in a container, from its start to its exit.
	SpanExec = "container exec"
	// SpanExecChannel is a command's run on the exec channel (exec_channel.go), the child of
	// SpanExec where a docker exec would have its daemon calls: from the dial to the exit.
	SpanExecChannel = "exec channel"
	// SpanSeal is the proof of a new egress network's seal: from the proxy's start (its probe
	// runs then) to the log read that holds the probe's verdict.
	SpanSeal = "egress seal"
)

// Attributes of the backend's spans (besides container.name).
const (
	// KeyFilePlane is the plane a file call took: archive or host.
	KeyFilePlane = attribute.Key("maf_sandbox.file_plane")
	// KeySeal is a seal probe's verdict: sealed, breached or unknown.
	KeySeal = attribute.Key("maf_sandbox.egress.seal")
)

// WithMetrics records freeze times and the warm pool into m (nil, the default: no metrics,
// one nil check where each would be recorded). The backend's acts — its commands, its egress
// decisions — are counted by m as an observer of them ([Backend.ReportTo]).
func WithMetrics(m *telemetry.Metrics) Option {
	return func(o *options) error { o.metrics = m; return nil }
}

// WithTracerProvider starts the backend's spans (freeze, file plane, exec, seal) from tp,
// children of the span the call's context carries; nil, the default, starts none.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error { o.tracer = tp; return nil }
}

// froze records one freeze's time: from its pause to the end of its thaw.
func (b *Backend) froze(ctx context.Context, since time.Time) {
	b.metrics.Froze(ctx, time.Since(since))
}
