package label

import (
	"encoding/base64"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mafsandbox/engine/sandbox"
)

// KeyBudget is the largest encoded attribution, in bytes, inclusive.
const KeyBudget = 4096

// EncodeKey returns the value of [KeyV1] for key (egress-and-reap.md §3.5): the JSON
// array [Scope, ThreadID, AgentID, CallID] exactly as Python's json.dumps writes it with its
// defaults — ", " between elements, every code point outside 0x20–0x7E escaped (\n, \r, \t, \b,
// \f by name, the rest as lower-case \uXXXX, UTF-16 surrogate pairs above U+FFFF), `"` and `\`
// escaped, "/" not — then URL-safe base64 with "=" padding. The value holds only
// [A-Za-z0-9_=-], so it is byte-identical to the reference backend's label for the same key.
//
// ok is false, and value empty, when the key cannot be encoded: a component is not valid UTF-8,
// or the encoding is longer than [KeyBudget]. The proxy is then still created, with the
// label present and empty, and the caller logs a warning saying the key "exceeds the 4096-byte
// attribution limit".
func EncodeKey(key sandbox.Key) (value string, ok bool) {
	fields := [4]string{key.Scope, key.ThreadID, key.AgentID, key.CallID}
	var b strings.Builder
	b.WriteByte('[')
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		if !writeASCIIJSONString(&b, f) {
			return "", false
		}
		// 4 bytes of base64 per 3 of JSON: stop early rather than encode a megabyte.
		if base64.URLEncoding.EncodedLen(b.Len()) > KeyBudget {
			return "", false
		}
	}
	b.WriteByte(']')
	value = base64.URLEncoding.EncodeToString([]byte(b.String()))
	if len(value) > KeyBudget {
		return "", false
	}
	return value, true
}

// writeASCIIJSONString writes s as a JSON string in Python's ensure_ascii form. It returns
// false when s is not valid UTF-8.
func writeASCIIJSONString(b *strings.Builder, s string) bool {
	const hex = "0123456789abcdef"
	u := func(r rune) {
		b.WriteString(`\u`)
		b.WriteByte(hex[r>>12&0xf])
		b.WriteByte(hex[r>>8&0xf])
		b.WriteByte(hex[r>>4&0xf])
		b.WriteByte(hex[r&0xf])
	}
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		i += size
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= 0x20 && r <= 0x7e:
			b.WriteByte(byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			u(hi)
			u(lo)
		default:
			u(r)
		}
	}
	b.WriteByte('"')
	return true
}

// DecodeKey reads a non-empty [KeyV1] value: strict, padded URL-safe base64 of a
// JSON array of exactly four strings, in any valid JSON form (the reference's or another
// writer's). ok is false for anything else.
func DecodeKey(value string) (key sandbox.Key, ok bool) {
	// Go's decoder skips CR and LF even in strict mode; the label alphabet has neither.
	for i := 0; i < len(value); i++ {
		c := value[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '=') {
			return key, false
		}
	}
	raw, err := base64.URLEncoding.Strict().DecodeString(value)
	if err != nil || !utf8.Valid(raw) {
		return key, false
	}
	fields, ok := parseStringArray(string(raw))
	if !ok || len(fields) != 4 {
		return key, false
	}
	return sandbox.Key{Scope: fields[0], ThreadID: fields[1], AgentID: fields[2], CallID: fields[3]}, true
}

// parseStringArray parses s, which must be valid UTF-8, as one JSON array whose elements are
// all strings, with surrounding JSON white space allowed. A lone UTF-16 surrogate escape is
// refused: it names no character a key can hold.
func parseStringArray(s string) ([]string, bool) {
	p := jsonParser{s: s}
	p.space()
	if !p.take('[') {
		return nil, false
	}
	var out []string
	p.space()
	if p.take(']') {
		p.space()
		return out, p.i == len(p.s)
	}
	for {
		p.space()
		v, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		p.space()
		if p.take(']') {
			break
		}
		if !p.take(',') {
			return nil, false
		}
	}
	p.space()
	return out, p.i == len(p.s)
}

type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *jsonParser) take(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) str() (string, bool) {
	if !p.take('"') {
		return "", false
	}
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b.WriteByte(c)
			p.i++
			continue
		}
		p.i++ // the backslash
		if p.i >= len(p.s) {
			return "", false
		}
		e := p.s[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by an escaped low one names a character.
				if r >= 0xdc00 || !strings.HasPrefix(p.s[p.i:], `\u`) {
					return "", false
				}
				p.i += 2
				lo, ok := p.hex4()
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, lo); r == utf8.RuneError {
					return "", false
				}
			}
			b.WriteRune(r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	p.i += 4
	return r, true
}
