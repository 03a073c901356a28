// Package bench measures the engine's operations against a real Docker engine: the rows of
// `engine bench`, each timed over repeated runs after one warm-up.
package bench
