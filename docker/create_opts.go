package docker

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/mafsandbox/engine/label"
)

// KeepAlive is the command every workload runs: it keeps the container alive, and every piece of
// work reaches it through exec.
func KeepAlive() []string { return []string{"sleep", "infinity"} }

// CreateSpec is everything `docker run` is told about one workload container. It is a plain
// value: [CreateOpt] functions change it and each driver renders it. The zero Network means
// "none"; nothing in a CreateSpec can name a volume, mount, tmpfs, published port or socket.
type CreateSpec struct {
	Name            string
	Image           string
	NoNewPrivileges bool
	PidsLimit       int // 0: not passed
	CapDropAll      bool
	CapAdd          []string      // after --cap-drop ALL, in order (Config.CapAdd)
	Memory          string        // "": not passed
	CPUs            *float64      // nil: not passed
	Network         string        // "" or "none": --network none
	ProxyURL        string        // with a Network other than none: the proxy variables' value
	Sealed          bool          // the seal constraints (sealCapDrop, sealSysctls) apply
	Labels          []label.Label // in command-line order
	Cmd             []string      // nil: KeepAlive
	// Entrypoint, when set, replaces the image's entrypoint with this one executable (the
	// command line's --entrypoint takes no arguments: they go in Cmd).
	Entrypoint string
	// IPv4, when valid, is the container's fixed address on Network (--ip).
	IPv4 netip.Addr
	// TrustFile, with a Network, is the CA bundle the common TLS clients' trust variables
	// (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE) point at: the
	// file holding the certificate of an inspecting proxy. "": not set.
	TrustFile string
	// Env are extra NAME=VALUE variables (a credential's placeholder), after the backend's own.
	Env []string
}

// trustVariables are the variables the common TLS clients read a CA bundle from, set on a
// workload whose proxy inspects: OpenSSL and Go (SSL_CERT_FILE), Python requests
// (REQUESTS_CA_BUNDLE), Node.js (NODE_EXTRA_CA_CERTS, added to its own roots) and curl
// (CURL_CA_BUNDLE).
var trustVariables = []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"}

// CreateOpt changes a [CreateSpec].
type CreateOpt func(*CreateSpec)

