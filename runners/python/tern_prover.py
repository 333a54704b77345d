#!/usr/bin/env python3
"""Tern's GPU prover: answers one hardware challenge (libs/proof) from inside a Tern container
started on the claimed GPU, the Python twin of libs/proof's ReferenceProver.

    0. reads {"prepare": {"n", "allocateBytes", "claimedBytes"}} (no seed: the scheduler sends it
       only once the prover is ready, so none of this is timed): imports PyTorch, makes the CUDA
       context, allocates the product's buffers for n and runs it once on zeros (cuBLAS's kernels
       load), then allocates and touches device memory until, with what others hold on the
       device, it has allocateBytes (the GPU's claimed claimedBytes less the margin), frees the
       extra, and writes {"ready": true, "backend", "allocatedBytes", "heldByOthersBytes",
       "timings"}. Without CUDA it refuses: a GPU claim is not proven on a CPU.
       TERN_PROVER_FAKE_GPU=1 (the device check's --fake-gpu only) lets it go on without;
    1. reads {"seed": hex, "n": n}, draws A and B from the seed exactly as matrices.ts does,
       computes C = A.B (int8 x int8, int32 sums) on the device, and writes {"root": hex, ...},
       the Merkle root over C's rows as merkle.ts builds it;
    2. reads {"vectors": [base64 int32 ...], "rows": [i ...]} (the probe, drawn after the root
       arrived) and writes {"products": [...], "rows": [{"index", "values", "proof"}]}, C.r mod P
       for each vector and the revealed rows with their Merkle proofs, in wire.ts's encoding;
       again, from the same product, while the probe says "more": true (its rows in parts,
       wire.ts probeParts, when the answer would not fit one NATS message).

One JSON object a line, over a unix socket the agent listens on (--connect PATH: the container's
stdio goes to log files) or over stdin/stdout. Errors: {"error": "..."} and exit status 1.

The product, by what the container has:
  - PyTorch with CUDA: torch._int_mm (int8 inputs, int32 accumulation, the tensor cores' integer
    path), or, if this build refuses the shape, a float64 product on the device, exact because every
    partial sum is an integer below n.2^14 <= 2^31 < 2^53;
  - NumPy: a float64 product through BLAS, exact for the same reason;
  - neither: plain Python, for the protocol's tests at small n (hours at the GPU challenge's n: a
    CPU answering a GPU challenge misses the band's deadline whatever path it takes).
TERN_PROVER_PRODUCT=numpy|python rules out the paths before it (tests). A and B come from AES-256-CTR: the `cryptography` package, else the machine's libcrypto through
ctypes, else AES in plain Python (small n only). Standard library only otherwise.

    tern_prover.py [--connect PATH]             answer one challenge
    tern_prover.py matrices SEED N [--aes python]  print A||B in hex (tests)
    tern_prover.py backends                     print what this container would use
"""

import base64
import ctypes
import ctypes.util
import hashlib
import json
import os
import socket
import struct
import sys
import time
from array import array

P = 67_108_859
MATRIX_TAG = b"tern-proof/matrices/v1"
LEAF, NODE = b"\x00", b"\x01"
EMPTY = hashlib.sha256(b"\x02").digest()
MAX_N = 1 << 17


# ---------------------------------------------------------------------------------------------
# A and B: AES-256-CTR keystream under sha256(tag || seed), counter block 0 (matrices.ts)


def matrix_bytes(seed, n, aes=None):
    """The 2n^2 bytes of A then B, as signed bytes are read from them (row-major)."""
    key = hashlib.sha256(MATRIX_TAG + seed).digest()
    for name, keystream in AES_BACKENDS:
        if aes and name != aes:
            continue
        out = keystream(key, 2 * n * n)
        if out is not None:
            return out, name
    raise RuntimeError(f"no AES backend named {aes!r}")


def _keystream_cryptography(key, length):
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError:
        return None
    encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    return encryptor.update(bytes(length)) + encryptor.finalize()


