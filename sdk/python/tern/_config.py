"""Where the gateway is and who calls it: the CLI's own configuration.

TERN_GATEWAY / TERN_TOKEN, else the current context (or the one named) of ~/.tern/config.json
(TERN_CONFIG moves it; `npm run up` and `tern` write it), else the local default.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Mapping, Optional

DEFAULT_GATEWAY = "http://127.0.0.1:1994"


@dataclass(frozen=True)
class Connection:
    gateway: str
    token: Optional[str] = None


def config_path(env: Mapping[str, str]) -> str:
    return env.get("TERN_CONFIG") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".tern", "config.json")


def resolve_connection(
    gateway: Optional[str] = None,
    token: Optional[str] = None,
    context: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Connection:
    """Arguments first, then TERN_GATEWAY / TERN_TOKEN, then the config file's context, then the default."""
    env = os.environ if env is None else env
    path = config_path(env)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = {}
    name = context or config.get("current")
    ctx = (config.get("contexts") or {}).get(name) if name else None
    if context and ctx is None:
        raise ValueError(f'no context "{context}" in {path}')
    ctx = ctx or {}
    return Connection(
        gateway=(gateway or env.get("TERN_GATEWAY") or ctx.get("gateway") or DEFAULT_GATEWAY).rstrip("/"),
        token=token or env.get("TERN_TOKEN") or ctx.get("token"),
    )
