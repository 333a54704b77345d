"""Sandboxes: a long-lived container driven over the API (processes, files, ports).

    sb = tern.Sandbox.create(cpu=0.5, memory="512Mi")
    print(sb.run_code("print(6 * 7)").stdout)   # 42
    sb.terminate()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

from ._http import Http, quote
from .client import default_http
from .image import Image


@dataclass
class ExecResult:
    """What a finished process wrote and how it ended."""

    pid: str
    exit_code: Optional[int]
    signal: Optional[str]
    stdout: str
    stderr: str


def _at(path: str) -> str:
    return f"?path={quote(path)}"


class SandboxFiles:
    """The sandbox's files, confined to it by its agent; relative paths are under its workdir."""

    def __init__(self, http: Http, base: str) -> None:
        self._http = http
        self._base = base

    def read(self, path: str) -> bytes:
        with self._http.open("GET", f"{self._base}/files{_at(path)}") as response:
            return response.read()

    def write(self, path: str, data: Union[bytes, str]) -> None:
        self._http.request("PUT", f"{self._base}/files{_at(path)}", data.encode() if isinstance(data, str) else data)

    def list(self, path: str = ".") -> List[Dict[str, Any]]:
        return self._http.get(f"{self._base}/files/list{_at(path)}")["entries"]

    def stat(self, path: str) -> Dict[str, Any]:
        return self._http.get(f"{self._base}/files/stat{_at(path)}")

    def mkdir(self, path: str) -> None:
        self._http.request("POST", f"{self._base}/files/mkdir{_at(path)}")

    def remove(self, path: str) -> None:
        self._http.request("DELETE", f"{self._base}/files{_at(path)}")


class Sandbox:
    """A running sandbox. Also a context manager that terminates it on exit."""

    def __init__(self, http: Http, view: Dict[str, Any]) -> None:
        self._http = http
        self.view = view
        self.id: str = view["id"]
        self._base = f"/api/v1/sandboxes/{quote(self.id)}"
        self.files = SandboxFiles(http, self._base)

    @classmethod
    def create(
        cls,
        *,
        image: Union[None, str, Image] = None,
        cpu: Optional[float] = None,
        memory: Union[None, str, int] = None,
        gpu: Union[None, str, List[str]] = None,
        gpu_count: Optional[int] = None,
        env: Optional[Mapping[str, str]] = None,
        workdir: Optional[str] = None,
        timeout: Optional[int] = None,
        idle_timeout: Optional[int] = None,
        network: Optional[Mapping[str, Any]] = None,
        pool: Optional[str] = None,
        volumes: Optional[List[Mapping[str, Any]]] = None,
        http: Optional[Http] = None,
    ) -> "Sandbox":
        """Places a sandbox and answers once it runs; UnavailableError when no machine can take it now.

        ``volumes``: the workspace's volumes to mount, ``[{"name": "data", "path": "/data"},
        {"name": "models", "path": "/models", "read_only": True}]``; a read-write one is the
        sandbox's own copy, committed back when it ends.
        """
        spec: Dict[str, Any] = {
            "image": image.to_spec() if isinstance(image, Image) else image,
            "cpu": cpu,
            "memory": memory,
            "gpu": gpu,
            "gpu_count": gpu_count,
            "env": dict(env) if env else None,
            "workdir": workdir,
            "timeout": timeout,
            "idle_timeout": idle_timeout,
            "network": dict(network) if network else None,
            "pool": pool,
            "volumes": [dict(v) for v in volumes] if volumes else None,
        }
        http = http or default_http()
        return cls(http, http.request("POST", "/api/v1/sandboxes", {k: v for k, v in spec.items() if v is not None}))

    @classmethod
    def from_id(cls, id: str, http: Optional[Http] = None) -> "Sandbox":
        http = http or default_http()
        return cls(http, http.get(f"/api/v1/sandboxes/{quote(id)}"))

    @property
    def state(self) -> str:
        return str(self.view["state"])

    def stream(self, request: Mapping[str, Any]) -> Iterator[Dict[str, Any]]:
        """A process's events as it runs: `{"pid"}`, then `{"stream", "data"}` as output comes, then `{"exit_code", "signal"}`."""
        return self._http.ndjson("POST", f"{self._base}/exec", dict(request), timeout=(request.get("timeout") or 3600) + 30)

    def exec(
        self,
        *cmd: str,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        stdin: Optional[str] = None,
        timeout: Optional[int] = None,
        on_output: Optional[Callable[[str, str], None]] = None,
        **program: Any,
    ) -> ExecResult:
        """Runs `cmd` (`sb.exec("ls", "-l")`) to its end; `on_output(stream, data)` hears output as it comes."""
        request: Dict[str, Any] = {"cwd": cwd, "env": dict(env) if env else None, "stdin": stdin, "timeout": timeout, **program}
        if cmd:
            request["cmd"] = list(cmd)
        result = ExecResult(pid="", exit_code=None, signal=None, stdout="", stderr="")
        for event in self.stream({k: v for k, v in request.items() if v is not None}):
            if "pid" in event:
                result.pid = event["pid"]
            elif "stream" in event:
                setattr(result, event["stream"], getattr(result, event["stream"]) + event["data"])
                if on_output:
                    on_output(event["stream"], event["data"])
            else:
                result.exit_code = event.get("exit_code")
                result.signal = event.get("signal")
                result.stderr += event.get("error") or ""
        return result

    def run_code(self, code: str, language: str = "python", **options: Any) -> ExecResult:
        """Runs code in the language's interpreter (python, node, bash)."""
        return self.exec(code=code, language=language, **options)

    def expose_port(self, port: int) -> str:
        """Makes a port the sandbox listens on reachable through the gateway; the URL (with the workspace token)."""
        return str(self._http.request("POST", f"{self._base}/ports", {"port": port})["url"])

    def snapshot(self, name: Optional[str] = None, tag: Optional[str] = None) -> Dict[str, str]:
        """Pushes its /workspace, on the image it runs, as an image of the workspace.

        Answers ``{"image", "digest", "tag"}``: ``image`` (pinned by digest) starts a new sandbox
        (``Sandbox.create(image=...)``, its /workspace holding these files) or a deployment.
        """
        body = {k: v for k, v in {"name": name, "tag": tag}.items() if v is not None}
        # The gateway answers within 300 s (the snapshot's own limit), so the read waits past it.
        return dict(self._http.request("POST", f"{self._base}/snapshot", body, timeout=330))

    def refresh(self) -> Dict[str, Any]:
        self.view = self._http.get(self._base)
        return self.view

    def terminate(self) -> Dict[str, Any]:
        """Kills its processes and removes its container and files."""
        self.view = self._http.request("DELETE", self._base)
        return self.view

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *_: Any) -> None:
        if self.view.get("state") in ("placing", "running"):
            self.terminate()

    def __repr__(self) -> str:
        return f"tern.Sandbox({self.id!r}, state={self.view.get('state')!r})"
