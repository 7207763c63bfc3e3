"""Every body the `anthropic` SDK's request types allow (`MessageCreateParamsStreaming`, beta included) is either
decoded and buildable for every vendor, or a 400 (404 for a model name) naming a field: never an exception
that would be a 500.

The bodies are generated from the SDK's own TypedDicts (walked here: `hypothesis.strategies.from_type` does not
take `Iterable[...]` fields as JSON, nor bound their depth), so a field the SDK gains is generated too.
"""

from __future__ import annotations

import collections.abc
import copy
import json
import types
import typing

import typing_extensions
from pathlib import Path
from typing import Any

from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.doors.errors import BadRequest
from app.contract.catalog_entries import ModelInfo, Pricing
from app.doors.anthropic_messages.request import decode
from app.providers.anthropic.request import build_request as anthropic_request
from app.providers.google.request import build_request as google_request
from app.providers.openai_responses.request import build_request as openai_request
from app.providers.openai_completions.compat import Compat
from app.providers.openai_completions.request import build_request as completions_request
from app.contract.refusals import RequestRejected
from app.providers.base import ProviderError
from tests.conftest import examples

MAX_DEPTH = 6
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
    max_leaves=4,
)
# Values the SDK types leave open (a JSON schema, a model name) drawn from what a real client would send.
OVERRIDES: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from(["anthropic/text", "openai/text", "google/text", "text", "no-such/model"]),
    "input_schema": st.just({"type": "object", "properties": {"x": {"type": "string"}}}),
    "media_type": st.sampled_from(["image/png", "image/jpeg", "application/pdf"]),
    "data": st.sampled_from(["aGVsbG8=", ""]),
    "max_tokens": st.integers(1, 200_000),
    "budget_tokens": st.integers(0, 100_000),
}


def strategy(tp: Any, depth: int = 0, name: str = "") -> st.SearchStrategy[Any]:
    if name in OVERRIDES:
        return OVERRIDES[name]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return strategy(args[0], depth, name)
    if tp in (typing.Any, object):
        return JSON
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([strategy(a, depth, name) for a in args])
    if typing_extensions.is_typeddict(tp):
        if depth >= MAX_DEPTH:
            return st.nothing()
        # `Required[...]` marks a required key (`__required_keys__` misses those of a `total=False` base).
        hints = typing_extensions.get_type_hints(tp, include_extras=True)
        needed = {k for k, v in hints.items() if typing.get_origin(v) is typing_extensions.Required} | set(
            tp.__required_keys__
        )
        hints = {
            k: typing.get_args(v)[0]
            if typing.get_origin(v) in (typing_extensions.Required, typing_extensions.NotRequired)
            else v
            for k, v in hints.items()
        }
        required = {k: strategy(v, depth + 1, k) for k, v in hints.items() if k in needed}
        optional = {k: strategy(v, depth + 1, k) for k, v in hints.items() if k not in needed}
        return st.fixed_dictionaries(required, optional=optional)
    if (
        origin in (list, collections.abc.Iterable, collections.abc.Sequence)
        or getattr(tp, "__name__", "") == "SequenceNotStr"
    ):
        item = args[0] if args else str
        elements = st.nothing() if depth >= MAX_DEPTH else strategy(item, depth + 1, name)
        return st.just([]) if elements.is_empty else st.lists(elements, max_size=3)
    if origin in (dict, collections.abc.Mapping):
        return st.dictionaries(st.text(max_size=4), JSON, max_size=2)
    if tp is str:
        return st.text(max_size=8)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(-2, 200_000)
    if tp is float:
        return st.floats(-1, 3, allow_nan=False)
    if tp is type(None):
        return st.none()
    return JSON  # a type this walk does not know (e.g. a datetime): JSON of any shape


BODIES = strategy(MessageCreateParamsStreaming)
MODELS = [
    (anthropic_request, ModelInfo("anthropic", "claude-sonnet-4-5", Pricing(), max_tokens=64000, reasoning=True)),
    (openai_request, ModelInfo("openai", "gpt-5-mini", Pricing(), max_tokens=128000, reasoning=True)),
    (google_request, ModelInfo("google", "gemini-2.5-flash", Pricing(), max_tokens=65536, reasoning=True)),
    (
        lambda m, c, o: completions_request(m, c, o, Compat()),
        ModelInfo("groq", "openai/gpt-oss-120b", Pricing(), max_tokens=65536, reasoning=True),
    ),
]


@settings(
    max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(BODIES)
def test_any_body_the_sdk_types_allow_is_decoded_or_a_400_naming_a_field(body):
    try:
        request = decode(body, {"anthropic-beta": "context-management-2025-06-27"})
    except BadRequest as error:
        assert error.status in (400, 404), error.message
        assert error.param, error.message
        assert error.message.startswith(error.param), error.message
        return
    for build, model in MODELS:
        try:
            build(model, request.unified.context, request.unified.options)
        except (RequestRejected, ProviderError):
            pass  # a refusal before any call, typed


def _field_strategies() -> dict[str, st.SearchStrategy[Any]]:
    hints = typing_extensions.get_type_hints(MessageCreateParamsStreaming, include_extras=True)
    return {
        k: strategy(typing.get_args(v)[0] if typing.get_origin(v) is typing_extensions.Required else v, 1, k)
        for k, v in hints.items()
    }


FIELDS = _field_strategies()
CLAUDE_CODE = json.loads((Path(__file__).parents[1] / "claude_code" / "claude-code-2.json").read_text())["body"]
# One field of a real Claude Code request replaced by any value its SDK type allows (the rest stays valid, so
# the decoder and the builders are reached far more often than from wholly generated bodies).
MUTATED = st.sampled_from(sorted(FIELDS)).flatmap(lambda k: FIELDS[k].map(lambda v: (k, v)))


@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(MUTATED, st.sampled_from(["anthropic/text", "openai/text", "google/text"]))
def test_a_claude_code_request_with_any_field_the_sdk_allows_is_decoded_or_a_400(field_value, model):
    field, value = field_value
    body = {**copy.deepcopy(CLAUDE_CODE), "model": model, field: value}
    test_any_body_the_sdk_types_allow_is_decoded_or_a_400_naming_a_field.hypothesis.inner_test(body)
