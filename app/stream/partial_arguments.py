"""`partialArguments`: a tool call's arguments parsed so far, added to each `toolcall_delta` on request.

A client that sets `options.partialArguments` gets, on every `toolcall_delta`, the value the accumulated
argument text denotes so far — the same value partial-json-parser's `loads` gives for that text (with
every kind of partialness allowed): complete members, the last string cut where it stands, a number
without a dangling `.`/`e`/sign, `t`/`n`/`f` completed to `true`/`null`/`false`, containers closed; a member
whose key or value has not begun is left out.

Re-parsing the whole text on every delta with partial-json-parser costs pure-Python time proportional to the
text, so a long tool call costs O(n²) in Python. `PartialJson` instead scans each fragment once (O(fragment)
Python work, string contents skipped with one regex search), keeping just enough state to know where the
text can be cut and which closing characters complete it; the value is then `orjson.loads` of
`text[:cut] + closers`, linear but in C.

Two deliberate differences from partial-json-parser: a string never ends in half a surrogate pair (a
trailing `\\uD800`-`\\uDBFF` escape waits for its low half, since a lone surrogate cannot be sent as UTF-8),
and text that is not the start of a JSON value keeps the last value that parsed (initially `{}`, as pi-ai's
`parseStreamingJson` answers for nothing parseable) instead of raising.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

import orjson

_STRING_SPECIAL = re.compile(r'["\\]')
_WHITESPACE = frozenset(" \t\r\n")
_NUMBER_CHARS = frozenset("0123456789.-+eE")
_NUMBER_TRAILERS = ".-+eE"
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')
_HEX = frozenset("0123456789abcdefABCDEF")
_LITERALS = {"t": "true", "f": "false", "n": "null"}


class _Expect(Enum):
    """What the scanner expects next at the innermost level."""

    VALUE = "value"  # a value (top level, after `:`, after `[` or `,` in an array)
    KEY = "key"  # a key or `}` (after `{` or `,` in an object)
    COLON = "colon"  # `:` after a key
    AFTER = "after"  # `,` or the container's closer, after a value
    STRING = "string"  # inside a string (a key or a value)
    NUMBER = "number"
    LITERAL = "literal"  # inside true/false/null
    END = "end"  # the top-level value is complete


class _Container:
    """An open `{` or `[`: its kind and where its complete members end (the cut when nothing else is partial)."""

    __slots__ = ("kind", "opened", "safe")

    def __init__(self, kind: str, opened: int) -> None:
        self.kind = kind
        self.opened = opened  # the index just after the bracket
        self.safe = opened

    @property
    def empty(self) -> bool:
        return self.safe == self.opened


class PartialJson:
    """One JSON text arriving in fragments; `value()` is what it denotes so far."""

    def __init__(self) -> None:
        self._text = ""
        self._pos = 0  # everything before this index has been scanned
        self._stack: list[_Container] = []
        self._expect = _Expect.VALUE
        self._token_start = 0  # where the string, number or literal being scanned starts
        self._string_is_key = False
        self._content_cut = 0  # inside a string: its content is complete up to here
        self._broken = False  # the text is not the start of a JSON value
        self._last: Any = {}
        self._last_completion: tuple[int, str] | None = None

    @property
    def text(self) -> str:
        return self._text

    def feed(self, fragment: str) -> None:
        self._text += fragment
        if not self._broken:
            try:
                self._scan()
            except _NotJson:
                self._broken = True

    def value(self) -> Any:
        """The arguments parsed so far (a fresh object only when the text denotes something new)."""
        if self._broken:
            return self._last
        completion = self._completion()
        if completion is None or completion == self._last_completion:
            return self._last
        cut, tail = completion
        try:
            parsed = orjson.loads(self._text[:cut] + tail)
        except orjson.JSONDecodeError:
            return self._last
        self._last, self._last_completion = parsed, completion
        return parsed

    # ----------------------------------------------------------------- completion

    def _closers(self) -> str:
        return "".join("}" if c.kind == "{" else "]" for c in reversed(self._stack))

    def _completion(self) -> tuple[int, str] | None:
        """Where to cut the text and what to append, or None when no value has begun."""
        expect = self._expect
        if expect is _Expect.END:
            return self._pos, ""
        if expect is _Expect.STRING and not self._string_is_key:
            return self._content_cut, '"' + self._closers()
        if expect is _Expect.NUMBER:
            number = self._text[self._token_start : self._pos].rstrip(_NUMBER_TRAILERS)
            if number:
                return self._token_start + len(number), self._closers()
        elif expect is _Expect.LITERAL:
            literal = _LITERALS[self._text[self._token_start]]
            return self._token_start, literal + self._closers()
        if not self._stack:
            return None
        return self._stack[-1].safe, self._closers()

    # ----------------------------------------------------------------- scanning

    def _value_done(self, end: int) -> None:
        """A value ending at `end` completed: its container's complete members now reach `end`."""
        if self._stack:
            self._stack[-1].safe = end
            self._expect = _Expect.AFTER
        else:
            self._expect = _Expect.END

    def _scan(self) -> None:
        text = self._text
        length = len(text)
        pos = self._pos
        while pos < length:
            expect = self._expect
            if expect is _Expect.STRING:
                pos = self._scan_string(text, pos)
                if self._expect is _Expect.STRING:  # the string continues in a later fragment
                    break
                continue
            if expect is _Expect.NUMBER:
                while pos < length and text[pos] in _NUMBER_CHARS:
                    pos += 1
                if pos == length:
                    break
                self._value_done(pos)
                continue
            if expect is _Expect.LITERAL:
                literal = _LITERALS[text[self._token_start]]
                seen = text[self._token_start : min(length, self._token_start + len(literal))]
                if not literal.startswith(seen):
                    raise _NotJson
                if len(seen) < len(literal):
                    pos = length
                    break
                pos = self._token_start + len(literal)
                self._value_done(pos)
                continue
            char = text[pos]
            if char in _WHITESPACE:
                pos += 1
                continue
            if expect is _Expect.VALUE:
                pos = self._begin_value(char, pos)
            elif expect is _Expect.KEY:
                if char == '"':
                    self._begin_string(pos, key=True)
                elif char == "}" and self._stack[-1].empty:
                    pos = self._close(char, pos)
                    continue
                else:
                    raise _NotJson
                pos += 1
            elif expect is _Expect.COLON:
                if char != ":":
                    raise _NotJson
                self._expect = _Expect.VALUE
                pos += 1
            elif expect is _Expect.AFTER:
                if char == ",":
                    self._expect = _Expect.KEY if self._stack[-1].kind == "{" else _Expect.VALUE
                    pos += 1
                elif char in "}]":
                    pos = self._close(char, pos)
                else:
                    raise _NotJson
            else:  # END: only whitespace may follow the top-level value
                raise _NotJson
        self._pos = pos

    def _begin_value(self, char: str, pos: int) -> int:
        if char == '"':
            self._begin_string(pos, key=False)
            return pos + 1
        if char in "{[":
            self._stack.append(_Container(char, pos + 1))
            self._expect = _Expect.KEY if char == "{" else _Expect.VALUE
            return pos + 1
        if char == "]" and self._stack and self._stack[-1].kind == "[" and self._stack[-1].empty:
            return self._close(char, pos)  # `[]`
        if char == "-" or char.isdigit():
            self._token_start = pos
            self._expect = _Expect.NUMBER
            return pos + 1
        if char in _LITERALS:
            self._token_start = pos
            self._expect = _Expect.LITERAL
            return pos
        raise _NotJson

    def _close(self, char: str, pos: int) -> int:
        container = self._stack.pop()
        if container.kind != ("{" if char == "}" else "["):
            raise _NotJson
        self._value_done(pos + 1)
        return pos + 1

    def _begin_string(self, pos: int, key: bool) -> None:
        self._expect = _Expect.STRING
        self._string_is_key = key
        self._token_start = pos
        self._content_cut = pos + 1

    def _scan_string(self, text: str, pos: int) -> int:
        """Scan string content from `pos`; returns where scanning stopped (at an incomplete escape, or the end)."""
        length = len(text)
        while True:
            match = _STRING_SPECIAL.search(text, pos)
            if match is None:
                self._content_cut = length
                return length
            at = match.start()
            if text[at] == '"':
                if self._string_is_key:
                    self._expect = _Expect.COLON
                else:
                    self._value_done(at + 1)
                return at + 1
            escaped = _escape_length(text, at)
            if escaped == 0:  # incomplete: wait for the rest, content ends before the backslash
                self._content_cut = at
                return at
            pos = at + escaped
            self._content_cut = pos


