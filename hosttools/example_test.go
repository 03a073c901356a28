package hosttools_test

import (
	"context"
	"fmt"

	"github.com/mafsandbox/engine/hosttools"
	"github.com/mafsandbox/engine/sandbox"
)

// A registry with one declared tool; a run answers a guest's calls with values or refusal
// sentences, never errors.
func Example() {
	reg, _ := hosttools.NewRegistry(hosttools.WithMaxCallsPerRun(3), hosttools.WithoutRegistrationWarning())
	src := sandbox.SourceTrusted
	_ = reg.Register(hosttools.Tool{Name: "add", Declaration: &hosttools.Declaration{Source: &src},
		Params: []hosttools.Param{{Name: "a", Required: true}, {Name: "b", Required: true}},
		Func: func(_ context.Context, args hosttools.Arguments) (any, error) {
			var a, b int
			_ = args.Decode("a", &a)
			_ = args.Decode("b", &b)
			return a + b, nil
		}})
	agg := reg.Aggregate() // what the spec carries; the registry is sealed now
	fmt.Println(agg.MaxCallsPerRun, *agg.ResultIntegrity)

	run := reg.NewRun()
	ctx := context.Background()
	fmt.Println(string(run.Call(ctx, "add", hosttools.Arguments{"a": []byte("2"), "b": []byte("3")}).Frame()))
	fmt.Println(run.Call(ctx, "add", hosttools.Arguments{"a": []byte("2")}).Refusal)
	fmt.Println(run.Call(ctx, "sub", nil).Refusal)
	fmt.Println(run.Call(ctx, "add", nil).Code)
	// Output:
	// 3 trusted
	// {"value": 5}
	// Error: arguments do not bind to host tool "add": missing a required argument: "b"
	// Error: "sub" is not a registered host tool
	// cap
}
