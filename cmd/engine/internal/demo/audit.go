package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/events"
)

// auditTrail prints the conversation's audit trail as the MAF_SANDBOX_AUDIT stream holds
// it: what a subscriber of <prefix>.audit.<scope>.> reads. It waits (at most 10 s) until the
// audit outbox is empty and the stream's count for the scope has settled.
func auditTrail(ctx context.Context, step func(string, ...any), nc *nats.Conn, ev *events.Events, scope string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	filter := ev.Prefix() + ".audit." + events.Token(scope) + ".>"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, events.StreamAudit)
	if err != nil {
		return fmt.Errorf("audit stream: %w", err)
	}
	var n, last uint64
	for {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return fmt.Errorf("audit stream: %w", err)
		}
		n = 0
		for _, c := range info.State.Subjects {
			n += c
		}
		if n == last && n > 0 && ev.AuditStats().Pending == 0 {
			break
		}
		last = n
		select {
		case <-ctx.Done():
			return fmt.Errorf("audit stream: %d events after 10 s: %w", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return err
	}
	batch, err := cons.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return err
	}
	step("the conversation's audit trail, read back from JetStream (%s, subjects %s):", events.StreamAudit, filter)
	for m := range batch.Messages() {
		var a events.AuditEvent
		if err := json.Unmarshal(m.Data(), &a); err != nil {
			return fmt.Errorf("audit event: %w", err)
		}
		fmt.Printf("    %s  %-19s %-14s %-21s %7.1f ms  %s\n", a.Time.Format("15:04:05.000"), a.Type, a.Kind, auditOutcome(a), a.DurationMS, auditDetail(a))
	}
	return batch.Error()
}

func auditOutcome(a events.AuditEvent) string {
	if a.Error != "" {
		return a.Outcome + ":" + a.Error
	}
	return a.Outcome
}

// auditDetail is one event's detail in a few words: never the command's text (the event does
// not carry it).
func auditDetail(a events.AuditEvent) string {
	switch {
	case a.Exec != nil && a.Exec.ExitCode != nil:
		return fmt.Sprintf("%s %s sha256:%.12s exit %d, %d+%d bytes out", a.Exec.Form, a.Exec.Argv0, a.Exec.CommandSHA256, *a.Exec.ExitCode, a.Exec.StdoutBytes, a.Exec.StderrBytes)
	case a.Exec != nil:
		return fmt.Sprintf("%s %s sha256:%.12s", a.Exec.Form, a.Exec.Argv0, a.Exec.CommandSHA256)
	case a.File != nil:
		return fmt.Sprintf("%s %q %d bytes", a.File.Direction, a.File.Path, a.File.Size)
	case a.Acquire != nil:
		return fmt.Sprintf("instance %.12s, egress %s", a.InstanceID, a.Acquire.Egress)
	case a.Disposal != nil && a.Type == events.AuditScopePurged:
		return fmt.Sprintf("%d more disposed %s", a.Disposal.Disposed, a.Disposal.Undisposed)
	case a.Process != nil && a.Process.ExitCode != nil:
		return fmt.Sprintf("process %s %s: %s %d, %d bytes out", a.Process.ID, a.Process.Argv0, a.Process.Reason, *a.Process.ExitCode, a.Process.Output)
	case a.Process != nil:
		return fmt.Sprintf("process %s %s (pid %d, %s)", a.Process.ID, a.Process.Argv0, a.Process.PID, a.Process.Transport)
	case a.Lifecycle != nil:
		return lifecycleDetail(a)
	}
	return ""
}

// lifecycleDetail is a sleep's or a snapshot's detail: its reason and what it concerned.
func lifecycleDetail(a events.AuditEvent) string {
	l := a.Lifecycle
	switch a.Type {
	case events.AuditSandboxWoken:
		return fmt.Sprintf("reason %s, from %s, processes kept %v", l.Reason, l.From, l.ProcessesKept != nil && *l.ProcessesKept)
	case events.AuditSandboxPaused, events.AuditSandboxStopped:
		return fmt.Sprintf("reason %s, idle %d ms", l.Reason, l.IdleMS)
	case events.AuditSandboxForked:
		return fmt.Sprintf("reason %s, snapshot %.12s into %d sandboxes", l.Reason, l.Snapshot, len(l.Instances))
	}
	return fmt.Sprintf("reason %s, snapshot %.12s", l.Reason, l.Snapshot)
}

// metricsLine prints the acquire counts the engine's metrics endpoint serves.
func metricsLine(ctx context.Context, step func(string, ...any), addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "maf_sandbox_acquires_total{") {
			step("one line of the metrics endpoint (http://%s/metrics): %s", addr, line)
			return nil
		}
	}
	return fmt.Errorf("metrics: no maf_sandbox_acquires_total line at %s (%v)", addr, sc.Err())
}
