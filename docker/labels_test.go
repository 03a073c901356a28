package docker

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mafsandbox/engine/label"
)

func TestMergeLabels(t *testing.T) {
	base := []label.Label{{Key: label.Scope, Value: "s"}}
	cases := []struct {
		name    string
		user    map[string]string
		want    []label.Label
		wantErr error
	}{
		{"appends in key order", map[string]string{"z": "1", "a": "2"},
			[]label.Label{{Key: label.Scope, Value: "s"}, {Key: "a", Value: "2"}, {Key: "z", Value: "1"}}, nil},
		{"refuses the reserved prefix", map[string]string{"maf-sandbox.scope": "x"}, nil, ErrInvalid},
		{"refuses a reserved key even when new", map[string]string{"maf-sandbox.mine": "x"}, nil, ErrInvalid},
		{"refuses equals in key", map[string]string{"a=b": "x"}, nil, ErrInvalid},
		{"refuses empty key", map[string]string{"": "x"}, nil, ErrInvalid},
		{"refuses oversized", map[string]string{"k": strings.Repeat("v", 5000)}, nil, ErrInvalid},
		{"nothing to add", nil, []label.Label{{Key: label.Scope, Value: "s"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeLabels(base, tc.user)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
