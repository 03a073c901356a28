package proxy

import "strings"

// Match reports whether host is allowed by pattern (egress-and-reap.md §2.2): POSIX fnmatch
// of the lower-cased host against the lower-cased pattern, exactly as Python's
// fnmatch.fnmatchcase, with no pathname or leading-period rules. "*" matches any run of
// characters, "." included ("*.example.com" matches "a.b.example.com" but not
// "example.com"), "?" one character, "[seq]" and "[!seq]" one character in or out of a set
// with ranges; a "[" without a closing "]" is literal, and there is no escape character. A
// pattern without these is an exact, case-insensitive match. path.Match is not this: its "*"
// stops at "/" and it spells negation "^".
func Match(host, pattern string) bool {
	return compilePattern(pattern).match(strings.ToLower(host))
}

// pattern is one compiled allowlist entry.
type pattern []token

type tokenKind uint8

const (
	tokLiteral tokenKind = iota
	tokAny               // ?
	tokStar              // *
	tokClass             // [...]
)

type token struct {
	kind   tokenKind
	r      rune      // tokLiteral
	negate bool      // tokClass
	ranges [][2]rune // tokClass: inclusive ranges, single characters as r..r
}

// matches reports whether a one-character token accepts r.
func (t token) matches(r rune) bool {
	switch t.kind {
	case tokLiteral:
		return t.r == r
	case tokAny:
		return true
	case tokClass:
		in := false
		for _, rg := range t.ranges {
			if rg[0] <= r && r <= rg[1] {
				in = true
				break
			}
		}
		return in != t.negate
	}
	return false
}

// compilePattern lower-cases pat and compiles it with the rules of Python's
// fnmatch.translate.
func compilePattern(pat string) pattern {
	rs := []rune(strings.ToLower(pat))
	var p pattern
	for i := 0; i < len(rs); {
		c := rs[i]
		i++
		switch c {
		case '*':
			if len(p) == 0 || p[len(p)-1].kind != tokStar {
				p = append(p, token{kind: tokStar})
			}
		case '?':
			p = append(p, token{kind: tokAny})
		case '[':
			j := i
			if j < len(rs) && rs[j] == '!' {
				j++
			}
			if j < len(rs) && rs[j] == ']' {
				j++
			}
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j >= len(rs) {
				p = append(p, token{kind: tokLiteral, r: '['})
				continue
			}
			p = append(p, compileClass(rs[i:j]))
			i = j + 1
		default:
			p = append(p, token{kind: tokLiteral, r: c})
		}
	}
	return p
}

// compileClass compiles the text between "[" and "]" (never empty) the way fnmatch.translate
// does: a leading "!" negates; a "-" first or last is literal; ranges are cut at each "-"
// after the first character, with the scan resuming two characters past a cut ("a-c-e" is
// a..c, "-" and "e"); a reversed range is removed together with its two endpoints; an empty
// set matches nothing and an empty negated set any character.
func compileClass(stuff []rune) token {
	t := token{kind: tokClass}
	if stuff[0] == '!' {
		t.negate = true
		stuff = stuff[1:]
	}
	// The chunks between range-forming hyphens.
	var chunks [][]rune
	if indexRune(stuff, '-', 0) < 0 {
		chunks = [][]rune{stuff}
	} else {
		start, k := 0, 1
		for {
			k = indexRune(stuff, '-', k)
			if k < 0 {
				break
			}
			chunks = append(chunks, stuff[start:k])
			start = k + 1
			k += 3
		}
		if last := stuff[start:]; len(last) > 0 {
			chunks = append(chunks, last)
		} else {
			last := chunks[len(chunks)-1]
			chunks[len(chunks)-1] = append(append([]rune{}, last...), '-')
		}
		// Remove reversed ranges, from the end.
		for k := len(chunks) - 1; k > 0; k-- {
			prev, next := chunks[k-1], chunks[k]
			if len(prev) == 0 || len(next) == 0 || prev[len(prev)-1] <= next[0] {
				continue
			}
			merged := append(append([]rune{}, prev[:len(prev)-1]...), next[1:]...)
			chunks = append(chunks[:k-1], append([][]rune{merged}, chunks[k+1:]...)...)
		}
	}
	// Chunks joined by range hyphens, read left to right: a character, then "-" and another
	// make a range; every hyphen inside a chunk is literal.
	type item struct {
		r      rune
		hyphen bool // a range hyphen between chunks
	}
	var seq []item
	for k, c := range chunks {
		if k > 0 {
			seq = append(seq, item{hyphen: true})
		}
		for _, r := range c {
			seq = append(seq, item{r: r})
		}
	}
	for i := 0; i < len(seq); {
		if seq[i].hyphen { // cannot start the set; skip defensively
			i++
			continue
		}
		if i+2 < len(seq) && seq[i+1].hyphen && !seq[i+2].hyphen {
			if lo, hi := seq[i].r, seq[i+2].r; lo <= hi {
				t.ranges = append(t.ranges, [2]rune{lo, hi})
			}
			i += 3
			continue
		}
		t.ranges = append(t.ranges, [2]rune{seq[i].r, seq[i].r})
		i++
	}
	return t
}

func indexRune(rs []rune, r rune, from int) int {
	for i := from; i < len(rs); i++ {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

// match reports whether the whole of name matches p. Every token but "*" consumes exactly one
// character, so one backtracking point (the last star) suffices and the cost stays
// len(name)·len(p).
func (p pattern) match(name string) bool {
	rs := []rune(name)
	ti, ni := 0, 0
	starT, starN := -1, 0
	for ni < len(rs) {
		if ti < len(p) {
			switch t := p[ti]; {
			case t.kind == tokStar:
				starT, starN = ti, ni
				ti++
				continue
			case t.matches(rs[ni]):
				ti++
				ni++
				continue
			}
		}
		if starT < 0 {
			return false
		}
		ti = starT + 1
		starN++
		ni = starN
	}
	for ti < len(p) && p[ti].kind == tokStar {
		ti++
	}
	return ti == len(p)
}
