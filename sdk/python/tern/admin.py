"""Deletes through the API, as `tern workspace rm` and `tern image rm` do them."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._http import Http, query, quote
from .client import default_http


def delete_workspace(workspace_id: str, http: Optional[Http] = None) -> Dict[str, Any]:
    """Deletes a workspace and what it holds, its usage kept (an operator token); what went, and any `problems`."""
    return (http or default_http()).request("DELETE", f"/api/v1/workspaces/{quote(workspace_id)}")


def delete_image(ref: str, http: Optional[Http] = None) -> Dict[str, Any]:
    """Deletes an image from Tern's registry: a workspace admin its own builds, the operator any; `{image, digest}`."""
    return (http or default_http()).request("DELETE", f"/api/v1/images{query(ref=ref)}")
