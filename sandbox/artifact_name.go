package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxArtifactNameBytes is the longest artifact name, in UTF-8 bytes.
const MaxArtifactNameBytes = 255

// ValidateArtifactName checks the narrow invariant every output path and every delivered name
// must hold, rule by rule in this order: non-empty; no backslash; not starting with "/"; no
// ".." segment; no empty or "." segment ("a//b", "a/./b", a trailing "/"); no ASCII control
// character 0–31 (DEL is allowed); valid UTF-8; at most [MaxArtifactNameBytes] bytes. The first
// rule broken fails with [*ArtifactNameInvalidError] naming it.
//
// It checks the spelling given: validate the name actually delivered, since NFC can lengthen
// a name.
func ValidateArtifactName(name string) error {
	if rule := brokenNameRule(name); rule != "" {
		return &ArtifactNameInvalidError{Name: name, Rule: rule}
	}
	return nil
}

// brokenNameRule returns the first rule name breaks, or "".
func brokenNameRule(name string) string {
	if name == "" {
		return "it is empty"
	}
	if strings.Contains(name, `\`) {
		return `it contains a backslash ("\" is not a separator)`
	}
	if strings.HasPrefix(name, "/") {
		return `it starts with "/" (names are relative)`
	}
	segments := strings.Split(name, "/")
	for _, seg := range segments {
		if seg == ".." {
			return `it has a ".." segment`
		}
	}
	for _, seg := range segments {
		if seg == "" || seg == "." {
			return `it has an empty or "." segment`
		}
	}
	if codes := controlCodes(name); len(codes) > 0 {
		return "it contains ASCII control characters (codes " + strings.Join(codes, ", ") + ")"
	}
	if !utf8.ValidString(name) {
		return "it is not valid UTF-8"
	}
	if len(name) > MaxArtifactNameBytes {
		return fmt.Sprintf("it is %d bytes long, above the %d-byte limit", len(name), MaxArtifactNameBytes)
	}
	return ""
}

// controlCodes lists, in ascending order and once each, the ASCII control codes 0–31 in name.
// Such bytes never occur inside a multi-byte UTF-8 sequence, so scanning bytes is exact.
func controlCodes(name string) []string {
	var seen [32]bool
	for i := 0; i < len(name); i++ {
		if name[i] < 32 {
			seen[name[i]] = true
		}
	}
	var codes []string
	for c, ok := range seen {
		if ok {
			codes = append(codes, strconv.Itoa(c))
		}
	}
	return codes
}

// PortableName rewrites name so that every segment is a legal file name on Windows as well as
// POSIX. It is opt-in and never applied automatically. Per "/"-separated segment: each of
// < > : " | ? * and each ASCII control character 0–31 becomes "_"; trailing dots and spaces are
// stripped; when the part before the first "." is, upper-cased, a reserved device name (CON,
// PRN, AUX, NUL, COM1–COM9, LPT1–LPT9, or COM/LPT followed by ¹, ² or ³), "_" is appended to
// that part; an empty segment becomes "_".
func PortableName(name string) string {
	segments := strings.Split(name, "/")
	for i, seg := range segments {
		segments[i] = portableSegment(seg)
	}
	return strings.Join(segments, "/")
}

func portableSegment(seg string) string {
	b := []byte(seg)
	for i, c := range b {
		if c < 32 || strings.IndexByte(`<>:"|?*`, c) >= 0 {
			b[i] = '_'
		}
	}
	seg = strings.TrimRight(string(b), ". ")
	stem, rest, hasDot := strings.Cut(seg, ".")
	if reservedDeviceName(strings.ToUpper(stem)) {
		seg = stem + "_"
		if hasDot {
			seg += "." + rest
		}
	}
	if seg == "" {
		return "_"
	}
	return seg
}

// reservedDeviceName reports whether the upper-cased stem names a Windows device.
func reservedDeviceName(stem string) bool {
	switch stem {
	case "CON", "PRN", "AUX", "NUL":
		return true
	}
	for _, prefix := range []string{"COM", "LPT"} {
		suffix, ok := strings.CutPrefix(stem, prefix)
		if !ok {
			continue
		}
		switch suffix {
		case "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
			return true
		}
	}
	return false
}
