#!/usr/bin/env python3
"""Tern's Python runner: serves a user's handler under the container contract.

    GET  /health  503 while the module loads and on_start runs, 200 once ready
    HEAD          as GET, without the body
    POST <any>    JSON body -> handler(payload) -> JSON (200); an iterator/generator result is
                  streamed (chunked NDJSON, or SSE when the request accepts text/event-stream);
                  400 for a body that is not JSON, 500 {"error", "type"} when the handler raises
                  (and "traceback" for a task's call: its caller is the workspace itself).
                  A handler means another answer with tern.HTTPError(status, message) (raised:
                  that status, {"error": message}) or tern.Response(body, status, headers).
                  A client that hangs up mid-stream stops it: the generator is closed (its
                  `finally` runs) before its next item is written, and the runner logs it.
                  A task's call may carry a bunch of tasks, map chunks or plain payloads
                  ({"__tern_map_bunch__": [{task_id, attempt, payload}, ...], "budget_ms"}): they
                  run in turn, the answer streaming two NDJSON lines per task: {task_id, begun:
                  true} as it begins, {task_id, status, body} as it ends (what its own call would
                  have answered; a streamed result as the list of its items); none begins once the
                  call has run budget_ms. Task answers say so (X-Tern-Bunches: 2; an older runner's
                  1 took map chunks only), so an agent sends bunches only to a runner that takes them.

Environment: TERN_HANDLER ("app.py:predict", or "app.py:Model.predict": Model() made once per
container, its @tern.enter methods run, before /health is 200), TERN_ON_START ("app.py:load", optional), PORT,
TERN_WORKERS (processes, default 1), TERN_CONCURRENCY (requests each process handles at once,
default 1), TERN_DEPLOYMENT_KIND. The module is imported from the working directory (/app in a
Tern container).

Task queues (TERN_DEPLOYMENT_KIND=task_queue): workers always run as forked processes, and a
task request (X-Tern-Task-Id) whose caller closes the connection before the answer (the agent
cancelling it, or its timeout) ends the worker running it; the parent forks a fresh one, so a
stopped task really stops and the container stays warm.

Standard library only: it runs on whatever python3 the image has, with nothing installed.

Why the shape: on_start (loading a model) runs once, in the parent, before the workers are
forked, so every worker shares what it loaded (copy-on-write) instead of loading it N times.
The listening socket is opened first and answers 503 on /health meanwhile, so the agent can
tell "still loading" from "not listening".
"""

import asyncio
import inspect
import collections.abc
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Idle keep-alive connections are closed after this long (and at once on SIGTERM).
IDLE_TIMEOUT_S = 75


def log(msg):
    print(msg, flush=True)


def log_err(msg):
    print(msg, file=sys.stderr, flush=True)


def env_int(name, default):
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise SystemExit(f"tern-runner: {name}={raw!r} must be a whole number")
    if value < 1:
        raise SystemExit(f"tern-runner: {name}={raw!r} must be at least 1")
    return value


def resolve(ref, what):
    """"app.py:predict", "pkg/app.py:predict" or "pkg.app:predict" -> the callable; "app.py:Model.predict"
    (an instance method) -> a ClassHandler, instantiated later (see ClassHandler)."""
    path, sep, attr = ref.partition(":")
    if not sep or not path or not attr:
        raise SystemExit(f'tern-runner: {what} "{ref}" must look like "app.py:predict"')
    module_name = path[:-3] if path.endswith(".py") else path
    module_name = module_name.strip("/").replace("/", ".")
    module = importlib.import_module(module_name)
    target = module
    for part in attr.split("."):
        cls = declared_class(target)
        if cls is not None and inspect.isfunction(inspect.getattr_static(cls, part, None)):
            return ClassHandler(cls, part, ref)
        if not hasattr(target, part):
            raise SystemExit(f'tern-runner: {what} "{ref}": {module_name} has no attribute "{attr}"')
        target = getattr(target, part)
    # A class the SDK declared (@tern.endpoint on a class) serves the method it chose.
    cls = declared_class(target)
    method = getattr(target, "__tern_method__", None)
    if cls is not None and isinstance(method, str):
        return ClassHandler(cls, method, ref)
    if not callable(target):
        raise SystemExit(f'tern-runner: {what} "{ref}" is not callable')
    return target


