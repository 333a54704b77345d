"""What a handler answers when 200 and JSON is not what it means.

    import tern

    def predict(payload):
        if "prompt" not in payload:
            raise tern.HTTPError(400, "prompt is required")          # 400 {"error": "prompt is required"}
        return tern.Response({"id": 7}, status=201, headers={"Location": "/items/7"})

Tern's runners answer an HTTPError with its status, headers and a JSON body {"error": message}
(or `body` when given), and a Response as it says; any other exception stays a 500. The runners
recognise both by a marker attribute, so they need nothing installed.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Mapping, Optional


class HTTPError(Exception):
    """Raise in a handler to answer `status` (400-599) with `message`, `headers`, or a JSON `body` of its own."""

    __tern_http_error__ = True

    def __init__(self, status: int, message: str = "", headers: Optional[Mapping[str, str]] = None, body: Any = None) -> None:
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise ValueError(f"tern.HTTPError: status must be a whole number from 400 to 599, not {status!r}")
        if not message:
            try:
                message = HTTPStatus(status).phrase
            except ValueError:
                message = f"HTTP {status}"
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        self.body = body


class Response:
    """Return from a handler to choose the status, headers and body.

    `body`: bytes or str as they are, an iterator streamed (NDJSON, or SSE when asked), anything
    else as JSON. `media_type` sets Content-Type (default: by the body).
    """

    __tern_response__ = True

    def __init__(
        self,
        body: Any = None,
        status: int = 200,
        headers: Optional[Mapping[str, str]] = None,
        media_type: Optional[str] = None,
    ) -> None:
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise ValueError(f"tern.Response: status must be a whole number from 100 to 599, not {status!r}")
        self.body = body
        self.status = status
        self.headers = dict(headers or {})
        self.media_type = media_type
