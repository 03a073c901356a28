// Package fingerprint tests the Docker fingerprint subject against a real Docker engine
// (docs/fingerprint.md): each residue kind planted and named, the clean call passing, every
// refusal, the observer container hardened and removed however its run ends, and the same
// proof over NATS. It holds only tests; they fail, rather than skip, when
// MAF_SANDBOX_REQUIRE_DOCKER=1 and no engine answers.
package fingerprint