def declared_class(target):
    """The class `target` is, or the one a Tern SDK decorator declared it from; None for anything else."""
    if inspect.isclass(target):
        return target
    cls = getattr(target, "__tern_class__", None)
    return cls if inspect.isclass(cls) else None


class ClassHandler:
    """A handler that is a class's method: one instance per container, made before /health is 200.

    Like on_start it is made in the parent, before workers are forked, so they share what its
    `@tern.enter` methods loaded. Those run once each, base classes' first, in the order they are
    defined; an async one is awaited, and one that raises fails the start as on_start does.
    """

    def __init__(self, cls, method, ref):
        self.cls = cls
        self.method = method
        self.ref = ref

    def enter_methods(self):
        names = []
        for klass in reversed(self.cls.__mro__):
            for name in vars(klass):
                if name not in names and getattr(inspect.getattr_static(self.cls, name, None), "__tern_enter__", False):
                    names.append(name)
        return names

    def instantiate(self):
        instance = self.cls()
        for name in self.enter_methods():
            began = time.monotonic()
            settle(getattr(instance, name)())
            log(f"tern-runner: enter {self.cls.__name__}.{name} done in {time.monotonic() - began:.2f}s")
        return getattr(instance, self.method)


def settle(result):
    """Awaits coroutines; an async generator becomes a plain iterator driven by its own loop."""
    if inspect.iscoroutine(result):
        return asyncio.run(result)
    if isinstance(result, collections.abc.AsyncIterator):
        return iterate_async(result)
    return result


def iterate_async(agen):
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(agen.__anext__())
            except StopAsyncIteration:
                return
    finally:
        # Closed early (the client hung up): the async generator's own `finally` runs too.
        try:
            loop.run_until_complete(agen.aclose())
        finally:
            loop.close()


MAP_CHUNK_KEY = "__tern_map_chunk__"
MAP_BUNCH_KEY = "__tern_map_bunch__"
# What task answers say in X-Tern-Bunches: bunches of map chunks and of plain tasks (1: map chunks only).
BUNCHES = "2"


class MapInputError(Exception):
    """An input of a map's chunk failed and the map does not keep errors in place: the chunk fails."""


