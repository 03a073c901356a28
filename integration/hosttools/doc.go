// Package hosttools tests host tools against a real Docker engine: model-written Python in
// the Python image calling tools on the host, directly and over NATS, with their hints and
// failures. It holds only tests; they fail, rather than skip, when
// MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package hosttools
