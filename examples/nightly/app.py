"""A scheduled function: runs once per tick of its schedule, with the schedule's input."""

import datetime


def report(payload):
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    return {"report": payload.get("report", "daily"), "ran_at": now}
