package proxy

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/mafsandbox/engine/sandbox"
)

// maxRequestPath bounds the raw path (query excluded) of an inspected request; longer is
// refused.
const maxRequestPath = 4096

// pathClass is what the enforcer makes of a request target's path.
type pathClass uint8

const (
	// pathNormal is asked of the rule.
	pathNormal pathClass = iota
	// pathNotNormal is one no rule permits, since a server may read it as another path than
	// the one matched: denied, or passed as WOULD-DENY under a shadow rule.
	pathNotNormal
	// pathMalformed is refused whatever the rule: the decision log and the upstream request
	// could not carry it as the workload sent it.
	pathMalformed
)

// requestPath reads an origin-form request target. It returns the normalised path
// ([sandbox.MatchEgressPath]: each segment percent-decoded, a slash decoded inside one
// spelled %2F, a trailing slash kept as an empty last segment), the raw path as sent (query
// excluded), and the path's class.
//
// Malformed: not starting with '/', a fragment, longer than maxRequestPath, an escape that
// does not decode. Not normal, in any segment once decoded: empty but last ('//'); '.' or
// '..', also before a ';' (a server that drops path parameters reads "..;" as ".."); an
// encoded slash with an empty, '.' or '..' piece beside it (a server that decodes it would
// climb); a backslash (a separator to some servers), a control byte or NUL; bytes that are
// not UTF-8 (an overlong '.' or '/'); an escape left after decoding (double encoding of
// '.', '/', '\' or NUL).
func requestPath(target string) (path, raw string, class pathClass) {
	raw, _, _ = strings.Cut(target, "?")
	if !strings.HasPrefix(raw, "/") || strings.Contains(target, "#") || len(raw) > maxRequestPath {
		return "", raw, pathMalformed
	}
	segs := strings.Split(raw[1:], "/")
	var b strings.Builder
	class = pathNormal
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", raw, pathMalformed
		}
		if !normalSegment(d, i == len(segs)-1) {
			class = pathNotNormal
		}
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(d, "/", sandbox.EncodedSlash))
	}
	return b.String(), raw, class
}

// normalSegment reports whether d, one decoded segment, is normal; last says it ends the
// path, where it may be empty (a trailing slash).
func normalSegment(d string, last bool) bool {
	if d == "" {
		return last
	}
	if !utf8.ValidString(d) || strings.ContainsFunc(d, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return false
	}
	// Escapes left once decoded spell a dot, a slash, a backslash or NUL to a server that
	// decodes twice.
	lower := strings.ToLower(d)
	for _, enc := range []string{"%2e", "%2f", "%5c", "%00"} {
		if strings.Contains(lower, enc) {
			return false
		}
	}
	pieces := strings.Split(d, "/")
	for _, p := range pieces {
		if len(pieces) > 1 && p == "" || dotSegment(p) {
			return false
		}
	}
	return true
}

// dotSegment reports '.' or '..', with or without path parameters after a ';'.
func dotSegment(s string) bool {
	s, _, _ = strings.Cut(s, ";")
	return s == "." || s == ".."
}

// loggable is a raw path the decision log accepts: bytes outside 0x21–0x7E become '?', and
// a path that does not start with '/' gets one.
func loggable(raw string) string {
	b := []byte(raw)
	for i, c := range b {
		if c < 0x21 || c > 0x7e {
			b[i] = '?'
		}
	}
	if len(b) == 0 || b[0] != '/' {
		return "/" + string(b)
	}
	return string(b)
}
