package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// EgressCredential is a secret the enforcer adds to requests to its rule's host, so that the
// workload never holds it. The workload gets a placeholder (worthless anywhere else) in the
// variable Env; on a request the rule passes whose method and path this credential also
// matches, the enforcer replaces the placeholder in the header Header by Secret
// (`Authorization: Bearer $GITHUB_TOKEN` in the workload becomes the real token on the wire).
// A request to another host, or one it does not match, goes out with the placeholder as sent.
//
// # Grammar
//
// It belongs to an inspecting [EgressRule] (the enforcer must terminate TLS to swap anything)
// whose Host is one exact name, never a pattern: with `api-*.example`, the workload would
// pick the name the secret is sent to. It is bound to a method list, its own or, when it
// names none, its rule's; an empty one (every method) is refused, and so is one naming TRACE
// or TRACK, which echo the request, secret and all, back to the workload.
// Header is a field name of 1 to 64 letters, digits and hyphens, never one that frames or
// routes the request (Host, Content-Length, Transfer-Encoding, Connection, Upgrade, TE,
// Trailer, Keep-Alive, Proxy-Authorization, Proxy-Connection). Env is an upper-case variable
// name (`[A-Z_][A-Z0-9_]*`, at most 128 bytes), not one the backend sets itself (the proxy and
// trust variables, PATH, HOME, anything starting MAF_SANDBOX), and unique in the spec. Secret
// is 1 to 8192 bytes of visible ASCII, space and tab (a header value: no line break). Methods
// and Paths narrow it with the grammar of [EgressRule]; empty: every request the rule passes.
type EgressCredential struct {
	Header  string
	Env     string
	Secret  Secret
	Methods []string
	Paths   []string
}

// Secret is a credential's value. It prints as [redacted] in every fmt verb, so a spec
// logged by mistake does not carry it.
type Secret string

// String hides the secret.
func (Secret) String() string { return "[redacted]" }

// GoString hides the secret.
func (Secret) GoString() string { return "[redacted]" }

// Credential bounds.
const (
	maxCredentialHeader = 64
	maxCredentialEnv    = 128
	maxCredentialSecret = 8192
)

// framingHeaders frame or route a request: a credential never sets them.
var framingHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te",
	"trailer", "keep-alive", "proxy-authorization", "proxy-connection"}

// reservedEnv are variables the backend sets on a workload itself.
var reservedEnv = []string{"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
	"NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE", "PATH", "HOME"}

// normalizeCredentials checks the credentials of r and sorts their methods and paths.
func normalizeCredentials(r EgressRule) ([]EgressCredential, error) {
	if len(r.Credentials) == 0 {
		return nil, nil
	}
	if !r.Narrows() {
		return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
			"egress rule for %q has a credential but inspects nothing: give it methods or paths (every path: [\"/**\"])", r.Host)}
	}
	if HostPattern(r.Host) {
		return nil, &InvalidArgumentError{Reason: fmt.Sprintf(
			"egress rule for %q has a credential but its host is a pattern: a credential binds to one exact host name", r.Host)}
	}
	out := make([]EgressCredential, 0, len(r.Credentials))
	for _, c := range r.Credentials {
		reason := credentialFault(c)
		if reason == "" {
			reason = credentialMethodsFault(c, r)
		}
		if reason != "" {
			return nil, &InvalidArgumentError{Reason: fmt.Sprintf("egress credential for %q (variable %q): %s", r.Host, c.Env, reason)}
		}
		methods, err := normalizeMethods(EgressRule{Host: r.Host, Methods: c.Methods})
		if err != nil {
			return nil, err
		}
		paths, err := normalizePaths(EgressRule{Host: r.Host, Paths: c.Paths})
		if err != nil {
			return nil, err
		}
		c.Methods, c.Paths = methods, paths
		out = append(out, c)
	}
	return out, nil
}

// credentialFault says what is wrong with c's header, variable or secret, or "".
func credentialFault(c EgressCredential) string {
	switch {
	case c.Header == "" || len(c.Header) > maxCredentialHeader || strings.ContainsFunc(c.Header, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-'
	}):
		return fmt.Sprintf("header %q is not a field name of 1 to %d letters, digits and hyphens", c.Header, maxCredentialHeader)
	case slices.Contains(framingHeaders, strings.ToLower(c.Header)):
		return fmt.Sprintf("header %q frames or routes the request", c.Header)
	case !envName(c.Env):
		return fmt.Sprintf("the variable is not an upper-case name of 1 to %d bytes ([A-Z_][A-Z0-9_]*)", maxCredentialEnv)
	case slices.Contains(reservedEnv, c.Env) || strings.HasPrefix(c.Env, "MAF_SANDBOX"):
		return "the variable is one the backend sets itself"
	case c.Secret == "" || len(c.Secret) > maxCredentialSecret:
		return fmt.Sprintf("the secret is empty or longer than %d bytes", maxCredentialSecret)
	case strings.ContainsFunc(string(c.Secret), func(r rune) bool { return (r < 0x20 || r > 0x7e) && r != '\t' }):
		return "the secret holds a byte a header value cannot (a line break, a control or non-ASCII byte)"
	}
	return ""
}

// HostPattern reports whether a host entry is an fnmatch pattern (it holds *, ? or [)
// rather than one exact name.
func HostPattern(host string) bool { return strings.ContainsAny(host, "*?[") }

// EchoMethod reports TRACE and TRACK, which answer with the request they received, headers
// included: a credential is never bound to them, and the enforcer never swaps one into them.
func EchoMethod(m string) bool { return m == "TRACE" || m == "TRACK" }

// credentialMethodsFault says what is wrong with the methods c is bound to in r, or "".
func credentialMethodsFault(c EgressCredential, r EgressRule) string {
	methods := c.Methods
	if len(methods) == 0 {
		methods = r.Methods
	}
	if len(methods) == 0 {
		return "no method list, its own or its rule's: a credential is bound to the methods it may be sent with"
	}
	for _, m := range methods {
		if EchoMethod(m) {
			return fmt.Sprintf("method %s echoes the request, secret and all, back to the workload", m)
		}
	}
	return ""
}

func envName(s string) bool {
	if s == "" || len(s) > maxCredentialEnv || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' })
}

// EgressCredentialEnvs returns the variables of every credential of rules, sorted.
func EgressCredentialEnvs(rules []EgressRule) []string {
	var envs []string
	for _, r := range rules {
		for _, c := range r.Credentials {
			envs = append(envs, c.Env)
		}
	}
	slices.Sort(envs)
	return envs
}

// checkCredentialEnvs refuses two credentials naming one variable.
func checkCredentialEnvs(rules []EgressRule) error {
	envs := EgressCredentialEnvs(rules)
	for i := 1; i < len(envs); i++ {
		if envs[i] == envs[i-1] {
			return &InvalidArgumentError{Reason: fmt.Sprintf("two egress credentials name the variable %q", envs[i])}
		}
	}
	return nil
}
