// Package natscluster runs a real NATS cluster for tests: [Run] starts n nats-server
// containers (the image internal/images builds FROM scratch, nothing pulled) with JetStream on,
// routed to one another on a private --internal Docker network of their own, and removes the
// containers and the network when the test ends. The host reaches each node at its container
// IP (a Linux host routes to its bridges), so no port is published; [Cluster.Kill] and
// [Cluster.Start] stop and restart a node for failure tests. It is test code; only tests
// import it.
//
// Everything it creates carries dockertest's labels, so a package whose TestMain is
// dockertest.Main sweeps what a crashed test left.
package natscluster