class _NotJson(Exception):
    """The text cannot be the start of a JSON value."""


def _escape_length(text: str, at: int) -> int:
    """Length of the escape sequence at `text[at]` (a backslash), or 0 when the text ends inside it.
    A high-surrogate `\\uXXXX` counts together with its low half, so a string is never cut between the two."""
    length = len(text)
    if at + 1 >= length:
        return 0
    kind = text[at + 1]
    if kind in _SIMPLE_ESCAPES:
        return 2
    if kind != "u":
        raise _NotJson
    code = _hex4(text, at + 2)
    if code is None:
        return 0
    if not 0xD800 <= code <= 0xDBFF:
        return 6
    # A high surrogate: its low half must follow as `\uDC00`-`\uDFFF`.
    low_start = at + 6
    prefix = text[low_start : low_start + 2]
    if prefix != "\\u"[: len(prefix)]:
        raise _NotJson
    low = _hex4(text, low_start + 2)
    if low is None:
        return 0
    if not 0xDC00 <= low <= 0xDFFF:
        raise _NotJson
    return 12


def _hex4(text: str, start: int) -> int | None:
    """The four hex digits at `start` as a number, None when the text ends before them."""
    digits = text[start : start + 4]
    if any(d not in _HEX for d in digits):
        raise _NotJson
    if len(digits) < 4:
        return None
    return int(digits, 16)


class PartialArguments:
    """Adds `partialArguments` to the `toolcall_delta` events of one turn (one parser per open tool call)."""

    def __init__(self) -> None:
        self._calls: dict[int, PartialJson] = {}

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        kind = event["type"]
        if kind == "toolcall_delta":
            index = event["contentIndex"]
            parser = self._calls.get(index)
            if parser is None:
                parser = self._calls[index] = PartialJson()
            parser.feed(event["delta"])
            return {**event, "partialArguments": parser.value()}
        if kind == "toolcall_start" or kind == "toolcall_end":
            self._calls.pop(event["contentIndex"], None)
        return event
