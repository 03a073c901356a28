package service

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/messages"
)

// TestEveryOperationHasATenancyRule: an operation added to the API without a rule would be
// refused on every tenancy engine; this says so at once instead.
func TestEveryOperationHasATenancyRule(t *testing.T) {
	for _, op := range operations {
		if _, ok := tenancyRules[op.name]; !ok {
			t.Errorf("operation %s has no entry in tenancyRules (service/tenancy.go)", op.name)
		}
	}
	for name := range tenancyRules {
		found := false
		for _, op := range operations {
			found = found || op.name == name
		}
		if !found {
			t.Errorf("tenancyRules has %s, which is no operation", name)
		}
	}
}

// BenchmarkAuthorize is what the identity check costs one call: parse the server's header,
// check the key's scope and the handle's owner.
func BenchmarkAuthorize(b *testing.B) {
	ten, err := compileTenancy(DefaultTenancy())
	if err != nil {
		b.Fatal(err)
	}
	s := &Service{tenancy: ten, handles: newHandles()}
	h := nats.Header{messages.RequestInfoHeader: []string{`{"acc":"A","rtt":1234567,"user":"a-user","svc":"engine"}`}}
	env := &messages.APIEnvelope{Type: messages.APIExecRequestType, Key: &messages.APIKey{Scope: "A", ThreadID: "t", AgentID: "a"}, Sandbox: "nohandle"}
	data := []byte(`{"type":"maf.sandbox.api.v1.exec_request","key":{"scope":"A","thread_id":"t","agent_id":"a"},"sandbox":"nohandle","argv":["true"],"timeout_ms":60000}`)
	for b.Loop() {
		if _, err := s.authorize("exec", h, env, data); err != nil {
			b.Fatal(err)
		}
	}
}
