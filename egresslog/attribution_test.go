package egresslog

import (
	"maps"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// selectors returns the ownership labels the engine writes on a proxy for key, kind included.
func selectors(key sandbox.Key) map[string]string {
	l := map[string]string{
		label.Scope:          label.Value(key.Scope),
		label.Thread:         label.Value(key.ThreadID),
		label.Agent:          label.Value(key.AgentID),
		"maf-sandbox.kind":   "test",
		"maf-sandbox.role":   "proxy",
		"maf-sandbox.label.": "x",
	}
	if key.CallID != "" {
		l[label.Call] = label.Value(key.CallID)
	}
	return l
}

// proxyLabels returns what a proxy created for key carries: selectors plus the key label.
func proxyLabels(key sandbox.Key) map[string]string {
	l := selectors(key)
	l[label.KeyV1], _ = label.EncodeKey(key)
	return l
}

func with(l map[string]string, k, v string) map[string]string {
	l = maps.Clone(l)
	l[k] = v
	return l
}

func without(l map[string]string, k string) map[string]string {
	l = maps.Clone(l)
	delete(l, k)
	return l
}

func TestKeyFromLabels(t *testing.T) {
	conv := sandbox.Key{Scope: "scope", ThreadID: "thread", AgentID: "agent"}
	call := sandbox.Key{Scope: "scope", ThreadID: "thread", AgentID: "agent", CallID: "call-1"}
	hashed := sandbox.Key{Scope: "scope / unicode \u2603", ThreadID: "thread\nwith\tcontrols", AgentID: strings.Repeat("agent", 40)}
	odd := sandbox.Key{Scope: "sha256-" + strings.Repeat("a", 48), ThreadID: "quotes\"'\\\x00", AgentID: "a=b"}
	empty := sandbox.Key{}
	big := sandbox.Key{Scope: strings.Repeat("x", 3057)}
	claims, _ := label.EncodeKey(sandbox.Key{Scope: "other", ThreadID: "thread", AgentID: "agent"})
	callLabel, _ := label.EncodeKey(call)
	otherCall, _ := label.EncodeKey(sandbox.Key{Scope: "scope", ThreadID: "thread", AgentID: "agent", CallID: "call-2"})

	cases := []struct {
		name   string
		labels map[string]string
		want   sandbox.Key
		status Attribution
	}{
		// Label present and readable.
		{name: "label conversation", labels: proxyLabels(conv), want: conv, status: AttributionLabel},
		{name: "label call", labels: proxyLabels(call), want: call, status: AttributionLabel},
		{name: "label hashed selectors", labels: proxyLabels(hashed), want: hashed, status: AttributionLabel},
		{name: "label digest-shaped and quotes", labels: proxyLabels(odd), want: odd, status: AttributionLabel},
		{name: "label empty key", labels: proxyLabels(empty), want: empty, status: AttributionLabel},
		{name: "label at budget", labels: proxyLabels(sandbox.Key{Scope: strings.Repeat("x", 3056)}), want: sandbox.Key{Scope: strings.Repeat("x", 3056)}, status: AttributionLabel},
		// Label present and refused: the vectors of §3.5.
		{name: "junk", labels: with(selectors(hashed), label.KeyV1, "!"), status: AttributionRefused},
		{name: "object", labels: with(selectors(hashed), label.KeyV1, "e30="), status: AttributionRefused},
		{name: "numbers", labels: with(selectors(hashed), label.KeyV1, "WzEsMiwzXQ=="), status: AttributionRefused},
		{name: "empty array", labels: with(selectors(hashed), label.KeyV1, "W10="), status: AttributionRefused},
		{name: "standard alphabet", labels: with(selectors(hashed), label.KeyV1, "////"), status: AttributionRefused},
		{name: "three elements", labels: with(selectors(hashed), label.KeyV1, "WyJhIiwiYiIsImMiXQ=="), status: AttributionRefused},
		{name: "scope differs from selector", labels: with(selectors(conv), label.KeyV1, claims), status: AttributionRefused},
		{name: "claims other compact", labels: with(selectors(conv), label.KeyV1, "WyJvdGhlciIsImIiLCJjIiwiZCJd"), status: AttributionRefused},
		{name: "thread selector differs", labels: with(proxyLabels(conv), label.Thread, "other"), status: AttributionRefused},
		{name: "agent selector missing", labels: without(proxyLabels(conv), label.Agent), status: AttributionRefused},
		{name: "call decoded, call label absent", labels: without(proxyLabels(call), label.Call), status: AttributionRefused},
		{name: "call decoded, call label differs", labels: with(selectors(call), label.KeyV1, otherCall), status: AttributionRefused},
		{name: "no call decoded, call label present", labels: with(selectors(call), label.KeyV1, proxyLabels(conv)[label.KeyV1]), status: AttributionRefused},
		{name: "call label is the raw value of a hashed call", labels: with(selectors(conv), label.KeyV1, callLabel), status: AttributionRefused},
		// Label present and empty: the over-budget marker, no fallback to selectors.
		{name: "oversized", labels: proxyLabels(big), status: AttributionNone},
		{name: "empty with plain selectors", labels: with(selectors(conv), label.KeyV1, ""), status: AttributionNone},
		// Label absent: legacy selectors.
		{name: "legacy plain", labels: selectors(conv), want: conv, status: AttributionLegacySelectors},
		{name: "legacy plain call", labels: selectors(call), want: call, status: AttributionLegacySelectors},
		{name: "legacy hashed", labels: selectors(hashed), status: AttributionNone},
		{name: "legacy digest-shaped", labels: selectors(odd), status: AttributionNone},
		{name: "legacy hashed call", labels: selectors(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a", CallID: "call / 1"}), status: AttributionNone},
		{name: "legacy missing agent", labels: without(selectors(conv), label.Agent), status: AttributionNone},
		{name: "legacy empty selector", labels: with(selectors(conv), label.Scope, ""), status: AttributionNone},
		{name: "no labels", labels: map[string]string{}, status: AttributionNone},
		{name: "nil labels", labels: nil, status: AttributionNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, status := KeyFromLabels(tc.labels)
			if got != tc.want || status != tc.status {
				t.Fatalf("got %+v %q, want %+v %q", got, status, tc.want, tc.status)
			}
			if status.Attributed() != (status == AttributionLabel || status == AttributionLegacySelectors) {
				t.Fatalf("Attributed() %v for %q", status.Attributed(), status)
			}
		})
	}
}

// TestCallerKeyFallback is the matrix of §3.5: the caller's key stands in only for "none",
// never for "refused", and only where the selectors name that key, call included.
func TestCallerKeyFallback(t *testing.T) {
	conv := sandbox.Key{Scope: "scope / unicode \u2603", ThreadID: "thread", AgentID: "agent"}
	call := conv
	call.CallID = "call-1"
	otherConv := conv
	otherConv.AgentID = "other"

	oversized := func(k sandbox.Key) map[string]string { return with(selectors(k), label.KeyV1, "") }
	legacy := selectors // hashed scope: legacy-unrecoverable

	cases := []struct {
		name   string
		labels map[string]string
		caller *sandbox.Key
		want   sandbox.Key
		status Attribution
	}{
		{name: "label wins over caller", labels: proxyLabels(call), caller: &conv, want: call, status: AttributionLabel},
		{name: "oversized, own key", labels: oversized(conv), caller: &conv, want: conv, status: AttributionCallerKey},
		{name: "legacy hashed, own key", labels: legacy(conv), caller: &conv, want: conv, status: AttributionCallerKey},
		{name: "oversized call proxy, call key", labels: oversized(call), caller: &call, want: call, status: AttributionCallerKey},
		{name: "oversized call proxy, conversation key", labels: oversized(call), caller: &conv, status: AttributionNone},
		{name: "oversized conversation proxy, call key", labels: oversized(conv), caller: &call, status: AttributionNone},
		{name: "call label differs", labels: with(oversized(call), label.Call, "call-2"), caller: &call, status: AttributionNone},
		{name: "someone else's proxy", labels: oversized(otherConv), caller: &conv, status: AttributionNone},
		{name: "scope selector mismatched", labels: with(oversized(conv), label.Scope, "somebody-else"), caller: &conv, status: AttributionNone},
		{name: "scope selector missing", labels: without(oversized(conv), label.Scope), caller: &conv, status: AttributionNone},
		{name: "thread selector mismatched", labels: with(oversized(conv), label.Thread, "somebody-else"), caller: &conv, status: AttributionNone},
		{name: "thread selector missing", labels: without(oversized(conv), label.Thread), caller: &conv, status: AttributionNone},
		{name: "agent selector mismatched", labels: with(oversized(conv), label.Agent, "somebody-else"), caller: &conv, status: AttributionNone},
		{name: "agent selector missing", labels: without(oversized(conv), label.Agent), caller: &conv, status: AttributionNone},
		{name: "refused junk", labels: with(selectors(conv), label.KeyV1, "!"), caller: &conv, status: AttributionRefused},
		{name: "refused claim", labels: with(selectors(conv), label.KeyV1, "WyJvdGhlciIsImIiLCJjIiwiZCJd"), caller: &conv, status: AttributionRefused},
		{name: "sweep has no caller", labels: oversized(conv), caller: nil, status: AttributionNone},
		{name: "sweep, legacy plain", labels: selectors(sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}), caller: nil,
			want: sandbox.Key{Scope: "s", ThreadID: "t", AgentID: "a"}, status: AttributionLegacySelectors},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, status := Attribute(tc.labels, tc.caller)
			if got != tc.want || status != tc.status {
				t.Fatalf("got %+v %q, want %+v %q", got, status, tc.want, tc.status)
			}
			if tc.caller != nil {
				_, st := KeyFromLabels(tc.labels)
				stands := CallerKeyStandsIn(tc.labels, st, *tc.caller)
				if stands != (tc.status == AttributionCallerKey) {
					t.Fatalf("CallerKeyStandsIn %v", stands)
				}
			}
		})
	}
	// Refused never admits the caller, even when the selectors name it.
	if CallerKeyStandsIn(selectors(conv), AttributionRefused, conv) {
		t.Fatal("caller stood in for a refused label")
	}
}
