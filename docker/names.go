package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/mafsandbox/engine/sandbox"
)

// NamePrefix starts every container and network name this engine derives.
const NamePrefix = "maf-sandbox-docker-"

// Sibling suffixes of a workload name N: its network N-net and its egress proxy N-proxy.
const (
	NetworkSuffix = "-net"
	ProxySuffix   = "-proxy"
)

// ObserverNamePrefix starts the name of every fingerprint observer container; 16 random hex
// digits follow it ([IsObserverName]).
const ObserverNamePrefix = "maf-fingerprint-"

var observerName = regexp.MustCompile(`^` + regexp.QuoteMeta(ObserverNamePrefix) + `[0-9a-f]{16}$`)

// IsObserverName reports whether name (a leading "/" is ignored) is a fingerprint observer's.
func IsObserverName(name string) bool { return observerName.MatchString(strings.TrimPrefix(name, "/")) }

// proxyPort is the port the egress proxy listens on inside its network.
const proxyPort = 3128

// ContainerName derives the workload container name of (key, kind, egressID):
// NamePrefix + the first 12 hex digits of SHA-256 over the length-prefixed parts
// [Scope, ThreadID, AgentID, kind] + [egressID if non-empty] + ["call:"+CallID if non-empty].
// Each part is encoded as its UTF-8 byte length in ASCII decimal, ":", then its bytes, so no
// choice of separators inside a part can make two keys collide.
func ContainerName(key sandbox.Key, kind, egressID string) string {
	parts := []string{key.Scope, key.ThreadID, key.AgentID, kind}
	if egressID != "" {
		parts = append(parts, egressID)
	}
	if key.CallID != "" {
		parts = append(parts, "call:"+key.CallID)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return NamePrefix + hex.EncodeToString(sum[:])[:12]
}

// EgressID is the egress identity folded into the name: "" when no proxy image is configured or
// the allowlist is empty (the sandbox runs closed), else "allow:" + the hosts sorted by code
// point and joined by ",".
func EgressID(proxyImage string, allowlist []string) string {
	if proxyImage == "" || len(allowlist) == 0 {
		return ""
	}
	hosts := append([]string(nil), allowlist...)
	sort.Strings(hosts)
	return "allow:" + strings.Join(hosts, ",")
}

// PoolNamePrefix starts the name of a warm pool's member while it waits for a key; 12 hex
// digits follow it ([IsPoolName]). At hand-out the member is renamed to the key's
// [ContainerName], which a pool name can never be (it is not hex after [NamePrefix]).
const PoolNamePrefix = NamePrefix + "pool-"

var poolName = regexp.MustCompile(`^` + regexp.QuoteMeta(PoolNamePrefix) + `[0-9a-f]{12}$`)

// IsPoolName reports whether name (a leading "/" is ignored) is a waiting pool member's.
func IsPoolName(name string) bool { return poolName.MatchString(strings.TrimPrefix(name, "/")) }

// PoolName is the name of a waiting pool member whose random part is suffix (12 hex digits).
func PoolName(suffix string) string { return PoolNamePrefix + suffix }

// NetworkName is the internal network of workload name n.
func NetworkName(n string) string { return n + NetworkSuffix }

// ProxyName is the egress proxy container of workload name n.
func ProxyName(n string) string { return n + ProxySuffix }

// AsideName is where a restore keeps workload n's previous instance until the new one serves
// (actors/snapshot.go): n-aside. It carries n's labels, so a purge of its key removes it too.
func AsideName(n string) string { return n + "-aside" }

// ProxyURL is the proxy address a workload on n's network is given.
func ProxyURL(n string) string { return "http://" + ProxyName(n) + ":" + strconv.Itoa(proxyPort) }

// NameRole says which resource a derived name denotes.
type NameRole int

// The resources a derived name can denote.
const (
	RoleWorkload NameRole = iota + 1
	RoleProxyName
	RoleNetworkName
)

var derivedName = regexp.MustCompile(`^(` + regexp.QuoteMeta(NamePrefix) + `[0-9a-f]{12})(-proxy|-net)?$`)

// ParseName reports whether name (a leading "/" is ignored) is one this package derives, the
// workload base name it belongs to, and which resource it denotes.
func ParseName(name string) (base string, role NameRole, ok bool) {
	m := derivedName.FindStringSubmatch(strings.TrimPrefix(name, "/"))
	if m == nil {
		return "", 0, false
	}
	switch m[2] {
	case ProxySuffix:
		return m[1], RoleProxyName, true
	case NetworkSuffix:
		return m[1], RoleNetworkName, true
	}
	return m[1], RoleWorkload, true
}
