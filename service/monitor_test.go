package service_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/sandbox"
)

// control asks the engine (every engine of the service when engine is "") a $SRV verb and decodes the answer into v.
func control(t *testing.T, nc *nats.Conn, verb micro.Verb, engine string, v any) {
	t.Helper()
	subject, err := micro.ControlSubject(verb, messages.ServiceName, engine)
	if err != nil {
		t.Fatalf("control subject: %v", err)
	}
	msg, err := nc.Request(subject, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		t.Fatalf("%s answered %s: %v", subject, msg.Data, err)
	}
}

func endpointStats(st micro.Stats, name string) *micro.EndpointStats {
	for _, e := range st.Endpoints {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// TestMicroStatsCountTheRealWork holds an exec for 300 ms and sends a refused exec, then
// reads $SRV.STATS: the exec endpoint counts both requests, one error with its code, and a
// processing time that covers the held exec, though the reply left the handler's goroutine.
func TestMicroStatsCountTheRealWork(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	fake := newFake(t)
	e := startEngine(t, &wrapped{Backend: fake, wrap: func(sb sandbox.Sandbox) sandbox.Sandbox {
		return &blocking{Sandbox: sb, started: started, release: release}
	}})
	c := newClient(t, e)
	ctx := ctxT(t)
	sb, err := c.Acquire(ctx, testKey, testSpec(t))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	const hold = 300 * time.Millisecond
	go func() {
		<-started
		time.Sleep(hold)
		close(release)
	}()
	if _, err := sb.Exec(ctx, sandbox.Argv("wait"), ".", time.Minute); err != nil {
		t.Fatalf("exec: %v", err)
	}
	nc := newRawConn(t, e)
	execSubject := messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, e.svc.EngineID())
	if _, code := rawRequest(t, nc, execSubject, []byte(`{"type":"maf.sandbox.api.v1.exec_request"}`)); code != messages.CodeBadRequest {
		t.Fatalf("the refused exec answered code %q", code)
	}
	if _, err := nc.Request(messages.Engine(messages.SubjectEngineAliveT, messages.DefaultPrefix, e.svc.EngineID()), nil, 10*time.Second); err != nil {
		t.Fatalf("alive: %v", err)
	}

	// micro counts a request after its handler returns, which can be after the reply reached
	// us: read the stats until the requests just answered (two execs, one alive) are in them.
	var st micro.Stats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st = micro.Stats{}
		control(t, nc, micro.StatsVerb, "", &st)
		a, x := endpointStats(st, "alive"), endpointStats(st, "exec")
		if a != nil && a.NumRequests >= 1 && x != nil && x.NumRequests >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if st.Type != micro.StatsResponseType || st.ID != e.svc.EngineID() || st.Name != messages.ServiceName {
		t.Errorf("stats identity: %+v, want the engine ID as the service ID", st.ServiceIdentity)
	}
	ex := endpointStats(st, "exec")
	if ex == nil {
		t.Fatalf("no exec endpoint in %+v", st.Endpoints)
	}
	if ex.NumRequests != 2 || ex.NumErrors != 1 || !strings.HasPrefix(ex.LastError, messages.CodeBadRequest+": ") {
		t.Errorf("exec counted %d requests, %d errors, last %q; want 2, 1, bad_request", ex.NumRequests, ex.NumErrors, ex.LastError)
	}
	// A caller's bad request is an error of the endpoint's, never a failure of the engine's.
	var data messages.EndpointStatsData
	if err := json.Unmarshal(ex.Data, &data); err != nil || data.EngineFailures != 0 {
		t.Errorf("exec data %s (%v): the refused exec counted as the engine's failure", ex.Data, err)
	}
	if ex.ProcessingTime < hold || ex.AverageProcessingTime < hold/2 {
		t.Errorf("exec processing time %s (average %s), want at least the %s the exec was held", ex.ProcessingTime, ex.AverageProcessingTime, hold)
	}
	if acq := endpointStats(st, "acquire"); acq == nil || acq.NumRequests != 1 || acq.NumErrors != 0 || acq.QueueGroup != messages.QueueGroup {
		t.Errorf("acquire stats %+v", acq)
	}
	if alive := endpointStats(st, "alive"); alive == nil || alive.NumRequests < 1 {
		t.Errorf("alive stats %+v", alive)
	}
}

// TestMicroInfoListsEveryEndpointWithItsMetadata reads $SRV.INFO: every operation's
// endpoints and alive, each with a description and its message types.
func TestMicroInfoListsEveryEndpointWithItsMetadata(t *testing.T) {
	e := startEngine(t, newFake(t))
	nc := newRawConn(t, e)
	var info micro.Info
	control(t, nc, micro.InfoVerb, "", &info)
	if info.Type != micro.InfoResponseType || info.Description == "" || info.Metadata["engine"] != e.svc.EngineID() {
		t.Fatalf("info: %+v", info)
	}
	byName := map[string]micro.EndpointInfo{}
	for _, ep := range info.Endpoints {
		byName[ep.Name] = ep
		if ep.Metadata["description"] == "" || ep.Metadata["request_type"] == "" || ep.Metadata["response_type"] == "" {
			t.Errorf("endpoint %s has metadata %v", ep.Name, ep.Metadata)
		}
	}
	cases := []struct {
		name, subject, queue, reqType string
	}{
		{"acquire", messages.SubjectAcquire, messages.QueueGroup, messages.APIAcquireRequestType},
		{"engine-acquire", messages.Engine(messages.SubjectEngineAcquireT, messages.DefaultPrefix, e.svc.EngineID()), "", messages.APIAcquireRequestType},
		{"exec", messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, e.svc.EngineID()), "", messages.APIExecRequestType},
		{"alive", messages.Engine(messages.SubjectEngineAliveT, messages.DefaultPrefix, e.svc.EngineID()), "", "any"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep, ok := byName[tc.name]
			if !ok || ep.Subject != tc.subject || ep.QueueGroup != tc.queue || ep.Metadata["request_type"] != tc.reqType {
				t.Fatalf("endpoint %s: %+v, want subject %s, queue %q, request %s", tc.name, ep, tc.subject, tc.queue, tc.reqType)
			}
		})
	}
	var one micro.Info
	control(t, nc, micro.InfoVerb, e.svc.EngineID(), &one)
	if one.ID != e.svc.EngineID() || len(one.Endpoints) != len(info.Endpoints) {
		t.Errorf("the engine's own INFO subject answered %s with %d endpoints", one.ID, len(one.Endpoints))
	}
	if len(info.Endpoints) != 9*2+18+8+1 {
		t.Errorf("%d endpoints, want 45 (9 shared operations twice, 18 per-engine with fingerprint, run_program, list_sandboxes, lame_duck, pause and snapshot, 8 of processes, alive)", len(info.Endpoints))
	}
}

// TestMicroStatsOfTwoEngines checks that $SRV.STATS.maf-sandbox-engine reaches every engine
// of the pool, each under its own ID.
func TestMicroStatsOfTwoEngines(t *testing.T) {
	first := startEngine(t, newFake(t))
	second := startEngineOn(t, first.srv, newFake(t))
	nc := newRawConn(t, first)
	subject, err := micro.ControlSubject(micro.StatsVerb, messages.ServiceName, "")
	if err != nil {
		t.Fatalf("control subject: %v", err)
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		t.Fatalf("publish: %v", err)
	}
	seen := map[string]bool{}
	for range 2 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("stats replies: %v (seen %v)", err, seen)
		}
		var st micro.Stats
		if err := json.Unmarshal(m.Data, &st); err != nil {
			t.Fatalf("stats %s: %v", m.Data, err)
		}
		seen[st.ID] = true
	}
	if !seen[first.svc.EngineID()] || !seen[second.svc.EngineID()] {
		t.Fatalf("stats from %v, want both engines", seen)
	}
}
