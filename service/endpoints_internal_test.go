package service

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mafsandbox/engine/messages"
)

// An endpoint counts every error reply, and apart from them the engine's own failures only:
// a caller's bad request or a refusal is no failure of the engine's.
func TestEndpointCountsTheEngineFailuresApart(t *testing.T) {
	e := &endpoint{name: "dispose"}
	for _, code := range []string{"", messages.CodeBadRequest, messages.CodeForbidden, messages.CodeInternal,
		messages.CodeEngineUnavailable, messages.CodeImageMissing} {
		text := ""
		if code != "" {
			text = code + ": something"
		}
		e.record(time.Millisecond, text, code)
	}
	st := e.stats()
	var data messages.EndpointStatsData
	if err := json.Unmarshal(st.Data, &data); err != nil {
		t.Fatalf("stats data %s: %v", st.Data, err)
	}
	if st.NumRequests != 6 || st.NumErrors != 5 || data.EngineFailures != 3 {
		t.Fatalf("counted %d requests, %d errors, %d engine failures; want 6, 5, 3", st.NumRequests, st.NumErrors, data.EngineFailures)
	}
}
