"""The public contract as plain data: requests, messages, events (docs/api.md §3–§5)."""
