package egresslog_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/mafsandbox/engine/egresslog"
	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

func ExampleWriter() {
	w := egresslog.NewWriter(os.Stdout)
	_ = w.WriteReady(3128, []string{"api.example.com", "*.pkg.example"})
	_ = w.WriteDecision(sandbox.DecisionAllow, "api.example.com", 443)
	_ = w.WriteDecision(sandbox.DecisionDeny, "Evil.Example", 443)
	// Output:
	// listening on 3128; allowing: api.example.com, *.pkg.example
	// ALLOW api.example.com:443
	// DENY Evil.Example:443
}

func ExampleParseLog() {
	log := "2024-05-01T10:00:00.000000001Z listening on 3128; allowing: api.example.com\n" +
		"2024-05-01T10:00:02.5Z ALLOW api.example.com:443\n" +
		"2024-05-01T10:00:03Z DENY-NONGLOBAL [::1]:443\n"
	decisions, truncation, err := egresslog.ParseLog(strings.NewReader(log), egresslog.WithTimestamps())
	if err != nil {
		panic(err)
	}
	for _, d := range decisions {
		fmt.Println(d.At.Format("15:04:05.0"), d.Decision, d.Host, d.Port)
	}
	fmt.Println("truncated:", truncation.Truncated())
	// Output:
	// 10:00:02.5 ALLOW api.example.com 443
	// 10:00:03.0 DENY-NONGLOBAL [::1] 443
	// truncated: false
}

func ExampleAttribute() {
	key := sandbox.Key{Scope: "tenant-1", ThreadID: "t-1", AgentID: "devops"}
	value, _ := label.EncodeKey(key)
	labels := map[string]string{
		"maf-sandbox.scope":  "tenant-1",
		"maf-sandbox.thread": "t-1",
		"maf-sandbox.agent":  "devops",
		"maf-sandbox.kind":   "python",
		"maf-sandbox.role":   "proxy",
		label.KeyV1:          value,
	}
	got, how := egresslog.Attribute(labels, nil)
	fmt.Println(got, how)

	labels[label.KeyV1] = "" // the key was over budget
	got, how = egresslog.Attribute(labels, nil)
	fmt.Printf("%q %s\n", got.String(), how)
	got, how = egresslog.Attribute(labels, &key) // Dispose(key) may stand in
	fmt.Println(got, how)
	// Output:
	// tenant-1/t-1/devops label
	// "//" none
	// tenant-1/t-1/devops caller-key
}
