package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// LabelPrefix is the one prefix every label this engine owns lives under. Keys under it are
// refused from anyone else ([MergeLabels]).
const LabelPrefix = "maf-sandbox."

// Label keys, all derived from [LabelPrefix].
const (
	LabelScope  = LabelPrefix + "scope"  // LabelValue(key.Scope): workload, proxy, network
	LabelThread = LabelPrefix + "thread" // LabelValue(key.ThreadID): workload, proxy, network
	LabelAgent  = LabelPrefix + "agent"  // LabelValue(key.AgentID): workload, proxy, network
	LabelKind   = LabelPrefix + "kind"   // LabelValue(spec kind): workload, proxy, network
	LabelCall   = LabelPrefix + "call"   // LabelValue(key.CallID), only when non-empty
	// LabelUserPrefix carries each spec label k=v as LabelUserPrefix+k = LabelValue(v).
	LabelUserPrefix = LabelPrefix + "label."
	// LabelWorkDir records the storage base, raw (not digested); workload only.
	LabelWorkDir = LabelPrefix + "work-dir.v1"
	// LabelRole marks the egress proxy ([RoleProxy]); proxy only.
	LabelRole = LabelPrefix + "role"
	// LabelKeyV1 is the proxy's lossless key attribution; proxy only.
	LabelKeyV1 = LabelPrefix + "key.v1"
	// LabelPrivateCIDRs records Config.EgressPrivateCIDRs joined by ","; proxy only, when set.
	LabelPrivateCIDRs = LabelPrefix + "private-cidrs.v1"
)

// RoleProxy is the value of [LabelRole] on an egress proxy.
const RoleProxy = "proxy"

// maxLabelBytes bounds one label's key plus value.
const maxLabelBytes = 4096

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

// LabelValue maps a raw identity component to the label value that create writes and every
// filter selects on. raw passes through unchanged when it is 1..63 bytes of [A-Za-z0-9._-] and
// does not itself look like a digest; anything else becomes "sha256-" and the first 48 hex digits
// of its SHA-256. It never truncates: two long scopes with a common prefix stay apart.
func LabelValue(raw string) string {
	if len(raw) <= 63 && plainLabelValue.MatchString(raw) && !digestLabelValue.MatchString(raw) {
		return raw
	}
	sum := sha256.Sum256([]byte(raw))
	return "sha256-" + hex.EncodeToString(sum[:])[:48]
}

// SandboxLabels returns the identity labels of a sandbox in command-line order: scope, thread,
// agent, kind, [call], then one [LabelUserPrefix] label per spec label in key order. Values pass
// through [LabelValue]; spec label keys are not transformed and are refused with [ErrInvalid]
// when they could not travel as one --label or filter argument.
func SandboxLabels(key sandbox.Key, kind string, specLabels map[string]string) ([]Label, error) {
	out := []Label{
		{LabelScope, LabelValue(key.Scope)},
		{LabelThread, LabelValue(key.ThreadID)},
		{LabelAgent, LabelValue(key.AgentID)},
		{LabelKind, LabelValue(kind)},
	}
	if key.CallID != "" {
		out = append(out, Label{LabelCall, LabelValue(key.CallID)})
	}
	keys := make([]string, 0, len(specLabels))
	for k := range specLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		l := Label{LabelUserPrefix + k, LabelValue(specLabels[k])}
		if err := checkLabel(l); err != nil {
			return nil, fmt.Errorf("spec label %q: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// WorkloadLabels returns the labels of a workload container: [SandboxLabels] followed by
// [LabelWorkDir] = workDir (raw).
func WorkloadLabels(key sandbox.Key, kind string, specLabels map[string]string, workDir string) ([]Label, error) {
	out, err := SandboxLabels(key, kind, specLabels)
	if err != nil {
		return nil, err
	}
	l := Label{LabelWorkDir, workDir}
	if err := checkLabel(l); err != nil {
		return nil, fmt.Errorf("work dir label: %w", err)
	}
	return append(out, l), nil
}

// KeyFilter returns the label filter that selects every resource of key: scope, thread and agent,
// plus call when the key names one, plus kind when kind is non-nil. Dispose lists with it.
func KeyFilter(key sandbox.Key, kind *string) map[string]string {
	f := map[string]string{
		LabelScope:  LabelValue(key.Scope),
		LabelThread: LabelValue(key.ThreadID),
		LabelAgent:  LabelValue(key.AgentID),
	}
	if key.CallID != "" {
		f[LabelCall] = LabelValue(key.CallID)
	}
	if kind != nil {
		f[LabelKind] = LabelValue(*kind)
	}
	return f
}

// ScopeFilter returns the label filter of one conversation (scope and thread). DisposeScope lists
// with it.
func ScopeFilter(scope, thread string) map[string]string {
	return map[string]string{
		LabelScope:  LabelValue(scope),
		LabelThread: LabelValue(thread),
	}
}

// IdentityFilter returns the reaper's filter: all four identity labels present, and the scope
// equal to LabelValue(scope) when scope is non-empty. An empty value in a filter map means
// "label present, any value".
func IdentityFilter(scope string) map[string]string {
	f := map[string]string{LabelScope: "", LabelThread: "", LabelAgent: "", LabelKind: ""}
	if scope != "" {
		f[LabelScope] = LabelValue(scope)
	}
	return f
}

// MergeLabels appends the caller's labels to base in key order. A caller key under
// [LabelPrefix], a key that could not travel as one argument, or a duplicate of a base key is
// refused with [ErrInvalid]: only this package writes the engine's own labels.
func MergeLabels(base []Label, user map[string]string) ([]Label, error) {
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := append([]Label(nil), base...)
	seen := make(map[string]bool, len(base))
	for _, l := range base {
		seen[l.Key] = true
	}
	for _, k := range keys {
		if strings.HasPrefix(k, LabelPrefix) {
			return nil, fmt.Errorf("label %q: %w: keys under %q are reserved", k, ErrInvalid, LabelPrefix)
		}
		if seen[k] {
			return nil, fmt.Errorf("label %q: %w: duplicate key", k, ErrInvalid)
		}
		l := Label{k, user[k]}
		if err := checkLabel(l); err != nil {
			return nil, fmt.Errorf("label %q: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// checkLabel refuses a label that would not survive `--label k=v` and `--filter label=k=v`
// intact: an empty key, "=" or a control character in the key, a control character in the
// value, or more than 4096 bytes in all.
func checkLabel(l Label) error {
	switch {
	case l.Key == "":
		return fmt.Errorf("%w: empty label key", ErrInvalid)
	case strings.ContainsRune(l.Key, '='):
		return fmt.Errorf("%w: label key contains '='", ErrInvalid)
	case strings.ContainsFunc(l.Key, isControl) || strings.ContainsFunc(l.Value, isControl):
		return fmt.Errorf("%w: label contains a control character", ErrInvalid)
	case len(l.Key)+len(l.Value) > maxLabelBytes:
		return fmt.Errorf("%w: label is longer than %d bytes", ErrInvalid, maxLabelBytes)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
