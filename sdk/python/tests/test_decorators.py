import unittest

import tern


class DecoratorTest(unittest.TestCase):
    def test_an_endpoint_declares_its_spec_with_the_spec_own_options(self):
        def load():
            pass

        @tern.endpoint(cpu=1, memory="1Gi", gpu=["A100", "H100"], workers=2, keep_warm_seconds=30, on_start=load, idle_timeout=5,
                       autoscaler={"type": "queue_depth", "max_containers": 3}, env={"MODEL": "x"},
                       image=tern.Image(base="python:3.11-slim", apt=["ffmpeg"], pip=["numpy==2.1.0"], commands=["echo hi"]))
        def predict_text(payload):
            return {"echo": payload}

        self.assertEqual(
            predict_text.spec("app.py:predict_text"),
            {
                "name": "predict-text",
                "kind": "endpoint",
                "handler": "app.py:predict_text",
                "on_start": "app.py:load",
                "image": {"base": "python:3.11-slim", "apt": ["ffmpeg"], "pip": ["numpy==2.1.0"], "commands": ["echo hi"]},
                "cpu": 1,
                "memory": "1Gi",
                "gpu": ["A100", "H100"],
                "workers": 2,
                "keep_warm_seconds": 30,
                "idle_timeout": 5,
                "autoscaler": {"type": "queue_depth", "max_containers": 3},
                "env": {"MODEL": "x"},
            },
        )

    def test_a_task_queue_and_a_function_carry_task_policy_schedule_and_volumes(self):
        @tern.task_queue(name="jobs", task_policy={"max_retries": 2, "timeout": 60}, max_pending_tasks=100,
                         volumes={"/data": "weights"})
        def work(payload):
            return payload

        @tern.function(schedule="*/5 * * * *", volumes=[{"name": "cache", "mount_path": "/cache", "mode": "ro"}])
        def nightly(payload):
            return payload

        @tern.function(schedule="30s", image="registry.example.com/team/model:1.2")
        def often(payload):
            return payload

        self.assertEqual(
            work.spec("jobs.py:work"),
            {
                "name": "jobs",
                "kind": "task_queue",
                "handler": "jobs.py:work",
                "volumes": [{"name": "weights", "mount_path": "/data"}],
                "task_policy": {"max_retries": 2, "timeout": 60},
                "max_pending_tasks": 100,
            },
        )
        self.assertEqual(nightly.spec("a.py:nightly")["schedule"], {"cron": "*/5 * * * *"})
        self.assertEqual(nightly.spec("a.py:nightly")["volumes"], [{"name": "cache", "mount_path": "/cache", "mode": "ro"}])
        self.assertEqual(often.spec("a.py:often")["schedule"], {"every": "30s"})
        self.assertEqual(often.spec("a.py:often")["image"], "registry.example.com/team/model:1.2")

    def test_the_decorated_function_still_runs_locally_as_the_runner_calls_it(self):
        @tern.function()
        def square(payload):
            """Squares n."""
            return {"square": payload["n"] ** 2}

        self.assertEqual(square({"n": 7}), {"square": 49})
        self.assertEqual(square.__name__, "square")
        self.assertEqual(square.__doc__, "Squares n.")
        self.assertIsInstance(square, tern.Deployment)

    def test_an_option_the_spec_does_not_have_is_refused_where_it_is_written(self):
        with self.assertRaises(TypeError):
            tern.endpoint(cpus=2)  # type: ignore[call-arg]
        with self.assertRaises(TypeError):
            tern.endpoint(task_policy={"max_retries": 1})  # type: ignore[call-arg]

    def test_a_name_the_gateway_would_refuse_is_refused_at_once(self):
        with self.assertRaisesRegex(ValueError, "lower-case letters, digits or -"):
            tern.function(name="Not_Valid")(lambda p: p)

    def test_a_call_that_does_not_fit_the_kind_says_which_fits(self):
        @tern.endpoint()
        def echo(payload):
            return payload

        with self.assertRaisesRegex(TypeError, r"echo is a endpoint: \.put\(\) is for a task queue"):
            echo.put({"x": 1})
        with self.assertRaisesRegex(TypeError, r"\.map\(\) is for a function"):
            list(echo.map([{"x": 1}]))


class ImageTest(unittest.TestCase):
    def test_only_the_fields_set_go_into_the_spec(self):
        self.assertEqual(tern.Image().to_spec(), {})
        self.assertEqual(
            tern.Image(pip=["torch"], env={"A": "1"}, workdir="/w", npm=["left-pad"]).to_spec(),
            {"pip": ["torch"], "npm": ["left-pad"], "env": {"A": "1"}, "workdir": "/w"},
        )


if __name__ == "__main__":
    unittest.main()
