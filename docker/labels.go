package docker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mafsandbox/engine/label"
)

// mergeLabels appends the caller's labels to base in key order. A caller key under
// [label.Prefix], a key that could not travel as one argument, or a duplicate of a base key is
// refused with [ErrInvalid]: only this package writes the engine's own labels.
func mergeLabels(base []label.Label, user map[string]string) ([]label.Label, error) {
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := append([]label.Label(nil), base...)
	seen := make(map[string]bool, len(base))
	for _, l := range base {
		seen[l.Key] = true
	}
	for _, k := range keys {
		if strings.HasPrefix(k, label.Prefix) {
			return nil, fmt.Errorf("label %q: %w: keys under %q are reserved", k, ErrInvalid, label.Prefix)
		}
		if seen[k] {
			return nil, fmt.Errorf("label %q: %w: duplicate key", k, ErrInvalid)
		}
		l := label.Label{Key: k, Value: user[k]}
		if err := checkLabel(l); err != nil {
			return nil, fmt.Errorf("label %q: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// checkLabel is [label.Check] as this package's [ErrInvalid] (it matches both).
func checkLabel(l label.Label) error {
	if err := label.Check(l); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// checkedLabels is [mergeLabels] of base and extra with base's own labels, which come from the
// spec rather than from this package, held to the label rules too.
func checkedLabels(base []label.Label, extra map[string]string) ([]label.Label, error) {
	labels, err := mergeLabels(base, extra)
	if err != nil {
		return nil, err
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return nil, err
		}
	}
	return labels, nil
}
