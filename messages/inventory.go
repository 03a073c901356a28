package messages

import "time"

// Type values of the inventory call.
const (
	APIListSandboxesRequestType  = APITypePrefix + "list_sandboxes_request"
	APIListSandboxesResponseType = APITypePrefix + "list_sandboxes_response"
)

// APIListSandboxesRequest asks one engine for the sandboxes it holds, one page at a time,
// oldest acquire first. Every filter field is optional and they combine with AND: scope and
// thread_id match the key's, kind, instance_id, image and egress match exactly; state matches
// [APISandboxEntry].State; older_than_ms keeps sandboxes acquired at least that long ago and
// idle_ms those whose last call is at least that old. Limit bounds the page (0: the engine's
// default, at most its maximum); after is the previous page's next cursor. The envelope's
// key is not used: the filter names the scope.
type APIListSandboxesRequest struct {
	APIEnvelope
	Scope       string `json:"scope,omitempty"`
	ThreadID    string `json:"thread_id,omitempty"`
	Kind        string `json:"kind,omitempty"`
	InstanceID  string `json:"instance_id,omitempty"`
	Image       string `json:"image,omitempty"`
	Egress      string `json:"egress,omitempty"`
	State       string `json:"state,omitempty"`
	OlderThanMS int64  `json:"older_than_ms,omitempty"`
	IdleMS      int64  `json:"idle_ms,omitempty"`
	Limit       int    `json:"limit,omitempty"`
	After       string `json:"after,omitempty"`
}

// APIListSandboxesResponse is one page of an engine's sandboxes. Next is the cursor of the
// following page, empty on the last one; Total counts every sandbox the filter matched.
type APIListSandboxesResponse struct {
	APIResponse
	Engine    string            `json:"engine"`
	Sandboxes []APISandboxEntry `json:"sandboxes"`
	Total     int               `json:"total"`
	Next      string            `json:"next,omitempty"`
}

// APISandboxEntry is one sandbox an engine holds: its handle, key, kind, instance, image and
// egress mode (the acquire's spec), when it was first acquired and when a call last named
// it (an acquire or a call addressed to the handle). State is "live" for a sandbox awake,
// "paused" or "stopped" for one asleep; a disposed or gone sandbox is no longer listed.
type APISandboxEntry struct {
	ID         string    `json:"id"`
	Engine     string    `json:"engine"`
	Key        APIKey    `json:"key"`
	Kind       string    `json:"kind"`
	InstanceID string    `json:"instance_id"`
	Image      string    `json:"image"`
	Egress     string    `json:"egress"`
	State      string    `json:"state"`
	AcquiredAt time.Time `json:"acquired_at"`
	LastCallAt time.Time `json:"last_call_at"`
}

// The states an engine lists a sandbox in: live (awake), or asleep, paused or stopped
// (docs/operations.md, "Sleep").
const (
	SandboxStateLive    = "live"
	SandboxStatePaused  = "paused"
	SandboxStateStopped = "stopped"
)