def _libcrypto():
    for name in (ctypes.util.find_library("crypto"), "libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.EVP_aes_256_ctr.restype = ctypes.c_void_p
            lib.EVP_CIPHER_CTX_new.restype = ctypes.c_void_p
            lib.EVP_EncryptInit_ex.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
            lib.EVP_EncryptUpdate.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int]
            lib.EVP_CIPHER_CTX_free.argtypes = [ctypes.c_void_p]
            return lib
        except (OSError, AttributeError):
            continue
    return None


def _keystream_libcrypto(key, length):
    lib = _libcrypto()
    if lib is None:
        return None
    ctx = lib.EVP_CIPHER_CTX_new()
    try:
        if lib.EVP_EncryptInit_ex(ctx, lib.EVP_aes_256_ctr(), None, key, bytes(16)) != 1:
            return None
        out = ctypes.create_string_buffer(length)
        chunk = 1 << 24
        zeros = bytes(min(chunk, length))
        written = ctypes.c_int(0)
        for offset in range(0, length, chunk):
            size = min(chunk, length - offset)
            if lib.EVP_EncryptUpdate(ctx, ctypes.byref(out, offset), ctypes.byref(written), zeros, size) != 1 or written.value != size:
                return None
        return out.raw
    finally:
        lib.EVP_CIPHER_CTX_free(ctx)


def _aes_tables():
    sbox = [0] * 256
    p = q = 1
    while True:  # the S-box from the multiplicative inverse in GF(2^8) and its affine map
        p = p ^ ((p << 1) & 0xFF) ^ (0x1B if p & 0x80 else 0)
        q ^= q << 1
        q ^= q << 2
        q ^= q << 4
        q &= 0xFF
        if q & 0x80:
            q ^= 0x09
        x = q ^ ((q << 1 | q >> 7) & 0xFF) ^ ((q << 2 | q >> 6) & 0xFF) ^ ((q << 3 | q >> 5) & 0xFF) ^ ((q << 4 | q >> 4) & 0xFF)
        sbox[p] = x ^ 0x63
        if p == 1:
            break
    sbox[0] = 0x63
    xtime = lambda b: ((b << 1) ^ (0x1B if b & 0x80 else 0)) & 0xFF
    t0 = [0] * 256
    for i, s in enumerate(sbox):
        s2 = xtime(s)
        t0[i] = (s2 << 24) | (s << 16) | (s << 8) | (s2 ^ s)
    rot = lambda t, r: [((w >> r) | (w << (32 - r))) & 0xFFFFFFFF for w in t]
    return sbox, t0, rot(t0, 8), rot(t0, 16), rot(t0, 24)


