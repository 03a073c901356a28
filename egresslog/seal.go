package egresslog

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// The seal line: before an allowlisted sandbox's internal network is first handed out, the
// proxy — trusted code of ours, on that network's own segment, with no outbound leg yet and
// the workload's constraints — tries to reach the host, and writes one line saying how it
// went. The engine connects the proxy's outbound leg only after reading "sealed".
//
//	seal: sealed after <n> attempts
//	seal: breach: <what answered>
//
// Neither line is a decision, and [ParseLog] skips both.

// SealMarker starts the seal line.
const SealMarker = "seal: "

const (
	sealedWord = "sealed after "
	breachWord = "breach: "
)

// FormatSealed returns the line of a probe that reached nothing in attempts tries.
func FormatSealed(attempts int) string {
	return SealMarker + sealedWord + strconv.Itoa(attempts) + " attempts\n"
}

// FormatBreach returns the line of a probe that something answered; what says what, on one
// line (line breaks are replaced).
func FormatBreach(what string) string {
	return SealMarker + breachWord + strings.NewReplacer("\n", " ", "\r", " ").Replace(what) + "\n"
}

// SealVerdict is what a proxy's log says about its network's seal.
type SealVerdict int

const (
	// SealUnknown: no seal line yet.
	SealUnknown SealVerdict = iota
	// Sealed: the probe reached nothing.
	Sealed
	// SealBreached: something answered; the detail says what.
	SealBreached
)

// ParseSeal finds the seal line in a proxy's log (the engine's timestamps may precede it) and
// returns its verdict, with the breach's detail or the attempt count's text.
func ParseSeal(log []byte) (SealVerdict, string) {
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, SealMarker)
		if i < 0 {
			continue
		}
		rest := line[i+len(SealMarker):]
		switch {
		case strings.HasPrefix(rest, sealedWord):
			return Sealed, strings.TrimPrefix(rest, sealedWord)
		case strings.HasPrefix(rest, breachWord):
			return SealBreached, strings.TrimPrefix(rest, breachWord)
		}
	}
	return SealUnknown, ""
}
