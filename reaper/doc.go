// Package reaper is the operator's explicit age-based sweep of one Docker engine
// (egress-and-reap.md §4): [Reap] removes the workload containers, egress proxies and internal
// networks this engine created longer ago than a given age, and nothing else.
//
// # Rules
//
// Age is creation time, never idleness: a running sandbox older than the age is terminated.
// The clock is read once; a resource is expired only when it was created strictly before
// now − olderThan. Only names this engine derives (maf-sandbox-docker-<12 hex>, its -proxy and
// its -net) that carry all four identity labels qualify; anything else is foreign and never
// touched. A fingerprint observer (maf-fingerprint-<16 hex>, role label observer, the four
// identity labels) qualifies too, as a group of its own judged by its own age: it lives only
// while it measures, so one the sweep finds is what an engine that died left. Resources are
// grouped by their base name and the group's anchor decides: the
// workload when there is one, else the orphan proxy, else the network — so a proxy or network
// rebuilt recently still goes with an old workload, and a young orphan proxy keeps its old
// network.
//
// Any failure to list, inspect or revalidate deletes nothing at all in that sweep: it comes
// back as one [sandbox.ReapFailure] with code unlisted. Removal failures are returned one per resource and
// never stop another group. Within a group the proxy goes first (drained through the
// [Drainer], when one is wired, and its window published only once its removal succeeded or
// found it absent), then the workload, then the network, which is never forced. Every
// removal addresses the inspected ID, so a replacement created under the same name survives.
// Every engine call runs under its own bounded context.
package reaper
