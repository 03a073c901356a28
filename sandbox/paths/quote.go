package paths

import "strings"

// QuoteArgv joins argv into one POSIX shell word list with the semantics of Python's
// shlex.join (protocol §4.3), so that each element reaches the program as exactly one
// argument, unaltered: see [Quote]. An unquoted join is a command injection.
func QuoteArgv(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = Quote(a)
	}
	return strings.Join(words, " ")
}

// Quote quotes one shell word like Python's shlex.quote: a word made only of
// [A-Za-z0-9@%+=:,./_-] stays bare, the empty word becomes a pair of single quotes, and
// anything else is wrapped in single quotes with each single quote inside written as '"'"'.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// unsafe reports a rune outside shlex's safe set.
func unsafe(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("@%+=:,./_-", r)
}
