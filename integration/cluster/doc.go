// Package cluster tests several engines on one Docker engine, joined by a real NATS cluster
// of containers: placement of a key on one container, traffic across a node kill, and an
// engine taking over a sandbox whose owner was cut off. It holds only tests; they fail, rather
// than skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package cluster
