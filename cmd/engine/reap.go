package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/actors"
	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/reaper"
	"github.com/mafsandbox/engine/sandbox"
)

// errReapFailures makes the command exit non-zero when a sweep reported failures (§4.9).
var errReapFailures = errors.New("the sweep reported failures")

// reapVerb is "engine reap": one age-based sweep of the Docker daemon, then exit
// (egress-and-reap.md §4).
type reapVerb struct {
	olderThan, callTimeout, natsWait  time.Duration
	natsDupes                         time.Duration
	scope, dockerPath                 string
	dryRun, asJSON, verbose, natsCore bool
	natsURL, natsPrefix               string
}

// reapCmd parses args into a [reapVerb] and runs it.
func reapCmd(ctx context.Context, args []string) error {
	v := &reapVerb{}
	if err := v.parse(args); err != nil {
		return err
	}
	return v.run(ctx)
}

func (v *reapVerb) parse(args []string) error {
	fs := flag.NewFlagSet("reap", flag.ContinueOnError)
	fs.DurationVar(&v.olderThan, "older-than", 0, "remove what was created longer ago than this (required, e.g. 24h)")
	fs.StringVar(&v.scope, "scope", "", "only this scope (strongly advised: without it every scope on the daemon is swept)")
	fs.BoolVar(&v.dryRun, "dry-run", false, "take the inventory and decide, remove nothing")
	fs.BoolVar(&v.asJSON, "json", false, "print the result as JSON instead of a table")
	fs.StringVar(&v.dockerPath, "docker", docker.DefaultDockerPath, "the Docker CLI binary (the daemon is the one its context or DOCKER_HOST names)")
	fs.DurationVar(&v.callTimeout, "call-timeout", reaper.DefaultCallTimeout, "bound on each call to the daemon of the sweep")
	fs.BoolVar(&v.verbose, "v", false, "log the sweep's work to stderr")
	fs.StringVar(&v.natsURL, "nats-url", "", "publish the sweep's summary ("+events.SchemaReapCompleted+") and the windows of the egress proxies it removes ("+events.SchemaEgressObserved+") to this NATS server")
	fs.BoolVar(&v.natsCore, "nats-core", false, "publish on core NATS instead of the JetStream stream "+events.StreamOps)
	fs.StringVar(&v.natsPrefix, "nats-prefix", events.DefaultSubjectPrefix, "subject prefix of the summary")
	fs.DurationVar(&v.natsDupes, "nats-duplicate-window", events.DefaultDuplicateWindow, "the event streams' duplicate window, as engine serve's --event-duplicate-window (the streams are created or updated with it)")
	fs.DurationVar(&v.natsWait, "nats-wait", 30*time.Second, "how long to keep retrying the summary while NATS is unreachable")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: engine reap --older-than 24h [--scope S] [--dry-run] [--json]\n\n"+
			"Removes the sandboxes, egress proxies and networks the engine created on the Docker daemon\n"+
			"longer ago than --older-than (creation age: running sandboxes are terminated too). Exits\n"+
			"non-zero when anything could not be removed.\n\n")
		fs.PrintDefaults()
	}
	if err := settings.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("reap: unexpected arguments %q", fs.Args())
	}
	if v.olderThan <= 0 {
		return errors.New("reap: --older-than must be a positive duration, e.g. 24h")
	}
	return nil
}

// run sweeps once, prints the result, publishes its summary when asked, and fails when the
// sweep reported failures.
func (v *reapVerb) run(ctx context.Context) error {
	log := zap.NewNop()
	if v.verbose {
		log, _ = zap.NewDevelopment()
	}
	cfg := docker.Config{DockerPath: v.dockerPath}
	drv, err := docker.NewEngine(cfg, docker.WithLogger(log))
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	binding, err := drv.Bind(ctx)
	if err != nil {
		return fmt.Errorf("reap: bind the daemon: %w", err)
	}
	backend, err := actors.NewBackend(cfg, actors.WithEngine(drv), actors.WithLogger(log), actors.WithoutEventWatch())
	if err != nil {
		return err
	}
	defer backend.Close(context.WithoutCancel(ctx))
	var ev *events.Events
	if v.natsURL != "" && !v.dryRun {
		// An orphaned proxy (its engine died before removing it) may be the only record of
		// its window: the sweep drains it, removes it by the inspected ID and publishes the
		// window only once that removal succeeded or found it absent, as an engine would. The
		// backend reports the windows and the sweep to the events.
		nc, err := nats.Connect(v.natsURL, nats.Name("maf-sandbox engine reap"), nats.RetryOnFailedConnect(true),
			nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond))
		if err != nil {
			return fmt.Errorf("reap: connect %s: %w", v.natsURL, err)
		}
		defer nc.Close()
		if ev, err = v.events(ctx, nc, backend, log); err != nil {
			return err
		}
		defer func() { _ = v.closeEvents(ctx, ev) }() // on an early return; the run's own close comes first
		_, _ = backend.ReportTo(ev)
	}

	opts := []reaper.Option{reaper.WithCallTimeout(v.callTimeout)}
	if v.scope != "" {
		opts = append(opts, reaper.WithScope(v.scope))
	}
	if v.dryRun {
		opts = append(opts, reaper.WithDryRun())
	}
	res, err := backend.Reap(ctx, v.olderThan, opts...)
	if ev != nil {
		// The pending windows of every engine of this daemon whose proxies are gone, the
		// sweep's included (docs/events.md, across engine failures).
		_, _ = ev.Recover(context.WithoutCancel(ctx))
	}
	if err != nil {
		if ev != nil {
			_ = v.closeEvents(ctx, ev)
		}
		return fmt.Errorf("reap: %w", err)
	}
	if v.asJSON {
		err = printReapJSON(os.Stdout, binding, res)
	} else {
		err = printReapTable(os.Stdout, binding, res)
	}
	if err != nil {
		return err
	}
	if ev != nil {
		// The summary, which the backend reported once the sweep ran, is published once
		// (§3.7): kept and retried while NATS is unreachable, for at most --nats-wait; not
		// delivered by then is an error, never a silent loss.
		if err := v.closeEvents(ctx, ev); err != nil {
			return fmt.Errorf("reap: %w", err)
		}
		fmt.Fprintf(os.Stderr, "published the sweep's summary (%s) on %s\n", events.SchemaReapCompleted, events.ReapSubject(v.natsPrefix))
	}
	if len(res.Failures) > 0 {
		return fmt.Errorf("reap: %w (%d)", errReapFailures, len(res.Failures))
	}
	return nil
}

