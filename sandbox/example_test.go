package sandbox_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mafsandbox/engine/sandbox"
	"github.com/mafsandbox/engine/sandbox/sandboxtest"
)

// The default posture: the router's isolation floor is microvm, so a container backend (a
// Docker-like one) is refused when the router is built, not when the first workload arrives.
// The host opts down with WithMinIsolation.
func ExampleNewRouter() {
	docker, _ := sandboxtest.New(sandboxtest.WithName("docker"), sandboxtest.WithIsolation(sandbox.IsolationContainer))

	_, err := sandbox.NewRouter([]sandbox.Backend{docker})
	var refused *sandbox.BackendNotPermittedError
	fmt.Println(errors.As(err, &refused), errors.Is(err, sandbox.ErrRefused))
	fmt.Println(err)

	r, err := sandbox.NewRouter([]sandbox.Backend{docker}, sandbox.WithMinIsolation(sandbox.IsolationContainer))
	fmt.Println(err, r.Enabled(), r.Backend().Name())
	// Output:
	// true true
	// sandbox backend "docker" declares isolation "container", below the required floor "microvm" (ladder, weakest first: none < runtime < os_process < container < hardened_container < microvm < vm); it is refused rather than degraded: lower MinIsolation only if the host accepts that boundary
	// <nil> true docker
}

// A router with a lowered floor serves the default spec: closed egress, exec and files_in,
// the default transfer limits, one sandbox per conversation, disposed after every call.
func ExampleRouter_Acquire() {
	ctx := context.Background()
	sb, _ := sandboxtest.NewSandbox(sandboxtest.WithInstanceID("c0ffee"))
	docker, _ := sandboxtest.New(sandboxtest.WithName("docker"), sandboxtest.WithIsolation(sandbox.IsolationContainer),
		sandboxtest.WithSandbox(sb))
	r, _ := sandbox.NewRouter([]sandbox.Backend{docker}, sandbox.WithMinIsolation(sandbox.IsolationContainer))

	spec, _ := sandbox.NewSpec("python")
	cleanup, _ := r.EffectiveCleanup(spec)
	fmt.Println(spec.Egress, spec.Requires, r.EffectiveIsolationScope(spec), cleanup)

	key := sandbox.Key{Scope: "tenant", ThreadID: "thread", AgentID: "agent"}
	got, err := r.Acquire(ctx, key, spec)
	fmt.Println(got.InstanceID(), err)
	// This router never served c0ffee before, and the fake says nothing about creating it,
	// so the router disposed it and acquired once more.
	fmt.Println(len(docker.Acquires()), len(docker.Disposals()))
	// Output:
	// closed exec, files_in conversation dispose
	// c0ffee <nil>
	// 2 1
}

// The router refuses rather than degrades: a backend that enforces only closed egress does
// not serve an allowlist workload, and nothing stronger is substituted.
func ExampleRouter_EnsureCanServe() {
	b, _ := sandboxtest.New(sandboxtest.WithName("docker"), sandboxtest.WithIsolation(sandbox.IsolationContainer),
		sandboxtest.WithDeclarations(sandbox.Declarations{EgressModes: sandbox.NewEgressSet(sandbox.EgressClosed)}))
	r, _ := sandbox.NewRouter([]sandbox.Backend{b}, sandbox.WithMinIsolation(sandbox.IsolationContainer))

	spec, _ := sandbox.NewSpec("fetch", sandbox.WithAllowlist(sandbox.Hosts("pypi.org")...))
	err := r.EnsureCanServe(spec)
	fmt.Println(errors.Is(err, sandbox.ErrRefused))
	fmt.Println(err)
	// Output:
	// true
	// sandbox backend "docker" cannot enforce the "allowlist" egress the "fetch" workload runs in (it enforces closed)
}

// An allowlist entry is tunnel-only (a host) or inspecting (methods and path patterns); the
// grammar refuses what could widen the policy unnoticed, such as a bare "*" or an IP literal.
func ExampleEgressRule() {
	spec, _ := sandbox.NewSpec("agent", sandbox.WithAllowlist(
		sandbox.EgressRule{Host: "pypi.org"},
		sandbox.EgressRule{Host: "api.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/acme/**"}},
	))
	fmt.Println(spec.RequiredCapabilities().Has(sandbox.EgressMethods))
	fmt.Println(sandbox.MatchEgressPath("/repos/acme/**", "/repos/acme/widgets/issues"))
	fmt.Println(sandbox.MatchEgressPath("/repos/acme/**", "/repos/acmex"))

	_, err := sandbox.NewSpec("agent", sandbox.WithAllowlist(sandbox.Hosts("169.254.169.254")...))
	fmt.Println(err)
	// Output:
	// true
	// true
	// false
	// egress allowlist entry "169.254.169.254" looks like an IPv4 literal (name a host)
}
