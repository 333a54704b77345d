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
