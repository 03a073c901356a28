package images

import (
	"embed"
	"errors"
	"io/fs"
	"path"
	"strings"
)

// embedded holds what `make engine` lays over the embedded directory: the egress proxy's
// static binary for one platform, named by [embeddedProxyName]. A plain go build embeds only
// the directory's README, and then the proxy is built from source.
//
//go:embed embedded
var embedded embed.FS

// embeddedProxyName is the name of the proxy binary for goos/goarch in the embedded directory.
func embeddedProxyName(goos, goarch string) string {
	return path.Join("embedded", proxyBinary+"-"+goos+"-"+goarch)
}

// embeddedProxy returns the proxy binary for goos/goarch embedded in this program, or false
// when it was built without one.
func embeddedProxy(goos, goarch string) ([]byte, bool, error) {
	b, err := embedded.ReadFile(embeddedProxyName(goos, goarch))
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
func EmbeddedProxyPlatforms() []string {
	es, err := embedded.ReadDir("embedded")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		rest, ok := strings.CutPrefix(e.Name(), proxyBinary+"-")
		if i := strings.LastIndex(rest, "-"); ok && i > 0 {
			out = append(out, rest[:i]+"/"+rest[i+1:])
		}
	}
	return out
}
