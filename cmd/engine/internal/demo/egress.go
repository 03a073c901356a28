package demo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mafsandbox/engine/client"
	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/events"
	"github.com/mafsandbox/engine/internal/images"
	"github.com/mafsandbox/engine/sandbox"
)

// The demo's allowlisted step: a target server of ours (the static e2e program, FROM
// scratch) on a private internal network that serves two names; a sandbox whose allowlist
// names one of them reaches it through its proxy and is refused the other; then dispose, and
// the window of decisions is read back from JetStream with a durable consumer. A third name is
// inspected: one allowed GET carries a credential the sandbox never holds, swapped
// in by the proxy (the target logs its digest, which the demo checks), and one POST is refused.

const (
	allowedHost = "allowed.demo.maf-sandbox.example"
	deniedHost  = "denied.demo.maf-sandbox.example"
	apiHost     = "api.demo.maf-sandbox.example"
	// targetSubnets is where the demo target network's /24 comes from: outside the egress subnet
	// pool and the daemon's default pools. A leftover of a killed demo holds one; the next
	// takes another.
	targetSubnets = "10.218.0.0/16"
)

// target is the private network the proxies' outbound legs join, and its server.
type target struct {
	docker  string
	network string
	subnet  netip.Prefix
	server  string
	caB64   string
	caPEM   []byte
}

