package actors

import (
	"slices"
	"sync"
)

// imageFactsLimit bounds how many images' facts a backend remembers; the oldest goes first.
const imageFactsLimit = 256

// imageFacts remembers, per image ID, what a container created from that image showed before
// its guest ran: the guest identity its Config.User resolves to, the storage base components
// its filesystem lacks, and the command probes it passed. A container created a moment ago has
// its image's filesystem exactly, so the next fresh container of the same image ID needs none
// of those calls. Only fresh containers read or feed it: an adopted or restarted one may have
// had its files changed by its guest and is learned per instance. Keyed by image ID, never by
// tag: a retagged image is another key.
type imageFacts struct {
	mu      sync.Mutex
	limit   int
	order   []string // image IDs, oldest first
	entries map[string]*imageEntry
}

type imageEntry struct {
	identity map[string]facts    // Config.User → the resolved identity
	missing  map[string][]string // storage base → its components the image lacks
	probed   map[string]bool     // probe name → passed
}

func newImageFacts(limit int) *imageFacts {
	return &imageFacts{limit: limit, entries: map[string]*imageEntry{}}
}

// entry returns imageID's entry, creating it (and evicting the oldest) when add; nil when
// unknown and not add, or when the image ID is empty.
func (c *imageFacts) entry(imageID string, add bool) *imageEntry {
	if imageID == "" {
		return nil
	}
	e := c.entries[imageID]
	if e != nil || !add {
		return e
	}
	if len(c.order) >= c.limit {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	e = &imageEntry{identity: map[string]facts{}, missing: map[string][]string{}, probed: map[string]bool{}}
	c.entries[imageID] = e
	c.order = append(c.order, imageID)
	return e
}

// identity returns the resolved identity of user in imageID, if known.
func (c *imageFacts) identity(imageID, user string) (facts, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entry(imageID, false); e != nil {
		f, ok := e.identity[user]
		return f, ok
	}
	return facts{}, false
}

// setIdentity records a resolved identity; an unresolved one is never kept.
func (c *imageFacts) setIdentity(imageID, user string, f facts) {
	if !f.resolved {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entry(imageID, true); e != nil {
		e.identity[user] = f
	}
}

// missing returns the components of base that imageID lacks, if known.
func (c *imageFacts) missing(imageID, base string) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entry(imageID, false); e != nil {
		m, ok := e.missing[base]
		return slices.Clone(m), ok
	}
	return nil, false
}

// setMissing records what a clean walk of base found missing in imageID.
func (c *imageFacts) setMissing(imageID, base string, missing []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entry(imageID, true); e != nil {
		e.missing[base] = slices.Clone(missing)
	}
}

// probed returns the probes imageID passed.
func (c *imageFacts) probed(imageID string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	if e := c.entry(imageID, false); e != nil {
		for k, v := range e.probed {
			out[k] = v
		}
	}
	return out
}

// setProbed records a passed probe; a failure is never kept (the next acquire retries it).
func (c *imageFacts) setProbed(imageID, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entry(imageID, true); e != nil {
		e.probed[name] = true
	}
}
