// Package integration holds the tests that run the engine against a real Docker engine. They
// fail, rather than skip, when MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package integration
