package messages

// AliveReply is the body of an answer on [SubjectEngineAlive] (an engine of an older
// release answered with an empty body, which a client reads as "nothing known").
type AliveReply struct {
	// ConnectedMS is how long ago the engine's NATS connection was last (re)established, by
	// the engine's own clock: a call that has waited longer than that may have had its request
	// or its reply lost with the connection the engine had before.
	ConnectedMS *int64 `json:"connected_ms,omitempty"`
	// ReconnectedMS is ConnectedMS once the connection has been re-established at least once,
	// absent before: on [SubjectAlive] a call on a shared subject that has waited longer may
	// have gone to this engine and been lost, while an engine that only started since could
	// not have received it.
	ReconnectedMS *int64 `json:"reconnected_ms,omitempty"`
	Engine        string `json:"engine,omitempty"`
}
