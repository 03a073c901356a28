package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/messages"
)

// engine pause and engine snapshot through engine serve: a key's sandbox paused, snapshotted,
// listed, restored in place, forked and the snapshot deleted, each act on the audit stream
// with its reason.
func TestSnapshotVerbs(t *testing.T) {
	bin := buildEngine(t)
	url, log := serveEngine(t, bin)
	thread := "verbs-" + strings.ReplaceAll(t.TempDir()[len(t.TempDir())-3:], "/", "") + time.Now().Format("150405.000")
	key := []string{"--nats-url", url, "--scope", "verbs", "--thread", thread, "--agent", "a", "--image", dockertest.Busybox(t)}
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		req, _ := json.Marshal(messages.APIDisposeScopeRequest{APIEnvelope: messages.APIEnvelope{Type: messages.APIDisposeScopeRequestType,
			Key: &messages.APIKey{Scope: "verbs", ThreadID: thread}}})
		_, _ = nc.Request(messages.Shared(messages.SubjectDisposeScopeT, messages.DefaultPrefix), req, time.Minute)
	})
	verb := func(args ...string) string {
		t.Helper()
		res := runEngine(t, bin, nil, args...)
		if res.code != 0 {
			t.Fatalf("engine %s: exit %d: %s\nserve log:\n%s", strings.Join(args, " "), res.code, res.stderr, log.String())
		}
		return res.stdout
	}
	verb(append([]string{"pause"}, key...)...)
	var snap messages.APISnapshotInfo
	if err := json.Unmarshal([]byte(verb(append([]string{"snapshot", "take"}, key...)...)), &snap); err != nil || snap.ID == "" {
		t.Fatalf("snapshot take printed %+v, %v", snap, err)
	}
	var list []messages.APISnapshotInfo
	if err := json.Unmarshal([]byte(verb("snapshot", "list", "--nats-url", url, "--scope", "verbs", "--thread", thread)), &list); err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("snapshot list = %+v, %v", list, err)
	}
	verb(append([]string{"snapshot", "restore", "--id", snap.ID}, key...)...)
	out := verb(append([]string{"snapshot", "fork", "--id", snap.ID, "--agents", "f1,f2"}, key...)...)
	if strings.Count(out, "instance_id") != 2 {
		t.Fatalf("snapshot fork printed %s", out)
	}
	verb("snapshot", "delete", "--nats-url", url, "--id", snap.ID)

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, events.StreamAudit, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.DefaultSubjectPrefix + ".audit." + events.Token("verbs") + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{events.AuditSandboxPaused: "call", events.AuditSnapshotTaken: "call", events.AuditSandboxWoken: "call",
		events.AuditSandboxRestored: "call", events.AuditSandboxForked: "call"}
	got := map[string]string{}
	for len(got) < len(want) {
		msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("audit so far %v: %v", got, err)
		}
		var ev events.AuditEvent
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		if _, ok := want[ev.Type]; ok && ev.Lifecycle != nil {
			got[ev.Type] = ev.Lifecycle.Reason
		}
	}
	for typ, reason := range want {
		if got[typ] != reason {
			t.Errorf("audit %s reason %q, want %q", typ, got[typ], reason)
		}
	}
}