def _keystream_python(key, length):
    sbox, t0, t1, t2, t3 = _aes_tables()
    w = list(struct.unpack(">8I", key))
    rcon = 1
    for i in range(8, 60):
        t = w[i - 1]
        if i % 8 == 0:
            t = ((t << 8) & 0xFFFFFFFF) | (t >> 24)
            t = (sbox[t >> 24] << 24) | (sbox[(t >> 16) & 0xFF] << 16) | (sbox[(t >> 8) & 0xFF] << 8) | sbox[t & 0xFF]
            t ^= rcon << 24
            rcon = ((rcon << 1) ^ (0x1B if rcon & 0x80 else 0)) & 0xFF
        elif i % 8 == 4:
            t = (sbox[t >> 24] << 24) | (sbox[(t >> 16) & 0xFF] << 16) | (sbox[(t >> 8) & 0xFF] << 8) | sbox[t & 0xFF]
        w.append(w[i - 8] ^ t)
    out = bytearray()
    for counter in range((length + 15) // 16):
        s = list(struct.unpack(">4I", counter.to_bytes(16, "big")))
        s = [s[c] ^ w[c] for c in range(4)]
        for rnd in range(1, 14):
            k = w[4 * rnd : 4 * rnd + 4]
            s = [
                t0[s[c] >> 24] ^ t1[(s[(c + 1) % 4] >> 16) & 0xFF] ^ t2[(s[(c + 2) % 4] >> 8) & 0xFF] ^ t3[s[(c + 3) % 4] & 0xFF] ^ k[c]
                for c in range(4)
            ]
        k = w[56:60]
        s = [
            ((sbox[s[c] >> 24] << 24) | (sbox[(s[(c + 1) % 4] >> 16) & 0xFF] << 16) | (sbox[(s[(c + 2) % 4] >> 8) & 0xFF] << 8) | sbox[s[(c + 3) % 4] & 0xFF]) ^ k[c]
            for c in range(4)
        ]
        out += struct.pack(">4I", *s)
    return bytes(out[:length])


AES_BACKENDS = [("cryptography", _keystream_cryptography), ("libcrypto", _keystream_libcrypto), ("python", _keystream_python)]


# ---------------------------------------------------------------------------------------------
# C = A.B, kept as a list of rows for the Merkle tree and the probe


def _allowed(name):
    """TERN_PROVER_PRODUCT=python (or numpy) rules out the faster paths: the protocol's tests take the
    plain-Python one; a slower path can only miss a band's deadline, never pass one it would fail."""
    chosen = os.environ.get("TERN_PROVER_PRODUCT", "")
    order = ["torch", "numpy", "python"]
    return not chosen or order.index(name) >= order.index(chosen) if chosen in order else True


def _torch():
    if not _allowed("torch"):
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _numpy():
    if not _allowed("numpy"):
        return None
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def backend_name():
    if _torch():
        import torch

        return f"torch-cuda ({torch.cuda.get_device_name(0)})"
    return "numpy" if _numpy() else "python"


class Product:
    """C on whatever computed it, with each row's little-endian int32 bytes for the tree."""

    def __init__(self, ab, n):
        self.n = n
        torch, np = _torch(), _numpy()
        if torch:
            self.backend, self.rows_bytes, self._device = self._on_cuda(torch, ab, n)
        elif np:
            a = np.frombuffer(ab, dtype=np.int8, count=n * n).reshape(n, n).astype(np.float64)
            b = np.frombuffer(ab, dtype=np.int8, offset=n * n).reshape(n, n).astype(np.float64)
            c = (a @ b).astype(np.int32).astype("<i4")
            self.backend, self._device = "numpy", None
            self.rows_bytes = [c[i].tobytes() for i in range(n)]
        else:
            self.backend, self._device = "python", None
            self.rows_bytes = _product_python(ab, n)

    @staticmethod
    def warm(torch, zeros, n):
        """The product once on zeros of the challenge's size: cuBLAS loads its kernels before the seed."""
        m = -(-n // 8) * 8
        try:
            padded = torch.nn.functional.pad(zeros, (0, m - n, 0, m - n))
            torch._int_mm(padded, padded)
        except (RuntimeError, AttributeError):
            zeros.double() @ zeros.double()

    def _on_cuda(self, torch, ab, n):
        host = torch.frombuffer(bytearray(ab), dtype=torch.int8)
        a = host[: n * n].view(n, n).cuda()
        b = host[n * n :].view(n, n).cuda()
        # _int_mm wants the inner and outer sizes multiples of 8 (and more than 16 rows): zero
        # padding changes no entry of C.
        m = -(-n // 8) * 8
        try:
            pa = torch.nn.functional.pad(a, (0, m - n, 0, m - n))
            pb = torch.nn.functional.pad(b, (0, m - n, 0, m - n))
            c = torch._int_mm(pa, pb)[:n, :n]
            backend = "torch._int_mm"
        except (RuntimeError, AttributeError):
            c = (a.double() @ b.double()).to(torch.int32)
            backend = "torch float64"
        torch.cuda.synchronize()
        self._c = c
        host_c = c.contiguous().cpu().numpy().astype("<i4")
        return backend, [host_c[i].tobytes() for i in range(n)], c.device

    def times(self, r):
        """C.r mod P, each term's value reduced first: exact in int64 with r split in 13-bit halves."""
        n = self.n
        if self._device is not None:
            import torch

            cm = torch.remainder(self._c.to(torch.int64), P)
            rv = torch.tensor(r, dtype=torch.int64, device=self._device)
            lo = (cm * (rv & 0x1FFF)).sum(dim=1) % P
            hi = (cm * (rv >> 13)).sum(dim=1) % P
            return ((lo + hi * 8192) % P).tolist()
        np = _numpy()
        if np is not None:
            cm = np.remainder(np.stack([np.frombuffer(row, dtype="<i4") for row in self.rows_bytes]).astype(np.int64), P)
            rv = np.array(r, dtype=np.int64)
            lo = (cm * (rv & 0x1FFF)).sum(axis=1) % P
            hi = (cm * (rv >> 13)).sum(axis=1) % P
            return ((lo + hi * 8192) % P).tolist()
        return [sum((v % P) * x for v, x in zip(self.row(i), r)) % P for i in range(n)]

    def row(self, i):
        return struct.unpack(f"<{self.n}i", self.rows_bytes[i])


def _product_python(ab, n):
    a = array("b", ab[: n * n])
    b = array("b", ab[n * n :])
    rows = []
    for i in range(n):
        c = [0] * n
        for k in range(n):
            aik = a[i * n + k]
            if aik:
                bk = b[k * n : (k + 1) * n]
                c = [x + aik * y for x, y in zip(c, bk)]
        rows.append(struct.pack(f"<{n}i", *c))
    return rows


# ---------------------------------------------------------------------------------------------
# The Merkle tree over C's rows (merkle.ts)


def merkle_levels(rows_bytes):
    leaves = [hashlib.sha256(LEAF + struct.pack("<I", i) + row).digest() for i, row in enumerate(rows_bytes)]
    width = 1
    while width < len(leaves):
        width *= 2
    levels = [leaves + [EMPTY] * (width - len(leaves))]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([hashlib.sha256(NODE + below[i] + below[i + 1]).digest() for i in range(0, len(below), 2)])
    return levels


def merkle_proof(levels, index):
    return [levels[level][(index >> level) ^ 1].hex() for level in range(len(levels) - 1)]


# ---------------------------------------------------------------------------------------------
# The exchange


def decode_int32(text, n):
    raw = base64.b64decode(text, validate=True)
    if len(raw) != 4 * n:
        raise ValueError(f"a probe vector must hold {n} int32s")
    values = struct.unpack(f"<{n}i", raw)
    if any(v < 0 or v >= P for v in values):
        raise ValueError("a probe vector holds a value that is not a residue mod P")
    return values


def encode_int32(values):
    return base64.b64encode(struct.pack(f"<{len(values)}i", *values)).decode()


def parse_challenge(message):
    seed, n = message.get("seed"), message.get("n")
    if not isinstance(seed, str) or len(seed) != 64 or any(ch not in "0123456789abcdef" for ch in seed):
        raise ValueError("seed must be 64 hex digits")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > MAX_N:
        raise ValueError(f"n must be a whole number in [1, {MAX_N}]")
    return bytes.fromhex(seed), n


# Device memory is allocated in pieces of this size, so a short device reports how much it got.
MEMORY_PIECE = 1 << 30


def prepare(message):
    """Everything before the seed; the product's own path (Product) finds PyTorch and CUDA as left here."""
    started = time.perf_counter()
    n, allocate, claimed = message.get("n"), message.get("allocateBytes", 0), message.get("claimedBytes", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > MAX_N:
        raise ValueError(f"n must be a whole number in [1, {MAX_N}]")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (allocate, claimed)):
        raise ValueError("allocateBytes and claimedBytes must be whole numbers of bytes")
    torch = _torch()
    if torch is None:
        if os.environ.get("TERN_PROVER_FAKE_GPU") == "1":
            return {"ready": True, "backend": f"{backend_name()} (fake GPU)", "allocatedBytes": 0, "timings": {"startMs": _ms(started), "allocateMs": 0}}
        raise RuntimeError(f"no CUDA device for a GPU claim: {_why_no_cuda()}; a CPU cannot prove a GPU")
    zeros = torch.zeros((n, n), dtype=torch.int8, device="cuda")
    Product.warm(torch, zeros, n)
    torch.cuda.synchronize()
    context = time.perf_counter()
    # A workload may hold part of the GPU when a challenge comes: what the device holds for others
    # (and for CUDA contexts, this one's included) counts, since with the prover's own it cannot
    # exceed the device's memory. The prover allocates and touches the rest of the claim.
    free, total = torch.cuda.mem_get_info()
    others = max(0, total - free - torch.cuda.memory_reserved())
    pieces, held = [], torch.cuda.memory_allocated()
    try:
        while others + held < allocate:
            size = min(MEMORY_PIECE, allocate - others - held)
            piece = torch.empty(size, dtype=torch.uint8, device="cuda")
            piece.fill_(0xA5)
            pieces.append(piece)
            held += size
        torch.cuda.synchronize()
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
        if "out of memory" not in str(e).lower():
            raise
    del pieces, zeros
    torch.cuda.empty_cache()
    if others + held < allocate:
        raise RuntimeError(
            f"{torch.cuda.get_device_name(0)} claims {claimed} bytes of memory; the prover allocated {held} bytes"
            f" ({others} more held by CUDA contexts and other processes) of the {allocate} it must"
        )
    timings = {"startMs": _ms(started, context), "allocateMs": _ms(context)}
    return {"ready": True, "backend": backend_name(), "allocatedBytes": others + held, "heldByOthersBytes": others, "timings": timings}


def _why_no_cuda():
    if not _allowed("torch"):
        return f"TERN_PROVER_PRODUCT={os.environ.get('TERN_PROVER_PRODUCT')} rules out PyTorch"
    try:
        import torch
    except ImportError as e:
        return f"PyTorch does not import ({e})"
    return f"PyTorch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is false)"


def _ms(a, b=None):
    return round(((b or time.perf_counter()) - a) * 1000, 1)


def commit(message):
    seed, n = parse_challenge(message)
    started = time.perf_counter()
    ab, aes = matrix_bytes(seed, n)
    drawn = time.perf_counter()
    product = Product(ab, n)
    multiplied = time.perf_counter()
    levels = merkle_levels(product.rows_bytes)
    hashed = time.perf_counter()
    ms = lambda a, b: round((b - a) * 1000, 1)
    timings = {"drawMs": ms(started, drawn), "productMs": ms(drawn, multiplied), "hashMs": ms(multiplied, hashed)}
    return product, levels, {"root": levels[-1][0].hex(), "backend": product.backend, "aes": aes, "timings": timings}


def answer(product, levels, message):
    n = product.n
    vectors = [decode_int32(v, n) for v in message.get("vectors", [])]
    rows = message.get("rows", [])
    if not isinstance(rows, list) or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 or i >= n for i in rows):
        raise ValueError(f"rows must be indices in [0, {n})")
    return {
        "products": [encode_int32(product.times(r)) for r in vectors],
        "rows": [{"index": i, "values": encode_int32(product.row(i)), "proof": merkle_proof(levels, i)} for i in rows],
    }


def serve(reader, write):
    """The prepare step first when the agent sends one (it always does); a challenge straight away
    otherwise (the protocol's tests over stdio)."""
    try:
        message = json.loads(reader.readline() or "{}")
        if "prepare" in message:
            write(prepare(message["prepare"] if isinstance(message["prepare"], dict) else {}))
            message = json.loads(reader.readline() or "{}")
        product, levels, committed = commit(message)
        write(committed)
        # The probe, in one part or several (libs/proof probeParts), each answered from the same
        # product; every part but the last says "more".
        more = True
        while more:
            line = reader.readline()
            if not line:
                return 0
            probe = json.loads(line)
            more = probe.get("more") is True
            write(answer(product, levels, probe))
        return 0
    except (ValueError, RuntimeError, MemoryError) as e:
        write({"error": f"{type(e).__name__}: {e}"})
        return 1


def main(argv):
    if argv[:1] == ["matrices"]:
        ab, _ = matrix_bytes(bytes.fromhex(argv[1]), int(argv[2]), argv[4] if argv[3:4] == ["--aes"] else None)
        print(ab.hex())
        return 0
    if argv[:1] == ["backends"]:
        print(json.dumps({"product": backend_name(), "aes": [name for name, ks in AES_BACKENDS if ks(bytes(32), 16) is not None][0]}))
        return 0
    if argv[:1] == ["--connect"] and len(argv) == 2:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(argv[1])
        reader = sock.makefile("r", encoding="utf-8")
        return serve(reader, lambda obj: sock.sendall((json.dumps(obj) + "\n").encode()))
    if not argv:
        return serve(sys.stdin, lambda obj: (sys.stdout.write(json.dumps(obj) + "\n"), sys.stdout.flush()))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
