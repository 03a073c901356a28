package actors

import "sync"

// Freezes is the process-wide record of container freezes, keyed by the daemon endpoint and
// the container name. Within one [Backend] the container actor's mailbox already keeps two
// freezes of a container apart; the record is what lets acquire's recovery of a container a
// dead host left paused tell that freeze from a live call's, including one made by another
// Backend of this process on the same endpoint (share a Freezes with [WithFreezes]).
type Freezes struct {
	mu   sync.Mutex
	tick uint64
	m    map[freezeKey]*freezeRecord
}

type freezeKey struct{ endpoint, name string }

type freezeRecord struct {
	claims    int    // code in this process owes a thaw
	confirmed bool   // pause returned success and unpause has not been issued
	gen       uint64 // changes whenever confirmed changes
}

// NewFreezes returns an empty record.
func NewFreezes() *Freezes { return &Freezes{m: map[freezeKey]*freezeRecord{}} }

func (f *Freezes) with(k freezeKey, fn func(*freezeRecord)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[k]
	if r == nil {
		r = &freezeRecord{}
		f.m[k] = r
	}
	fn(r)
	if r.claims == 0 && !r.confirmed {
		delete(f.m, k)
	}
}

// claim is taken before pause is issued: a cancelled pause may still have frozen.
func (f *Freezes) claim(k freezeKey) { f.with(k, func(r *freezeRecord) { r.claims++ }) }

// release drops a claim after the thaw attempt.
func (f *Freezes) release(k freezeKey) { f.with(k, func(r *freezeRecord) { r.claims-- }) }

// confirm records that pause succeeded.
func (f *Freezes) confirm(k freezeKey) {
	f.with(k, func(r *freezeRecord) { f.tick++; r.confirmed, r.gen = true, f.tick })
}

// unconfirm records, just before unpause is issued, that the guest runs again from here.
func (f *Freezes) unconfirm(k freezeKey) {
	f.with(k, func(r *freezeRecord) { f.tick++; r.confirmed, r.gen = false, f.tick })
}

// sole reports whether the caller's own claim is the only one on k and nothing in this process
// has k confirmed frozen: a "paused" answer from the daemon then is not this process's freeze.
func (f *Freezes) sole(k freezeKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[k]
	return r != nil && r.claims == 1 && !r.confirmed
}

// claimed reports whether any code in this process owes k a thaw.
func (f *Freezes) claimed(k freezeKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[k]
	return r != nil && r.claims > 0
}
