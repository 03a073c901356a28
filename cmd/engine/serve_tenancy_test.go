package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mafsandbox/engine/cmd/engine/internal/settings"
)

// TestServeTenancyFlags: no flag is one tenant; --tenancy or --tenancy-file give a tenancy
// option, with --placement too; with the embedded server or a bad file, serve refuses to start.
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
		wantOption bool
		wantErr    error
		anyErr     bool
	}{
		{name: "no flag: one tenant", embedded: true},
		{name: "--tenancy", args: []string{"--tenancy"}, wantOption: true},
		{name: "--tenancy-file", args: []string{"--tenancy-file", good}, wantOption: true},
		{name: "unknown field in the file", args: []string{"--tenancy-file", bad}, anyErr: true},
		{name: "embedded server", args: []string{"--tenancy"}, embedded: true, wantErr: errTenancyEmbedded},
		{name: "placement is allowed", args: []string{"--tenancy", "--placement"}, wantOption: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &serveVerb{labels: settings.Labels{}}
			if err := v.parse(tc.args); err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			opt, mode, err := v.tenancy.option(tc.embedded)
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
