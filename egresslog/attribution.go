package egresslog

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// The ownership selectors the engine writes on every proxy (docker-backend.md §6.3). They are
// written by the docker package; this package only reads them.
const (
	labelScope  = "maf-sandbox.scope"
	labelThread = "maf-sandbox.thread"
	labelAgent  = "maf-sandbox.agent"
	labelCall   = "maf-sandbox.call" // only when the key names a call
)

// Attribution says how a proxy's key was recovered, or why it was not. The three that name a
// key are the values of the egress event's "attribution" field.
type Attribution string

const (
	// AttributionLabel: decoded from [LabelKeyV1] and confirmed by the selectors.
	AttributionLabel Attribution = "label"
	// AttributionLegacySelectors: no [LabelKeyV1] at all (a proxy older than the label), and
	// the selectors were plain values, so they are the key itself.
	AttributionLegacySelectors Attribution = "legacy-selectors"
	// AttributionCallerKey: nothing to read, and the key-addressed caller's own key stood in
	// ([CallerKeyStandsIn]).
	AttributionCallerKey Attribution = "caller-key"
	// AttributionNone: nothing to read — [LabelKeyV1] present and empty (the key was over
	// budget), or absent with selectors that were digested or missing. A caller's key may
	// stand in.
	AttributionNone Attribution = "none"
	// AttributionRefused: [LabelKeyV1] present, non-empty and not believed — it does not
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
//   - [LabelKeyV1] present and non-empty: it must be strict, padded URL-safe base64 of a JSON
//     array of exactly four strings; the scope, thread and agent selectors must be present and
//     equal to labelValue of the decoded scope, thread and agent; a non-empty decoded call
//     needs the call selector present and equal to labelValue of it, an empty one needs the
//     call selector absent. Anything else is [AttributionRefused].
//   - [LabelKeyV1] present and empty: [AttributionNone] (the over-budget marker); the
//     selectors are not consulted.
//   - [LabelKeyV1] absent: the selectors are the key when scope, thread and agent are present
//     and plain — each equal to its own labelValue, which a digest never is — and so is the
//     call selector when present. Otherwise [AttributionNone].
func KeyFromLabels(labels map[string]string) (sandbox.Key, Attribution) {
	value, present := labels[LabelKeyV1]
	switch {
	case present && value == "":
		return sandbox.Key{}, AttributionNone
	case present:
		key, ok := decodeKeyLabel(value)
		if !ok || !selectorsName(labels, key) {
			return sandbox.Key{}, AttributionRefused
		}
		return key, AttributionLabel
	}

	var key sandbox.Key
	for _, f := range []struct {
		label string
		dst   *string
	}{{labelScope, &key.Scope}, {labelThread, &key.ThreadID}, {labelAgent, &key.AgentID}} {
		v, ok := labels[f.label]
		if !ok || !plain(v) {
			return sandbox.Key{}, AttributionNone
		}
		*f.dst = v
	}
	if v, ok := labels[labelCall]; ok {
		if !plain(v) {
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
// labelValue of the caller's, and the call selector absent when caller.CallID is empty, or
// present and equal to labelValue(caller.CallID) when it is not. So a conversation's key never
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
	for _, f := range []struct{ label, raw string }{
		{labelScope, key.Scope}, {labelThread, key.ThreadID}, {labelAgent, key.AgentID},
	} {
		if v, ok := labels[f.label]; !ok || v != labelValue(f.raw) {
			return false
		}
	}
	call, ok := labels[labelCall]
	if key.CallID == "" {
		return !ok
	}
	return ok && call == labelValue(key.CallID)
}

// plain reports whether a selector value is the raw value it was made from.
func plain(v string) bool { return labelValue(v) == v }

// labelValue is the engine's selector mapping (docker-backend.md §6.3), which the docker
// package's LabelValue writes: raw unchanged when it is 1–63 bytes of [A-Za-z0-9._-] and not
// digest-shaped, otherwise "sha256-" and the first 48 hex digits of its SHA-256. It is
// restated here so that the proxy binary, which links this package, does not link the docker
// package; the spec's vectors pin it, and a test reads labels the docker package wrote.
func labelValue(raw string) string {
	if len(raw) >= 1 && len(raw) <= 63 && onlyBytes(raw, isPlainByte) && !digestShaped(raw) {
		return raw
	}
	sum := sha256.Sum256([]byte(raw))
	return "sha256-" + hex.EncodeToString(sum[:])[:48]
}

// digestShaped reports whether v looks like a digest labelValue writes: "sha256-" and 48
// lower-case hex digits.
func digestShaped(v string) bool {
	hexDigits, ok := strings.CutPrefix(v, "sha256-")
	return ok && len(hexDigits) == 48 && onlyBytes(hexDigits, func(c byte) bool {
		return '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	})
}

func isPlainByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

func onlyBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}
