package service

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/mafsandbox/engine/messages"
)

// Tenancy: one engine pool, many tenants. This file is every identity check of the API.
//
// The caller's identity comes from the NATS server, never from the request body: each tenant
// account imports the engine account's API subjects as a service, and the server sets
// [messages.RequestInfoHeader] on every request crossing that import, replacing any value the
// sender set (docs/operations.md#tenancy has the deployment and the threat model). With
// tenancy configured ([WithTenancy]):
//
//   - a request without exactly one such header, or one that names no account, is refused
//     with a [*messages.ForbiddenError]: never served as "anyone"; the one exception is a
//     call another engine of the pool forwarded from inside the engine's account (no server
//     header there), served as the identity it carries in [ForwardedIdentityHeader];
//   - each operation is checked by its rule in [tenancyRules] (an operation missing from the
//     table is refused);
//   - a handle is bound to the accounts that acquired it, not only to its key;
//   - the subjects a request makes the engine publish to (an exec's stream_to, a
//     run_program's tool subjects) must be under the caller's own namespace.
//
// Without tenancy nothing here runs and the API behaves as it always has.

// Tenancy is the mapping from the caller's NATS account to what it may touch. Load one from a
// file with [LoadTenancy]; [DefaultTenancy] maps every account to the scope of its own name.
type Tenancy struct {
	// Scopes maps an account to the scopes its calls may name. An account listed with no
	// scope may use none (every call naming a scope is refused), whatever SameName says.
	Scopes map[string][]string `json:"scopes,omitempty"`
	// Users maps an account's users to their scopes, and decides for a user it lists in place
	// of Scopes and SameName (an empty list: none). The user is known only when the tenant's
	// import has share: true; a user not listed, or not known, gets the account's scopes.
	Users map[string]map[string][]string `json:"users,omitempty"`
	// SameName lets an account that Scopes does not list use the scope of its own name.
	SameName bool `json:"same_name"`
	// Operators are the accounts that may reap every scope (or all at once) and dispose or
	// purge any scope's sandboxes. They reach other sandboxes' calls only through Scopes.
	Operators []string `json:"operators,omitempty"`
	// ToolPrefix: a run_program's tool subjects must be ToolPrefix.<account>.… (default
	// [DefaultToolPrefix]), which that account exports to the engine's account.
	ToolPrefix string `json:"tool_prefix,omitempty"`
	// StreamPrefix: an exec's stream_to must be StreamPrefix.<account>.… (default
	// [DefaultStreamPrefix]), which the engine's account exports to that account as a stream.
	StreamPrefix string `json:"stream_prefix,omitempty"`
}

// The default namespaces of the subjects the engine publishes to on a tenant's behalf.
const (
	DefaultToolPrefix   = "maf.sandbox.tools"
	DefaultStreamPrefix = "maf.sandbox.stream"
)

// DefaultTenancy maps every account to the scope of its own name, with no operator.
func DefaultTenancy() *Tenancy { return &Tenancy{SameName: true} }

// LoadTenancy reads a tenancy mapping from a JSON file ([Tenancy]'s fields; same_name is true
// unless the file sets it false). It fails on an unreadable file or unknown fields.
func LoadTenancy(path string) (*Tenancy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tenancy file: %w", err)
	}
	t := DefaultTenancy()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(t); err != nil {
		return nil, fmt.Errorf("parse tenancy file %s: %w", path, err)
	}
	return t, nil
}

// Identity is who sent a request, as the NATS server put it in [messages.RequestInfoHeader].
type Identity struct {
	Account string `json:"acc"`
	User    string `json:"user,omitempty"`
}

// String names the caller in a refusal: its account, and its user when the server gave one.
func (id *Identity) String() string {
	if id.User == "" {
		return fmt.Sprintf("account %q", id.Account)
	}
	return fmt.Sprintf("account %q (user %q)", id.Account, id.User)
}

// tenancy is a [Tenancy] compiled for lookups.
type tenancy struct {
	scopes       map[string]map[string]bool
	users        map[string]map[string]map[string]bool // account → user → scopes
	sameName     bool
	operators    map[string]bool
	toolPrefix   string
	streamPrefix string
}

