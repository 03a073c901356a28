package sandboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

func Example() {
	ctx := context.Background()
	b, _ := sandboxtest.New(sandboxtest.WithSandboxOptions(sandboxtest.WithStdout("python3", "hi\n")))
	spec, _ := sandbox.NewSpec("python")
	sb, _ := b.Acquire(ctx, sandbox.Key{Scope: "tenant", ThreadID: "thread", AgentID: "agent"}, spec)

	_ = sb.WriteFile(ctx, "in/data.txt", []byte("hello"), ".")
	st, _ := sb.StatFile(ctx, "in/data.txt", ".")
	fmt.Println(st.Path, st.Kind, *st.Size)

	res, _ := sb.Exec(ctx, sandbox.Argv("python3", "-c", "print('hi')"), ".", time.Minute)
	fmt.Print(res.StdoutText())
	fmt.Println(b.Sandbox().ExecCalls()[0].Text)

	err := sb.WriteFile(ctx, "../escape.txt", nil, ".")
	fmt.Println(errors.Is(err, sandbox.ErrInvalid))
	// Output:
	// in/data.txt file 5
	// hi
	// python3 -c 'print('"'"'hi'"'"')'
	// true
}
