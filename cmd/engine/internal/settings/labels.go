package settings

import (
	"fmt"
	"strings"
)

// Labels collects repeated --label k=v flags; a flag.Value. Use a non-nil map.
type Labels map[string]string

func (f Labels) String() string {
	parts := make([]string, 0, len(f))
	for k, v := range f {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

// Set adds one k=v; it fails when s has no "=" or an empty key.
func (f Labels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q is not k=v", s)
	}
	f[k] = v
	return nil
}
