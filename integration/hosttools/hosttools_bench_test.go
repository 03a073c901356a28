package hosttools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/sandbox"
)

// roundTripProgram calls a tool 50 times and prints each guest-to-host-to-guest round trip
// in milliseconds, measured in the guest, as JSON.
const roundTripProgram = `
import json, time, maf_host_tools
ms = []
for i in range(50):
    t = time.perf_counter()
    maf_host_tools.ping(i=i)
    ms.append((time.perf_counter() - t) * 1000)
print(json.dumps(ms))
`

// hintVariants are the supervisor's two ways to learn of a request, at the default 200 ms
// poll: the watcher hint (the default on a streaming sandbox) and the poll alone.
var hintVariants = []struct {
	name string
	opts []hosttools.ProgramOption
}{
	{"hint", nil},
	{"poll_only", []hosttools.ProgramOption{hosttools.WithHint(nil)}},
}

// BenchmarkHostToolsRoundTrip measures one tool call's round trip as the guest sees it (from
// the shim's claim to the answer read back), 50 calls a program, with the watcher hint and
// with the poll alone, with the host-tool protocol run by a Go host over the engine in process. Run with
//
//	go test -run '^$' -bench HostToolsRoundTrip -benchtime 3x ./integration
//
// It reports the median and p95 over every call of every iteration.
func BenchmarkHostToolsRoundTrip(b *testing.B) {
	ping := hosttools.Tool{Name: "ping", Declaration: &hosttools.Declaration{}, AnyArguments: true,
		Func: func(context.Context, hosttools.Arguments) (any, error) { return "pong", nil }}
	env := newHostToolsEnvB(b, []hosttools.Option{hosttools.WithMaxCallsPerRun(64)}, ping)
	sb := env.acquireB(b)
	for _, v := range hintVariants {
		b.Run(v.name, func(b *testing.B) {
			var all []float64
			for b.Loop() {
				l, err := hosttools.NewLayout(hosttools.RandomRunDir("/maf-sandbox/work"), "")
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				res, err := hosttools.RunProgram(ctx, sb, env.reg.NewRun(), l, []byte(roundTripProgram), 4*time.Minute, v.opts...)
				_ = hosttools.ReclaimRun(ctx, sb, l, time.Minute)
				cancel()
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("RunProgram: %v, %s", err, res.Stdout())
				}
				var ms []float64
				if err := json.Unmarshal([]byte(strings.TrimSpace(res.Stdout())), &ms); err != nil || len(ms) != 50 {
					b.Fatalf("program output %q: %v", res.Stdout(), err)
				}
				all = append(all, ms...)
			}
			sort.Float64s(all)
			b.ReportMetric(all[len(all)/2], "median-ms/call")
			b.ReportMetric(all[len(all)*95/100], "p95-ms/call")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// spinProgram spins a counter for its whole life while, with calls set, the main thread calls
// a tool 50 times; it prints the spins per second.
const spinProgram = `
import threading, time, json
calls = %s
stop = False
count = [0]
def spin():
    while not stop:
        count[0] += 1
t = threading.Thread(target=spin); t.start()
start = time.perf_counter()
if calls:
    import maf_host_tools
    for i in range(50):
        maf_host_tools.ping(i=i)
else:
    time.sleep(%f)
stop = True; t.join()
print(json.dumps(count[0] / (time.perf_counter() - start)))
`

// BenchmarkHostToolsGuestShare reports the guest's share of its wall clock while a program
// calls a tool 50 times under supervision (the file plane freezes the guest around each call),
// as its spin rate against the same spin run by one plain exec.
func BenchmarkHostToolsGuestShare(b *testing.B) {
	ping := hosttools.Tool{Name: "ping", Declaration: &hosttools.Declaration{}, AnyArguments: true,
		Func: func(context.Context, hosttools.Arguments) (any, error) { return "pong", nil }}
	env := newHostToolsEnvB(b, []hosttools.Option{hosttools.WithMaxCallsPerRun(64)}, ping)
	sb := env.acquireB(b)
	for _, v := range hintVariants {
		b.Run(v.name, func(b *testing.B) { guestShare(b, env, sb, v.opts) })
	}
}

func guestShare(b *testing.B, env hostToolsEnv, sb sandbox.Sandbox, opts []hosttools.ProgramOption) {
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		l, _ := hosttools.NewLayout(hosttools.RandomRunDir("/maf-sandbox/work"), "")
		start := time.Now()
		res, err := hosttools.RunProgram(ctx, sb, env.reg.NewRun(), l, []byte(fmt.Sprintf(spinProgram, "True", 0.0)), 4*time.Minute, opts...)
		elapsed := time.Since(start)
		_ = hosttools.ReclaimRun(ctx, sb, l, time.Minute)
		if err != nil {
			cancel()
			b.Fatalf("supervised: %v", err)
		}
		var supervised, alone float64
		if json.Unmarshal([]byte(strings.TrimSpace(res.Stdout())), &supervised) != nil || res.ExitCode != 0 {
			cancel()
			b.Fatalf("supervised: exit %d, %q", res.ExitCode, res.Stdout())
		}
		if err := sb.WriteFile(ctx, "spin.py", []byte(fmt.Sprintf(spinProgram, "False", elapsed.Seconds()/2)), "."); err != nil {
			cancel()
			b.Fatal(err)
		}
		plain, err := sb.Exec(ctx, sandbox.Argv("python3", "spin.py"), ".", 4*time.Minute)
		cancel()
		if err != nil || json.Unmarshal([]byte(strings.TrimSpace(plain.Stdout())), &alone) != nil || alone == 0 {
			b.Fatalf("unsupervised: %v %q", err, plain.Stdout())
		}
		b.ReportMetric(100*supervised/alone, "guest-%")
		b.ReportMetric(0, "ns/op")
	}
}