// NewCreateSpec returns the spec of container name running image, with opts applied in order
// (nil options are skipped) on top of --network none and [KeepAlive].
func NewCreateSpec(name, image string, opts ...CreateOpt) CreateSpec {
	s := CreateSpec{Name: name, Image: image, Network: "none"}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

// withNoNewPrivileges adds --security-opt no-new-privileges.
func withNoNewPrivileges() CreateOpt { return func(s *CreateSpec) { s.NoNewPrivileges = true } }

// withPidsLimit sets --pids-limit n.
func withPidsLimit(n int) CreateOpt { return func(s *CreateSpec) { s.PidsLimit = n } }

// withCapDropAll adds --cap-drop ALL.
func withCapDropAll() CreateOpt { return func(s *CreateSpec) { s.CapDropAll = true } }

// withCapAdd adds --cap-add c for each of caps, after --cap-drop ALL.
func withCapAdd(caps ...string) CreateOpt {
	return func(s *CreateSpec) { s.CapAdd = append([]string(nil), caps...) }
}

// WithLimits narrows a workload to what its spec asked: memory in bytes, CPUs and pids; a
// zero value keeps what the configuration set. The caller checks the asks against
// [Config.Bounds] first: this option only renders them.
func WithLimits(memoryBytes int64, cpus float64, pids int) CreateOpt {
	return func(s *CreateSpec) {
		if memoryBytes > 0 {
			s.Memory = strconv.FormatInt(memoryBytes, 10)
		}
		if cpus > 0 {
			s.CPUs = &cpus
		}
		if pids > 0 {
			s.PidsLimit = pids
		}
	}
}

// withMemory sets --memory m ("512m", "2g").
func withMemory(m string) CreateOpt { return func(s *CreateSpec) { s.Memory = m } }

// withCPUs sets --cpus n.
func withCPUs(n float64) CreateOpt { return func(s *CreateSpec) { s.CPUs = &n } }

// WithNetworkNone places the container on --network none: loopback only.
func WithNetworkNone() CreateOpt {
	return func(s *CreateSpec) { s.Network, s.ProxyURL = "none", "" }
}

// WithNetwork places the container on network, points the four proxy variables
// (HTTPS_PROXY, HTTP_PROXY, https_proxy, http_proxy) at proxyURL, and applies the seal
// constraints: a workload on a network runs without NET_RAW and with IPv6 disabled.
func WithNetwork(network, proxyURL string) CreateOpt {
	return func(s *CreateSpec) { s.Network, s.ProxyURL, s.Sealed = network, proxyURL, true }
}

// WithTrustFile points the common TLS clients' trust variables (SSL_CERT_FILE,
// REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE) at path, a CA bundle inside the
// container; it needs a network.
func WithTrustFile(path string) CreateOpt { return func(s *CreateSpec) { s.TrustFile = path } }

// WithEnv appends NAME=VALUE variables to the container's environment.
func WithEnv(kv ...string) CreateOpt {
	return func(s *CreateSpec) { s.Env = append(s.Env, kv...) }
}

// WithLabels appends labels, keeping their order.
func WithLabels(labels ...label.Label) CreateOpt {
	return func(s *CreateSpec) { s.Labels = append(s.Labels, labels...) }
}

// WithCmd replaces the container's command (default [KeepAlive]).
func WithCmd(cmd ...string) CreateOpt {
	return func(s *CreateSpec) { s.Cmd = append([]string(nil), cmd...) }
}

// WithEntrypoint replaces the image's entrypoint with path (its arguments are the Cmd).
func WithEntrypoint(path string) CreateOpt { return func(s *CreateSpec) { s.Entrypoint = path } }

// WithIPv4 fixes the container's address on its network.
func WithIPv4(a netip.Addr) CreateOpt { return func(s *CreateSpec) { s.IPv4 = a } }

// attached reports whether s joins a network (a --network other than none).
func (s CreateSpec) attached() bool { return s.Network != "" && s.Network != "none" }

// trustFileValid reports whether s sets no trust file or one it can render: an absolute
// path on a workload with a network.
func (s CreateSpec) trustFileValid() bool {
	return s.TrustFile == "" || (s.attached() && strings.HasPrefix(s.TrustFile, "/") && !strings.ContainsAny(s.TrustFile, "\x00\n"))
}

// validate refuses a spec that could not render to a safe command line.
func (s CreateSpec) validate() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("create spec: %w: no container name", ErrInvalid)
	case strings.HasPrefix(s.Name, "-"):
		return fmt.Errorf("create spec: %w: container name starts with '-'", ErrInvalid)
	case s.Image == "":
		return fmt.Errorf("create spec: %w: the spec names neither image nor image_id", ErrInvalid)
	case strings.HasPrefix(s.Image, "-"):
		return fmt.Errorf("create spec: %w: image starts with '-'", ErrInvalid)
	case s.attached() && s.ProxyURL == "":
		return fmt.Errorf("create spec: %w: network %s without a proxy", ErrInvalid, s.Network)
	case s.IPv4.IsValid() && (!s.IPv4.Is4() || !s.attached()):
		return fmt.Errorf("create spec: %w: a fixed address needs an IPv4 address and a network", ErrInvalid)
	case strings.HasPrefix(s.Entrypoint, "-"):
		return fmt.Errorf("create spec: %w: entrypoint starts with '-'", ErrInvalid)
	case !s.trustFileValid():
		return fmt.Errorf("create spec: %w: a trust file needs a network and an absolute path", ErrInvalid)
	}
	if err := s.validateLimits(); err != nil {
		return err
	}
	for _, l := range s.Labels {
		if err := checkLabel(l); err != nil {
			return fmt.Errorf("create spec: %w", err)
		}
	}
	return nil
}

