// Package bench is `engine bench`: [Command] parses the verb's flags and prints the rows; the
// rest measures the engine's operations against a real Docker engine, each row timed over
// repeated runs after one warm-up ([Run]), a cold acquire's per-call trace ([TraceCold]) and
// the costs as live sandboxes grow ([Scale]).
package bench
