"""A function: squares a number. Called once (tern run) or mapped over many inputs (tern map).

Input: {"n": 7}; for demos also "seconds" (how long to work, default 0). An input whose "n" is
not a number raises, to show how a map reports failures (return_exceptions).
"""

import time


def square(payload):
    n = payload.get("n", 0)
    if not isinstance(n, (int, float)):
        raise ValueError(f'"n" must be a number, got {n!r}')
    time.sleep(float(payload.get("seconds", 0)))
    return {"n": n, "square": n * n}
