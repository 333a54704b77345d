"""A stand-in for PyTorch with one CUDA device of FAKE_TORCH_DEVICE_BYTES bytes, of which other
processes hold FAKE_TORCH_OTHERS_BYTES, enough for
tern_prover.py's prepare step (the CUDA context, the warm-up product, the claimed memory) to run
where no GPU is: allocations are counted, not made, and fail past the device's size as CUDA's do."""

import os

__version__ = "0.0-fake"
int8, uint8, int32 = "int8", "uint8", "int32"
_SIZES = {int8: 1, uint8: 1, int32: 4}
_allocated = [0]


class OutOfMemoryError(RuntimeError):
    pass


def _capacity():
    return int(os.environ.get("FAKE_TORCH_DEVICE_BYTES", "0"))


def _free_before():
    """The device's memory less what others hold, before this process's allocations."""
    return _capacity() - int(os.environ.get("FAKE_TORCH_OTHERS_BYTES", "0"))


class Tensor:
    def __init__(self, count, dtype):
        self.size = 0
        size = count * _SIZES[dtype]
        if _allocated[0] + size > _free_before():
            raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} bytes")
        _allocated[0] += size
        self.size, self.count, self.dtype = size, count, dtype

    def __del__(self):
        _allocated[0] -= self.size

    def fill_(self, value):
        return self


def _count(shape):
    shape = shape if isinstance(shape, tuple) else (shape,)
    total = 1
    for s in shape:
        total *= s
    return total


def zeros(shape, dtype, device=None):
    return Tensor(_count(shape), dtype)


def empty(shape, dtype, device=None):
    return Tensor(_count(shape), dtype)


def _int_mm(a, b):
    return Tensor(a.count, int32)


class _Functional:
    @staticmethod
    def pad(t, widths):
        return Tensor(t.count, t.dtype)


class nn:
    functional = _Functional


class cuda:
    OutOfMemoryError = OutOfMemoryError

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_device_name(index):
        return "NVIDIA Fake 4GB"

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def memory_allocated():
        return _allocated[0]

    @staticmethod
    def memory_reserved():
        return _allocated[0]

    @staticmethod
    def mem_get_info():
        return _free_before() - _allocated[0], _capacity()

    @staticmethod
    def empty_cache():
        pass
