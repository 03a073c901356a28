package sandbox

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// EgressRule is one allowlist entry. An entry with only a Host is tunnel-only, the default
// and the form every existing spec uses: the enforcer opens a CONNECT tunnel to a listed name
// and sees nothing inside it. An entry with Methods or Paths asks for inspection: the enforcer
// terminates TLS for that host and passes only requests whose method and path the entry lists
// (a list left empty allows every method, or every path).
//
// # Grammar
//
// Host is a DNS name or an fnmatch pattern of one (`api.github.com`, `*.pypi.org`), compared
// case-insensitively. [NewSpec] refuses an entry that is empty or over 253 octets; that
// contains whitespace, a control byte, a comma or `://`; that is a bare `*` (every name); or
// that looks like an IP literal: any `:` (an IPv6 literal, or a port, which the proxy never
// reads), a name whose last label is a number (`10.0.0.1`, `127.1`, `0x7f.1`, read as IPv4 by
// resolvers and URL parsers), or a pattern made only of digits and wildcards (`10.*`).
//
// Methods are upper-case HTTP method tokens (RFC 9110 §5.6.2: letters, digits and
// !#$%&'*+-.^_`|~), 1 to 32 bytes each: `GET`, `POST`, `PROPFIND`.
//
// Paths are patterns over the request path without its query, each 1024 bytes at most:
//
//	pattern = "/" / 1*( "/" segment ) [ "/**" ] / "/**"
//	segment = "*" / piece *( "%2F" piece )
//	piece   = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "!" / "$" / "&" / "'" /
//	              "(" / ")" / "+" / "=" / ":" / "@" )
//
// A literal segment matches itself (case-sensitive); `*` matches exactly one non-empty
// segment that holds no encoded slash; a final `**` matches the path named before it and
// everything under it, at a segment boundary (`/repos/acme/**` matches `/repos/acme`,
// `/repos/acme/` and `/repos/acme/x/y`, never `/repos/acmex`). `%2F` (either case) is the
// one escape a pattern may hold: a slash inside a segment, as GitLab's API spells a project
// (`/api/v4/projects/acme%2Fwidgets/**`); the pieces around it are neither empty nor `.` or
// `..`. [NewSpec] refuses an empty segment (`//`, a trailing `/`), a `.` or `..` segment, a
// `*` inside a segment, a `**` anywhere but last, any other `%`, and `?`, `#`, `\`,
// whitespace, control and non-ASCII bytes: patterns are written against the normalised,
// decoded path ([MatchEgressPath] says what that is, and docs/operations.md which request
// paths the enforcer normalises and which it refuses).
//
// Shadow makes an inspecting entry report instead of enforce: a request its methods or
// paths do not permit, or whose path is not normal, passes, and its decision says
// WOULD-DENY, so a policy author can replay windows before enforcing. What the enforcer
// refuses whatever the rule is still refused in shadow: a target that is not an origin-form
// path (or carries a fragment, or is over 4 KiB, or holds an undecodable escape), a Host
// header naming another host, an upgrade. [NewSpec] refuses Shadow on an entry without
// methods or paths, which would shadow nothing.
//
// Equivalent entries collapse (hosts compared case-insensitively, methods and paths as sets);
// one host given two different method or path sets is refused. An inspecting entry adds
// [EgressMethods] to the spec's required capabilities, and the router serves it only on a
// backend that declares each method in EgressMethodTokens and, for paths, EgressPaths.
type EgressRule struct {
	Host    string
	Methods []string // upper-case HTTP tokens; empty = every method
	Paths   []string // path patterns; empty = every path
	Shadow  bool     // report WOULD-DENY instead of refusing what Methods and Paths do not permit
	// Credentials the enforcer adds to this host's requests; the workload holds placeholders
	// ([EgressCredential]). Only on an inspecting entry.
	Credentials []EgressCredential
	Authority   string // opaque to the core; carried for the enforcer
}

// Hosts builds tunnel-only rules, the common allowlist.
func Hosts(hosts ...string) []EgressRule {
	rules := make([]EgressRule, len(hosts))
	for i, h := range hosts {
		rules[i] = EgressRule{Host: h}
	}
	return rules
}

// Narrows reports whether the rule asks for inspection: it restricts methods or paths.
func (r EgressRule) Narrows() bool { return len(r.Methods) > 0 || len(r.Paths) > 0 }

// Canonical is the rule's identity as text: the host alone for a tunnel-only rule (so the
// identity of every plain allowlist is its host list, as before rules existed), and the host
// followed by its sorted methods and paths for an inspecting one. It holds no comma and no
// two rules share one, so a comma-joined list of them is unambiguous. A shadow rule ends in
// " shadow", then a rule with credentials in " credentials=" and their variables, sorted and
// ';'-joined (never a secret: the variables are what a warm sandbox must already hold). A
// backend folds it into the names of what it builds, so a changed rule never reuses a warm
// sandbox.
func (r EgressRule) Canonical() string {
	if !r.Narrows() {
		return r.Host
	}
	c := r.Host + " methods=" + strings.Join(r.Methods, ";") + " paths=" + strings.Join(r.Paths, ";")
	if r.Shadow {
		c += " shadow"
	}
	if envs := EgressCredentialEnvs([]EgressRule{r}); len(envs) > 0 {
		c += " credentials=" + strings.Join(envs, ";")
	}
	return c
}