// validateLimits refuses limits and capabilities no create could take: a negative pids limit,
// CPUs that are not a positive finite number, a capability outside the allow-list or one
// given back without every other dropped first.
func (s CreateSpec) validateLimits() error {
	switch {
	case s.PidsLimit < 0:
		return fmt.Errorf("create spec: %w: negative pids limit", ErrInvalid)
	case s.CPUs != nil && (math.IsNaN(*s.CPUs) || math.IsInf(*s.CPUs, 0) || *s.CPUs <= 0):
		return fmt.Errorf("create spec: %w: CPUs must be a positive finite number", ErrInvalid)
	case len(s.CapAdd) > 0 && !s.CapDropAll:
		return fmt.Errorf("create spec: %w: capabilities are only added back after --cap-drop ALL", ErrInvalid)
	}
	if err := checkCapAdd(s.CapAdd); err != nil {
		return fmt.Errorf("create spec: %w", err)
	}
	return nil
}

// cliRunArgs renders s as the arguments of `docker run`, in exactly this order:
//
//	run -d --name N --security-opt no-new-privileges --pids-limit P [--cap-drop ALL
//	    [--cap-add C]…] [--memory M] [--cpus C] (--network none | --network NET -e HTTPS_PROXY=U
//	    -e HTTP_PROXY=U -e https_proxy=U -e http_proxy=U) --label k=v … IMAGE CMD…
func cliRunArgs(s CreateSpec) []string { return cliContainerArgs([]string{"run", "-d"}, s) }

// cliCreateArgs is the same command line as [cliRunArgs] with create instead of run -d: the
// container is made but not started.
func cliCreateArgs(s CreateSpec) []string { return cliContainerArgs([]string{"create"}, s) }

func cliContainerArgs(verb []string, s CreateSpec) []string {
	args := append(verb, "--name", s.Name)
	if s.NoNewPrivileges {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if s.PidsLimit > 0 {
		args = append(args, "--pids-limit", strconv.Itoa(s.PidsLimit))
	}
	if s.CapDropAll {
		args = append(args, "--cap-drop", "ALL")
		for _, c := range s.CapAdd {
			args = append(args, "--cap-add", c)
		}
	}
	if s.Memory != "" {
		args = append(args, "--memory", s.Memory)
	}
	if s.CPUs != nil {
		args = append(args, "--cpus", pyFloatRepr(*s.CPUs))
	}
	if s.Network == "" || s.Network == "none" {
		args = append(args, "--network", "none")
	} else {
		args = append(args, "--network", s.Network)
		if s.IPv4.IsValid() {
			args = append(args, "--ip", s.IPv4.String())
		}
		for _, v := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"} {
			args = append(args, "-e", v+"="+s.ProxyURL)
		}
		if s.TrustFile != "" {
			for _, v := range trustVariables {
				args = append(args, "-e", v+"="+s.TrustFile)
			}
		}
		if s.Sealed {
			args = append(args, sealArgs()...)
		}
	}
	for _, e := range s.Env {
		args = append(args, "-e", e)
	}
	for _, l := range s.Labels {
		args = append(args, "--label", l.Key+"="+l.Value)
	}
	// The engine never pulls: an image is built or loaded by its owner, and a missing one
	// must fail here rather than send the daemon to a registry.
	if s.Entrypoint != "" {
		args = append(args, "--entrypoint", s.Entrypoint)
	}
	args = append(args, "--pull", "never", s.Image)
	if s.Cmd == nil {
		return append(args, KeepAlive()...)
	}
	return append(args, s.Cmd...)
}

// pyFloatRepr renders f the way Python's repr does: the shortest round-tripping digits, fixed
// notation with at least one decimal (2 → "2.0") for exponents -4..15, scientific otherwise.
func pyFloatRepr(f float64) string {
	if f == 0 || (math.Abs(f) >= 1e-4 && math.Abs(f) < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}
