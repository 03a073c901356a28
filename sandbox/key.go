package sandbox

import "strings"

// Key addresses a conversation's sandboxes. Every component comes from the host's request
// context, never from model input: a key a model can influence lets one conversation address
// another's sandbox.
//
// Any component may be empty, as in the reference: an empty ThreadID or AgentID is a value
// like any other, part of the identity (the Docker backend digests it into names and labels),
// never a wildcard. The engine's NATS API requires Scope.
//
// The identity of one physical sandbox is the pair (Key, Spec.Kind); see [Identity].
type Key struct {
	Scope    string // tenant or user scope
	ThreadID string // conversation
	AgentID  string // one agent's filesystem
	CallID   string // empty unless the effective isolation scope is "call"
}

// String renders the key as a slash-separated path for logs and error messages.
func (k Key) String() string {
	parts := []string{k.Scope, k.ThreadID, k.AgentID}
	if k.CallID != "" {
		parts = append(parts, k.CallID)
	}
	return strings.Join(parts, "/")
}

// SandboxID is the identity of one physical sandbox: a key holds at most one sandbox per kind,
// and two kinds never share one.
type SandboxID struct {
	Key  Key
	Kind string
}

// Identity returns the physical-sandbox identity of key and kind.
func Identity(key Key, kind string) SandboxID { return SandboxID{Key: key, Kind: kind} }
