package dockertest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

const (
	// LabelSession is the label key whose value, [Session], names one go test run.
	LabelSession = "maf-sandbox-test.session"
	// LabelProcess is the label key whose value, [Process], names one test binary of that
	// run. Test binaries of several packages run at once in one session, so a binary sweeps
	// only what carries its own process label, never what another package is still using.
	LabelProcess = "maf-sandbox-test.process"
)

// Session returns the id of the current go test run, 12 hex digits: a hash of the parent
// process's pid and start time. go test starts every package's test binary itself, so all
// packages of one run share the id and the next run gets another (the start time tells a
// reused pid apart).
func Session() string { return procID(os.Getppid()) }

// Process returns the id of this test binary, built as [Session] is from its own pid and
// start time.
func Process() string { return procID(os.Getpid()) }

// Labels returns the labels every object a test creates must carry: [LabelSession] and
// [LabelProcess] with their values.
func Labels() map[string]string {
	return map[string]string{LabelSession: Session(), LabelProcess: Process()}
}

// LabelArgs returns [Labels] as docker CLI flags ("--label", "key=value", ...), for docker
// create, run and network create.
func LabelArgs() []string {
	var args []string
	for k, v := range Labels() {
		args = append(args, k+"="+v)
	}
	sort.Strings(args)
	out := make([]string, 0, 2*len(args))
	for _, a := range args {
		out = append(out, "--label", a)
	}
	return out
}

// procID returns 12 hex digits of the sha256 of pid and its start time. Without /proc (not
// Linux) it hashes the pid alone.
func procID(pid int) string {
	key := strconv.Itoa(pid)
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if start, err := startTime(string(stat)); err == nil {
			key += "-" + start
		}
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:12]
}

// startTime returns field 22, starttime, of a /proc/<pid>/stat line. Field 2 is the command
// name in parentheses, which may itself hold spaces and parentheses, so fields are counted
// from the last ")".
func startTime(stat string) (string, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", errors.New("parse stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("parse stat: %d fields after the command name, want at least 20", len(f))
	}
	return f[19], nil
}
