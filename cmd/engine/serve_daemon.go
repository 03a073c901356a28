package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/mafsandbox/engine/docker"
)

// daemonCheckTimeout bounds serve's first question to the daemon: a daemon in reach answers a
// version request in milliseconds.
const daemonCheckTimeout = 5 * time.Second

// checkDaemon asks the daemon behind drv for its version once, at start, and says at error
// level when it does not answer, naming where the engine looked (the Docker context, its
// endpoint, the client binary). The engine serves all the same: every acquire is answered
// engine_unavailable and health reports the daemon unreachable, with its error, until the
// daemon answers. It reports whether the daemon answered.
func checkDaemon(ctx context.Context, drv *docker.Engine, dockerPath string, log *zap.Logger) bool {
	ctx, cancel := context.WithTimeout(ctx, daemonCheckTimeout)
	defer cancel()
	where := []zap.Field{zap.String("docker", dockerPath)}
	b, err := drv.Bind(ctx)
	if err == nil {
		where = append(where, zap.String("docker_context", b.Context), zap.String("endpoint", b.Endpoint))
		var version string
		if version, err = drv.ServerVersion(ctx); err == nil {
			log.Info("docker daemon answers", append(where, zap.String("daemon_version", version))...)
			return true
		}
	}
	log.Error("the Docker daemon cannot be reached: the engine serves, but answers every acquire engine_unavailable "+
		"and reports the daemon unreachable in health until it answers; start the daemon, or point DOCKER_HOST, "+
		"DOCKER_CONTEXT or --docker at one that runs", append(where, zap.Error(err))...)
	return false
}
