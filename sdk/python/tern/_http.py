"""The SDK's one HTTP transport to the gateway: bearer token, JSON or bytes in, typed errors out."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, Iterator, Mapping, Optional, Union

from ._config import Connection
from .errors import ConnectionError, api_error, message_of

Body = Union[None, bytes, Iterable[bytes], Mapping[str, Any], list, str, int, float]

#: How long one read may wait; long polls ask the gateway for less.
READ_TIMEOUT_S = 60.0


def query(**values: Any) -> str:
    """`?a=1&b=true` from the values that are set (booleans as true/false)."""
    pairs = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in values.items() if v is not None}
    return f"?{urllib.parse.urlencode(pairs)}" if pairs else ""


def quote(segment: str) -> str:
    return urllib.parse.quote(str(segment), safe="")


def _parse(raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


class Http:
    """Requests to one gateway. Errors are tern.errors.ApiError subclasses carrying the gateway's message."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def open(
        self,
        method: str,
        path: str,
        body: Body = None,
        content_type: Optional[str] = None,
        timeout: float = READ_TIMEOUT_S,
    ):
        """The answer, open for reading (bytes, NDJSON); an error status raises with the gateway's message."""
        headers: Dict[str, str] = {"accept": "application/json"}
        if self.connection.token:
            headers["authorization"] = f"Bearer {self.connection.token}"
        data: Any = None
        # JSON: any value but None (a handler's input may be `7` or "text"); raw bodies are bytes.
        if isinstance(body, (dict, list, str, int, float)):
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        elif body is not None:
            data = body  # bytes, or an iterable of bytes sent chunked as it is read
            headers["content-type"] = content_type or "application/octet-stream"
        request = urllib.request.Request(f"{self.connection.gateway}{path}", data=data, headers=headers, method=method)
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as e:
            parsed = _parse(e.read())
            raise api_error(e.code, message_of(parsed, e.reason or "error"), parsed) from None
        except (urllib.error.URLError, socket.timeout, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ConnectionError(
                0, f"cannot reach the gateway at {self.connection.gateway} ({reason}); is it running? (npm run up)"
            ) from None

    def request(self, method: str, path: str, body: Body = None, timeout: float = READ_TIMEOUT_S) -> Any:
        """A JSON request; the answer's JSON (or text)."""
        with self.open(method, path, body, timeout=timeout) as response:
            return _parse(response.read())

    def get(self, path: str, timeout: float = READ_TIMEOUT_S) -> Any:
        return self.request("GET", path, timeout=timeout)

    def ndjson(self, method: str, path: str, body: Body = None, timeout: float = READ_TIMEOUT_S) -> Iterator[Dict[str, Any]]:
        """Each line of an NDJSON answer, parsed, as it arrives."""
        with self.open(method, path, body, timeout=timeout) as response:
            for line in response:
                if line.strip():
                    yield json.loads(line)
