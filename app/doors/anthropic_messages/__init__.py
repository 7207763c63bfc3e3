"""The Anthropic Messages door (`POST /v1/messages`): `request.py` decodes Anthropic's request body into the
unified request, `events.py` encodes the normalized events as Anthropic's stream and `message` object,
`signatures.py` wraps signed thinking with its origin, `errors.py` gives errors Anthropic's shape.
docs/doors/anthropic-messages.md describes the door."""
