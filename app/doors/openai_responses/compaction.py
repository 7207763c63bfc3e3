"""Remote compaction as the Codex CLI asks for it (its "remote compaction v2", used for a provider named
"OpenAI" — the built-in one, also with `openai_base_url` pointing at the gateway — or an Azure one):

- the request: an ordinary `POST /v1/responses` whose last `input` item is `{"type": "compaction_trigger"}`;
- the answer it expects: exactly one `compaction` output item (`id`, `encrypted_content`) and
  `response.completed`;
- later requests: the user messages it kept, then that `compaction` item in place of the conversation before it.

The gateway serves it on every vendor with the turn's own model: the trigger becomes a user message asking the
model to summarize the conversation so far (`PROMPT`), the turn goes through the normal dispatch, and its text
answer is the summary, handed out as the item's `encrypted_content`:

    gwc1.<base64url(the summary, UTF-8)>

Nothing in it is secret (it is the client's own conversation, summarized), so it is encoded, not encrypted.
When a `compaction` item comes back in `input`, its summary becomes a user message (`SUMMARY_PREFIX` + the
summary) at its position, which every vendor reads as context. A compaction item the gateway did not make (one
from OpenAI itself, encrypted by OpenAI) cannot be read and is refused.

`POST /v1/responses/compact` (OpenAI's first remote compaction, `client.responses.compact`, which Codex CLIs
before the trigger used) is the same turn, not streamed, answered as OpenAI's compacted response: `{"id",
"object": "response.compaction", "created_at", "output": [the user messages of input, then the compaction
item], "usage"}` (`compact.py`).
"""

from __future__ import annotations

import base64
import binascii

PREFIX = "gwc1."
TRIGGER = "compaction_trigger"
ITEM_TYPES = ("compaction", "compaction_summary")  # the second is an older name the Codex CLI still reads
PROMPT = (
    "Context compaction: write a summary of the conversation so far that lets you continue the task without it. "
    "Include the user's requests and constraints, what has been done and decided, the state of the work "
    "(files, commands, results, errors), and what remains to be done next. Answer with the summary only."
)
SUMMARY_PREFIX = "The conversation before this point was compacted. Its summary:\n\n"


def wrap_summary(summary: str) -> str:
    """A compaction item's `encrypted_content` holding `summary`."""
    return PREFIX + base64.urlsafe_b64encode(summary.encode()).decode().rstrip("=")


def unwrap_summary(encrypted: str) -> str | None:
    """The summary a compaction item of this gateway holds; None for one the gateway did not make."""
    if not encrypted.startswith(PREFIX):
        return None
    data = encrypted[len(PREFIX) :]
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode()
    except (binascii.Error, ValueError):
        return None


def compaction_item(item_id: str, summary: str) -> dict[str, str]:
    return {"id": item_id, "type": "compaction", "encrypted_content": wrap_summary(summary)}
