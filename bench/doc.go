// Package bench holds Orrery's end-to-end benchmarks: the kernel's write
// path into SQLite, replay of a long session over SSE, and token-to-wire
// latency. Each has a baseline benchmark measured in the same run, so that
// figures are read as ratios on a shared, noisy machine. See
// docs/PERFORMANCE.md for the figures and the commands.
package bench
