"""A task handler: squares a number, optionally slowly or flakily, to show retries and scaling.

Payload: {"n": 7}, plus for demos "seconds" (how long to work, default 0), "fail_times" (fail
the first N attempts of the task with key "key": a counter kept in the container's /tmp, so it
counts across attempts when one container runs them) and "pad" (add a string of that many
characters to the result, to see large results kept in the object store).
"""

import os
import socket
import time


def square(payload):
    n = payload.get("n", 0)
    if not isinstance(n, (int, float)):
        raise ValueError(f'"n" must be a number, got {n!r}')
    fail_times = int(payload.get("fail_times", 0))
    if fail_times:
        counter = os.path.join("/tmp", f"attempts-{payload.get('key', 'default')}")
        seen = int(open(counter).read()) if os.path.exists(counter) else 0
        with open(counter, "w") as f:
            f.write(str(seen + 1))
        if seen < fail_times:
            raise RuntimeError(f"failing on purpose: attempt {seen + 1} of the first {fail_times}")
    time.sleep(float(payload.get("seconds", 0)))
    result = {"n": n, "square": n * n, "container": socket.gethostname()}
    if payload.get("pad"):
        result["pad"] = "x" * int(payload["pad"])
    return result
