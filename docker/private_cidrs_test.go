package docker

import (
	"errors"
	"slices"
	"testing"
)

func TestParsePrivateCIDRs(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{"none", "", nil, false},
		{"blanks only", " , ,", nil, false},
		{"one", "10.20.0.0/16", []string{"10.20.0.0/16"}, false},
		{"several, spaced", " 172.30.1.0/24 ,fd00:1::/64,, 192.168.7.0/24 ", []string{"172.30.1.0/24", "fd00:1::/64", "192.168.7.0/24"}, false},
		{"the widest private ranges", "10.0.0.0/8,fc00::/7", []string{"10.0.0.0/8", "fc00::/7"}, false},
		{"a lone address", "10.1.2.3", nil, true},
		{"not an address", "intranet/24", nil, true},
		{"bits out of range", "10.0.0.0/33", nil, true},
		{"everything v4", "0.0.0.0/0", nil, true},
		{"everything v6", "::/0", nil, true},
		{"wider than /8", "10.0.0.0/7", nil, true},
		{"wider than /7", "fc00::/6", nil, true},
		{"mapped everything", "::ffff:0.0.0.0/96", nil, true},
		{"one bad among good", "10.20.0.0/16,0.0.0.0/0", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePrivateCIDRs(tc.in)
			var pe *PrivateCIDRError
			if tc.wantErr {
				if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParsePrivateCIDRs(%q) = %v, %v; want a *PrivateCIDRError", tc.in, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePrivateCIDRs(%q): %v", tc.in, err)
			}
			var shown []string
			for _, p := range got {
				shown = append(shown, p.String())
			}
			if !slices.Equal(shown, tc.want) {
				t.Fatalf("ParsePrivateCIDRs(%q) = %v, want %v", tc.in, shown, tc.want)
			}
		})
	}
}
