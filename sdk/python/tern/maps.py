"""Server-side maps: inputs streamed up as NDJSON, result lines read back in order."""

from __future__ import annotations

import json
import time
from http.client import HTTPException
from typing import Any, Dict, Iterable, Iterator

from ._http import Http, query, quote
from .errors import ApiError

#: How long a reader waits before asking again for the lines it has not had.
RECONNECT_S = 1.0


def _ndjson(inputs: Iterable[Any]) -> Iterator[bytes]:
    """The inputs as NDJSON lines, produced only as fast as the gateway reads them."""
    for item in inputs:
        yield (json.dumps(item) + "\n").encode()


def start_map(http: Http, route: str, inputs: Iterable[Any], **options: Any) -> Dict[str, Any]:
    """POST <route> with the inputs streamed (never whole in memory); answers once every input is durably accepted."""
    with http.open("POST", f"{route}{query(**options)}", _ndjson(inputs), content_type="application/x-ndjson") as response:
        return json.loads(response.read())


def map_results(http: Http, map_id: str, total: int) -> Iterator[Dict[str, Any]]:
    """Every result line once, in the map's order: a dropped connection is asked again from the lines
    had so far; a 4xx (the map is not there) raises with the gateway's word."""
    received = 0
    while received < total:
        try:
            for line in http.ndjson("GET", f"/api/v1/maps/{quote(map_id)}/results?from={received}"):
                received += 1
                yield line
        except ApiError as e:
            if 400 <= e.status < 500:
                raise
        except (OSError, HTTPException):
            pass  # the stream broke or stalled mid-way: ask again from where it stopped
        if received < total:
            time.sleep(RECONNECT_S)
