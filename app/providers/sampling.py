"""Which of the sampling fields apps moving from the OpenAI API send (`seed`, the penalties, `logit_bias`) a
turn's vendor honours, and what happens to the others (docs/api.md, "Sampling fields and drop_params").

A field reaches the vendors whose api has it with the same meaning (`SAMPLING_APIS`: Chat Completions vendors all
four, Gemini `seed` and both penalties); each adapter maps the ones its api has. For any other vendor the turn is
refused with a 400 naming the field (`check`, before any upstream call: a route's fallback that cannot honour it
is left out), unless the turn drops params (`options.dropParams`, set by the client or by the key's or the
route's setting): then the vendor is sent the turn without them, and `dropped` names them for the
`X-Gateway-Dropped-Params` response header and the record. The fields a door knows no vendor honours through the
gateway (`options.unhonoured`, e.g. Chat Completions `n`) follow the same rule.
"""

from __future__ import annotations

from app.contract.refusals import RequestRejected
from app.contract.request import StreamOptions

# The fields, by their client-facing name (OpenAI's, as apps send them; the header and the record use it, and it
# is the unified option's attribute).
FIELDS = ("seed", "frequency_penalty", "presence_penalty", "logit_bias")
SAMPLING_APIS: dict[str, frozenset[str]] = {
    "openai-completions": frozenset(FIELDS),
    "google-generative-ai": frozenset({"seed", "frequency_penalty", "presence_penalty"}),
}


def asked(options: StreamOptions) -> list[str]:
    """The sampling fields the request sets; a zero penalty and an empty bias change nothing and count as unset."""
    return [
        name for name in FIELDS if getattr(options, name) is not None and (name == "seed" or getattr(options, name))
    ]


def unhonoured(api: str, options: StreamOptions) -> list[str]:
    """The fields of the request the vendor of `api` cannot honour: the door's own, then the sampling ones."""
    honoured = SAMPLING_APIS.get(api, frozenset())
    return [*(options.unhonoured or ()), *(name for name in asked(options) if name not in honoured)]


def check(api: str, vendor: str, options: StreamOptions) -> None:
    """Refuse (400) a turn whose vendor cannot honour a field it sets, unless the turn drops params."""
    if options.drop_params:
        return
    for name in unhonoured(api, options):
        raise RequestRejected(
            f"{name} is not honoured by {vendor} through the gateway; send drop_params: true (or the header "
            "X-Gateway-Drop-Params: true) to send the turn without it",
            param=name,
        )


def dropped(api: str, options: StreamOptions) -> tuple[str, ...]:
    """The fields the turn is sent to the vendor of `api` without (the dispatcher keeps them on the turn)."""
    return tuple(unhonoured(api, options)) if options.drop_params else ()
