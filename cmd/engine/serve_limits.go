package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/mafsandbox/engine/docker"
)

// limitFlags are the operator's bounds on every workload: memory, CPUs and pids, which a
// spec may ask to narrow (sandbox.Resources) but never to exceed, and the capabilities given
// back after every one is dropped.
type limitFlags struct {
	memory, cpus, capAdd string
	pids                 int
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.memory, "memory", envOr("MAF_SANDBOX_MEMORY", ""), "memory each workload may use, as docker run --memory takes it (512m, 2g); a spec may ask for less, never more; empty: unbounded unless a spec asks (env MAF_SANDBOX_MEMORY)")
	fs.StringVar(&l.cpus, "cpus", envOr("MAF_SANDBOX_CPUS", ""), "CPUs each workload may use, as docker run --cpus takes it (0.5, 2); a spec may ask for less, never more; empty: unbounded unless a spec asks (env MAF_SANDBOX_CPUS)")
	fs.IntVar(&l.pids, "pids-limit", envInt("MAF_SANDBOX_PIDS_LIMIT", 512), "processes each workload may run at once; a spec may ask for fewer, never more (env MAF_SANDBOX_PIDS_LIMIT)")
	fs.StringVar(&l.capAdd, "cap-add", envOr("MAF_SANDBOX_CAP_ADD", ""), "comma-separated capabilities given back to every workload, which otherwise runs with none: any of "+
		strings.Join(docker.AddableCapabilities(), ", ")+"; any given withholds files_delete and reclaim and serves call-scoped sandboxes only (docs/operations.md) (env MAF_SANDBOX_CAP_ADD)")
}

// apply puts the bounds on cfg; a value that does not parse is an error naming its flag.
func (l *limitFlags) apply(cfg *docker.Config) error {
	if l.pids <= 0 {
		return fmt.Errorf("--pids-limit %d: a workload needs at least one process", l.pids)
	}
	cfg.PidsLimit, cfg.Memory = l.pids, l.memory
	if l.cpus != "" {
		n, err := strconv.ParseFloat(l.cpus, 64)
		if err != nil {
			return fmt.Errorf("--cpus %q: not a number", l.cpus)
		}
		cfg.CPUs = &n
	}
	for _, c := range strings.Split(l.capAdd, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cfg.CapAdd = append(cfg.CapAdd, c)
		}
	}
	return nil
}

// envInt is the integer in the environment variable name, or def when it is unset or not an
// integer (the flag's own parse then reports nothing: the default stands).
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(strings.TrimSpace(envOr(name, ""))); err == nil {
		return n
	}
	return def
}
