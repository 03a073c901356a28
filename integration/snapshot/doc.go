// Package snapshot tests snapshots against a real Docker engine: a sandbox's filesystem taken
// as its changes against its image, restored and forked, a guest's hostile layouts and a
// store's hostile layers restored as data inside the new sandbox alone, and a snapshot kept
// in JetStream restored on another engine of a NATS cluster. It holds only tests; they fail,
// rather than skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package snapshot
