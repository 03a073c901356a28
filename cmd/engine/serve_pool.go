package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mafsandbox/engine/actors"
)

// poolFlags are serve's warm pool settings (docs/operations.md, "The warm pool"): off unless
// --warm-pool names an image.
type poolFlags struct {
	sizes   warmPoolFlag
	maxWait time.Duration
	envErr  error // a bad MAF_SANDBOX_WARM_POOL, returned by check
}

func (p *poolFlags) register(fs *flag.FlagSet) {
	p.sizes = warmPoolFlag{}
	if env := os.Getenv("MAF_SANDBOX_WARM_POOL"); env != "" {
		for _, one := range strings.Split(env, ",") {
			if err := p.sizes.Set(strings.TrimSpace(one)); err != nil && p.envErr == nil {
				p.envErr = fmt.Errorf("MAF_SANDBOX_WARM_POOL: %w", err)
			}
		}
	}
	fs.Var(p.sizes, "warm-pool", "IMAGE=N: keep N closed sandboxes of IMAGE started ahead of demand; repeatable; off by default (env MAF_SANDBOX_WARM_POOL, comma-separated)")
	fs.DurationVar(&p.maxWait, "warm-pool-max-wait", envDuration("MAF_SANDBOX_WARM_POOL_MAX_WAIT", actors.DefaultPoolMaxWait),
		"a warm pool member that waited this long for a key is replaced (env MAF_SANDBOX_WARM_POOL_MAX_WAIT)")
}

// check refuses what the environment gave that a flag would have refused.
func (p *poolFlags) check() error { return p.envErr }

// options are the backend options of the pools asked for; none when none was.
func (p *poolFlags) options() []actors.Option {
	if len(p.sizes) == 0 {
		return nil
	}
	images := make([]string, 0, len(p.sizes))
	for image := range p.sizes {
		images = append(images, image)
	}
	sort.Strings(images)
	opts := []actors.Option{actors.WithWarmPoolMaxWait(p.maxWait)}
	for _, image := range images {
		opts = append(opts, actors.WithWarmPool(image, p.sizes[image]))
	}
	return opts
}

// warmPoolFlag collects repeated --warm-pool IMAGE=N flags. The size follows the last "=",
// so an image reference keeps any "=" of its own.
type warmPoolFlag map[string]int

func (f warmPoolFlag) String() string {
	parts := make([]string, 0, len(f))
	for image, n := range f {
		parts = append(parts, image+"="+strconv.Itoa(n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (f warmPoolFlag) Set(s string) error {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 {
		return fmt.Errorf("warm pool %q is not IMAGE=N", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return fmt.Errorf("warm pool %q: N must be a whole number of at least zero", s)
	}
	f[s[:i]] = n
	return nil
}
