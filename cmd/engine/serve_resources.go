package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/mafsandbox/engine/docker"
)

// resourceFlags are the operator's bounds on every workload: memory, CPUs and pids, which a
// spec may ask to narrow (sandbox.Resources) but never to exceed, and the capabilities given
// back after every one is dropped.
type resourceFlags struct {
	memory, cpus, capAdd string
	pids                 int
	envNumbers
}

func (l *resourceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.memory, "memory", envOr("MAF_SANDBOX_MEMORY", ""), "memory each workload may use, as docker run --memory takes it (512m, 2g); a spec may ask for less, never more; empty: unbounded unless a spec asks (env MAF_SANDBOX_MEMORY)")
	fs.StringVar(&l.cpus, "cpus", envOr("MAF_SANDBOX_CPUS", ""), "CPUs each workload may use, as docker run --cpus takes it (0.5, 2); a spec may ask for less, never more; empty: unbounded unless a spec asks (env MAF_SANDBOX_CPUS)")
	fs.IntVar(&l.pids, "pids-limit", l.envInt("MAF_SANDBOX_PIDS_LIMIT", 512), "processes each workload may run at once; a spec may ask for fewer, never more (env MAF_SANDBOX_PIDS_LIMIT)")
	fs.StringVar(&l.capAdd, "cap-add", envOr("MAF_SANDBOX_CAP_ADD", ""), "comma-separated capabilities given back to every workload, which otherwise runs with none: any of "+
		strings.Join(docker.AddableCapabilities(), ", ")+"; any given withholds files_delete and reclaim and serves call-scoped sandboxes only (docs/operations.md) (env MAF_SANDBOX_CAP_ADD)")
}

// apply puts the bounds on cfg; a value that does not parse is an error naming its flag.
func (l *resourceFlags) apply(cfg *docker.Config) error {
	if l.envErr != nil {
		return l.envErr
	}
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
