package telemetry

import "sync"

// Caller-chosen label values. A sandbox's kind and its key's scope are strings the caller
// picks; as metric labels each new value is a new series, so a caller minting values would
// grow the engine's metrics (and its Prometheus) without bound. Each such label is bounded:
// the values an operator lists ([WithKinds]) always have series of their own; others get
// theirs in order of first use until [WithLabelCap] of them have, and every later one is
// counted under [LabelOther]. The operation, the error code, the outcome and the other
// labels come from fixed sets and need no bound.

// LabelOther is the value a caller-chosen label takes once its bound is reached. A caller's
// own value "other" is counted there too.
const LabelOther = "other"

// DefaultLabelCap is how many values of one caller-chosen label, beyond those listed, get
// series of their own.
const DefaultLabelCap = 32

// boundedLabel maps a caller-chosen value to a label value from a bounded set. A value once
// admitted stays admitted, so its series keeps its name.
type boundedLabel struct {
	mu       sync.RWMutex
	admitted map[string]bool
	listed   int // values listed at construction, never counted against limit
	limit    int
}

func newBoundedLabel(listed []string, limit int) *boundedLabel {
	b := &boundedLabel{admitted: map[string]bool{}, limit: limit}
	for _, v := range listed {
		if v != LabelOther && !b.admitted[v] {
			b.admitted[v] = true
			b.listed++
		}
	}
	return b
}

// value is the label value v is counted under: v itself when it is listed or admitted, or
// admitted now while the bound has room; else [LabelOther].
func (b *boundedLabel) value(v string) string {
	if v == LabelOther {
		return LabelOther
	}
	b.mu.RLock()
	ok, full := b.admitted[v], len(b.admitted)-b.listed >= b.limit
	b.mu.RUnlock()
	switch {
	case ok:
		return v
	case full:
		return LabelOther
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.admitted[v] {
		if len(b.admitted)-b.listed >= b.limit {
			return LabelOther
		}
		b.admitted[v] = true
	}
	return v
}

// fold sums counts by the label value each key is counted under.
func (b *boundedLabel) fold(counts map[string]int) map[string]int {
	out := make(map[string]int, len(counts))
	for v, n := range counts {
		out[b.value(v)] += n
	}
	return out
}
