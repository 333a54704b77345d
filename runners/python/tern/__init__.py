"""Tern's helpers for handler code: `import tern; tern.volume.commit()`."""

from . import volume

__all__ = ["volume"]
