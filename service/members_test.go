package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/service"
)

// TestMembersAnnounceLoadAndLeave: engines with WithMembers list themselves with the sandboxes
// they hold, and a stopped engine leaves the list at once.
func TestMembersAnnounceLoadAndLeave(t *testing.T) {
	srv := natstest.Run(t)
	members := func() *placement.Members {
		js, err := jetstream.New(natstest.Connect(t, srv))
		if err != nil {
			t.Fatal(err)
		}
		m, err := placement.NewMembers(ctxT(t), js, placement.WithLease(time.Hour)) // leaving, not expiry, is tested
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	e1 := startEngineOn(t, srv, newFake(t), service.WithEngineID("m1"), service.WithMembers(members(), "daemon-1"))
	e2 := startEngineOn(t, srv, newFake(t), service.WithEngineID("m2"), service.WithMembers(members(), "daemon-1"))
	c := newClient(t, e1, client.WithEngine("m1"))
	for i := range 2 {
		if _, err := c.Acquire(ctxT(t), sandbox.Key{Scope: "s", ThreadID: fmt.Sprint(i), AgentID: "a"}, testSpec(t)); err != nil {
			t.Fatal(err)
		}
	}
	m := members()
	list := func() map[string]placement.Member {
		got, err := m.List(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]placement.Member{}
		for _, mb := range got {
			out[mb.Engine] = mb
		}
		return out
	}
	// The first announcement is made at start, before the acquires, and the next is 20 minutes
	// away: this test checks presence and leaving; TestMembersAnnounceLoad checks the load.
	got := list()
	if len(got) != 2 || got["m1"].Daemon != "daemon-1" || got["m2"].Engine != "m2" {
		t.Fatalf("members %+v, want m1 and m2 on daemon-1", got)
	}
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e2.svc.Stop(stop); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 1 || got["m1"].Engine != "m1" {
		t.Fatalf("members after m2 stopped: %+v, want m1 only", got)
	}
}

// TestMembersAnnounceLoad: with a short TTL the announcements carry the sandboxes held.
func TestMembersAnnounceLoad(t *testing.T) {
	srv := natstest.Run(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	m, err := placement.NewMembers(ctxT(t), js, placement.WithLease(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	e := startEngineOn(t, srv, newFake(t), service.WithEngineID("m1"), service.WithMembers(m, ""))
	c := newClient(t, e)
	for i := range 3 {
		if _, err := c.Acquire(ctxT(t), sandbox.Key{Scope: "s", ThreadID: fmt.Sprint(i), AgentID: "a"}, testSpec(t)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := m.List(ctxT(t))
		if err == nil && len(got) == 1 && got[0].Sandboxes == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members %+v, %v; want m1 holding 3 sandboxes", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