func compileTenancy(t *Tenancy) (*tenancy, error) {
	c := &tenancy{scopes: map[string]map[string]bool{}, users: map[string]map[string]map[string]bool{}, sameName: t.SameName, operators: map[string]bool{},
		toolPrefix: t.ToolPrefix, streamPrefix: t.StreamPrefix}
	if c.toolPrefix == "" {
		c.toolPrefix = DefaultToolPrefix
	}
	if c.streamPrefix == "" {
		c.streamPrefix = DefaultStreamPrefix
	}
	for _, p := range []string{c.toolPrefix, c.streamPrefix} {
		if !messages.ValidPrefix(p) {
			return nil, errOption("tenancy: subject prefix %q is not dot-separated tokens of letters, digits, '-' and '_'", p)
		}
	}
	for acc, scopes := range t.Scopes {
		if acc == "" {
			return nil, errOption("tenancy: an empty account name in scopes")
		}
		c.scopes[acc] = scopeSet(scopes)
	}
	for acc, users := range t.Users {
		c.users[acc] = map[string]map[string]bool{}
		for user, scopes := range users {
			if acc == "" || user == "" {
				return nil, errOption("tenancy: an empty account or user name in users")
			}
			c.users[acc][user] = scopeSet(scopes)
		}
	}
	for _, op := range t.Operators {
		if op == "" {
			return nil, errOption("tenancy: an empty operator account")
		}
		c.operators[op] = true
	}
	return c, nil
}

func scopeSet(scopes []string) map[string]bool {
	set := map[string]bool{}
	for _, sc := range scopes {
		if sc != "" {
			set[sc] = true
		}
	}
	return set
}

