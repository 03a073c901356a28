package docker

import (
	"fmt"
	"regexp"
	"strings"
)

// checkTarget refuses a container, network or image reference the engine could read as an
// option, a path or nothing: empty, dash-led, or holding a colon or a NUL.
func checkTarget(target string) error {
	if target == "" || strings.HasPrefix(target, "-") || strings.ContainsAny(target, ":\x00") {
		return fmt.Errorf("%w: container reference %q", ErrInvalid, target)
	}
	return nil
}

// fullID matches a full container ID: the one target that confirms the older client's ambiguous
// absence answer by itself.
var fullID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkFilters holds every label filter to the label rules ([checkLabel]).
func checkFilters(labels map[string]string) error {
	for k, v := range labels {
		if err := checkLabel(Label{Key: k, Value: v}); err != nil {
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
