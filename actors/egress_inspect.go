package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/mafsandbox/engine/docker"
	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/sandbox"
)

// Request-level egress on this backend: an allowlist entry with methods or paths
// makes the proxy terminate TLS for its host with a CA the proxy draws at start (its key
// never leaves the proxy process). The engine reads the CA's certificate from the line the
// proxy prints before it is ready (egresslog.FormatCA) and writes it, with the image's own
// system bundle after it when the image has one, into the workload at [trustPath] through
// the archive API (never a bind mount of a host file). The workload is created with the
// trust variables (docker.WithTrustFile) pointing at that path: the path is fixed, so the
// variables can be set at create although the certificate exists only once the proxy runs.
// The file is rewritten on every acquire that recreates the proxy (each proxy has its own
// CA), before hand-out: every exec sees the current one. A gated image's own command may
// start before the file is written; execs, the only way work reaches a sandbox, never do.

// trustPath is where the CA bundle of an inspecting proxy lives in its workload: beside the
// gate, outside the storage base, so file calls on the sandbox's storage neither list it nor
// replace it.
const trustPath = "/maf-sandbox-proxy-ca.pem"

// systemBundles are the image bundles appended after the proxy's CA, first found wins: so a
// client that reads only the bundle the variables name still trusts tunnelled hosts.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// maxSystemBundle bounds the read of an image's system bundle.
const maxSystemBundle = 4 << 20

// errNoProxyCA: the proxy of an inspecting allowlist announced no CA certificate (an image
// older than request-level egress): the workload could trust nothing, so the acquire fails.
var errNoProxyCA = errors.New("the egress proxy announced no CA certificate; rebuild it with `engine images build`")

// inspects reports whether spec's allowlist has an entry the proxy inspects.
func inspects(spec sandbox.Spec) bool {
	return spec.Egress == sandbox.EgressAllowlist && egresslog.FormatInspect(spec.EgressAllow) != ""
}

// inspectEnv is the proxy's environment for spec's inspecting rules and the backend's
// upstream bundle; none for a tunnel-only allowlist, whose proxy is exactly as before.
func (b *Backend) inspectEnv(spec sandbox.Spec) []string {
	rules := egresslog.FormatInspect(spec.EgressAllow)
	if rules == "" {
		return nil
	}
	env := []string{egresslog.EnvInspect + "=" + rules}
	if len(b.egress.upstreamCAs) > 0 {
		env = append(env, egresslog.EnvUpstreamCAs+"="+string(b.egress.upstreamCAs))
	}
	return env
}

// WithEgressUpstreamCAs makes inspecting proxies verify the hosts they inspect against the
// PEM bundle pem instead of the system roots (a private origin, a test's target). It is
// public: a bundle of certificates, no key.
func WithEgressUpstreamCAs(pemBundle []byte) Option {
	return func(o *options) error {
		if len(pemBundle) > 0 {
			if b, _ := pem.Decode(pemBundle); b == nil {
				return errors.New("egress upstream CAs: no PEM block")
			}
		}
		o.egress.upstreamCAs = append([]byte(nil), pemBundle...)
		return nil
	}
}

// installTrust writes the inspecting proxy's CA, then the image's system bundle, to
// trustPath in the workload. No-op when the proxy was not built by this acquire or does not
// inspect.
func (a *containerActor) installTrust(ctx context.Context, run *egressRun, spec sandbox.Spec, target string) error {
	if run == nil || !inspects(spec) {
		return nil
	}
	if len(run.ca) == 0 {
		return errNoProxyCA
	}
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: run.ca})
	for _, p := range systemBundles {
		e, data, err := a.b.engine.Read(ctx, target, p, maxSystemBundle)
		if errors.Is(err, docker.ErrPathAbsent) || errors.Is(err, docker.ErrPathAbsentUnconfirmed) {
			continue // the container is there: the acquire just bound it
		}
		if err != nil {
			return fmt.Errorf("read the system bundle %s of %s: %w", p, a.name, err)
		}
		if e != nil && e.Type == docker.EntryFile && len(data) > 0 {
			bundle = append(append(bundle, '\n'), data...)
			break
		}
	}
	tar, err := docker.BuildTar(docker.FileEntry(trustPath, bundle, 0o444, 0, 0))
	if err == nil {
		err = a.b.engine.CopyIn(ctx, target, tar)
	}
	if err != nil {
		return fmt.Errorf("write the proxy's CA into %s: %w", a.name, err)
	}
	return nil
}

// inspectedMethods are the methods an inspecting rule may name on this backend: the methods
// of RFC 9110 a workload sends through a forward proxy (CONNECT and TRACE are not among them:
// the first opens the tunnel inspection replaces, the second echoes what the proxy added).
var inspectedMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Credentials at the boundary. A spec's credential names a workload
// variable; the workload gets a placeholder there and the proxy, alone, gets the secret, in
// its environment (egresslog.EnvCredentials), and swaps one for the other on the requests
// the credential matches. The workload is created before or long after any one proxy (a warm
// sandbox outlives many), so the placeholder is derived, not drawn: from the container's name
// and the variable. It is not secret and need not be: only this sandbox's proxy turns it into
// the secret, and only on a matching request to the credential's host.

// placeholder is the value of the variable env in the workload name.
func placeholder(name, env string) string {
	sum := sha256.Sum256([]byte("maf-sandbox egress credential placeholder\x00" + name + "\x00" + env))
	return "maf-sandbox-placeholder-" + hex.EncodeToString(sum[:16])
}

// credentialVars are the workload's placeholder variables for spec's credentials.
func credentialVars(name string, spec sandbox.Spec) []string {
	var vars []string
	for _, env := range sandbox.EgressCredentialEnvs(spec.EgressAllow) {
		vars = append(vars, env+"="+placeholder(name, env))
	}
	return vars
}

// credentialEnv is the proxy's environment for spec's credentials; none without any.
func (a *containerActor) credentialEnv(spec sandbox.Spec) ([]string, error) {
	v, err := egresslog.FormatCredentials(spec.EgressAllow, func(env string) string { return placeholder(a.name, env) })
	if err != nil || v == "" {
		return nil, err
	}
	return []string{egresslog.EnvCredentials + "=" + v}, nil
}
