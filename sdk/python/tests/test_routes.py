import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tern._config import Connection
from tern._http import Http
from tern.deployment import Deployment


class _Gateway(BaseHTTPRequestHandler):
    """A gateway that answers every POST with a task or call view and records the path it was sent to."""

    paths = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Gateway.paths.append(self.path)
        data = json.dumps({"task_id": "t", "call_id": "c", "status": "pending", "done": False}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass


class RouteTest(unittest.TestCase):
    def setUp(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.http = Http(Connection(gateway=f"http://127.0.0.1:{self.server.server_address[1]}"))
        _Gateway.paths.clear()

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()

    def test_an_endpoint_is_pinned_with_at_a_version_since_its_own_path_may_start_with_v1(self):
        llm = Deployment(None, "endpoint", "llm", {}, self.http)
        llm.remote({"x": 1}, version=3)
        llm.remote({"x": 1})
        self.assertEqual(_Gateway.paths, ["/endpoint/llm@3", "/endpoint/llm"])

    def test_a_task_queue_and_a_function_keep_their_v_form(self):
        Deployment(None, "task_queue", "jobs", {}, self.http).put({"x": 1}, version=2)
        Deployment(None, "function", "fn", {}, self.http).spawn({"x": 1}, version=4)
        self.assertEqual([p.split("?")[0] for p in _Gateway.paths], ["/taskqueue/jobs/v2", "/function/fn/v4"])


if __name__ == "__main__":
    unittest.main()
