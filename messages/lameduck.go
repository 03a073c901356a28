package messages

// Type values of the lame-duck call.
const (
	APILameDuckRequestType  = APITypePrefix + "lame_duck_request"
	APILameDuckResponseType = APITypePrefix + "lame_duck_response"
)

// APILameDuckRequest puts one engine in lame duck: it takes no new sandboxes and keeps
// serving those it holds. It has no field beyond the envelope; the envelope's key is not used.
type APILameDuckRequest struct {
	APIEnvelope
}

// APILameDuckResponse says the engine is in lame duck. Already is true when it was before
// this call (the call changed nothing); Sandboxes is how many it holds.
type APILameDuckResponse struct {
	APIResponse
	Engine    string `json:"engine"`
	Already   bool   `json:"already"`
	Sandboxes int    `json:"sandboxes"`
}
