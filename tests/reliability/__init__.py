"""The reliability suite: bad input, lifecycle under load, concurrency,
faults from below, failing callbacks, leaks, sanitizers (docs/reliability.md)."""
