//go:build !race

package proxy

// raceFactor widens memory budgets under the race detector; the proxy ships without it.
const raceFactor = 1.0
