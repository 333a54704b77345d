"""An image built from a base, as a spec's `image:` build."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence


@dataclass(frozen=True)
class Image:
    """`tern.Image(base="python:3.11-slim", apt=["ffmpeg"], pip=["numpy"], commands=["..."])`.

    Built layer by layer by `tern deploy` (unchanged steps come from the cache), then deployed by
    digest. `base` defaults to Tern's own base image. A registry reference (`"ghcr.io/x/y:1"`)
    needs no Image: pass the string as `image=`.
    """

    base: Optional[str] = None
    apt: Sequence[str] = ()
    pip: Sequence[str] = ()
    npm: Sequence[str] = ()
    commands: Sequence[str] = ()
    env: Dict[str, str] = field(default_factory=dict)
    workdir: Optional[str] = None
    pip_index_url: Optional[str] = None

    def to_spec(self) -> Dict[str, Any]:
        """The spec's `image:` mapping, with only the fields that are set."""
        spec: Dict[str, Any] = {}
        for key in ("base", "workdir", "pip_index_url"):
            if getattr(self, key) is not None:
                spec[key] = getattr(self, key)
        for key in ("apt", "pip", "npm", "commands"):
            values: List[str] = list(getattr(self, key))
            if values:
                spec[key] = values
        if self.env:
            spec["env"] = dict(self.env)
        return spec