// startTarget builds the images the step needs and starts the target; stop removes both.
func startTarget(ctx context.Context, dockerPath string, labels map[string]string) (*target, error) {
	for _, err := range []error{images.EnsureProxy(ctx, dockerPath, images.ProxyTag), images.EnsureTarget(ctx, dockerPath),
		images.EnsureClient(ctx, dockerPath, images.BusyboxTag)} {
		if err != nil {
			return nil, fmt.Errorf("demo: build the egress images: %w", err)
		}
	}
	caPEM, certPEM, keyPEM, err := images.TargetCertificates(allowedHost, deniedHost, apiHost)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	t := &target{docker: dockerPath, network: "maf-sandbox-demo-targets-" + suffix, server: "maf-sandbox-demo-target-" + suffix,
		caB64: base64.StdEncoding.EncodeToString(caPEM), caPEM: caPEM}
	var labelArgs []string
	for k, v := range labels {
		labelArgs = append(labelArgs, "--label", k+"="+v)
	}
	pool, err := docker.NewSubnetPool(netip.MustParsePrefix(targetSubnets), 24)
	if err != nil {
		return nil, err
	}
	for subnet := range pool.Candidates(t.network) {
		err = t.docker1(ctx, append(append([]string{"network", "create", "--internal", "--subnet", subnet.String()}, labelArgs...), t.network)...)
		if err == nil {
			t.subnet = subnet
			break
		}
		if !strings.Contains(err.Error(), "overlaps") {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	args := append([]string{"run", "-d", "--name", t.server, "--pull", "never", "--network", t.network,
		"--network-alias", allowedHost, "--network-alias", deniedHost, "--network-alias", apiHost, "--dns", "127.0.0.1", "--user", "0",
		"-e", "E2E_CERT=" + string(certPEM), "-e", "E2E_KEY=" + string(keyPEM)}, labelArgs...)
	if err := t.docker1(ctx, append(args, images.TargetTag)...); err != nil {
		t.stop()
		return nil, err
	}
	return t, nil
}

func (t *target) docker1(ctx context.Context, args ...string) error {
	if out, err := exec.CommandContext(ctx, t.docker, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("demo: docker %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (t *target) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = t.docker1(ctx, "rm", "-f", t.server)
	_ = t.docker1(ctx, "network", "rm", t.network)
}

// egressConfig points the backend's proxies at the demo's target network.
func (t *target) egressConfig(cfg docker.Config) docker.Config {
	cfg.EgressProxyImage = images.ProxyTag
	cfg.OutboundNetwork = t.network
	cfg.EgressPrivateCIDRs = []netip.Prefix{t.subnet}
	return cfg
}

// egressStep runs the allowlisted step through the remote client and reads the window back.
func egressStep(ctx context.Context, step func(string, ...any), nc *nats.Conn, remote *client.Backend, t *target) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	key := sandbox.Key{Scope: "demo", ThreadID: fmt.Sprintf("egress-%d", time.Now().UnixNano()), AgentID: "browser"}
	secret := make([]byte, 12)
	_, _ = rand.Read(secret)
	token := "demo-secret-" + hex.EncodeToString(secret)
	spec, err := sandbox.NewSpec("fetcher", sandbox.WithImage(images.ClientTag), sandbox.WithAllowlist(sandbox.EgressRule{Host: allowedHost},
		sandbox.EgressRule{Host: apiHost, Methods: []string{"GET"}, Paths: []string{"/repos/demo/**"},
			Credentials: []sandbox.EgressCredential{{Header: "Authorization", Env: "DEMO_TOKEN", Secret: sandbox.Secret(token)}}}))
	if err != nil {
		return err
	}
	defer remote.DisposeScope(context.WithoutCancel(ctx), key.Scope, key.ThreadID)
	start := time.Now()
	sb, err := remote.Acquire(ctx, key, spec)
	if err != nil {
		return err
	}
	step("acquired an allowlisted sandbox in %s: its own internal network, sealed (the proxy proved nothing of the host answers), and a proxy allowing %s",
		time.Since(start).Round(time.Millisecond), allowedHost)
	for _, host := range []string{allowedHost, deniedHost} {
		res, err := sb.Exec(ctx, sandbox.Argv("maf-e2e", "get", "https://"+host+"/", t.caB64), "/", time.Minute)
		if err != nil {
			return err
		}
		step("GET https://%s/ from the sandbox: %s", host, strings.TrimSpace(res.Stdout()))
	}
	if err := inspected(ctx, step, sb, t, token); err != nil {
		return err
	}
	if f := remote.Dispose(ctx, key, sandbox.DisposeOptions{}); f != nil {
		return fmt.Errorf("dispose: %v", f)
	}
	step("disposed: the proxy was read, removed, and only then its window published")
	return readEgressWindow(ctx, step, js, key)
}

// readEgressWindow reads the sandbox's window from the egress stream with a durable consumer,
// as a subscriber in any language would, and prints its decisions.
func readEgressWindow(ctx context.Context, step func(string, ...any), js jetstream.JetStream, key sandbox.Key) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(cctx, events.StreamEgress, jetstream.ConsumerConfig{
		Durable: "maf-sandbox-demo", FilterSubject: events.DefaultSubjectPrefix + ".egress.>", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		return fmt.Errorf("demo: durable consumer on %s: %w", events.StreamEgress, err)
	}
	defer func() { _ = js.DeleteConsumer(context.WithoutCancel(ctx), events.StreamEgress, "maf-sandbox-demo") }()
	for cctx.Err() == nil {
		batch, err := cons.Fetch(10, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("demo: fetch from %s: %w", events.StreamEgress, err)
		}
		for m := range batch.Messages() {
			_ = m.Ack()
			var ev events.EgressObservedEvent
			if json.Unmarshal(m.Data(), &ev) != nil || ev.Key.ThreadID != key.ThreadID {
				continue
			}
			step("read back from JetStream (stream %s, durable consumer, subject %s, event %.16s…):", events.StreamEgress, m.Subject(), ev.EventID)
			for _, d := range ev.Decisions {
				if r := d.Request; r != nil {
					step("    %s %s:%d %s %s status=%d rule=%s", d.Verdict, d.Host, d.Port, r.Method, r.Path, r.Status, r.Rule)
					continue
				}
				if d.TLS != "" { // refused at the workload's TLS handshake: say why
					step("    %s %s:%d tls=%s", d.Verdict, d.Host, d.Port, d.TLS)
					continue
				}
				step("    %s %s:%d", d.Verdict, d.Host, d.Port)
			}
			return nil
		}
	}
	return fmt.Errorf("demo: the egress window of %s never reached %s", key, events.StreamEgress)
}

// inspected makes the inspected host's two requests from the sandbox, which holds only a
// placeholder, and checks with the target's log that the allowed one carried the real token.
func inspected(ctx context.Context, step func(string, ...any), sb sandbox.Sandbox, t *target, token string) error {
	for _, method := range []string{"GET", "POST"} {
		res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", "maf-e2e send "+method+" https://"+apiHost+"/repos/demo/widgets"+
			` "Authorization: Bearer $DEMO_TOKEN" | head -1`), "/", time.Minute)
		if err != nil {
			return err
		}
		step("%s https://%s/repos/demo/widgets with \"Authorization: Bearer $DEMO_TOKEN\": %s", method, apiHost, strings.TrimSpace(res.Stdout()))
	}
	res, err := sb.Exec(ctx, sandbox.Argv("sh", "-c", `printf %s "$DEMO_TOKEN"`), "/", time.Minute)
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, t.docker, "logs", t.server).Output()
	if err != nil {
		return fmt.Errorf("demo: read the target's log: %w", err)
	}
	sum := sha256.Sum256([]byte("Bearer " + token))
	want := "request GET /repos/demo/widgets auth-sha256=" + hex.EncodeToString(sum[:])
	if !strings.Contains(string(out), want) {
		return fmt.Errorf("demo: the target did not receive the real credential (no %q in its log)", want)
	}
	step("the sandbox held only %s; the target received the real token (its log shows the token's digest)", strings.TrimSpace(res.Stdout()))
	return nil
}