def run_chunk(chunk):
    """A map's chunk (one task): the handler once per input; [{"status": "ok", "result"} | {"status": "error", "error"}].

    With return_exceptions an input's error is kept in its place; without, the first one fails the
    chunk (its task is retried, then the map fails), naming the input's place in the chunk.
    """
    outcomes = []
    for i, item in enumerate(chunk.get("inputs") or []):
        try:
            value = settle(STATE.handler(item))
            if is_stream(value):
                value = list(value)
            json.dumps(value)
            outcomes.append({"status": "ok", "result": value})
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
            if not chunk.get("return_exceptions"):
                raise MapInputError(f"input {i} of the chunk: {message}") from e
            log_err("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip())
            outcomes.append({"status": "error", "error": message})
    return outcomes


# A task's traceback travels with its failure; its end is what matters.
TRACEBACK_CHARS = 8000
# The runner frames the answer itself: a handler's headers do not choose these.
FRAMING_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive"}


def error_types(cls):
    """The class and those it derives from, by name (and module.name for non-builtins): ValueError, mymodule.BadInput."""
    names = []
    for c in cls.__mro__:
        if c in (object, BaseException):
            continue
        names.append(c.__name__)
        if c.__module__ != "builtins":
            names.append(f"{c.__module__}.{c.__qualname__}")
    return names


def own_headers(headers):
    """A handler's headers as the runner sends them: names and values as text, framing ones left out, Content-Type named so."""
    out = {}
    for name, value in (headers or {}).items():
        name, value = str(name), str(value)
        if name.lower() in FRAMING_HEADERS or "\n" in name + value or "\r" in name + value:
            continue
        out["Content-Type" if name.lower() == "content-type" else "Cache-Control" if name.lower() == "cache-control" else name] = value
    return out


def is_stream(result):
    # Strings, bytes, dicts and lists are values; only real iterators (generators) stream.
    return isinstance(result, collections.abc.Iterator)


class State:
    """What the request handlers share within one process."""

    def __init__(self, concurrency):
        self.ready = False
        self.handler = None
        self.concurrency = concurrency
        self.slots = threading.BoundedSemaphore(concurrency)
        self.stopping = False
        self.lock = threading.Lock()
        self.idle = set()


STATE = State(1)
# Functions pull tasks too (one call, or one chunk of a map, per task).
TASK_QUEUE = os.environ.get("TERN_DEPLOYMENT_KIND", "") in ("task_queue", "function")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A stream's head and chunks leave in separate writes: with Nagle's algorithm on, each waits
    # for the client's delayed ACK (~40 ms a write on a kept-alive connection).
    disable_nagle_algorithm = True
    server_version = "tern-runner"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def setup(self):
        super().setup()
        # The accept loop took a slot for this connection before handing it over (see Server).
        self.slot_held = True
        self.started = 0.0
        # A task's call (X-Tern-Task-Id): its answers say the runner takes bunches.
        self.task_call = False

    def handle(self):
        try:
            super().handle()
        except (ConnectionError, socket.timeout):
            pass
        finally:
            with STATE.lock:
                STATE.idle.discard(self.connection)
            self.release_slot()

    def handle_one_request(self):
        # Waiting for the next request on a kept-alive connection: SIGTERM may close it.
        with STATE.lock:
            if STATE.stopping:
                self.close_connection = True
                return
            STATE.idle.add(self.connection)
        super().handle_one_request()

    def parse_request(self):
        with STATE.lock:
            STATE.idle.discard(self.connection)
        self.started = time.monotonic()
        return super().parse_request()

    def take_slot(self):
        if not self.slot_held:
            STATE.slots.acquire()
            self.slot_held = True

    def release_slot(self):
        if self.slot_held:
            self.slot_held = False
            STATE.slots.release()

    # --- routes ---------------------------------------------------------------------------

    def do_GET(self):
        self.take_slot()
        try:
            if self.path.split("?", 1)[0] == "/health":
                if STATE.ready:
                    self.send_json(200, {"status": "ok"})
                else:
                    self.send_json(503, {"status": "starting"})
            else:
                self.send_json(405, {"error": "use POST / to call the handler, GET /health for health"})
        finally:
            self.release_slot()

    def do_HEAD(self):
        # As GET: send_bytes leaves the body out of a HEAD answer.
        self.do_GET()

    def do_POST(self):
        self.take_slot()
        try:
            self.post()
        finally:
            self.release_slot()

    def post(self):
        try:
            body = self.read_body()
        except ValueError as e:
            self.send_json(400, {"error": str(e)})
            return
        if not STATE.ready:
            self.send_json(503, {"error": "the handler is still starting"})
            return
        try:
            payload = json.loads(body) if body.strip() else {}
        except (ValueError, UnicodeDecodeError) as e:
            self.send_json(400, {"error": f"request body is not valid JSON: {e}"})
            return
        task_id = self.headers.get("X-Tern-Task-Id") if TASK_QUEUE else None
        self.task_call = bool(task_id)
        watch = watch_caller(self.connection, task_id) if task_id else None
        bunch = payload.get(MAP_BUNCH_KEY) if task_id and isinstance(payload, dict) else None
        if isinstance(bunch, list):
            try:
                self.run_bunch(bunch, payload.get("budget_ms"))
            finally:
                watch.set()
            return
        chunk = payload.get(MAP_CHUNK_KEY) if task_id and isinstance(payload, dict) else None
        try:
            result = run_chunk(chunk) if isinstance(chunk, dict) else settle(STATE.handler(payload))
        except Exception as e:
            if getattr(type(e), "__tern_http_error__", False):
                self.send_http_error(e)
            else:
                self.fail(e, with_traceback=bool(task_id))
            return
        finally:
            if watch:
                watch.set()
        if getattr(type(result), "__tern_response__", False):
            self.send_response_object(result)
            return
        if is_stream(result):
            self.stream(result)
            return
        try:
            data = json.dumps(result).encode()
        except (TypeError, ValueError) as e:
            self.fail(TypeError(f"handler result is not JSON-serialisable: {e}"))
            return
        self.send_bytes(200, "application/json", data)

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ValueError("Content-Length is not a number")
        return self.rfile.read(length) if length > 0 else b""

    # --- responses ------------------------------------------------------------------------

    def fail(self, e, with_traceback=False):
        self.send_json(500, failure_body(e, with_traceback))

    def run_bunch(self, members, budget_ms):
        """A bunch of tasks, in turn: a line as each begins and one as it ends; none begins past budget_ms."""
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Tern-Bunches", BUNCHES)
        self.end_headers()
        began = time.monotonic()
        for member in members:
            if isinstance(budget_ms, (int, float)) and (time.monotonic() - began) * 1000 >= budget_ms:
                break
            task_id = member.get("task_id") if isinstance(member, dict) else None
            self.write_chunk(json.dumps({"task_id": task_id, "begun": True}).encode() + b"\n")
            self.write_chunk(json.dumps(bunch_line(member)).encode() + b"\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_http_error(self, e):
        """A tern.HTTPError: its status and headers, its body or {"error": message}; no traceback (it was meant)."""
        self.send_json(int(e.status), http_error_body(e), own_headers(getattr(e, "headers", None)))

    def send_response_object(self, r):
        """A tern.Response: its status and headers; bytes and str as they are, an iterator streamed, the rest JSON."""
        headers = own_headers(r.headers)
        body = settle(r.body)
        if is_stream(body):
            self.stream(body, int(r.status), headers, r.media_type)
            return
        if body is None:
            data, content_type = b"", "text/plain; charset=utf-8"
        elif isinstance(body, (bytes, bytearray)):
            data, content_type = bytes(body), "application/octet-stream"
        elif isinstance(body, str):
            data, content_type = body.encode(), "text/plain; charset=utf-8"
        else:
            try:
                data, content_type = json.dumps(body).encode(), "application/json"
            except (TypeError, ValueError) as e:
                self.fail(TypeError(f"tern.Response body is not JSON-serialisable: {e}"))
                return
        self.send_bytes(int(r.status), headers.pop("Content-Type", None) or r.media_type or content_type, data, headers)

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, "application/json", json.dumps(obj).encode(), headers)

    def send_bytes(self, status, content_type, data, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.task_call:
            self.send_header("X-Tern-Bunches", BUNCHES)
        # While loading (a throwaway server) or stopping, no connection outlives its response.
        if STATE.stopping or not STATE.ready:
            self.send_header("Connection", "close")
            self.close_connection = True
        # Head and body in one write (end_headers would send the head alone): one segment, so the
        # caller reads the whole response at once instead of waking up twice.
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(data)
        self.flush_headers()

    def stream(self, items, status=200, headers=None, media_type=None):
        sse = "text/event-stream" in (media_type or self.headers.get("Accept", ""))
        headers = dict(headers or {})
        self.send_response(status)
        self.send_header("Content-Type", headers.pop("Content-Type", None) or media_type or ("text/event-stream" if sse else "application/x-ndjson"))
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", headers.pop("Cache-Control", None) or "no-cache")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        sent = 0
        try:
            for item in items:
                data = encode_item(item, sse)
                try:
                    # Looked at before each write, not only when a write fails (the first one after
                    # a hang-up usually does not): the generator stops at its next item.
                    if caller_gone(self.connection):
                        raise ConnectionResetError("the client closed the connection")
                    self.write_chunk(data)
                except (ConnectionError, BrokenPipeError):
                    self.close_connection = True
                    log_err(f"tern-runner: the client of {self.command} {self.path} hung up after {sent} item(s); stopped the handler's stream")
                    close = getattr(items, "close", None)
                    if close:
                        close()
                    return
                sent += 1
        except Exception as e:
            # The status is out already: log it, tell an SSE client, end the stream.
            log_err("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip())
            if sse:
                err = json.dumps({"error": str(e) or type(e).__name__, "type": type(e).__name__})
                self.write_chunk(f"event: error\ndata: {err}\n\n".encode())
            self.close_connection = True
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def write_chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def log_request(self, code="-", size="-"):
        ms = (time.monotonic() - self.started) * 1000 if self.started else 0.0
        log(f"{self.command} {self.path} {code} {ms:.1f}ms pid={os.getpid()}")

    def log_message(self, format, *args):
        # Protocol errors (bad request lines) only; requests are logged by log_request.
        log_err(f"tern-runner: {format % args}")


def failure_body(e, with_traceback):
    """What a raised exception is answered with (500), logged; a task's call also gets its types and traceback."""
    trace = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip()
    log_err(trace)
    body = {"error": str(e) or type(e).__name__, "type": type(e).__name__}
    if with_traceback:
        # The task policy's no_retry_on matches any of these; the traceback is kept with the task.
        # A map's chunk fails for one input's error: its types count too.
        cause = e.__cause__ if isinstance(e, MapInputError) else None
        body["types"] = error_types(type(e)) + (error_types(type(cause)) if cause else [])
        body["traceback"] = trace[-TRACEBACK_CHARS:]
    return body


def http_error_body(e):
    return e.body if getattr(e, "body", None) is not None else {"error": getattr(e, "message", str(e))}


def bunch_line(member):
    """One task of a bunch (a map chunk or a plain payload), run: {task_id, status, body} as its own call would have answered."""
    member = member if isinstance(member, dict) else {}
    payload = member.get("payload")
    chunk = payload.get(MAP_CHUNK_KEY) if isinstance(payload, dict) else None
    line = {"task_id": member.get("task_id")}
    try:
        if isinstance(chunk, dict):
            return {**line, "status": 200, "body": run_chunk(chunk)}
        status, body = plain_result(settle(STATE.handler(payload)))
        json.dumps(body)  # a result that is not JSON fails here, as its own call's would
        return {**line, "status": status, "body": body}
    except Exception as e:
        if getattr(type(e), "__tern_http_error__", False):
            return {**line, "status": int(e.status), "body": http_error_body(e)}
        return {**line, "status": 500, "body": failure_body(e, True)}


def plain_result(result):
    """A plain task's result as a bunch's line carries it: (status, JSON body); a stream as the list of its items."""
    status = 200
    if getattr(type(result), "__tern_response__", False):
        status, result = int(result.status), settle(result.body)
    return status, list(result) if is_stream(result) else result


def caller_gone(conn):
    """Whether the other end closed the connection (readable, and nothing to read)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def watch_caller(conn, task_id):
    """Ends this worker process if the caller hangs up while the task runs; returns the event that stops watching."""
    done = threading.Event()

    def run():
        while not done.wait(0.2):
            if caller_gone(conn) and not done.is_set():
                log_err(f"tern-runner: the caller of task {task_id} hung up (cancelled or timed out); ending worker {os.getpid()}")
                os._exit(3)

    threading.Thread(target=run, name=f"watch-{task_id}", daemon=True).start()
    return done


def encode_item(item, sse):
    if isinstance(item, bytes):
        text = item.decode("utf-8", "replace") if sse else None
        if not sse:
            return item
    elif isinstance(item, str):
        text = item
    else:
        text = json.dumps(item)
    if sse:
        return "".join(f"data: {line}\n" for line in text.split("\n")).encode() + b"\n"
    return (text if isinstance(item, str) else text + "\n").encode()


class Server(ThreadingHTTPServer):
    """One process's server on the shared socket, at most TERN_CONCURRENCY requests at once."""

    daemon_threads = False  # server_close() waits for in-flight requests
    block_on_close = True

    def __init__(self, sock):
        super().__init__(sock.getsockname()[:2], Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock

    def get_request(self):
        conn, addr = self.socket.accept()
        # The listening socket is non-blocking (workers race for connections); the
        # connection itself must block.
        conn.setblocking(True)
        return conn, addr

    def _handle_request_noblock(self):
        # Hold a slot before taking a connection: while this process is busy the connection
        # stays in the kernel's queue, where another worker can take it. (Overrides
        # socketserver's hook, which would accept first and then queue inside this process.)
        if not STATE.slots.acquire(timeout=0.2):
            return
        try:
            request, client_address = self.get_request()
        except OSError:
            STATE.slots.release()  # another worker won the race, or the socket closed
            return
        try:
            self.process_request(request, client_address)
        except Exception:
            STATE.slots.release()
            self.handle_error(request, client_address)
            self.shutdown_request(request)

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, socket.timeout)):
            super().handle_error(request, client_address)

    def server_close(self):
        # Leave the shared socket open for the other processes; join the request threads.
        threads = getattr(self, "_threads", None)
        if threads is not None:
            threads.join()


def listen(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def serve(sock):
    """Serves until SIGTERM/SIGINT, then stops accepting, finishes in-flight requests, returns."""
    server = Server(sock)

    def stop(signum, frame):
        with STATE.lock:
            if STATE.stopping:
                return
            STATE.stopping = True
            idle = list(STATE.idle)
        for conn in idle:
            try:
                conn.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        # shutdown() waits for serve_forever, which runs on this (the main) thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever(poll_interval=0.2)
    server.server_close()


def start_workers(sock, count):
    children = {}
    stopping = False

    def spawn():
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                serve(sock)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = time.monotonic()

    def stop(signum, frame):
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(count):
        spawn()
    log(f"tern-runner: {count} workers serving (pids {', '.join(map(str, children))})")
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        children.pop(pid, None)
        if not stopping:
            # A worker died under load (a crash in native code, say): keep the container serving.
            log_err(f"tern-runner: worker {pid} ended ({status}); starting another")
            spawn()
    return 0


def main():
    global STATE
    sys.stdout.reconfigure(line_buffering=True)
    handler_ref = os.environ.get("TERN_HANDLER", "")
    if not handler_ref:
        raise SystemExit("tern-runner: TERN_HANDLER is not set (e.g. app.py:predict)")
    port = env_int("PORT", 8000)
    workers = env_int("TERN_WORKERS", 1)
    STATE = State(env_int("TERN_CONCURRENCY", 1))
    sys.path.insert(0, os.getcwd())
    # Tern's Python SDK (`import tern`: its decorators, tern.volume), bound beside the runners in a
    # container (/tern/sdk/python) and found the same way from a checkout.
    sys.path.insert(1, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python")))

    sock = listen(port)
    # Answer 503 on /health while the module loads and on_start runs.
    loading = Server(sock)
    loader = threading.Thread(target=loading.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    loader.start()
    # Nothing is in flight yet: a stop while loading just ends the process, cleanly.
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    try:
        began = time.monotonic()
        handler = resolve(handler_ref, "TERN_HANDLER")
        on_start_ref = os.environ.get("TERN_ON_START", "")
        if on_start_ref:
            on_start = resolve(on_start_ref, "TERN_ON_START")
            if isinstance(on_start, ClassHandler):
                raise SystemExit(f'tern-runner: TERN_ON_START "{on_start_ref}" names a class: use its @tern.enter methods instead')
            settle(on_start())
            log(f"tern-runner: on_start {on_start_ref} done in {time.monotonic() - began:.2f}s")
        # After on_start: it may fetch what an enter method loads.
        STATE.handler = handler.instantiate() if isinstance(handler, ClassHandler) else handler
    except SystemExit:
        raise
    except BaseException:
        log_err("tern-runner: start-up failed:\n" + traceback.format_exc().rstrip())
        return 1
    finally:
        loading.shutdown()
        loading.server_close()
    STATE.ready = True
    log(f"tern-runner: serving {handler_ref} on port {port} ({workers} worker(s), concurrency {STATE.concurrency})")
    if workers == 1 and not TASK_QUEUE:
        serve(sock)
        return 0
    return start_workers(sock, workers)


if __name__ == "__main__":
    sys.exit(main())
