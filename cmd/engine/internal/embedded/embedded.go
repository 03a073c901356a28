// Package embedded starts the NATS server with JetStream that "engine serve" (without
// --nats-url) and "engine demo" run in their own process, bound to loopback only.
package embedded

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
)

// Start starts a NATS server with JetStream on listen, a loopback address (port 0: a free
// one), storing under dataDir and logging through log. It fails on an address that is not
// loopback, and when the server is not ready for connections within 10 s.
func Start(listen, dataDir string, log *zap.Logger) (*server.Server, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("serve: --listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("serve: --listen %q is not a loopback address: the embedded server is for this host only; "+
			"run a NATS server with authentication and pass --nats-url to serve other hosts", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("serve: --listen %q: bad port", listen)
	}
	if port == 0 {
		port = -1 // nats-server's "pick a free port"
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("serve: data dir: %w", err)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "maf-sandbox-engine",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(dataDir, "jetstream"),
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("serve: embedded NATS server: %w", err)
	}
	srv.SetLoggerV2(natsLogger{log.Named("nats-server").WithOptions(zap.WithCaller(false)).Sugar()}, false, false, false)
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("serve: the embedded NATS server did not start on %s (is the port taken?)", listen)
	}
	return srv, nil
}

// natsLogger routes nats-server's logging into zap.
type natsLogger struct{ l *zap.SugaredLogger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debugf(format, v...) } // its start-up banner
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warnf(format, v...) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Errorf(format, v...) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Errorf(format, v...) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debugf(format, v...) }
func (n natsLogger) Tracef(format string, v ...any)  { n.l.Debugf(format, v...) }
