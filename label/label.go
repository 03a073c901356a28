// Package label is the one place the engine's label encoding lives (docker-backend.md §6.3,
// egress-and-reap.md §1.2 and §3.5): the prefix, every key, the value mapping the selectors
// use, the lossless key label of a proxy, and the label sets each resource kind carries. Every
// writer (the docker driver, the actors) and every reader (the egress attribution, the reaper,
// the tests) calls it, so the two sides cannot drift.
//
// It imports only the standard library and sandbox: the egress proxy binary reads labels
// through egresslog, and must link no Docker or NATS client.
package label

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// Prefix is the one prefix every label this engine owns lives under. Keys under it are
// refused from anyone else (package docker, labels.go).
const Prefix = "maf-sandbox."

// Label keys, all derived from [Prefix].
const (
	Scope  = Prefix + "scope"  // Value(key.Scope): workload, proxy, network
	Thread = Prefix + "thread" // Value(key.ThreadID): workload, proxy, network
	Agent  = Prefix + "agent"  // Value(key.AgentID): workload, proxy, network
	Kind   = Prefix + "kind"   // Value(spec kind): workload, proxy, network
	Call   = Prefix + "call"   // Value(key.CallID), only when non-empty
	// UserPrefix carries each spec label k=v as UserPrefix+k = Value(v).
	UserPrefix = Prefix + "label."
	// WorkDir records the storage base, raw (not digested); workload only.
	WorkDir = Prefix + "work-dir.v1"
	// Role marks the egress proxy ([RoleProxy]) and the fingerprint observer ([RoleObserver]).
	Role = Prefix + "role"
	// KeyV1 is the proxy's lossless key attribution: [EncodeKey] of the key that ran behind it,
	// or empty when that encoding does not fit [KeyBudget]; proxy only.
	KeyV1 = Prefix + "key.v1"
	// PrivateCIDRs records Config.EgressPrivateCIDRs joined by ","; proxy only, when set.
	PrivateCIDRs = Prefix + "private-cidrs.v1"
	// Pool marks a warm pool's member (actors/pool.go) with the pool it was made for. A member
	// carries it and [WorkDir] instead of the identity labels, which cannot change once the
	// member is handed to a key: its binding is recorded in the container instead.
	Pool = Prefix + "pool.v1"
	// Snapshot names the snapshot an image was made of (actors/snapshot.go): on a snapshot's
	// image, and so on every container created from it.
	Snapshot = Prefix + "snapshot.v1"
)

// RoleProxy is the value of [Role] on an egress proxy.
const RoleProxy = "proxy"

// RoleObserver is the value of [Role] on a fingerprint observer container (docker-backend
// §12.5), which lives only while it measures one workload.
const RoleObserver = "observer"

// MaxBytes bounds one label's key plus value.
const MaxBytes = 4096

// ErrInvalid is the class of a label that could not travel as one --label or filter argument.
var ErrInvalid = errors.New("label: invalid label")

// Label is one engine label. Labels travel as ordered slices because the command line order is
// part of the contract.
type Label struct {
	Key   string
	Value string
}

var (
	plainLabelValue  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	digestLabelValue = regexp.MustCompile(`^sha256-[0-9a-f]{48}$`)
)

// Value maps a raw identity component to the label value that create writes and every
// filter selects on. raw passes through unchanged when it is 1..63 bytes of [A-Za-z0-9._-] and
// does not itself look like a digest; anything else becomes "sha256-" and the first 48 hex digits
// of its SHA-256. It never truncates: two long scopes with a common prefix stay apart.
func Value(raw string) string {
	if len(raw) <= 63 && plainLabelValue.MatchString(raw) && !digestLabelValue.MatchString(raw) {
		return raw
	}
	sum := sha256.Sum256([]byte(raw))
	return "sha256-" + hex.EncodeToString(sum[:])[:48]
}

// Plain reports whether a selector value is the raw value it was made from ([Value] leaves it
// unchanged, which a digest never is).
func Plain(v string) bool { return Value(v) == v }

