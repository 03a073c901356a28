// Package itest is what the integration packages share: backends and keys on the test
// labels ([NewBackend], [NewKey], [BusyboxSpec], [Acquire]), the file planes a test runs over
// ([OnEveryPlane]), a backend served over NATS ([StartNATSEngine]), the engine command
// ([StartServe]), a relay in front of the daemon's socket ([Relay]), an engine wrapper that
// counts calls ([NewCountingBackend]) and derived images ([DerivedImage]). It is test code;
// only the integration tests import it.
package itest
