// Package placement records, in a JetStream KV bucket, which engine owns each sandbox of a
// cluster of engines, so that exactly one engine ever creates or serves a given (key, kind)
// and any process can find it.
//
// # Claims and leases
//
// A [Store] is one engine's view of the bucket. [Store.Claim] creates the sandbox's entry if
// it is absent (kv.Create: compare and swap on "no entry"), so among engines claiming at once
// exactly one wins; the others get a [*HeldError] naming the owner. The winner holds a
// [Lease]: the entry's KV revision and an expiry. [Store.Renew] extends it with kv.Update on
// that revision, so a renewal succeeds only while nobody else has written the entry.
// [Store.Release] deletes it on that revision (dispose), [Store.ReleaseScope] deletes every
// entry of a conversation this engine owns (scope purge). A dispose that reaches an engine
// which does not own an entry reads it ([Store.KeyEntries], [Store.ScopeEntries]) and either
// hands the dispose to the live owner or, once [Store.Lapsed], claims the entry and releases
// it ([Owner.ClaimKeyEntries]).
//
// A lease that is not renewed lapses. Another engine's Claim then takes the entry over with
// kv.Update on the last revision it read, so of several engines taking over at once one wins
// too. The taker waits a grace beyond the recorded expiry ([WithGrace]), which is the bound on
// clock skew between hosts the scheme assumes. The record names the owner's daemon and, once
// the owner sets [Lease.Instance] and renews, the instance it handed out: a taker on the same
// daemon adopts that instance, one on another creates afresh ([Owner.Route]).
//
// # Fencing
//
// An owner must not serve a sandbox it may have lost. [Lease.Valid] is false once the lease's
// expiry has passed by the owner's clock (the expiry is computed from the time the renewal
// was sent, before the bucket acknowledged it, so the owner stops no later than any taker
// starts); a partitioned owner, unable to renew, stops serving there. After a heal its Renew
// fails with a [*LostError], because the takeover moved the revision: the revision is the
// fencing token.
//
// # Lookups
//
// [Store.Lookup] answers from a copy of the whole bucket kept current by the bucket's watch,
// so a lookup costs no round trip; the copy may trail the bucket by the watch's latency, which
// is why Claim always asks the bucket itself.
//
// # The owner
//
// [Owner] is one engine's ownership component over these buckets, and a layer around the
// engine's router: its [Owner.Acquire], [Owner.Dispose] and [Owner.DisposeScope] are the
// router's in a cluster (layer.go). [Owner.Route] answers "serve here" (claiming, or taking a
// lapsed owner's sandbox over) or "forward to engine X"; [Owner.Lighter] picks a lighter
// engine for a cold acquire; it renews the leases, fences each call on a sandbox by its lease
// ([Owner.Fence]), announces the engine and gives everything up at [Owner.Stop]. The engine
// (package service) carries the forwards ([Forwarder]) and hears of claims and lost leases
// through [Hooks].
//
// # Membership
//
// [Members] is a second bucket whose entries expire with the bucket's TTL: each engine
// announces itself ([Members.Announce]: engine ID, daemon identity, load) at least once per
// TTL, and [Members.List] returns those that have.
package placement
