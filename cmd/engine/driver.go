package main

import (
	"errors"
	"fmt"
	"strings"
)

// envDriver is the variable the daemon-driving verbs refuse, as they refuse --driver.
const envDriver = "MAF_SANDBOX_DRIVER"

// errDriverGone is the refusal of a --driver flag or of envDriver: the engine has one driver.
var errDriverGone = errors.New("the engine has one driver, the Docker Engine API, which reaches every endpoint " +
	"a docker context names: unix sockets, tcp:// with the context's TLS material, and ssh:// through " +
	`"docker system dial-stdio" on the remote host`)

// drivesTheDaemon are the verbs that refuse --driver and envDriver.
var drivesTheDaemon = map[string]bool{"serve": true, "reap": true, "bench": true}

// refuseDriver refuses, for a verb that drives the daemon, a --driver flag in args (any
// spelling, before a "--") or envDriver set in the environment (lookup), saying how the
// engine reaches the daemon, so that a deployment that passes either learns what to drop
// instead of meeting "flag provided but not defined" or a setting silently ignored.
func refuseDriver(verb string, args []string, lookup func(string) (string, bool)) error {
	if !drivesTheDaemon[verb] {
		return nil
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "driver" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		return fmt.Errorf("%s: --driver %s is refused: %w; remove --driver", verb, value, errDriverGone)
	}
	if v, ok := lookup(envDriver); ok && v != "" {
		return fmt.Errorf("%s: %s=%s is refused: %w; unset %s", verb, envDriver, v, errDriverGone, envDriver)
	}
	return nil
}
