"""The public contract as plain data: requests, messages, events (CONTRACT §2–§3)."""
