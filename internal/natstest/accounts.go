package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Password is every user's password on a [RunTenants] server.
const Password = "pw"

// statsSubject is where the engines' micro services answer their statistics
// ($SRV.STATS.<messages.ServiceName>): a tenant's console finds the pool's engines there. The
// engine account exports it with streamed responses, since every engine answers one request.
const statsSubject = "$SRV.STATS.maf-sandbox-engine"

// eventPrefix is the engine's default event subject prefix (events.DefaultSubjectPrefix).
const eventPrefix = "maf.sandbox.docker"

// RunTenants starts an embedded server (127.0.0.1, a random port, JetStream for the engine's
// account only) with the
// accounts of a multi-tenant engine pool, as docs/operations.md#tenancy configures them:
// account engine (user engine) exports the API subjects under apiPrefix as a service; each
// tenant account (user of the same name) imports them with share: true, exports its tool
// subjects maf.sandbox.tools.<tenant>.> to the engine, and imports the engine's stream
// maf.sandbox.stream.<tenant>.>, and imports its own events: the engine account (the only one
// with JetStream) exports the audit and egress subjects of the scope named as the tenant,
// under the default event prefix maf.sandbox.docker, to that tenant alone (the tenant names
// are plain subject tokens, so the scope's token is the name), and its processes' output
// subjects likewise; and imports the engines' statistics subject, so that a console of the tenant's finds the engines. Connect as an account with
// [ConnectAs].
func RunTenants(t testing.TB, engine, apiPrefix string, tenants ...string) *server.Server {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "host: 127.0.0.1\nport: -1\njetstream: {store_dir: %q}\naccounts {\n", t.TempDir())
	var engineExports, engineImports []string
	engineExports = append(engineExports, fmt.Sprintf(`{service: "%s.>"}`, apiPrefix),
		fmt.Sprintf(`{service: %q, response_type: stream}`, statsSubject))
	for _, ten := range tenants {
		engineExports = append(engineExports, fmt.Sprintf(`{stream: "maf.sandbox.stream.%s.>", accounts: [%q]}`, ten, ten),
			fmt.Sprintf(`{stream: "%s.audit.%s.>", accounts: [%q]}`, eventPrefix, ten, ten),
			fmt.Sprintf(`{stream: "%s.egress.observed.%s.*", accounts: [%q]}`, eventPrefix, ten, ten),
			fmt.Sprintf(`{stream: "%s.process.%s.>", accounts: [%q]}`, eventPrefix, ten, ten))
		engineImports = append(engineImports, fmt.Sprintf(`{service: {account: %q, subject: "maf.sandbox.tools.%s.>"}}`, ten, ten))
		fmt.Fprintf(&b, "  %q: {\n    users: [{user: %q, password: %q}]\n", ten, ten, Password)
		fmt.Fprintf(&b, "    imports: [{service: {account: %q, subject: \"%s.>\"}, share: true}, {stream: {account: %q, subject: \"maf.sandbox.stream.%s.>\"}},\n",
			engine, apiPrefix, engine, ten)
		fmt.Fprintf(&b, "      {stream: {account: %q, subject: \"%s.audit.%s.>\"}}, {stream: {account: %q, subject: \"%s.egress.observed.%s.*\"}},\n",
			engine, eventPrefix, ten, engine, eventPrefix, ten)
		fmt.Fprintf(&b, "      {stream: {account: %q, subject: \"%s.process.%s.>\"}},\n", engine, eventPrefix, ten)
		fmt.Fprintf(&b, "      {service: {account: %q, subject: %q}}]\n", engine, statsSubject)
		fmt.Fprintf(&b, "    exports: [{service: \"maf.sandbox.tools.%s.>\", accounts: [%q]}]\n  }\n", ten, engine)
	}
	fmt.Fprintf(&b, "  %q: {\n    jetstream: enabled\n    users: [{user: %q, password: %q}]\n    exports: [%s]\n    imports: [%s]\n  }\n}\n",
		engine, engine, Password, strings.Join(engineExports, ", "), strings.Join(engineImports, ", "))
	path := filepath.Join(t.TempDir(), "accounts.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatalf("natstest: write config: %v", err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("natstest: config %s: %v\n%s", path, err, b.String())
	}
	opts.NoLog, opts.NoSigs = true, true
	return RunWithOptions(t, opts)
}

// ConnectAs connects to a [RunTenants] server as the user of account and closes the
// connection when the test ends.
func ConnectAs(t testing.TB, s *server.Server, account string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return Connect(t, s, append([]nats.Option{nats.UserInfo(account, Password)}, opts...)...)
}
