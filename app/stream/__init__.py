"""The per-request event stream: settle guard, coalescing, back-pressure."""
