package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/mafsandbox/engine/placement"
	"github.com/mafsandbox/engine/service"
)

// placementFlags are serve's cluster placement settings (docs/operations.md, "N hosts").
type placementFlags struct {
	on       bool
	bucket   string
	replicas int
	lease    time.Duration
}

func (p *placementFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&p.on, "placement", envBool("MAF_SANDBOX_PLACEMENT"), "record sandbox ownership in a JetStream KV bucket, so that engines sharing NATS hold one sandbox per key (env MAF_SANDBOX_PLACEMENT=1)")
	fs.StringVar(&p.bucket, "placement-bucket", envOr("MAF_SANDBOX_PLACEMENT_BUCKET", placement.DefaultBucket), "the placement bucket (env MAF_SANDBOX_PLACEMENT_BUCKET)")
	fs.IntVar(&p.replicas, "placement-replicas", 1, "JetStream replicas of the placement bucket when this engine creates it; 3 on a 3-node cluster")
	fs.DurationVar(&p.lease, "placement-lease", envDuration("MAF_SANDBOX_PLACEMENT_LEASE", placement.DefaultLease), "how long a sandbox's claim holds unless renewed (env MAF_SANDBOX_PLACEMENT_LEASE)")
}

// open opens the placement store for engine on nc, recording the daemon's identity in its
// entries, and returns the service options that use it and announce the engine in the members
// bucket (TTL: the lease).
func (p *placementFlags) open(ctx context.Context, nc *nats.Conn, engine string, ids engineIdentity, log *zap.Logger) (
	*placement.Store, []service.Option, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: placement: %w", err)
	}
	opts := []placement.Option{placement.WithLogger(log.Named("placement")), placement.WithBucket(p.bucket),
		placement.WithReplicas(p.replicas), placement.WithLease(p.lease)}
	daemon := ""
	if id, err := ids.EngineID(ctx); err == nil {
		daemon = id
		opts = append(opts, placement.WithDaemon(id))
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := placement.New(octx, js, engine, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: placement: %w", err)
	}
	members, err := placement.NewMembers(octx, js, placement.WithReplicas(p.replicas), placement.WithLease(p.lease))
	if err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("serve: placement: %w", err)
	}
	return store, []service.Option{service.WithPlacement(store), service.WithMembers(members, daemon)}, nil
}

// envBool is true when the variable is "1" or "true".
func envBool(name string) bool { return envBoolOr(name, false) }

// envBoolOr is the variable as a boolean ("1" or "true", "0" or "false"), else def.
func envBoolOr(name string, def bool) bool {
	switch os.Getenv(name) {
	case "1", "true":
		return true
	case "0", "false":
		return false
	}
	return def
}

// lameDuck waits for ctx to end, putting the engine in lame duck (service.LameDuck) on the
// first SIGUSR1 meanwhile.
func lameDuck(ctx context.Context, svc *service.Service, log *zap.Logger) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-usr1:
			if err := svc.LameDuck(); err != nil {
				log.Warn("lame duck", zap.Error(err))
			}
		}
	}
}
