import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spec(folder, *args):
    env = {**os.environ, "PYTHONPATH": SDK}
    return subprocess.run([sys.executable, "-m", "tern.spec", *args], cwd=folder, env=env, capture_output=True, text=True)


class SpecCommandTest(unittest.TestCase):
    """`python3 -m tern.spec app.py handler`, as `tern deploy app.py:handler` runs it."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        with open(os.path.join(self.dir.name, "helpers.py"), "w") as f:
            f.write("GREETING = 'hi'\n")
        with open(os.path.join(self.dir.name, "app.py"), "w") as f:
            f.write(textwrap.dedent("""
                import tern
                from helpers import GREETING

                def load():
                    pass

                @tern.endpoint(name="greeter", on_start=load, cpu=0.5)
                def greet(payload):
                    return {"text": GREETING}

                def plain(payload):
                    return payload
            """))

    def tearDown(self):
        self.dir.cleanup()

    def test_prints_the_spec_the_decorator_declares_importing_the_module_from_its_folder(self):
        ran = spec(self.dir.name, "app.py", "greet")
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertEqual(
            json.loads(ran.stdout),
            {"name": "greeter", "kind": "endpoint", "handler": "app.py:greet", "on_start": "app.py:load", "cpu": 0.5},
        )

    def test_says_what_is_wrong_with_a_handler_that_is_not_declared(self):
        for args, message in [
            (("app.py", "missing"), "app.py has no 'missing'"),
            (("app.py", "plain"), "plain is not declared with @tern.endpoint, @tern.task_queue or @tern.function"),
            (("nope.py", "greet"), "nope.py: no such file"),
        ]:
            ran = spec(self.dir.name, *args)
            self.assertEqual(ran.returncode, 1)
            self.assertIn(message, ran.stderr)


if __name__ == "__main__":
    unittest.main()
