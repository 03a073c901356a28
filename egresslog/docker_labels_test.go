package egresslog_test

import (
	"strings"
	"testing"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// TestReadsWhatDockerWrites pins this package's reading of the selectors to the docker
// package's writing of them. egresslog restates the label-value mapping so that the proxy
// binary does not link docker; if the two ever differ, every label attribution here is
// refused and this test fails.
func TestReadsWhatDockerWrites(t *testing.T) {
	if egresslog.LabelKeyV1 != docker.LabelKeyV1 {
		t.Fatalf("key label %q here, %q in docker", egresslog.LabelKeyV1, docker.LabelKeyV1)
	}
	keys := []sandbox.Key{
		{Scope: "scope", ThreadID: "thread", AgentID: "agent"},
		{Scope: "scope", ThreadID: "thread", AgentID: "agent", CallID: "call-1"},
		{Scope: "scope / unicode \u2603", ThreadID: "thread\nwith\tcontrols", AgentID: strings.Repeat("agent", 40)},
		{Scope: "sha256-" + strings.Repeat("a", 48), ThreadID: "quotes\"'\\\x00", AgentID: "a=b", CallID: "call / 1"},
		{},
	}
	for _, key := range keys {
		t.Run(key.String(), func(t *testing.T) {
			ls, err := docker.SandboxLabels(key, "python", nil)
			if err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{docker.LabelRole: docker.RoleProxy}
			for _, l := range ls {
				labels[l.Key] = l.Value
			}
			legacy, how := egresslog.KeyFromLabels(labels)
			plain := docker.LabelValue(key.Scope) == key.Scope && docker.LabelValue(key.ThreadID) == key.ThreadID &&
				docker.LabelValue(key.AgentID) == key.AgentID && (key.CallID == "" || docker.LabelValue(key.CallID) == key.CallID)
			if plain && (how != egresslog.AttributionLegacySelectors || legacy != key) {
				t.Fatalf("legacy plain selectors: %+v %q", legacy, how)
			}
			if !plain && how != egresslog.AttributionNone {
				t.Fatalf("legacy digested selectors: %+v %q", legacy, how)
			}

			labels[docker.LabelKeyV1], _ = egresslog.EncodeKeyLabel(key)
			if got, how := egresslog.KeyFromLabels(labels); got != key || how != egresslog.AttributionLabel {
				t.Fatalf("got %+v %q, want %+v label", got, how, key)
			}
			labels[docker.LabelKeyV1] = ""
			if got, how := egresslog.Attribute(labels, &key); got != key || how != egresslog.AttributionCallerKey {
				t.Fatalf("caller key: got %+v %q", got, how)
			}
		})
	}
}
