package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/console"
)

// startConsole serves the operator console for the demo's engine on listen (loopback), as
// `engine console` would, on a connection of its own; it returns the page's URL. eng's close
// stops it.
func startConsole(eng *engine, listen string, log *zap.Logger) (string, error) {
	nc, err := nats.Connect(eng.url, nats.Name("maf-sandbox engine console"))
	if err != nil {
		return "", fmt.Errorf("demo console: %w", err)
	}
	eng.onClose(nc.Close)
	c, err := console.New(nc, console.WithLogger(log), console.WithIdentity("anonymous (the demo's embedded NATS server)"))
	if err != nil {
		return "", fmt.Errorf("demo console: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = c.Close()
		return "", fmt.Errorf("demo console: listen on %s: %w", listen, err)
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("demo console", zap.Error(err))
		}
	}()
	eng.onClose(func() {
		_ = c.Close() // ends the pages' event streams first
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String() + "/", nil
}

// lingerForConsole keeps the demo's engine up for d after the agent is done, so the console
// still shows the conversation; ctx's end (Ctrl-C) ends it sooner.
func lingerForConsole(ctx context.Context, url string, d time.Duration) {
	if d <= 0 || url == "" {
		return
	}
	step("the operator console stays up for %s at %s (Ctrl-C ends it)", d, url)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
