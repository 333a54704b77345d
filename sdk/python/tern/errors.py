"""What the gateway refused, by kind, each carrying the gateway's own message."""

from __future__ import annotations

from typing import Any, Optional, Tuple, Type


class TernError(Exception):
    """Every error this SDK raises."""


class ApiError(TernError):
    """The gateway answered an error status; `message` is its own word for what to fix."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.status = status
        self.message = message
        self.body = body


class ConnectionError(ApiError):  # noqa: A001 - the SDK's own, raised as tern.ConnectionError
    """The gateway could not be reached at all."""


class InvalidRequestError(ApiError):
    """400, 413, 422: a spec field or an input is not valid; the message names what to fix."""


class AuthError(ApiError):
    """401, 403: no token, a wrong one, or one without the right."""


class NotFoundError(ApiError):
    """404: no such deployment, call, task, map or sandbox in this workspace."""


class ConflictError(ApiError):
    """409: the thing has already ended (a task, a map, a sandbox)."""


class UnavailableError(ApiError):
    """429, 503, 504: too much waiting, stopped, or no capacity now; worth trying again later."""


# Where a task's error gives way to the handler's own traceback (the agent writes it so).
REMOTE_TRACEBACK = "\n\nRemote traceback:\n"


class RemoteError(TernError):
    """A call, task or map input that ran and failed: the handler's error as the gateway recorded it.

    Its message ends with the handler's own traceback when the runner sent one; `traceback` holds it alone.
    """

    def __init__(self, message: str, id: str) -> None:
        super().__init__(message)
        self.id = id
        _, found, trace = message.partition(REMOTE_TRACEBACK)
        self.traceback: Optional[str] = trace if found else None


_KINDS: Tuple[Tuple[Tuple[int, ...], Type[ApiError]], ...] = (
    ((400, 413, 422), InvalidRequestError),
    ((401, 403), AuthError),
    ((404,), NotFoundError),
    ((409,), ConflictError),
    ((429, 503, 504), UnavailableError),
)


def api_error(status: int, message: str, body: Any = None) -> ApiError:
    """The error of the right kind for a status."""
    for statuses, kind in _KINDS:
        if status in statuses:
            return kind(status, message, body)
    return ApiError(status, message, body)


def message_of(body: Any, fallback: str) -> str:
    """The gateway's message in an error answer: JSON `message` (a string or a list), or the text itself."""
    if isinstance(body, dict):
        said: Optional[Any] = body.get("message")
        if isinstance(said, list):
            return "; ".join(str(s) for s in said)
        if said is not None:
            return str(said)
    if isinstance(body, str) and body.strip():
        return body.strip()
    return fallback

