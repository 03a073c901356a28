package docker

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/mafsandbox/engine/label"
)

// checkTarget refuses a container, network or image reference the engine could read as an
// option, a path or nothing: empty, dash-led, or holding a colon or a NUL.
func checkTarget(target string) error {
	if target == "" || strings.HasPrefix(target, "-") || strings.ContainsAny(target, ":\x00") {
		return fmt.Errorf("%w: container reference %q", ErrInvalid, target)
	}
	return nil
}

// checkImage refuses an image reference the client could read as an option, or none; what
// names the call. A colon is a tag's, so [checkTarget] is too strict here.
func checkImage(what, ref string) error {
	if ref == "" || strings.HasPrefix(ref, "-") {
		return fmt.Errorf("%s: %w: image reference %q", what, ErrInvalid, ref)
	}
	return nil
}

// fullID matches a full container ID: the one target that confirms the older client's ambiguous
// absence answer by itself.
var fullID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkFilters holds every label filter to the label rules ([checkLabel]).
func checkFilters(labels map[string]string) error {
	for k, v := range labels {
		if err := checkLabel(label.Label{Key: k, Value: v}); err != nil {
			return err
		}
	}
	return nil
}

// checkID accepts only a full ID ([fullID]): the one reference the inventory takes.
func checkID(what, id string) error {
	if !fullID.MatchString(id) {
		return fmt.Errorf("%s: %w: %q is not a full 64-hex ID", what, ErrInvalid, id)
	}
	return nil
}

// check refuses, with [ErrInvalid] and before any engine call, an exec request no driver can
// run: a bad target, an empty argv, a negative output budget, or an environment entry that is
// not K=V.
func (req ExecRequest) check() error {
	if err := checkTarget(req.Target); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if len(req.Argv) == 0 {
		return fmt.Errorf("exec in %s: %w: empty argv", req.Target, ErrInvalid)
	}
	if req.MaxOutputBytes < 0 {
		return fmt.Errorf("exec in %s: %w: negative output budget", req.Target, ErrInvalid)
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("exec in %s: %w: environment entry %q is not K=V", req.Target, ErrInvalid, kv)
		}
	}
	return nil
}