// EgressHosts returns the hosts of rules, in order.
func EgressHosts(rules []EgressRule) []string {
	hosts := make([]string, len(rules))
	for i, r := range rules {
		hosts[i] = r.Host
	}
	return hosts
}

// EgressIdentities returns the [EgressRule.Canonical] form of rules, in order.
func EgressIdentities(rules []EgressRule) []string {
	ids := make([]string, len(rules))
	for i, r := range rules {
		ids[i] = r.Canonical()
	}
	return ids
}

// Egress entry bounds.
const (
	maxEgressHost    = 253
	maxEgressMethod  = 32
	maxEgressPath    = 1024
	egressPathSuffix = "/**"
)

// CheckEgressRules refuses, with an [*InvalidArgumentError], any rule the grammar of
// [EgressRule] refuses. [NewSpec] runs it; a backend runs it again at acquire, since a
// spec's fields can be changed after NewSpec built it, and an entry with a comma would change
// the policy once the list is comma-joined for the enforcer.
func CheckEgressRules(rules []EgressRule) error {
	_, err := normalizeEgressRules(rules)
	return err
}

// normalizeEgressRules validates every entry (see [EgressRule]) and collapses equivalent
// ones, refusing one host given two different method or path sets.
func normalizeEgressRules(rules []EgressRule) ([]EgressRule, error) {
	seen := make(map[string]int, len(rules))
	out := make([]EgressRule, 0, len(rules))
	for _, r := range rules {
		if err := checkEgressHost(r.Host); err != nil {
			return nil, err
		}
		methods, err := normalizeMethods(r)
		if err != nil {
			return nil, err
		}
		paths, err := normalizePaths(r)
		if err != nil {
			return nil, err
		}
		r.Methods, r.Paths = methods, paths
		if r.Credentials, err = normalizeCredentials(r); err != nil {
			return nil, err
		}
		if r.Shadow && !r.Narrows() {
			return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
				"egress rule for %q is shadow but names no methods or paths: it would shadow nothing", r.Host)}
		}
		fold := strings.ToLower(r.Host)
		if i, ok := seen[fold]; ok {
			if err := sameNarrowing(out[i], r); err != nil {
				return nil, err
			}
			continue
		}
		seen[fold] = len(out)
		out = append(out, r)
	}
	if err := checkCredentialEnvs(out); err != nil {
		return nil, err
	}
	return out, nil
}

func sameNarrowing(a, b EgressRule) error {
	if !slices.Equal(a.Methods, b.Methods) {
		return &InvalidArgumentError{Reason: fmt.Sprintf(
			"egress allowlist names host %q twice with different methods (%s and %s)",
			b.Host, listText(a.Methods, "every method"), listText(b.Methods, "every method"))}
	}
	if len(a.Credentials) > 0 || len(b.Credentials) > 0 {
		return &InvalidArgumentError{Reason: fmt.Sprintf(
			"egress allowlist names host %q twice and gives it credentials: name it once", b.Host)}
	}
	if a.Shadow != b.Shadow {
		return &InvalidArgumentError{Reason: fmt.Sprintf(
			"egress allowlist names host %q twice, once in shadow and once enforcing", b.Host)}
	}
	if !slices.Equal(a.Paths, b.Paths) {
		return &InvalidArgumentError{Reason: fmt.Sprintf(
			"egress allowlist names host %q twice with different paths (%s and %s)",
			b.Host, listText(a.Paths, "every path"), listText(b.Paths, "every path"))}
	}
	return nil
}

// checkEgressHost refuses a host entry the grammar of [EgressRule] refuses.
func checkEgressHost(h string) error {
	reason := ""
	switch {
	case h == "":
		reason = "is empty"
	case len(h) > maxEgressHost:
		reason = fmt.Sprintf("is longer than %d octets", maxEgressHost)
	case strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		reason = "contains whitespace or a control byte"
	case strings.Contains(h, ","):
		reason = "contains a comma"
	case strings.Contains(h, "://"):
		reason = "contains '://' (name a host, not a URL)"
	case h == "*":
		reason = "is a bare '*', which would allow every name"
	case strings.Contains(h, ":"):
		reason = "contains ':': an IPv6 literal or a port (name a host; the port is always 443)"
	case looksLikeIPv4(h):
		reason = "looks like an IPv4 literal (name a host)"
	}
	if reason != "" {
		return &InvalidArgumentError{Reason: fmt.Sprintf("egress allowlist entry %q %s", h, reason)}
	}
	return nil
}

// looksLikeIPv4 reports a name a resolver or URL parser would read as an IPv4 address (its
// last label is a decimal or 0x-hex number, as in the WHATWG host parser), or a pattern made
// only of digits, dots and wildcards.
func looksLikeIPv4(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	if isNumber(labels[len(labels)-1]) {
		return true
	}
	return !strings.ContainsFunc(h, func(r rune) bool {
		return (r < '0' || r > '9') && r != '.' && r != '*' && r != '?'
	}) && strings.ContainsAny(h, "0123456789")
}

