package egresslog

import (
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// Attribution says how a proxy's key was recovered, or why it was not. The three that name a
// key are the values of the egress event's "attribution" field.
type Attribution string

const (
	// AttributionLabel: decoded from [label.KeyV1] and confirmed by the selectors.
	AttributionLabel Attribution = "label"
	// AttributionLegacySelectors: no [label.KeyV1] at all (a proxy older than the label), and
	// the selectors were plain values, so they are the key itself.
	AttributionLegacySelectors Attribution = "legacy-selectors"
	// AttributionCallerKey: nothing to read, and the key-addressed caller's own key stood in
	// ([CallerKeyStandsIn]).
	AttributionCallerKey Attribution = "caller-key"
	// AttributionNone: nothing to read — [label.KeyV1] present and empty (the key was over
	// budget), or absent with selectors that were digested or missing. A caller's key may
	// stand in.
	AttributionNone Attribution = "none"
	// AttributionRefused: [label.KeyV1] present, non-empty and not believed — it does not
	// decode, or it contradicts the selectors. Nothing may stand in for it.
	AttributionRefused Attribution = "refused"
)

// Attributed reports whether a names a key.
func (a Attribution) Attributed() bool {
	return a == AttributionLabel || a == AttributionLegacySelectors || a == AttributionCallerKey
}

// KeyFromLabels recovers the key that ran behind a proxy from the proxy container's labels
// (egress-and-reap.md §3.5). It returns the key with [AttributionLabel] or
// [AttributionLegacySelectors], or the zero key with the reason there is none:
//
//   - [label.KeyV1] present and non-empty: it must be strict, padded URL-safe base64 of a JSON
//     array of exactly four strings; the scope, thread and agent selectors must be present and
//     equal to label.Value of the decoded scope, thread and agent; a non-empty decoded call
//     needs the call selector present and equal to label.Value of it, an empty one needs the
//     call selector absent. Anything else is [AttributionRefused].
//   - [label.KeyV1] present and empty: [AttributionNone] (the over-budget marker); the
//     selectors are not consulted.
//   - [label.KeyV1] absent: the selectors are the key when scope, thread and agent are present
//     and plain — each equal to its own label.Value, which a digest never is — and so is the
//     call selector when present. Otherwise [AttributionNone].
func KeyFromLabels(labels map[string]string) (sandbox.Key, Attribution) {
	value, present := labels[label.KeyV1]
	switch {
	case present && value == "":
		return sandbox.Key{}, AttributionNone
	case present:
		key, ok := label.DecodeKey(value)
		if !ok || !selectorsName(labels, key) {
			return sandbox.Key{}, AttributionRefused
		}
		return key, AttributionLabel
	}

	var key sandbox.Key
	for _, f := range []struct {
		name string
		dst  *string
	}{{label.Scope, &key.Scope}, {label.Thread, &key.ThreadID}, {label.Agent, &key.AgentID}} {
		v, ok := labels[f.name]
		if !ok || !label.Plain(v) {
			return sandbox.Key{}, AttributionNone
		}
		*f.dst = v
	}
	if v, ok := labels[label.Call]; ok {
		if !label.Plain(v) {
			return sandbox.Key{}, AttributionNone
		}
		key.CallID = v
	}
	return key, AttributionLegacySelectors
}

// CallerKeyStandsIn reports whether a key-addressed caller (acquire recreating the proxy,
// Dispose(key)) may file the proxy's window under its own key, caller (egress-and-reap.md
// §3.5). It may only when status is [AttributionNone] — never for [AttributionRefused] — and
// only when the proxy's ownership selectors name caller: scope, thread and agent equal to
// label.Value of the caller's, and the call selector absent when caller.CallID is empty, or
// present and equal to label.Value(caller.CallID) when it is not. So a conversation's key never
// stands in for a call's proxy. Sweeps (DisposeScope, Reap) have no caller key and never call
// this.
func CallerKeyStandsIn(labels map[string]string, status Attribution, caller sandbox.Key) bool {
	return status == AttributionNone && selectorsName(labels, caller)
}

// Attribute is [KeyFromLabels] followed, when it found nothing to read and caller is not nil,
// by [CallerKeyStandsIn]: the key a drained window is filed under, or the zero key with
// [AttributionNone] or [AttributionRefused] when the window goes unreported. Sweeps pass a nil
// caller.
func Attribute(labels map[string]string, caller *sandbox.Key) (sandbox.Key, Attribution) {
	key, status := KeyFromLabels(labels)
	if status.Attributed() {
		return key, status
	}
	if caller != nil && CallerKeyStandsIn(labels, status, *caller) {
		return *caller, AttributionCallerKey
	}
	return sandbox.Key{}, status
}

// selectorsName reports whether the ownership selectors are those the engine writes for key.
func selectorsName(labels map[string]string, key sandbox.Key) bool {
	for _, f := range []struct{ name, raw string }{
		{label.Scope, key.Scope}, {label.Thread, key.ThreadID}, {label.Agent, key.AgentID},
	} {
		if v, ok := labels[f.name]; !ok || v != label.Value(f.raw) {
			return false
		}
	}
	call, ok := labels[label.Call]
	if key.CallID == "" {
		return !ok
	}
	return ok && call == label.Value(key.CallID)
}
