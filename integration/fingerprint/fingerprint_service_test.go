package fingerprint

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/docker/fingerprint"
	"github.com/mafsandbox/engine/integration/internal/itest"
	"github.com/mafsandbox/engine/internal/natstest"
	"github.com/mafsandbox/engine/messages"
	"github.com/mafsandbox/engine/service"
)

// A host in another language proves a kind's confinement over NATS with plain JSON: acquire,
// the baseline fingerprint, the kind's call (an exec here), the final fingerprint compared
// back. The clean call passes; a file left in /dev/shm and a program left running come back
// named, and passed stays false.
func TestFingerprintOverNATS(t *testing.T) {
	b := itest.NewBackend(t)
	srv := natstest.Run(t)
	f, err := fingerprint.NewFactory(fingerprintEngine(t), fingerprint.WithObserverImage(observerImage(t)))
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := itest.ServeBackend(t, srv, b, service.WithFingerprinter(f))
	nc := natstest.Connect(t, srv)
	cases := []struct {
		name         string
		workDir      string // the spec's work_dir; "" is the default base, which the acquire creates
		script       string
		passed       bool
		pathsAdded   []string
		programAdded bool
	}{
		{name: "the clean call passes", workDir: fingerprintWorkDir, script: "mkdir -p /tmp/c && rm -rf /tmp/c", passed: true},
		{name: "residue comes back named", workDir: fingerprintWorkDir, script: "echo x > /dev/shm/left; nohup sleep 1002 >/dev/null 2>&1 &",
			pathsAdded: []string{"/dev/shm", "/dev/shm/left"}, programAdded: true},
		{name: "the clean call on the default base passes", script: "mkdir /maf-sandbox/work/c && rm -rf /maf-sandbox/work/c", passed: true},
		{name: "a chmod of the default base comes back named", script: "chmod 0705 /maf-sandbox/work",
			pathsAdded: []string{"/maf-sandbox/work"}},
		{name: "a trojaned file on the default base comes back named", script: trojanPasswd,
			pathsAdded: []string{"/etc/passwd"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noObserverOutlives(t)
			key := itest.NewKey(t)
			t.Cleanup(func() {
				disposeRaw(t, nc, key.Scope)
			})
			env := func(typ, handle string) map[string]any {
				m := map[string]any{"type": typ, "key": map[string]string{"scope": key.Scope, "thread_id": key.ThreadID, "agent_id": key.AgentID}}
				if handle != "" {
					m["sandbox"] = handle
				}
				return m
			}
			acq := env(messages.APIAcquireRequestType, "")
			spec := map[string]any{"kind": "shell", "image": fingerprintWorkload(t)}
			if tc.workDir != "" {
				spec["work_dir"] = tc.workDir
			}
			acq["spec"] = spec
			var ar messages.APIAcquireResponse
			jsonCall(t, nc, messages.Shared(messages.SubjectAcquireT, messages.DefaultPrefix), acq, &ar)
			if ar.Error != nil || ar.Sandbox == nil {
				t.Fatalf("acquire: %+v", ar.Error)
			}
			h, engine := ar.Sandbox.ID, ar.Sandbox.Engine
			if engine != svc.EngineID() {
				t.Fatalf("engine %s, want %s", engine, svc.EngineID())
			}
			subject := messages.Engine(messages.SubjectFingerprintT, messages.DefaultPrefix, engine)

			base := env(messages.APIFingerprintRequestType, h)
			base["phase"] = messages.FingerprintBaseline
			var br messages.APIFingerprintResponse
			jsonCall(t, nc, subject, base, &br)
			if br.Error != nil || br.Passed || br.Skipped || len(br.ChangedPaths) != 0 || len(br.RunningPrograms) == 0 {
				t.Fatalf("baseline %+v (error %+v)", br, br.Error)
			}

			ex := env(messages.APIExecRequestType, h)
			ex["shell"], ex["work_dir"], ex["timeout_ms"] = tc.script, "/", 60000
			var er messages.APIExecResponse
			jsonCall(t, nc, messages.Engine(messages.SubjectExecT, messages.DefaultPrefix, engine), ex, &er)
			if er.Error != nil {
				t.Fatalf("exec: %+v", er.Error)
			}

			final := env(messages.APIFingerprintRequestType, h)
			final["phase"] = messages.FingerprintFinal
			var fr messages.APIFingerprintResponse
			jsonCall(t, nc, subject, final, &fr)
			if fr.Error != nil || fr.Comparison == nil {
				t.Fatalf("final %+v (error %+v)", fr, fr.Error)
			}
			if fr.Passed != tc.passed || !slices.Equal(fr.Comparison.PathsAdded, nonNil(tc.pathsAdded)) ||
				(len(fr.Comparison.ProgramsAdded) > 0) != tc.programAdded {
				t.Fatalf("final %+v, comparison %+v; want passed %v, paths added %q, a program added %v",
					fr, *fr.Comparison, tc.passed, tc.pathsAdded, tc.programAdded)
			}
		})
	}
}

// jsonCall sends req as JSON to subject and decodes the reply into resp.
func jsonCall(t *testing.T, nc *nats.Conn, subject string, req, resp any) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(subject, body, 2*time.Minute)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		t.Fatalf("decode %s: %v", msg.Data, err)
	}
}

// disposeRaw purges the test's conversation over NATS.
func disposeRaw(t *testing.T, nc *nats.Conn, scope string) {
	var resp messages.APIDisposeScopeResponse
	jsonCall(t, nc, messages.Shared(messages.SubjectDisposeScopeT, messages.DefaultPrefix),
		map[string]any{"type": messages.APIDisposeScopeRequestType, "key": map[string]string{"scope": scope, "thread_id": "thread"}}, &resp)
	if resp.Error != nil || resp.Undisposed != nil {
		t.Errorf("dispose scope %s: %+v %+v", scope, resp.Error, resp.Undisposed)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
