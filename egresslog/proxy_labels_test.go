package egresslog_test

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

// TestReadsWhatProxiesCarry reads back the labels [label.Proxy] writes on a proxy (the labels
// the actors create it with), with and without the key label: the
// attribution here and the writing there share one encoding.
func TestReadsWhatProxiesCarry(t *testing.T) {
	keys := []sandbox.Key{
		{Scope: "scope", ThreadID: "thread", AgentID: "agent"},
		{Scope: "scope", ThreadID: "thread", AgentID: "agent", CallID: "call-1"},
		{Scope: "scope / unicode \u2603", ThreadID: "thread\nwith\tcontrols", AgentID: strings.Repeat("agent", 40)},
		{Scope: "sha256-" + strings.Repeat("a", 48), ThreadID: "quotes\"'\\\x00", AgentID: "a=b", CallID: "call / 1"},
		{},
	}
	for _, key := range keys {
		t.Run(key.String(), func(t *testing.T) {
			ls, attributed, err := label.Proxy(key, "python", nil, "")
			if err != nil || !attributed {
				t.Fatal(attributed, err)
			}
			labels := map[string]string{}
			for _, l := range ls {
				labels[l.Key] = l.Value
			}
			enc := labels[label.KeyV1]
			delete(labels, label.KeyV1) // a proxy older than the key label
			legacy, how := egresslog.KeyFromLabels(labels)
			plain := label.Value(key.Scope) == key.Scope && label.Value(key.ThreadID) == key.ThreadID &&
				label.Value(key.AgentID) == key.AgentID && (key.CallID == "" || label.Value(key.CallID) == key.CallID)
			if plain && (how != egresslog.AttributionLegacySelectors || legacy != key) {
				t.Fatalf("legacy plain selectors: %+v %q", legacy, how)
			}
			if !plain && how != egresslog.AttributionNone {
				t.Fatalf("legacy digested selectors: %+v %q", legacy, how)
			}

			labels[label.KeyV1] = enc
			if got, how := egresslog.KeyFromLabels(labels); got != key || how != egresslog.AttributionLabel {
				t.Fatalf("got %+v %q, want %+v label", got, how, key)
			}
			labels[label.KeyV1] = ""
			if got, how := egresslog.Attribute(labels, &key); got != key || how != egresslog.AttributionCallerKey {
				t.Fatalf("caller key: got %+v %q", got, how)
			}
		})
	}
}
