"""Handlers declared with Tern's Python SDK: the decorators are the specs.

    npx tern deploy examples/python-sdk/app.py           # all three at once
    npx tern deploy examples/python-sdk/app.py:square    # or one: a function, for .remote() and .map()
    python3 examples/python-sdk/main.py                  # calls them (PYTHONPATH=sdk/python, or pip install ./sdk/python)

Importing this module only declares: nothing runs until Tern calls a handler in its container.
"""

import tern

SMALL = {"cpu": 0.25, "memory": "128Mi", "keep_warm_seconds": 10}


@tern.endpoint(name="sdk-predict", **SMALL, autoscaler={"type": "queue_depth", "max_containers": 2})
def predict(payload):
    """A stand-in for a model: the words of a text, counted."""
    text = str(payload.get("text", ""))
    return {"text": text, "words": len(text.split())}


@tern.task_queue(name="sdk-count", **SMALL, workers=2, task_policy={"max_retries": 1, "timeout": 60})
def count(payload):
    """Counts each letter of a text."""
    letters = {}
    for c in str(payload.get("text", "")):
        if c.isalpha():
            letters[c] = letters.get(c, 0) + 1
    return {"letters": letters}


@tern.function(
    name="sdk-square",
    **SMALL,
    workers=2,
    task_policy={"max_retries": 1, "timeout": 60},
    autoscaler={"type": "queue_depth", "tasks_per_container": 4, "max_containers": 2},
)
def square(payload):
    """Squares n, given as is (`square.remote(7)`) or as {"n": 7}; an n that is not a number raises,
    to show how a map reports a failed input."""
    n = payload.get("n", 0) if isinstance(payload, dict) else payload
    if not isinstance(n, (int, float)):
        raise ValueError(f'"n" must be a number, got {n!r}')
    return {"n": n, "square": n * n}
