// Package natstest embeds a NATS server for tests: [Run] starts one on 127.0.0.1 with a
// random port and JetStream under the test's temporary directory, and shuts it down when the
// test ends; [Connect] opens a client connection to it that closes with the test. It is test
// code; only tests import it.
package natstest
