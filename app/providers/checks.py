"""Request checks every adapter's `check_request` shares: what no vendor can honour, phrased once.

Each raises `app.contract.refusals.RequestRejected` naming the request field, before any upstream call.
"""

from __future__ import annotations

from app.contract.messages import Context
from app.contract.request import StreamOptions, ToolChoiceTool
from app.contract.refusals import RequestRejected

TOOL_CHOICE = "options.toolChoice"
STOP = "options.stop"
TOP_P = "options.topP"
JSON_OBJECT = "options.jsonObject"
GEMINI_API = "google-generative-ai"  # the api a Gemini door client's own fields pass through to


def forces_a_tool(options: StreamOptions) -> bool:
    """`toolChoice` is "required" or names a tool."""
    return options.tool_choice == "required" or isinstance(options.tool_choice, ToolChoiceTool)


def check_tool_choice(context: Context, options: StreamOptions) -> None:
    """A forced tool needs tools, and a named tool must be one of them."""
    choice = options.tool_choice
    if not forces_a_tool(options):
        return
    tools = {t.name for t in context.tools or []}
    if not tools:
        raise RequestRejected(
            f"toolChoice {_describe(choice)} needs context.tools, and there are none", param=TOOL_CHOICE
        )
    if isinstance(choice, ToolChoiceTool) and choice.name not in tools:
        raise RequestRejected(f"toolChoice names tool {choice.name!r}, which is not among the tools", param=TOOL_CHOICE)


def check_no_gemini_cache(options: StreamOptions, vendor: str) -> None:
    """A Gemini door's `cachedContent` names a cache on Gemini: another vendor cannot read the turn's context from it."""
    if options.passthrough_for(GEMINI_API).get("cachedContent"):
        raise RequestRejected(
            f"cachedContent names a Gemini cache, which {vendor} cannot read: send the whole conversation in contents",
            param="cachedContent",
        )


def check_no_json_object(options: StreamOptions, vendor: str) -> None:
    """JSON mode without a schema (`jsonObject`) on a vendor that has none: refused, so a route's fallback on a
    vendor that has it serves the turn instead (a JSON schema, which every vendor takes, is the portable form)."""
    if options.json_object and options.json_schema is None:
        raise RequestRejected(
            f"{vendor} has no JSON mode without a schema (jsonObject: OpenAI json_object, Gemini responseMimeType "
            "application/json): give a JSON schema",
            param=JSON_OBJECT,
        )


def check_stop_count(options: StreamOptions, limit: int, vendor: str) -> None:
    if options.stop and len(options.stop) > limit:
        raise RequestRejected(f"{vendor} accepts at most {limit} stop sequences, not {len(options.stop)}", param=STOP)


def _describe(choice: object) -> str:
    return f"tool {choice.name!r}" if isinstance(choice, ToolChoiceTool) else f'"{choice}"'
