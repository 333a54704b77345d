"""The connection every handle uses unless given its own."""

from __future__ import annotations

from typing import Optional

from ._config import resolve_connection
from ._http import Http

_default: Optional[Http] = None


def configure(gateway: Optional[str] = None, token: Optional[str] = None, context: Optional[str] = None) -> Http:
    """Points the SDK at a gateway: the arguments, else TERN_GATEWAY / TERN_TOKEN, else ~/.tern/config.json."""
    global _default
    _default = Http(resolve_connection(gateway, token, context))
    return _default


def default_http() -> Http:
    """The configured connection, read from the environment and the CLI's config on first use."""
    return _default or configure()
