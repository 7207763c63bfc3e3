"""The public contract as plain data: requests, messages, events (docs/api.md §3–§5), and the typed failures
and refusals a turn can end with (`failures`, `refusals`, `limit_kinds`)."""
