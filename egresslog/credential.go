package egresslog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// Credential is one credential as the proxy gets it: on requests to Host (an inspecting
// rule's host, one exact name) whose method is one of Methods (never empty: the credential's
// own list, or its rule's) and whose path matches, occurrences of Placeholder in the header
// Header become Secret.
type Credential struct {
	Host        string   `json:"host"`
	Header      string   `json:"header"`
	Placeholder string   `json:"placeholder"`
	Secret      string   `json:"secret"`
	Methods     []string `json:"methods,omitempty"`
	Paths       []string `json:"paths,omitempty"`
}

// MinPlaceholder is the shortest placeholder the proxy accepts: a shorter one could occur
// in a header by chance.
const MinPlaceholder = 24

// FormatCredentials is the value of [EnvCredentials] for the credentials of rules, each
// workload variable's placeholder given by placeholder; "" when there are none.
func FormatCredentials(rules []sandbox.EgressRule, placeholder func(env string) string) (string, error) {
	var out []Credential
	for _, r := range rules {
		for _, c := range r.Credentials {
			methods := c.Methods
			if len(methods) == 0 {
				methods = r.Methods
			}
			out = append(out, Credential{Host: r.Host, Header: c.Header, Placeholder: placeholder(c.Env),
				Secret: string(c.Secret), Methods: methods, Paths: c.Paths})
		}
	}
	if len(out) == 0 {
		return "", nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("%w: encode credentials: %w", ErrInvalidInspect, err)
	}
	return string(b), nil
}

// ParseCredentials reads [EnvCredentials]'s value. It fails with [ErrInvalidInspect] for a
// value that is not that form or a credential the grammar refuses (a host pattern, no
// method list, TRACE); the error never quotes the value, which holds secrets.
func ParseCredentials(s string) ([]Credential, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var cs []Credential
	if err := json.Unmarshal([]byte(s), &cs); err != nil {
		return nil, fmt.Errorf("%w: credentials are not a JSON array of credentials", ErrInvalidInspect)
	}
	for i, c := range cs {
		if len(c.Placeholder) < MinPlaceholder || strings.Contains(c.Secret, c.Placeholder) {
			return nil, fmt.Errorf("%w: credential %d: placeholder shorter than %d bytes or inside its secret", ErrInvalidInspect, i, MinPlaceholder)
		}
		rule := sandbox.EgressRule{Host: c.Host, Paths: []string{"/**"}, Credentials: []sandbox.EgressCredential{{
			Header: c.Header, Env: "X", Secret: sandbox.Secret(c.Secret), Methods: c.Methods, Paths: c.Paths}}}
		if err := sandbox.CheckEgressRules([]sandbox.EgressRule{rule}); err != nil {
			return nil, fmt.Errorf("%w: credential %d for %q: host, header, secret, methods or paths refused", ErrInvalidInspect, i, c.Host)
		}
	}
	return cs, nil
}
