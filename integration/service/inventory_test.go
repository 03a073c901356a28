package service

import (
	"errors"
	"testing"
	"time"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/dockertest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// TestListSandboxes lists what an engine holds over NATS, against real Docker: every field,
// each filter, paging with the cursor, a bad filter refused, and a disposed sandbox gone.
func TestListSandboxes(t *testing.T) {
	dockertest.Require(t)
	e := itest.StartNATSEngine(t)
	c := e.Remote(t)
	engine := e.Service.EngineID()
	spec := itest.BusyboxSpec(t)
	a, b := itest.NewKey(t), itest.NewKey(t)
	a2 := a
	a2.AgentID = "other"
	before := time.Now()
	sbA := itest.AcquireRemote(t, c, e.Backend, a, spec)
	sbA2 := itest.AcquireRemote(t, c, e.Backend, a2, spec)
	sbB := itest.AcquireRemote(t, c, e.Backend, b, spec)
	ctx := itest.Context(t)

	list := func(t *testing.T, req messages.APIListSandboxesRequest) *messages.APIListSandboxesResponse {
		t.Helper()
		resp, err := c.ListSandboxes(ctx, engine, req)
		if err != nil {
			t.Fatalf("list sandboxes %+v: %v", req, err)
		}
		return resp
	}
	ids := func(r *messages.APIListSandboxesResponse) []string {
		var out []string
		for _, s := range r.Sandboxes {
			out = append(out, s.InstanceID)
		}
		return out
	}

	t.Run("fields", func(t *testing.T) {
		r := list(t, messages.APIListSandboxesRequest{Scope: b.Scope})
		if r.Engine != engine || r.Total != 1 || len(r.Sandboxes) != 1 || r.Next != "" {
			t.Fatalf("scope %s: %+v", b.Scope, r)
		}
		s := r.Sandboxes[0]
		if s.Engine != engine || s.Key.Scope != b.Scope || s.Key.ThreadID != b.ThreadID || s.Key.AgentID != b.AgentID ||
			s.Kind != "shell" || s.InstanceID != sbB.InstanceID() || s.Image != spec.Image || s.Egress != string(sandbox.EgressClosed) ||
			s.State != messages.SandboxStateLive || s.ID != sbB.(*client.Sandbox).Handle() {
			t.Fatalf("entry: %+v", s)
		}
		if s.AcquiredAt.Before(before) || s.AcquiredAt.After(time.Now()) || s.LastCallAt.Before(s.AcquiredAt) {
			t.Fatalf("times: acquired %v, last call %v, test began %v", s.AcquiredAt, s.LastCallAt, before)
		}
	})

	t.Run("last call follows calls", func(t *testing.T) {
		was := list(t, messages.APIListSandboxesRequest{Scope: b.Scope}).Sandboxes[0].LastCallAt
		time.Sleep(10 * time.Millisecond)
		itest.Sh(t, sbB, "true")
		now := list(t, messages.APIListSandboxesRequest{Scope: b.Scope}).Sandboxes[0].LastCallAt
		if !now.After(was) {
			t.Fatalf("last call %v after an exec, was %v", now, was)
		}
		if r := list(t, messages.APIListSandboxesRequest{Scope: b.Scope, IdleMS: time.Hour.Milliseconds()}); r.Total != 0 {
			t.Fatalf("idle an hour: %+v", r)
		}
	})

	t.Run("filters", func(t *testing.T) {
		cases := []struct {
			name string
			req  messages.APIListSandboxesRequest
			want int
		}{
			{"scope", messages.APIListSandboxesRequest{Scope: a.Scope}, 2},
			{"scope and instance", messages.APIListSandboxesRequest{Scope: a.Scope, InstanceID: sbA2.InstanceID()}, 1},
			{"scope and thread", messages.APIListSandboxesRequest{Scope: a.Scope, ThreadID: "no-such-thread"}, 0},
			{"kind", messages.APIListSandboxesRequest{Scope: a.Scope, Kind: "python"}, 0},
			{"image", messages.APIListSandboxesRequest{Scope: a.Scope, Image: spec.Image}, 2},
			{"other image", messages.APIListSandboxesRequest{Scope: a.Scope, Image: "nope:latest"}, 0},
			{"egress", messages.APIListSandboxesRequest{Scope: a.Scope, Egress: string(sandbox.EgressAllowlist)}, 0},
			{"state", messages.APIListSandboxesRequest{Scope: a.Scope, State: messages.SandboxStateLive}, 2},
			{"older than an hour", messages.APIListSandboxesRequest{Scope: a.Scope, OlderThanMS: time.Hour.Milliseconds()}, 0},
			{"older than nothing", messages.APIListSandboxesRequest{Scope: a.Scope, OlderThanMS: 1}, 2},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if r := list(t, tc.req); r.Total != tc.want || len(r.Sandboxes) != tc.want {
					t.Fatalf("want %d, got %+v", tc.want, r)
				}
			})
		}
	})

	t.Run("pages", func(t *testing.T) {
		first := list(t, messages.APIListSandboxesRequest{Scope: a.Scope, Limit: 1})
		if first.Total != 2 || len(first.Sandboxes) != 1 || first.Next == "" || first.Sandboxes[0].InstanceID != sbA.InstanceID() {
			t.Fatalf("first page: %+v", first)
		}
		second := list(t, messages.APIListSandboxesRequest{Scope: a.Scope, Limit: 1, After: first.Next})
		if got := ids(second); len(got) != 1 || got[0] != sbA2.InstanceID() || second.Next != "" {
			t.Fatalf("second page: %+v", second)
		}
	})

	t.Run("bad filter", func(t *testing.T) {
		for _, req := range []messages.APIListSandboxesRequest{{Limit: -1}, {After: "garbage"}, {IdleMS: -5}} {
			_, err := c.ListSandboxes(ctx, engine, req)
			var bad *messages.BadRequestError
			if !errors.As(err, &bad) || bad.Field == "" {
				t.Fatalf("list %+v: want a bad request naming its field, got %v", req, err)
			}
		}
		if _, err := c.ListSandboxes(ctx, "", messages.APIListSandboxesRequest{}); !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("no engine: %v", err)
		}
	})

	t.Run("disposed is gone", func(t *testing.T) {
		if f := c.Dispose(ctx, a, sandbox.DisposeOptions{InstanceID: sbA.InstanceID()}); f != nil {
			t.Fatalf("dispose: %v", f)
		}
		if got := ids(list(t, messages.APIListSandboxesRequest{Scope: a.Scope})); len(got) != 1 || got[0] != sbA2.InstanceID() {
			t.Fatalf("after dispose: %v", got)
		}
	})
}
