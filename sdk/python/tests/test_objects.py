import unittest

import tern


class SecretTest(unittest.TestCase):
    def test_secrets_and_names_become_the_spec_list_once_each(self):
        @tern.endpoint(secrets=[tern.Secret("HF_TOKEN"), "OTHER", tern.Secret.from_name("OTHER")])
        def predict(payload):
            return payload

        self.assertEqual(predict.spec("a.py:predict")["secrets"], ["HF_TOKEN", "OTHER"])

    def test_a_secret_name_the_gateway_would_refuse_is_refused_where_it_is_written(self):
        with self.assertRaisesRegex(ValueError, "named as an environment variable"):
            tern.Secret("hf-token")
        with self.assertRaisesRegex(ValueError, "named as an environment variable"):
            tern.function(secrets=["1BAD"], name="f")(lambda p: p)
        with self.assertRaisesRegex(TypeError, "secrets takes a list"):
            tern.function(secrets=tern.Secret("A"), name="f")(lambda p: p)  # type: ignore[arg-type]
        with self.assertRaisesRegex(TypeError, "not int"):
            tern.function(secrets=[1], name="f")(lambda p: p)  # type: ignore[list-item]


class VolumeTest(unittest.TestCase):
    def test_volumes_map_paths_to_volumes_or_names_or_list_them_with_a_path(self):
        @tern.function(volumes={"/models": tern.Volume("weights", read_only=True), "/cache": "cache"})
        def by_path(payload):
            return payload

        @tern.task_queue(volumes=[tern.Volume.from_name("weights").mount("/m"), tern.Volume("out", path="/out"), {"name": "x", "mount_path": "/x"}])
        def listed(payload):
            return payload

        self.assertEqual(
            by_path.spec("a.py:by_path")["volumes"],
            [{"name": "weights", "path": "/models", "mode": "ro"}, {"name": "cache", "mount_path": "/cache"}],
        )
        self.assertEqual(
            listed.spec("a.py:listed")["volumes"],
            [{"name": "weights", "path": "/m", "mode": "rw"}, {"name": "out", "path": "/out", "mode": "rw"}, {"name": "x", "mount_path": "/x"}],
        )

    def test_a_volume_without_a_place_or_with_a_bad_name_is_refused_where_it_is_written(self):
        with self.assertRaisesRegex(ValueError, r"volume weights: say where it mounts"):
            tern.function(volumes=[tern.Volume("weights")], name="f")(lambda p: p)
        with self.assertRaisesRegex(ValueError, "lower-case letters, digits or -"):
            tern.Volume("Weights")
        with self.assertRaisesRegex(ValueError, "must be an absolute path"):
            tern.function(volumes={"data": tern.Volume("weights")}, name="f")(lambda p: p)
        with self.assertRaisesRegex(TypeError, "volumes takes a mapping or a list"):
            tern.function(volumes=tern.Volume("w", path="/w"), name="f")(lambda p: p)  # type: ignore[arg-type]

    def test_commit_outside_a_container_says_why_it_cannot(self):
        with self.assertRaisesRegex(RuntimeError, "no TERN_AGENT_SOCKET"):
            tern.Volume("weights").commit()


class ImageChainTest(unittest.TestCase):
    def test_a_chain_builds_the_same_spec_as_the_keyword_constructor(self):
        chained = (
            tern.Image.base("python:3.11-slim")
            .apt("ffmpeg")
            .pip("numpy==2.1", "torch", index_url="https://pypi.example.com/simple")
            .npm(["left-pad"])
            .commands("echo hi")
            .env({"A": "1"})
            .env(B="2")
            .workdir("/w")
        )
        keywords = tern.Image(base="python:3.11-slim", apt=["ffmpeg"], pip=["numpy==2.1", "torch"], npm=["left-pad"], commands=["echo hi"],
                              env={"A": "1", "B": "2"}, workdir="/w", pip_index_url="https://pypi.example.com/simple")
        self.assertEqual(chained, keywords)
        self.assertEqual(hash(chained), hash(keywords))
        self.assertEqual(
            chained.to_spec(),
            {"base": "python:3.11-slim", "workdir": "/w", "pip_index_url": "https://pypi.example.com/simple", "apt": ["ffmpeg"],
             "pip": ["numpy==2.1", "torch"], "npm": ["left-pad"], "commands": ["echo hi"], "env": {"A": "1", "B": "2"}},
        )

    def test_each_step_answers_a_new_image_and_leaves_the_old_one_as_it_was(self):
        base = tern.Image.base("python:3.11-slim")
        with_numpy = base.pip_install("numpy")
        self.assertEqual(base.to_spec(), {"base": "python:3.11-slim"})
        self.assertEqual(with_numpy.apt_install("git").run_commands("make").to_spec(),
                         {"base": "python:3.11-slim", "apt": ["git"], "pip": ["numpy"], "commands": ["make"]})
        self.assertEqual(tern.Image.pip("x").to_spec(), {"pip": ["x"]})
        with self.assertRaisesRegex(AttributeError, "tern.Image is frozen"):
            base.extra = 1  # type: ignore[attr-defined]
        with self.assertRaisesRegex(TypeError, "image steps are strings, not int"):
            base.apt(1)  # type: ignore[arg-type]

    def test_a_chained_image_goes_into_a_decorator_spec(self):
        @tern.function(image=tern.Image.base("python:3.11-slim").pip("numpy"))
        def f(payload):
            return payload

        self.assertEqual(f.spec("a.py:f")["image"], {"base": "python:3.11-slim", "pip": ["numpy"]})


if __name__ == "__main__":
    unittest.main()
