package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestServeTenancyFlags: no flag is one tenant; --tenancy or --tenancy-file give a tenancy
// option; with the embedded server or placement, or a bad file, serve refuses to start.
func TestServeTenancyFlags(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"scopes":{"A":["a-1"]},"operators":["OPS"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"scope":{"A":["a-1"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		args       []string
		embedded   bool
		placement  bool
		wantOption bool
		wantErr    error
		anyErr     bool
	}{
		{name: "no flag: one tenant", embedded: true},
		{name: "--tenancy", args: []string{"--tenancy"}, wantOption: true},
		{name: "--tenancy-file", args: []string{"--tenancy-file", good}, wantOption: true},
		{name: "unknown field in the file", args: []string{"--tenancy-file", bad}, anyErr: true},
		{name: "embedded server", args: []string{"--tenancy"}, embedded: true, wantErr: errTenancyEmbedded},
		{name: "placement", args: []string{"--tenancy"}, placement: true, wantErr: errTenancyPlacement},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &serveVerb{labels: labelFlag{}}
			if err := v.parse(tc.args); err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			opt, mode, err := v.tenancy.option(tc.embedded, tc.placement)
			switch {
			case tc.wantErr != nil || tc.anyErr:
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("option() = %v, want %v", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("option(): %v", err)
			case (opt != nil) != tc.wantOption || mode == "":
				t.Fatalf("option() = %v, %q; want an option %t and a mode", opt != nil, mode, tc.wantOption)
			}
		})
	}
}
