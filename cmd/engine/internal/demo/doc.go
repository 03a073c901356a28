// Package demo is `engine demo` ([Command]): the engine on its embedded defaults (an embedded
// NATS server on loopback, the service over the local Docker daemon, a console) and a scripted
// agent played against it through the Go client, as a host in another process drives it. Each
// step beyond the first closed sandbox has a file: the warm pool (pool.go), the allowlisted and
// inspected egress with its window read back (egress.go), model-written Python calling a host
// tool (codeact.go), the audit trail and a metrics line (audit.go), the console (console.go).
package demo
