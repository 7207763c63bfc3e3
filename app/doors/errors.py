"""What a door raises for a request it cannot take: `BadRequest`, plain data (a status, a machine-readable
type, a message, the offending `param`, extra headers). The door's `error_body` renders it in the door's own
shape; the HTTP edge (`app.api.error_responses.ApiError`, a subclass) turns it into a response."""

from __future__ import annotations


class BadRequest(Exception):
    """A request refused before its turn starts: `status` (4xx), `type` (e.g. `validation_error`), `message`,
    the request field at fault (`param`) and headers the answer carries (e.g. `Retry-After`)."""

    def __init__(
        self, status: int, type_: str, message: str, param: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.param = param
        self.headers = headers or {}
