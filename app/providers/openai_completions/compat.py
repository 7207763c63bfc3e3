"""Per-vendor differences of the Chat Completions format, held as data (the catalog provider's `compat`).

Every field has the value that suits OpenAI's own `/chat/completions`; a catalog entry names only what its
vendor does differently, in camelCase (`{"maxTokensField": "max_tokens", "developerRole": false}`).
Unknown keys are refused when the catalog is read, so a typo does not silently fall back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping

from pydantic.alias_generators import to_camel

ReasoningParam = Literal["reasoning_effort", "openrouter", "none"]


@dataclass(frozen=True, slots=True)
class Compat:
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    developer_role: bool = True  # system prompt as `developer` (reasoning models) or `system`
    reasoning_param: ReasoningParam = "reasoning_effort"  # how `options.reasoning` is sent, or not at all
    reasoning_efforts: tuple[str, ...] = ("minimal", "low", "medium", "high")  # levels the vendor accepts
    stream_usage: bool = True  # send `stream_options: {"include_usage": true}`
    # Same-model thinking goes back in the field it came in (`field`), as plain assistant text (`text`), or not
    # at all (`drop`: DeepSeek rejects `reasoning_content` in input messages).
    thinking_replay: Literal["field", "text", "drop"] = "field"
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"  # when the field is unknown
    tool_call_id_max_length: int | None = 40  # OpenAI: 40; longer ids from other vendors are shortened
    tool_call_id_alphanumeric: bool = False  # Mistral: ids of exactly 9 characters [A-Za-z0-9]
    tool_call_id_length: int | None = None  # exact length the vendor requires (Mistral: 9)
    tool_result_name: bool = False  # tool results carry `name` (Mistral, some local servers)
    stop: bool = True  # accepts `stop` sequences
    max_stop: int = 4  # how many stop sequences it takes
    tool_choice: bool = True  # accepts `tool_choice`
    tool_choice_required: bool = True  # accepts `tool_choice: "required"`
    images: bool = True  # accepts `image_url` parts
    temperature_with_reasoning: bool = False  # may send temperature while reasoning is on

    @classmethod
    def parse(cls, data: Mapping[str, Any] | None) -> "Compat":
        """The compat of a catalog provider entry; raises ValueError for unknown keys or bad values."""
        by_wire = {to_camel(f.name): f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in (data or {}).items():
            name = by_wire.get(key) or (key if key in by_wire.values() else None)
            if name is None:
                raise ValueError(f"unknown compat key {key!r} (known: {', '.join(sorted(by_wire))})")
            values[name] = tuple(value) if isinstance(value, list) else value
        compat = cls(**values)
        if compat.max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ValueError(
                f"compat maxTokensField must be max_completion_tokens or max_tokens, not {compat.max_tokens_field!r}"
            )
        if compat.reasoning_param not in ("reasoning_effort", "openrouter", "none"):
            raise ValueError(
                f"compat reasoningParam must be reasoning_effort, openrouter or none, not {compat.reasoning_param!r}"
            )
        if compat.reasoning_field not in ("reasoning_content", "reasoning"):
            raise ValueError(
                f"compat reasoningField must be reasoning_content or reasoning, not {compat.reasoning_field!r}"
            )
        if compat.thinking_replay not in ("field", "text", "drop"):
            raise ValueError(f"compat thinkingReplay must be field, text or drop, not {compat.thinking_replay!r}")
        return compat