// Sandbox returns the identity labels of a sandbox in command-line order: scope, thread,
// agent, kind, [call], then one [UserPrefix] label per spec label in key order. Values pass
// through [Value]; spec label keys are not transformed and are refused with [ErrInvalid]
// when they could not travel as one --label or filter argument.
func Sandbox(key sandbox.Key, kind string, specLabels map[string]string) ([]Label, error) {
	out := []Label{
		{Scope, Value(key.Scope)},
		{Thread, Value(key.ThreadID)},
		{Agent, Value(key.AgentID)},
		{Kind, Value(kind)},
	}
	if key.CallID != "" {
		out = append(out, Label{Call, Value(key.CallID)})
	}
	keys := make([]string, 0, len(specLabels))
	for k := range specLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		l := Label{UserPrefix + k, Value(specLabels[k])}
		if err := Check(l); err != nil {
			return nil, fmt.Errorf("spec label %q: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// Workload returns the labels of a workload container: [Sandbox] followed by
// [WorkDir] = workDir (raw).
func Workload(key sandbox.Key, kind string, specLabels map[string]string, workDir string) ([]Label, error) {
	out, err := Sandbox(key, kind, specLabels)
	if err != nil {
		return nil, err
	}
	l := Label{WorkDir, workDir}
	if err := Check(l); err != nil {
		return nil, fmt.Errorf("work dir label: %w", err)
	}
	return append(out, l), nil
}

// Proxy returns the labels of a sandbox's egress proxy (egress-and-reap.md §1.2): [Sandbox],
// then [Role] = [RoleProxy], [KeyV1] = [EncodeKey] of key, and [PrivateCIDRs] = privateCIDRs
// when that is not empty. attributed is false when the key could not be encoded: [KeyV1] is
// then present and empty, and the caller says so (the key "exceeds the 4096-byte attribution
// limit").
func Proxy(key sandbox.Key, kind string, specLabels map[string]string, privateCIDRs string) (labels []Label, attributed bool, err error) {
	labels, err = Sandbox(key, kind, specLabels)
	if err != nil {
		return nil, false, err
	}
	enc, attributed := EncodeKey(key)
	labels = append(labels, Label{Key: Role, Value: RoleProxy}, Label{Key: KeyV1, Value: enc})
	if privateCIDRs != "" {
		labels = append(labels, Label{Key: PrivateCIDRs, Value: privateCIDRs})
	}
	return labels, attributed, nil
}

// PoolMember returns the labels of a warm pool's member: [Pool] = poolID, then [WorkDir] =
// workDir (raw). poolID is already a label value: [Value] of what tells the pool apart
// (image and shape), compared as it is when a backend adopts members.
func PoolMember(poolID, workDir string) ([]Label, error) {
	out := []Label{{Pool, poolID}, {WorkDir, workDir}}
	for _, l := range out {
		if err := Check(l); err != nil {
			return nil, fmt.Errorf("pool label: %w", err)
		}
	}
	return out, nil
}

// PoolFilter selects every warm pool member, bound to a key or not (an empty value means
// "label present").
func PoolFilter() map[string]string { return map[string]string{Pool: ""} }

// KeyFilter returns the label filter that selects every resource of key: scope, thread and agent,
// plus call when the key names one, plus kind when kind is non-nil. Dispose lists with it.
func KeyFilter(key sandbox.Key, kind *string) map[string]string {
	f := map[string]string{
		Scope:  Value(key.Scope),
		Thread: Value(key.ThreadID),
		Agent:  Value(key.AgentID),
	}
	if key.CallID != "" {
		f[Call] = Value(key.CallID)
	}
	if kind != nil {
		f[Kind] = Value(*kind)
	}
	return f
}

// ScopeFilter returns the label filter of one conversation (scope and thread). DisposeScope lists
// with it.
func ScopeFilter(scope, thread string) map[string]string {
	return map[string]string{
		Scope:  Value(scope),
		Thread: Value(thread),
	}
}

// IdentityKeys are the four identity label keys every engine resource of a sandbox carries:
// [Scope], [Thread], [Agent], [Kind]. A fingerprint observer copies them from its workload.
func IdentityKeys() []string { return []string{Scope, Thread, Agent, Kind} }

// IdentityFilter returns the reaper's filter: all four identity labels present, and the scope
// equal to Value(scope) when scope is non-empty. An empty value in a filter map means
// "label present, any value".
func IdentityFilter(scope string) map[string]string {
	f := map[string]string{Scope: "", Thread: "", Agent: "", Kind: ""}
	if scope != "" {
		f[Scope] = Value(scope)
	}
	return f
}

// Check refuses, with [ErrInvalid], a label that would not survive `--label k=v` and
// `--filter label=k=v` intact: an empty key, "=" or a control character in the key, a control
// character in the value, or more than [MaxBytes] bytes in all.
func Check(l Label) error {
	switch {
	case l.Key == "":
		return fmt.Errorf("%w: empty label key", ErrInvalid)
	case strings.ContainsRune(l.Key, '='):
		return fmt.Errorf("%w: label key contains '='", ErrInvalid)
	case strings.ContainsFunc(l.Key, isControl) || strings.ContainsFunc(l.Value, isControl):
		return fmt.Errorf("%w: label contains a control character", ErrInvalid)
	case len(l.Key)+len(l.Value) > MaxBytes:
		return fmt.Errorf("%w: label is longer than %d bytes", ErrInvalid, MaxBytes)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