func isNumber(label string) bool {
	digits := "0123456789"
	if l := strings.ToLower(label); strings.HasPrefix(l, "0x") {
		label, digits = l[2:], "0123456789abcdef"
		if label == "" {
			return true // "0x" alone is the number zero to inet_aton and URL parsers
		}
	}
	return label != "" && strings.Trim(label, digits) == ""
}

func normalizeMethods(r EgressRule) ([]string, error) {
	if len(r.Methods) == 0 {
		return nil, nil
	}
	ms := make([]string, 0, len(r.Methods))
	for _, m := range r.Methods {
		if !isMethodToken(m) {
			return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
				"egress rule for %q has method %q: methods are upper-case HTTP tokens of 1 to %d bytes", r.Host, m, maxEgressMethod)}
		}
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return slices.Compact(ms), nil
}

// isMethodToken reports an RFC 9110 token with no lower-case letter.
func isMethodToken(m string) bool {
	if m == "" || len(m) > maxEgressMethod {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func normalizePaths(r EgressRule) ([]string, error) {
	if len(r.Paths) == 0 {
		return nil, nil
	}
	ps := make([]string, 0, len(r.Paths))
	for _, p := range r.Paths {
		if reason := pathPatternFault(p); reason != "" {
			return nil, &InvalidArgumentError{Reason: fmt.Sprintf("egress rule for %q has path %q: %s", r.Host, p, reason)}
		}
		ps = append(ps, encodedSlashUpper(p))
	}
	slices.Sort(ps)
	return slices.Compact(ps), nil
}

// pathPatternFault says what is wrong with a path pattern, or "" when nothing is.
func pathPatternFault(p string) string {
	switch {
	case p == "":
		return "a path pattern is empty"
	case len(p) > maxEgressPath:
		return fmt.Sprintf("a path pattern is longer than %d bytes", maxEgressPath)
	case p[0] != '/':
		return "a path pattern starts with '/'"
	case p == "/" || p == egressPathSuffix:
		return ""
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if f := segmentFault(s, i == len(segs)-1); f != "" {
			return f
		}
	}
	return ""
}

func segmentFault(s string, last bool) string {
	switch s {
	case "":
		return "empty segment ('//' or a trailing '/'); a prefix ends in '/**'"
	case ".", "..":
		return "'.' and '..' segments are refused"
	case "*":
		return ""
	case "**":
		if last {
			return ""
		}
		return "'**' is allowed only as the last segment"
	}
	pieces := strings.Split(encodedSlashUpper(s), EncodedSlash)
	for _, p := range pieces {
		if len(pieces) > 1 && (p == "" || p == "." || p == "..") {
			return "an encoded slash ('%2F') has an empty, '.' or '..' piece beside it"
		}
		if f := pieceFault(p); f != "" {
			return f
		}
	}
	return ""
}

func pieceFault(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-._~!$&'()+=:@", c) >= 0:
		case c == '*':
			return "'*' stands for a whole segment, never part of one"
		case c == '%':
			return "percent-encoding is refused but for '%2F': write the decoded path"
		case c == '?' || c == '#':
			return "a query or fragment is not part of a path pattern"
		default:
			return fmt.Sprintf("byte %q is not allowed in a path pattern", c)
		}
	}
	return ""
}

// EncodedSlash is how a normalised path, and a path pattern, spell a slash inside a segment.
const EncodedSlash = "%2F"

// encodedSlashUpper spells every "%2f" of s as [EncodedSlash].
func encodedSlashUpper(s string) string { return strings.ReplaceAll(s, "%2f", EncodedSlash) }

// MatchEgressPath reports whether path, a normalised request path without its query,
// matches pattern, one that [NewSpec] accepted: literal segments match themselves, `*`
// matches one non-empty segment without an encoded slash, and a final `**` matches zero or
// more segments. A normalised path is the request path split at its slashes, each segment
// percent-decoded, a slash decoded inside a segment spelled [EncodedSlash] again, joined
// by "/"; a trailing slash is an empty last segment, which only a final `**` matches.
func MatchEgressPath(pattern, path string) bool {
	if !strings.HasPrefix(path, "/") || !strings.HasPrefix(pattern, "/") {
		return false
	}
	if pattern == "/" {
		return path == "/"
	}
	pat, segs := strings.Split(pattern[1:], "/"), strings.Split(path[1:], "/")
	if path == "/" {
		segs = nil
	}
	for i, p := range pat {
		if p == "**" && i == len(pat)-1 {
			return true
		}
		if i >= len(segs) || segs[i] == "" {
			return false
		}
		// A server that decodes an encoded slash sees two segments where `*` stands for one.
		if p == "*" && strings.Contains(segs[i], EncodedSlash) || p != "*" && p != segs[i] {
			return false
		}
	}
	return len(segs) == len(pat)
}

func listText(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ",")
}
