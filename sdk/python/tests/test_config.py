import json
import os
import tempfile
import unittest

from tern._config import DEFAULT_GATEWAY, resolve_connection


class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "config.json")
        with open(self.path, "w") as f:
            json.dump(
                {
                    "current": "local",
                    "contexts": {
                        "local": {"gateway": "http://127.0.0.1:4000/", "token": "tok-local"},
                        "prod": {"gateway": "https://tern.example.com", "token": "tok-prod"},
                    },
                },
                f,
            )

    def tearDown(self):
        self.dir.cleanup()

    def test_the_cli_current_context_is_the_default(self):
        c = resolve_connection(env={"TERN_CONFIG": self.path})
        self.assertEqual((c.gateway, c.token), ("http://127.0.0.1:4000", "tok-local"))

    def test_a_named_context_and_the_environment_take_precedence(self):
        c = resolve_connection(context="prod", env={"TERN_CONFIG": self.path})
        self.assertEqual((c.gateway, c.token), ("https://tern.example.com", "tok-prod"))
        c = resolve_connection(env={"TERN_CONFIG": self.path, "TERN_GATEWAY": "http://g:1", "TERN_TOKEN": "t"})
        self.assertEqual((c.gateway, c.token), ("http://g:1", "t"))
        c = resolve_connection(gateway="http://arg:2", env={"TERN_CONFIG": self.path, "TERN_GATEWAY": "http://g:1"})
        self.assertEqual(c.gateway, "http://arg:2")

    def test_no_config_means_the_local_gateway_and_a_missing_context_is_an_error(self):
        missing = os.path.join(self.dir.name, "none.json")
        self.assertEqual(resolve_connection(env={"TERN_CONFIG": missing}).gateway, DEFAULT_GATEWAY)
        with self.assertRaisesRegex(ValueError, 'no context "staging"'):
            resolve_connection(context="staging", env={"TERN_CONFIG": self.path})


if __name__ == "__main__":
    unittest.main()
