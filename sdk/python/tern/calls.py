"""Calls and tasks that run on their own: read them later with .get()."""

from __future__ import annotations

import time
from typing import Any, Dict

from ._http import Http, quote
from .errors import RemoteError

#: Seconds one long poll holds open: under the transport's read timeout; longer waits poll again.
WAIT_PER_REQUEST = 25


def wait_until_done(http: Http, path: str, view: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    """Long polls `<path>/wait` until the view says done, or `timeout` seconds pass; the last view."""
    deadline = time.monotonic() + timeout
    while not view.get("done") and time.monotonic() < deadline:
        left = max(1, int(deadline - time.monotonic() + 0.999))
        view = http.get(f"{path}/wait?timeout={min(WAIT_PER_REQUEST, left)}")
    return view


def result_of(view: Dict[str, Any], id: str) -> Any:
    """A finished call's or task's result, or RemoteError with its error."""
    if not view.get("done"):
        raise RemoteError(f"{id} is still {view.get('status')}", id)
    if view.get("status") != "COMPLETE":
        raise RemoteError(f"{id} {view.get('status')}: {view.get('error') or 'no error recorded'}", id)
    return view.get("result")


class _Pending:
    _route = ""

    def __init__(self, http: Http, id: str, view: Dict[str, Any]) -> None:
        self._http = http
        self.id = id
        self.view = view

    @property
    def _path(self) -> str:
        return f"/api/v1/{self._route}/{quote(self.id)}"

    def status(self) -> str:
        """PENDING, RUNNING, COMPLETE, ERROR, CANCELLED, EXPIRED or TIMEOUT, as it is now."""
        self.view = self._http.get(self._path)
        return str(self.view["status"])

    def wait(self, timeout: float = 3600) -> Dict[str, Any]:
        """The view once it ends, or as it is after `timeout` seconds."""
        self.view = wait_until_done(self._http, self._path, self.view, timeout)
        return self.view

    def get(self, timeout: float = 3600) -> Any:
        """The result once it ends; RemoteError when it failed or is still running after `timeout` seconds."""
        return result_of(self.wait(timeout), self.id)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, status={self.view.get('status')!r})"


class FunctionCall(_Pending):
    """One call of a function (`.spawn()`)."""

    _route = "calls"


class Task(_Pending):
    """One task of a task queue (`.put()`)."""

    _route = "tasks"

    def cancel(self) -> Dict[str, Any]:
        """A pending task never runs, a running one is stopped; ConflictError when it already ended."""
        self.view = self._http.request("DELETE", self._path)
        return self.view
