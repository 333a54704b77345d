import unittest

import tern
from tern.errors import api_error, message_of


class ErrorsTest(unittest.TestCase):
    def test_each_status_raises_its_kind_with_the_gateway_message(self):
        cases = {
            400: tern.InvalidRequestError,
            413: tern.InvalidRequestError,
            401: tern.AuthError,
            403: tern.AuthError,
            404: tern.NotFoundError,
            409: tern.ConflictError,
            429: tern.UnavailableError,
            503: tern.UnavailableError,
            500: tern.ApiError,
        }
        for status, kind in cases.items():
            error = api_error(status, "what to fix", {"message": "what to fix"})
            self.assertIs(type(error), kind)
            self.assertIsInstance(error, tern.TernError)
            self.assertEqual((error.status, error.message, str(error)), (status, "what to fix", f"{status} what to fix"))

    def test_the_message_is_read_from_json_a_list_or_plain_text(self):
        self.assertEqual(message_of({"message": "cpu must be positive"}, "x"), "cpu must be positive")
        self.assertEqual(message_of({"message": ["a", "b"]}, "x"), "a; b")
        self.assertEqual(message_of("plain words\n", "x"), "plain words")
        self.assertEqual(message_of(None, "Not Found"), "Not Found")


if __name__ == "__main__":
    unittest.main()


class RemoteErrorTest(unittest.TestCase):
    def test_a_remote_traceback_stays_in_the_message_and_is_held_alone(self):
        trace = 'Traceback (most recent call last):\n  File "app.py", line 3, in predict\nValueError: bad input'
        error = tern.RemoteError(f"t-1 ERROR: ValueError: bad input\n\nRemote traceback:\n{trace}", "t-1")
        self.assertEqual(error.traceback, trace)
        self.assertIn("Remote traceback:", str(error))
        self.assertIsNone(tern.RemoteError("t-2 TIMEOUT: ran longer than its timeout", "t-2").traceback)


class ResponsesTest(unittest.TestCase):
    def test_an_http_error_takes_a_4xx_or_5xx_and_defaults_its_message_to_the_phrase(self):
        error = tern.HTTPError(404)
        self.assertEqual((error.status, error.message, error.headers), (404, "Not Found", {}))
        self.assertEqual(tern.HTTPError(400, "prompt is required", headers={"X-Why": "1"}).headers, {"X-Why": "1"})
        for status in (200, 302, 600, "400", True):
            with self.assertRaises(ValueError):
                tern.HTTPError(status)

    def test_a_response_checks_its_status(self):
        self.assertEqual(tern.Response({"id": 7}, status=201).status, 201)
        with self.assertRaises(ValueError):
            tern.Response(status=99)