// reapReport is the --json output: the daemon swept, then the sweep in the one spelling its
// every form shares (messages.APIReapResult: the reap call's answer, the reap.completed event).
type reapReport struct {
	Engine  string `json:"engine"`
	Context string `json:"context"`
	messages.APIReapResult
}

func printReapJSON(w io.Writer, b docker.Binding, res sandbox.ReapResult) error {
	r := reapReport{Engine: b.Endpoint, Context: b.Context, APIReapResult: messages.ReapToWire(res)}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func printReapTable(w io.Writer, b docker.Binding, res sandbox.ReapResult) error {
	scope := "every scope"
	if res.Scope != "" {
		scope = fmt.Sprintf("scope %q", res.Scope)
	}
	mode := ""
	if res.DryRun {
		mode = " — DRY RUN, nothing removed"
	}
	fmt.Fprintf(w, "daemon %s (context %s), %s, older than %s: cutoff %s%s\n\n",
		b.Endpoint, b.Context, scope, res.OlderThan, res.Cutoff.UTC().Format(time.RFC3339), mode)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(res.Resources) == 0 {
		fmt.Fprintln(tw, "no resource of the engine on this daemon qualifies")
	} else {
		fmt.Fprintln(tw, "KIND\tNAME\tID\tCREATED\tAGE\tACTION")
		for _, d := range res.Resources {
			kind := d.Kind
			if d.Anchor {
				kind += "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", kind, d.Name, short(d.ID), d.Created.UTC().Format(time.RFC3339),
				res.StartedAt.Sub(d.Created).Round(time.Second), d.Action)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Resources) > 0 {
		fmt.Fprintf(w, "\n(* the group's anchor: its creation time decides the group)\n")
	}
	fmt.Fprintf(w, "removed: %d sandboxes, %d proxies, %d networks, %d observers; %d failures\n",
		res.Disposed, res.ProxiesRemoved, res.NetworksRemoved, res.ObserversRemoved, len(res.Failures))
	if len(res.Failures) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nCODE\tKIND\tID\tDETAIL")
		for _, f := range res.Failures {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Code, dash(f.ResourceKind), dash(short(f.ResourceID)), f.Detail)
		}
		return tw.Flush()
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// events starts the sweep's events on nc: its egress windows and its summary, under
// --nats-prefix, on JetStream (the windows recorded as pending before each removal) or core
// NATS. No recovery loop: the run makes one pass once the sweep is done.
func (v *reapVerb) events(ctx context.Context, nc *nats.Conn, daemon events.Daemon, log *zap.Logger) (*events.Events, error) {
	opts := []events.Option{events.WithPrefix(v.natsPrefix), events.WithDaemon(daemon), events.WithLogger(log),
		events.WithRecoveryEvery(0), events.WithStreams(events.WithDuplicateWindow(v.natsDupes)),
		events.WithOutbox(events.WithBackoff(200*time.Millisecond, 5*time.Second))}
	if v.natsCore {
		opts = append(opts, events.WithCoreNATS())
	}
	ev, err := events.New(ctx, nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("reap: %w", err)
	}
	return ev, nil
}

// closeEvents delivers what the sweep's events still hold, for at most --nats-wait.
func (v *reapVerb) closeEvents(ctx context.Context, ev *events.Events) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.natsWait)
	defer cancel()
	if err := ev.Close(wctx); err != nil {
		return fmt.Errorf("not delivered to %s within %s: %w", v.natsURL, v.natsWait, err)
	}
	return nil
}
