import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InstallTest(unittest.TestCase):
    """`pip install ./sdk/python` needs nothing from an index: the build backend is in the folder."""

    def test_installs_offline_into_a_fresh_venv_typed(self):
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            # No pip inside (creating one is slow): this interpreter's pip installs into the venv.
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
            python = os.path.join(venv, "bin", "python")
            install = ["install", "--no-index", "--no-cache-dir", "--disable-pip-version-check", SDK]
            pip = subprocess.run([sys.executable, "-m", "pip", "--python", python, *install], capture_output=True, text=True)
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            probe = "import os, tern; print(tern.__version__, os.path.isfile(os.path.join(os.path.dirname(tern.__file__), 'py.typed')))"
            ran = subprocess.run([python, "-c", probe], cwd=tmp, capture_output=True, text=True)
            self.assertEqual(ran.stdout.split(), ["0.1.0", "True"], ran.stderr)

    def test_the_wheel_is_the_same_bytes_each_build_and_records_every_file(self):
        sys.path.insert(0, SDK)
        try:
            import _build
        finally:
            sys.path.remove(SDK)
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            name = _build.build_wheel(a)
            self.assertEqual(name, _build.build_wheel(b))
            with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
                self.assertEqual(x.read(), y.read())
            with zipfile.ZipFile(os.path.join(a, name)) as whl:
                names = set(whl.namelist())
                record = whl.read("tern_gpu-0.1.0.dist-info/RECORD").decode()
            self.assertTrue({"tern/__init__.py", "tern/py.typed", "tern/spec.py", "tern/volume.py"} <= names)
            self.assertEqual({line.split(",")[0] for line in record.splitlines()}, names)


if __name__ == "__main__":
    unittest.main()