// describe says what the mapping is, for the engine's start line.
func (t *tenancy) describe() string {
	ops := make([]string, 0, len(t.operators))
	for op := range t.operators {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return fmt.Sprintf("tenancy: %d accounts mapped, %d by user, same-name scopes %t, operators %v", len(t.scopes), len(t.users), t.sameName, ops)
}

// mayUse reports whether the caller may name scope: its user's entry when the mapping has
// one, else its account's, else the same-name rule.
func (t *tenancy) mayUse(id *Identity, scope string) bool {
	if set, ok := t.users[id.Account][id.User]; ok && id.User != "" {
		return set[scope]
	}
	if set, ok := t.scopes[id.Account]; ok {
		return set[scope]
	}
	return t.sameName && scope == id.Account
}

// ForwardedIdentityHeader carries the caller's identity (an [Identity] as JSON) on a call one
// engine forwards to another ([ForwardedHeader], placement.go's relay): the forward is
// published inside the engine's account, where no import is crossed and the server sets no
// [messages.RequestInfoHeader]. The receiving engine believes it only on a request that
// carries no such server header, i.e. one that never crossed a tenant's import: a tenant's
// request always carries the server's header, which wins (docs/operations.md#tenancy).
const ForwardedIdentityHeader = "Maf-Sandbox-Forwarded-Identity"

// identityOf reads the caller's identity from the header the NATS server set. Exactly one
// value is taken: the server replaces a sender's, so two mean a header that did not come
// from one import crossing. A request with no server header is served only as the identity
// an engine of the pool forwarded it with (forwardedIdentityOf).
func identityOf(h nats.Header) (*Identity, error) {
	vals := h[messages.RequestInfoHeader]
	switch len(vals) {
	case 0:
		return forwardedIdentityOf(h)
	case 1:
	default:
		return nil, &messages.ForbiddenError{Reason: "the request carries more than one identity header"}
	}
	var id Identity
	if err := json.Unmarshal([]byte(vals[0]), &id); err != nil || id.Account == "" {
		return nil, &messages.ForbiddenError{Reason: "the request's identity header names no account"}
	}
	return &id, nil
}

// forwardedIdentityOf reads the identity another engine forwarded a call with, on a request
// without the server's header: one sent from inside the engine's account, which the threat
// model trusts. It must be marked forwarded and carry exactly one identity naming an account.
func forwardedIdentityOf(h nats.Header) (*Identity, error) {
	vals := h[ForwardedIdentityHeader]
	if len(vals) != 1 || h.Get(ForwardedHeader) == "" {
		return nil, &messages.ForbiddenError{Reason: "the request carries no identity from the NATS server: this engine serves tenants, and only a request crossing its account's service import is served"}
	}
	var id Identity
	if err := json.Unmarshal([]byte(vals[0]), &id); err != nil || id.Account == "" {
		return nil, &messages.ForbiddenError{Reason: "the forwarded request's identity names no account"}
	}
	return &id, nil
}

// forwardIdentity puts the caller's identity on a call this engine forwards to another
// (relay); nothing without tenancy.
func forwardIdentity(h nats.Header, id *Identity) {
	if id == nil {
		return
	}
	b, err := json.Marshal(id)
	if err != nil {
		return // an Identity is two strings: it always encodes
	}
	h.Set(ForwardedIdentityHeader, string(b))
}

// rule is what an operation's request is checked for, beyond an established identity.
type rule int

const (
	ruleIdentity         rule = iota + 1 // names nothing: any established identity
	ruleKey                              // the envelope's key: its scope must be the caller's
	ruleHandle                           // ruleKey, and the handle must be one the caller acquired
	rulePurge                            // ruleKey, or the caller is an operator
	ruleHandleOrOperator                 // ruleHandle, or the caller is an operator (a sandbox's lifecycle, not its data)
	ruleReap                             // the body's scope must be the caller's; an operator may name any, or none (all): reap, list_sandboxes (a tenant naming none lists its own scopes)
	ruleOperator                         // operators only: lame_duck
)

// tenancyRules is every operation's rule. An operation that is not here is refused on an
// engine with tenancy (TestEveryOperationHasATenancyRule keeps the table whole).
var tenancyRules = map[string]rule{
	"acquire":         ruleKey,
	"dispose":         rulePurge,
	"dispose_scope":   rulePurge,
	"reap":            ruleReap,
	"declarations":    ruleIdentity,
	"health":          ruleIdentity,
	"list_sandboxes":  ruleReap,
	"lame_duck":       ruleOperator,
	"exec":            ruleHandle,
	"run_code":        ruleHandle,
	"write_file":      ruleHandle,
	"upload_chunk":    ruleHandle,
	"read_file":       ruleHandle,
	"download_chunk":  ruleHandle,
	"stat_file":       ruleHandle,
	"remove":          ruleHandle,
	"list_dir":        ruleHandle,
	"reclaim":         ruleHandle,
	"reset":           ruleHandle,
	"pause":           ruleHandleOrOperator, // snapshots.go
	"snapshot":        ruleHandleOrOperator,
	"restore":         ruleKey, // and the snapshot's scope: checkSnapshotScope
	"fork":            ruleIdentity,
	"snapshots":       ruleIdentity,
	"fingerprint":     ruleHandle,
	"collect_outputs": ruleHandle,
	"run_program":     ruleHandle,
	// A process is reached only through its sandbox: the handle, acquired by the caller.
	"process_start":       ruleHandle,
	"process_list":        ruleHandle,
	"process_read":        ruleHandle,
	"process_stdin":       ruleHandle,
	"process_close_stdin": ruleHandle,
	"process_resize":      ruleHandle,
	"process_signal":      ruleHandle,
	"process_wait":        ruleHandle,
}

// authorize checks one request on an engine with tenancy and returns the caller's identity.
// env is the request's envelope, data its body (read again only for the operations that name
// a scope or a subject outside the envelope).
func (s *Service) authorize(op string, h nats.Header, env *messages.APIEnvelope, data []byte) (*Identity, error) {
	t := s.tenancy
	id, err := identityOf(h)
	if err != nil {
		return nil, err
	}
	r, ok := tenancyRules[op]
	if !ok {
		return id, &messages.ForbiddenError{Reason: fmt.Sprintf("%s has no tenancy rule on this engine", op)}
	}
	scope := ""
	if env.Key != nil {
		scope = env.Key.Scope
	}
	switch r {
	case ruleIdentity:
		return id, nil
	case ruleReap:
		return id, t.checkReap(op, id, data)
	case ruleOperator:
		if !t.operators[id.Account] {
			return id, &messages.ForbiddenError{Reason: fmt.Sprintf("account %q may not %s: only an operator may", id.Account, verbOf(op))}
		}
		return id, nil
	case rulePurge, ruleHandleOrOperator:
		if t.operators[id.Account] {
			return id, nil
		}
	}
	if env.Key == nil || scope == "" {
		return id, nil // the operation refuses the missing key itself (bad_request)
	}
	if !t.mayUse(id, scope) {
		return id, &messages.ForbiddenError{Reason: fmt.Sprintf("%s may not use scope %q", id, scope)}
	}
	if r == ruleHandle || r == ruleHandleOrOperator {
		if err := s.checkHandle(id, env.Sandbox); err != nil {
			return id, err
		}
	}
	return id, t.checkOutbound(op, id, data)
}

// checkHandle refuses a handle the caller did not acquire. A handle the engine does not hold
// is left to the operation (unknown_sandbox, or sandbox_gone for one buried under this key).
func (s *Service) checkHandle(id *Identity, handleID string) error {
	if handleID == "" {
		return nil
	}
	if h := s.handles.get(handleID); h != nil && !h.ownedBy(id.Account) {
		return &messages.ForbiddenError{Reason: fmt.Sprintf("account %q did not acquire sandbox %q", id.Account, handleID)}
	}
	return nil
}

// checkReap: a reap (or inventory, op) of one scope the caller may use, or any by an operator.
func (t *tenancy) checkReap(op string, id *Identity, data []byte) error {
	if t.operators[id.Account] {
		return nil
	}
	var req struct {
		Scope string `json:"scope"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return nil // the operation refuses the malformed body itself
	}
	if req.Scope == "" && op == "list_sandboxes" {
		return nil // answered with the scopes the caller may use alone (inventory.go, listSandboxes)
	}
	if req.Scope == "" {
		return &messages.ForbiddenError{Reason: fmt.Sprintf("account %q may not %s every scope: only an operator may", id.Account, verbOf(op))}
	}
	if !t.mayUse(id, req.Scope) {
		return &messages.ForbiddenError{Reason: fmt.Sprintf("%s may not %s scope %q", id, verbOf(op), req.Scope)}
	}
	return nil
}

// checkOutbound refuses a subject the request would have the engine publish to outside the
// caller's namespace: an exec's stream_to, a run_program's tool subjects.
func (t *tenancy) checkOutbound(op string, id *Identity, data []byte) error {
	var subjects []string
	var ns, what string
	switch op {
	case "exec":
		var req struct {
			StreamTo string `json:"stream_to"`
		}
		if json.Unmarshal(data, &req) != nil || req.StreamTo == "" {
			return nil
		}
		subjects, ns, what = []string{req.StreamTo}, t.streamPrefix, "stream_to"
	case "run_program":
		var req struct {
			Tools []struct {
				Subject string `json:"subject"`
			} `json:"tools"`
		}
		if json.Unmarshal(data, &req) != nil {
			return nil
		}
		for _, tool := range req.Tools {
			subjects = append(subjects, tool.Subject)
		}
		ns, what = t.toolPrefix, "tool subject"
	default:
		return nil
	}
	own := ns + "." + id.Account + "."
	for _, subj := range subjects {
		if !strings.HasPrefix(subj, own) {
			return &messages.ForbiddenError{Reason: fmt.Sprintf("%s %q is not under account %q's namespace %s>", what, subj, id.Account, own)}
		}
	}
	return nil
}

// verbOf is how a refusal of a ruleReap operation names it.
func verbOf(op string) string {
	switch op {
	case "list_sandboxes":
		return "list the sandboxes of"
	case "lame_duck":
		return "put an engine in lame duck"
	}
	return op
}

// checkSnapshotScope refuses a snapshot call touching a scope the caller may not use: the
// scope of the sandbox a snapshot was taken of (restore, fork, describe, delete), or of the
// keys a fork makes, or of a listing ("" lists every scope: operators only). nil without
// tenancy.
func (s *Service) checkSnapshotScope(ctx context.Context, scope string) error {
	c := callOf(ctx)
	if s.tenancy == nil || c == nil || c.identity == nil {
		return nil
	}
	id, t := c.identity, s.tenancy
	switch {
	case t.operators[id.Account] && scope == "":
		return nil
	case scope == "":
		return &messages.ForbiddenError{Reason: fmt.Sprintf("account %q may not list every scope's snapshots: only an operator may", id.Account)}
	case !t.mayUse(id, scope):
		return &messages.ForbiddenError{Reason: fmt.Sprintf("%s may not use scope %q, whose snapshot this is", id, scope)}
	}
	return nil
}

// callerIsOperator reports whether the call's caller is an operator of an engine with tenancy.
func (s *Service) callerIsOperator(ctx context.Context) bool {
	c := callOf(ctx)
	return s.tenancy != nil && c != nil && c.identity != nil && s.tenancy.operators[c.identity.Account]
}
