package placement

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// The entry of (key, kind) is named "=<scope>.=<thread>.=<agent>.=<call>.=<kind>", each part
// base64url without padding behind '='. Any byte string becomes letters, digits, '-' and '_',
// which KV keys allow; the '=' keeps an empty part a non-empty token; and the scope and thread
// lead, so that one conversation's entries match one filter.

var enc = base64.RawURLEncoding

func token(s string) string { return "=" + enc.EncodeToString([]byte(s)) }

// EntryKey is the bucket key of (key, kind).
func EntryKey(key sandbox.Key, kind string) string {
	return strings.Join([]string{token(key.Scope), token(key.ThreadID), token(key.AgentID), token(key.CallID), token(kind)}, ".")
}

// scopeFilter matches the entries of every sandbox of (scope, thread).
func scopeFilter(scope, thread string) string {
	return token(scope) + "." + token(thread) + ".>"
}

// keyFilter matches the entries of every kind of key's sandboxes.
func keyFilter(key sandbox.Key) string {
	return strings.Join([]string{token(key.Scope), token(key.ThreadID), token(key.AgentID), token(key.CallID), "*"}, ".")
}

// ParseEntryKey is the inverse of [EntryKey].
func ParseEntryKey(k string) (sandbox.Key, string, error) {
	parts := strings.Split(k, ".")
	if len(parts) != 5 {
		return sandbox.Key{}, "", fmt.Errorf("placement: entry key %q has %d parts, want 5", k, len(parts))
	}
	var out [5]string
	for i, p := range parts {
		if !strings.HasPrefix(p, "=") {
			return sandbox.Key{}, "", fmt.Errorf("placement: entry key %q: part %d lacks its '='", k, i)
		}
		b, err := enc.DecodeString(p[1:])
		if err != nil {
			return sandbox.Key{}, "", fmt.Errorf("placement: entry key %q: part %d: %w", k, i, err)
		}
		out[i] = string(b)
	}
	return sandbox.Key{Scope: out[0], ThreadID: out[1], AgentID: out[2], CallID: out[3]}, out[4], nil
}
