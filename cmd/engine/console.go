package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/console"
	"github.com/mafsandbox/engine/events"
)

const consoleUsage = `Usage: engine console [flags]

Serves the operator console: one web page about the engine pool (engines, sandboxes, egress
decisions, audit events, reap sweeps) whose server is one NATS client under the identity the
NATS flags give. Disposing and purging from the page are API calls under that identity, so
NATS permissions decide; the page greys what the identity may not do. It listens on loopback
only: the page has no login of its own (docs/operations.md, "Console").

Flags:
`

// defaultConsoleListen is where the console's page is served unless --listen says otherwise.
const defaultConsoleListen = "127.0.0.1:8422"

// consoleVerb is "engine console".
type consoleVerb struct {
	listen      string
	readyFile   string
	eventPrefix string
	scope       string
	window      int
	nats        natsFlags
	logs        logFlags
}

// consoleCmd parses args into a [consoleVerb] and runs it until ctx ends.
func consoleCmd(ctx context.Context, args []string) error {
	v := consoleVerb{}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *consoleVerb) parse(args []string) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.StringVar(&v.listen, "listen", envOr("MAF_SANDBOX_CONSOLE_LISTEN", defaultConsoleListen), "address of the console's page, loopback only; port 0 picks a free one (env MAF_SANDBOX_CONSOLE_LISTEN)")
	fs.StringVar(&v.readyFile, "ready-file", envOr("MAF_SANDBOX_CONSOLE_READY_FILE", ""), "write the page's URL to this file once serving (env MAF_SANDBOX_CONSOLE_READY_FILE)")
	fs.StringVar(&v.eventPrefix, "event-prefix", envOr("MAF_SANDBOX_EVENT_PREFIX", events.DefaultSubjectPrefix), "subject prefix of the engines' events (env MAF_SANDBOX_EVENT_PREFIX)")
	fs.StringVar(&v.scope, "scope", envOr("MAF_SANDBOX_CONSOLE_SCOPE", ""), "show only this scope's sandboxes and events (a tenant's console; default every scope, which an engine with tenancy allows an operator only) (env MAF_SANDBOX_CONSOLE_SCOPE)")
	fs.IntVar(&v.window, "window", console.DefaultWindow, "events of each kind (audit, egress, reap) kept in memory")
	v.nats.register(fs)
	v.logs.register(fs)
	fs.Usage = func() { fmt.Fprint(fs.Output(), consoleUsage); fs.PrintDefaults() }
	if err := settings.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("console: unexpected arguments %q", fs.Args())
	}
	host, _, err := net.SplitHostPort(v.listen)
	if err != nil {
		return fmt.Errorf("console: --listen %q: %w", v.listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("console: --listen %q is not a loopback address: the page acts with the console's NATS identity and has no login of its own", v.listen)
	}
	return nil
}

// identity is what the page says the console acts as: the NATS user, the credentials it
// was given, or none.
func (v *consoleVerb) identity() string {
	switch {
	case v.nats.user != "":
		return "NATS user " + v.nats.user
	case v.nats.creds != "":
		return "NATS credentials " + filepath.Base(v.nats.creds)
	case v.nats.nkey != "":
		return "NATS nkey " + filepath.Base(v.nats.nkey)
	case v.nats.token != "":
		return "NATS token"
	}
	return "anonymous (no NATS credentials)"
}

func (v *consoleVerb) run(ctx context.Context) error {
	log, err := v.logs.logger()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	nc, err := v.nats.connect("maf-sandbox engine console", log)
	if err != nil {
		return fmt.Errorf("console: %w", v.nats.noEngine(err))
	}
	defer nc.Close()
	c, err := console.New(nc, console.WithLogger(log), console.WithPrefix(v.nats.prefix), console.WithEventPrefix(v.eventPrefix),
		console.WithIdentity(v.identity()), console.WithWindow(v.window), scopeOption(v.scope))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	ln, err := net.Listen("tcp", v.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", v.listen, err)
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/"
	log.Info("console serving", zap.String("url", url), zap.String("identity", v.identity()))
	if v.readyFile != "" {
		if err := os.WriteFile(v.readyFile, []byte(url+"\n"), 0o600); err != nil {
			_ = srv.Close()
			return fmt.Errorf("write ready file: %w", err)
		}
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serve the console: %w", err)
	}
	_ = c.Close() // ends the browsers' event streams, so the shutdown need not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("stop the console: %w", err)
	}
	return nil
}

// scopeOption is console.WithScope for a --scope given, else no option.
func scopeOption(scope string) console.Option {
	if scope == "" {
		return nil
	}
	return console.WithScope(scope)
}
