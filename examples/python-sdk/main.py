"""Calls the handlers of app.py once deployed (see app.py), and runs code in a sandbox.

The gateway and token come from ~/.tern/config.json (npm run up writes it) or TERN_GATEWAY /
TERN_TOKEN.
"""

import sys

import tern
from app import count, predict, square


def progress(done, total):
    if done % 250 == 0 or done == total:
        print(f"  map: {done}/{total}", file=sys.stderr)


def main():
    print("predict.remote:", predict.remote(text="hello from the python sdk"))
    print("square.remote:", square.remote(n=12))

    task = count.put(text="banana")
    print("count.put:", task.id, "->", task.get(timeout=120))

    squares = list(square.map(({"n": n} for n in range(1000)), chunk_size=50, on_progress=progress))
    print("square.map: 1000 results, the last", squares[-1])

    with tern.Sandbox.create(cpu=0.25, memory="256Mi") as sandbox:
        ran = sandbox.run_code("import sys; print(sys.version_info[:2]); print(6 * 7)")
        print("sandbox.run_code:", ran.exit_code, ran.stdout.strip().splitlines()[-1])

    try:
        tern.lookup("no-such-deployment")
    except tern.NotFoundError as e:
        print("lookup of a missing deployment:", type(e).__name__, e.message)


if __name__ == "__main__":
    main()
