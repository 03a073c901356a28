package label_test

import (
	"fmt"
	"strings"

	"github.com/mafsandbox/engine/label"
	"github.com/mafsandbox/engine/sandbox"
)

func ExampleEncodeKey() {
	v, ok := label.EncodeKey(sandbox.Key{Scope: "scope", ThreadID: "thread", AgentID: "agent"})
	fmt.Println(v, ok)
	v, ok = label.EncodeKey(sandbox.Key{Scope: strings.Repeat("x", 3057)})
	fmt.Printf("%q %v\n", v, ok)
	// Output:
	// WyJzY29wZSIsICJ0aHJlYWQiLCAiYWdlbnQiLCAiIl0= true
	// "" false
}
