"""The unified options that ask every vendor for structured output, for the doors whose clients ask for it in
their own field (Chat Completions `response_format`, Responses `text.format`, Gemini `responseJsonSchema`)."""

from __future__ import annotations

from typing import Any

# What a door's `{"type": "json_object"}` (or Gemini's `application/json` without a schema) decodes to: JSON
# mode, no schema.
JSON_OBJECT: dict[str, Any] = {}
# The api whose adapter takes the schema in the client's own field (`StreamOptions.passthrough`).
ANTHROPIC_API = "anthropic-messages"


def structured_output(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The unified options for output following `schema` (None: no structured output; `JSON_OBJECT`: JSON mode,
    the unified `jsonObject`): `json_schema`, and for an Anthropic upstream the Messages field it is
    (`output_config.format`)."""
    if schema is JSON_OBJECT:
        return {"json_object": True}
    if schema is None:
        return {}
    output_config = {"format": {"type": "json_schema", "schema": schema}}
    return {"json_schema": schema, "passthrough": {ANTHROPIC_API: {"output_config": output_config}}}
