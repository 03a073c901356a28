package messages

// EndpointStatsData is the data of each endpoint of an engine's $SRV.STATS reply: the calls
// it answered with an error of the engine's own (codes internal, engine_unavailable and
// image_missing, the failures health reports), apart from num_errors, which counts every
// reply with an error object, the caller's mistakes and refusals (bad_request, forbidden,
// not found, …) among them.
type EndpointStatsData struct {
	EngineFailures int `json:"engine_failures"`
}
