package testtimes

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"a"}`,
		`{"Action":"run","Package":"a","Test":"TestSlow"}`,
		`{"Action":"pass","Package":"a","Test":"TestSlow/sub","Elapsed":9}`,
		`{"Action":"pass","Package":"a","Test":"TestSlow","Elapsed":9.5}`,
		`{"Action":"fail","Package":"a","Test":"TestFast","Elapsed":0.2}`,
		`{"Action":"skip","Package":"a","Test":"TestSkipped","Elapsed":0}`,
		`# a build failure's text is not an event`,
		`{"Action":"fail","Package":"a","Elapsed":10}`,
		`{"Action":"pass","Package":"b","Test":"TestMiddle","Elapsed":3}`,
		`{"Action":"pass","Package":"b","Elapsed":20}`,
		`{"Action":"run","Package":"c","Test":"TestNeverEnded"}`,
	}, "\n")
	var times Times
	if err := times.Read(strings.NewReader(stream), ""); err != nil {
		t.Fatal(err)
	}
	if err := times.Read(strings.NewReader(`{"Action":"pass","Package":"b","Elapsed":1}`), "cli"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := times.Report(&out, 2); err != nil {
		t.Fatal(err)
	}
	want := `packages, slowest first (3):
        20s  pass  b
        10s  fail  a
         1s  pass  b [cli]
the 2 slowest tests:
       9.5s  pass  a TestSlow
         3s  pass  b TestMiddle
tests: 3 passed, 1 failed, 1 skipped
`
	if out.String() != want {
		t.Fatalf("report:\n%s\nwant:\n%s", out.String(), want)
	}
}
