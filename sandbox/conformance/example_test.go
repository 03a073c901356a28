package conformance_test

import (
	"fmt"

	"github.com/mafsandbox/engine/sandbox/conformance"
)

// The layout a working directory is attacked with: the outside directory is a sibling that
// shares the working directory's string prefix, and probes reach it relatively.
func ExampleNewLayout() {
	l, err := conformance.NewLayout("/maf-sandbox/work")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l.Outside)
	fmt.Println(l.In(conformance.LinkDir), "->", l.Outside)
	fmt.Println(l.In(conformance.LinkFile), "->", l.Out(conformance.SecretFile))
	fmt.Println(l.Beyond(conformance.SecretFile))
	// Output:
	// /maf-sandbox/work-outside
	// /maf-sandbox/work/link-dir -> /maf-sandbox/work-outside
	// /maf-sandbox/work/link-file -> /maf-sandbox/work-outside/secret.txt
	// ../work-outside/secret.txt
}
