import numpy as np


def predict(body):
    """Multiplies two n×n integer matrices and returns checksums of the product."""
    n = int(body.get("n", 64))
    if not 1 <= n <= 2000:
        raise ValueError("n must be between 1 and 2000")
    a = np.arange(n * n, dtype=np.int64).reshape(n, n) % 7
    b = (np.arange(n * n, dtype=np.int64).reshape(n, n) % 5).T
    c = a @ b
    return {"n": n, "checksum": int(c.sum()), "trace": int(np.trace(c)), "numpy": np.__version__}
