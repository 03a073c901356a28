//go:build race

package proxy

// raceFactor widens memory budgets under the race detector, which enlarges goroutine stacks
// and heap objects; the proxy ships without it.
const raceFactor = 1.5
