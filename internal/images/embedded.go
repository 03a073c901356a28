package images

import (
	"embed"
	"errors"
	"io/fs"
	"path"
	"strings"
)

// embedded holds what `make engine` lays over the embedded directory: the static binaries of
// the egress proxy and of the fingerprint observer for one platform, named by [embeddedName].
// A plain go build embeds only the directory's README, and then each is built from source.
//
//go:embed embedded
var embedded embed.FS

// embeddedName is the name of binary for goos/goarch in the embedded directory.
func embeddedName(binary, goos, goarch string) string {
	return path.Join("embedded", binary+"-"+goos+"-"+goarch)
}

// embeddedBinary returns binary for goos/goarch embedded in this program, or false when it
// was built without one.
func embeddedBinary(binary, goos, goarch string) ([]byte, bool, error) {
	b, err := embedded.ReadFile(embeddedName(binary, goos, goarch))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// EmbeddedProxyPlatforms lists the platforms ("linux/amd64") whose proxy binary this program
// embeds: none for a plain go build, the one `make engine` was asked for otherwise.
func EmbeddedProxyPlatforms() []string { return embeddedPlatforms(proxyBinary) }

// EmbeddedObserverPlatforms lists the platforms whose fingerprint observer binary this program
// embeds, as [EmbeddedProxyPlatforms] does for the proxy.
func EmbeddedObserverPlatforms() []string { return embeddedPlatforms(observerBinary) }

func embeddedPlatforms(binary string) []string {
	es, err := embedded.ReadDir("embedded")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		rest, ok := strings.CutPrefix(e.Name(), binary+"-")
		if i := strings.LastIndex(rest, "-"); ok && i > 0 {
			out = append(out, rest[:i]+"/"+rest[i+1:])
		}
	}
	return out
}
