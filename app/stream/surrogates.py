"""Keeping streamed text valid: UTF-16 surrogate halves that vendors cut between events.

A vendor that cuts an emoji between two events sends its UTF-16 surrogate pair as two JSON escapes, `\\ud83d`
at the end of one event and `\\ude00` at the start of the next. Each decodes to a lone surrogate: a Python
string can hold it, but it is not text, and no JSON encoder or UTF-8 codec will write it. The event stream
(`app.stream.turn`) runs every delta through a `SurrogateJoiner` per block, so what goes out is valid text:
a trailing high surrogate waits for the next delta of its block, a pair cut in two is joined into its one
character, and a half that never pairs is dropped (also one still waiting when the block ends).
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
# A pair that sits side by side in one string (joined into one character), or a half on its own (dropped).
_PAIR_OR_HALF = re.compile("([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]")


def _is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _join_pair(pair: str) -> str:
    high, low = ord(pair[0]), ord(pair[1])
    return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def _pair_or_nothing(match: re.Match[str]) -> str:
    pair = match.group(1)
    return _join_pair(pair) if pair else ""


def valid_text(text: str) -> str:
    """`text` with side-by-side surrogate pairs joined and lone surrogates dropped."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _PAIR_OR_HALF.sub(_pair_or_nothing, text)


class SurrogateJoiner:
    """Turns one block's deltas into valid text, holding a trailing high surrogate for the next delta."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = ""  # a high surrogate that ended the previous delta, waiting for its low half

    def feed(self, delta: str) -> str:
        """The valid text of `delta` (possibly empty); a trailing high surrogate is kept for the next call."""
        if self.held:
            delta = self.held + delta  # valid_text joins it with a low half that starts `delta`, or drops it
            self.held = ""
        elif delta.isascii():
            return delta  # the hot path: nothing to look at
        if _SURROGATE.search(delta) is None:
            return delta
        if _is_high(delta[-1]):
            self.held = delta[-1]
            delta = delta[:-1]
        return valid_text(delta)

    def end(self) -> None:
        """The block ended: a high surrogate still waiting never paired and is dropped."""
        self.held = ""
