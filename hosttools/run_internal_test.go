package hosttools

import (
	"context"
	"testing"
)

// TestUndeclaredRefusedAtCall is the belt-and-braces check behind the registration gate: a
// registry that holds an undeclared tool and requires declarations refuses to call it.
func TestUndeclaredRefusedAtCall(t *testing.T) {
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(Tool{Name: "u", AnyArguments: true, Func: func(context.Context, Arguments) (any, error) { return 1, nil }}); err != nil {
		t.Fatal(err)
	}
	reg.opts.requireDeclared = true
	if a := reg.NewRun().Call(context.Background(), "u", nil); a.Code != RefusedUndeclared {
		t.Fatalf("answer = %+v, want undeclared", a)
	}
}

func TestParseReceipt(t *testing.T) {
	cases := []struct {
		name string
		out  string
		want Receipt
		ok   bool
	}{
		{"a group", "process-v1 41 41\n", Receipt{PID: 41, PGID: 41}, true},
		{"no group", "noise\nprocess-v1 41 0\n", Receipt{PID: 41}, true},
		{"another version", "process-v2 41 41\n", Receipt{}, false},
		{"a group that is not the pid's own", "process-v1 41 1\n", Receipt{}, false},
		{"pid 1", "process-v1 1 1\n", Receipt{}, false},
		{"not numbers", "process-v1 x y\n", Receipt{}, false},
		{"nothing", "", Receipt{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseReceipt(tc.out)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("parseReceipt(%q) = %+v, %v; want %+v, %v", tc.out, got, ok, tc.want, tc.ok)
			}
		})
	}
}
