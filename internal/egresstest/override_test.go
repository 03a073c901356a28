package egresstest

import (
	"context"
	"testing"
)

func TestBridgeName(t *testing.T) {
	cases := []struct {
		name, id, want string
		wantErr        bool
	}{
		{"full ID", "07f97b5c1bd03b22fb5c249b3834c0315599df3e9bb7202db2b2a9bb12d0298c", "br-07f97b5c1bd0", false},
		{"not hex", "07f97b5c1bd0; reboot", "", true},
		{"too short", "07f9", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BridgeName(tc.id)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("BridgeName(%q) = %q, %v", tc.id, got, err)
			}
		})
	}
	var flushed string
	o := NewOverrideFunc(func(_ context.Context, b string) error { flushed = b; return nil })
	if err := o.PrepareBridge(context.Background(), cases[0].id); err != nil || flushed != "br-07f97b5c1bd0" {
		t.Fatalf("flushed %q, %v", flushed, err)
	}
}
