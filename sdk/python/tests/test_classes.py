import os
import threading
import unittest
from http.server import ThreadingHTTPServer

import tern
from tern._config import Connection
from tern._http import Http
from tern.deployment import ClassDeployment

from .test_routes import _Gateway


class ClassDeclarationTest(unittest.TestCase):
    def test_a_class_declares_the_method_it_serves_in_its_handler_and_is_named_in_kebab_case(self):
        @tern.endpoint(gpu="A10G")
        class TextEmbedder:
            @tern.enter
            def load(self):
                self.model = "m"

            @tern.method
            def run(self, payload):
                return payload

            def helper(self):
                pass

        self.assertEqual(TextEmbedder.spec("app.py:TextEmbedder"), {"name": "text-embedder", "kind": "endpoint", "handler": "app.py:TextEmbedder.run", "gpu": "A10G"})
        self.assertIsInstance(TextEmbedder, tern.Deployment)
        self.assertEqual(TextEmbedder.__name__, "TextEmbedder")

    def test_without_tern_method_call_then_the_one_public_method_serves(self):
        @tern.task_queue()
        class Caller:
            @tern.enter()
            def load(self):
                pass

            def __call__(self, payload):
                return payload

            def other(self, payload):
                return payload

        @tern.function(name="one")
        class OnePublic:
            @tern.enter
            async def load(self):
                pass

            def _private(self):
                pass

            @staticmethod
            def util():
                pass

            def go(self, payload):
                return payload

        self.assertEqual(Caller.spec("a.py:Caller")["handler"], "a.py:Caller.__call__")
        self.assertEqual(OnePublic.spec("a.py:OnePublic")["handler"], "a.py:OnePublic.go")

    def test_a_class_whose_method_is_not_clear_is_refused_where_it_is_declared(self):
        class Two:
            def a(self, p):
                pass

            def b(self, p):
                pass

        class TwoMarked:
            @tern.method
            def a(self, p):
                pass

            @tern.method()
            def b(self, p):
                pass

        class Empty:
            @tern.enter
            def load(self):
                pass

        with self.assertRaisesRegex(TypeError, r"Two: mark the method to serve with @tern.method \(it has a, b\)"):
            tern.endpoint()(Two)
        with self.assertRaisesRegex(TypeError, "TwoMarked marks a, b with @tern.method: a class deploys one method"):
            tern.function()(TwoMarked)
        with self.assertRaisesRegex(TypeError, r"\(it has none\)"):
            tern.function()(Empty)
        with self.assertRaisesRegex(TypeError, "@tern.enter goes on a method defined with def"):
            tern.enter(staticmethod(lambda: None))  # type: ignore[arg-type]

    def test_an_inherited_method_serves_and_the_class_is_instantiated_locally_as_written(self):
        class Base:
            def run(self, payload):
                return {"got": payload, "loaded": getattr(self, "loaded", False)}

        @tern.endpoint()
        class Child(Base):
            @tern.enter
            def load(self):
                self.loaded = True

        self.assertEqual(Child.spec("a.py:Child")["handler"], "a.py:Child.run")
        # Locally it is the class: enter methods are the caller's to run, as in a test.
        local = Child()
        self.assertEqual(local.run(1), {"got": 1, "loaded": False})
        local.load()
        self.assertEqual(local.run(1)["loaded"], True)

    def test_the_handle_reads_the_class_attributes_its_methods_name_it_by(self):
        @tern.endpoint()
        class Labeller:
            LABEL = "x"

            def run(self, payload):
                return Labeller.LABEL

        self.assertEqual(Labeller.LABEL, "x")
        self.assertEqual(Labeller().run({}), "x")
        with self.assertRaises(AttributeError):
            Labeller.missing  # noqa: B018


class ClassCallTest(unittest.TestCase):
    def setUp(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.http = Http(Connection(gateway=f"http://127.0.0.1:{self.server.server_address[1]}"))
        _Gateway.paths.clear()

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()

    def test_remote_spawn_and_put_call_the_deployed_class_as_they_call_a_function(self):
        class Embed:
            def run(self, payload):
                return payload

        fn = ClassDeployment(Embed, "function", "embed", {}, self.http)
        queue = ClassDeployment(Embed, "task_queue", "embed-jobs", {}, self.http)
        fn.spawn({"x": 1})
        queue.put({"x": 1})
        self.assertEqual([p.split("?")[0] for p in _Gateway.paths], ["/function/embed", "/taskqueue/embed-jobs"])


if __name__ == "__main__":
    unittest.main()
