"""ctest python_cuda_import: the CUDA build's Python side works on a machine without a GPU.

Checks that minifloat._cuda_kernels was built, that `import minifloat` loads neither it nor a
CUDA library, that `import minifloat._cuda` and the extension import without a driver, that
arguments are checked before any CUDA call, and that a kernel call without a usable device
raises RuntimeError naming the CUDA error (on a machine with a GPU that part is skipped:
tests/gpu/run.sh checks the kernels there). Run with PYTHONPATH=<build>/python.
"""

import sys


def main():
    import minifloat

    assert "minifloat._cuda_kernels" not in sys.modules, "import minifloat loaded the CUDA extension"
    import minifloat._cuda as mc

    assert "minifloat._cuda_kernels" not in sys.modules, "import minifloat._cuda loaded the CUDA extension"
    assert mc.is_built(), "minifloat._cuda_kernels was not built or does not import: " + mc.problem()
    kernels = mc.raw_kernels()
    print(f"minifloat._cuda_kernels imported: CUDA runtime {kernels.runtime_version()}, "
          f"driver {kernels.driver_version()}, {kernels.device_count()} device(s)")

    f = minifloat.e4m3._key
    opts = (0, 1, 0, 0, 0)  # nearest_even, infinity
    mx, nv = minifloat.blocks.NAMED_BLOCKS["mxfp4"], minifloat.blocks.NAMED_BLOCKS["nvfp4"]
    block_opts = (0, 0, 0, 0, 0, 0, 1.0)  # nearest_even, saturate, floor
    # Bad arguments are refused before anything touches CUDA.
    for call, expected in [
        (lambda: kernels.quantize(0, 0, 16, False, (4, 30, 7, True, 1), opts, False, 0), "mantissa_bits = 30"),
        (lambda: kernels.quantize(0, 0, 16, False, f, (9, 1, 0, 0, 0), False, 0), "rounding index 9"),
        (lambda: kernels.encode(0, 0, 16, False, 1, minifloat.binary16._key, opts, 0), "do not fit 8-bit"),
        (lambda: kernels.encode(0, 0, 16, False, 3, f, opts, 0), "code_bytes = 3"),
        (lambda: kernels.decode(0, 1, 0, 16, False, f, 0, 1, 2048), "threads = 2048"),
        (lambda: kernels.quantize_blocks(0, 0, 1, 64, 1, mx._key[:1] + (0,) + mx._key[2:], block_opts, False, 0),
         "block_size"),
        (lambda: kernels.quantize_blocks(0, 0, 1, 64, 1, mx._key, (0, 1, 40, 0, 0, 0, 1.0), False, 0), "random_bits"),
        (lambda: kernels.quantize_blocks(0, 0, 1, 64, 1, nv._key, (0, 1, 0, 0, 0, 0, -1.0), False, 0), "tensor_scale"),
    ]:
        try:
            call()
        except ValueError as e:
            assert expected in str(e), f"{e!r} does not say {expected!r}"
        else:
            raise AssertionError(f"no ValueError for {expected!r}")
    # Empty calls need no device.
    assert kernels.quantize(0, 0, 0, False, f, opts, True, 0) == (0, 0, 0, 0, 0)
    assert kernels.encode(0, 0, 0, False, 1, f, opts, 0) == 0
    assert kernels.quantize_blocks(0, 0, 0, 64, 1, mx._key, block_opts, True, 0) == ((0, 0, 0, 0, 0), 0, 0, 0)

    problem = mc.problem()
    if problem:
        assert not mc.is_available()
        calls = [
            ("quantize", lambda: kernels.quantize(0, 0, 16, False, f, opts, False, 0)),
            ("quantize", lambda: kernels.quantize(0, 0, 16, True, f, (3, 0, 0, 1, 5), True, 0, 3, 96)),
            ("encode", lambda: kernels.encode(0, 0, 16, False, 1, f, opts, 0, 1, 32)),
            ("encode", lambda: kernels.encode(0, 0, 16, False, 1, minifloat.fp_4_3_4._key, opts, 0)),
            ("decode", lambda: kernels.decode(0, 1, 0, 16, False, f, 0)),
            ("quantize_blocks", lambda: kernels.quantize_blocks(0, 0, 2, 64, 1, mx._key, block_opts, True, 0)),
            ("quantize_blocks", lambda: kernels.quantize_blocks(0, 0, 2, 64, 1, nv._key, (0, 0, 0, 0, 0, 0, 0.0),
                                                                 False, 0)),
        ]
        for name, call in calls:
            try:
                call()
            except RuntimeError as e:
                assert f"minifloat._cuda.{name}: CUDA error" in str(e), repr(e)
            else:
                raise AssertionError(f"{name} without a usable device did not raise RuntimeError")
        print(f"no usable device ({problem}): every kernel call raised RuntimeError")
    else:
        print("a CUDA device is usable here: the kernels are checked by tests/gpu/run.sh")
    print("python_cuda_import: OK")


if __name__ == "__main__":
    main()
