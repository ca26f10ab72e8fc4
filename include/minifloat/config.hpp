// minifloat/config.hpp — the one macro of the library: the host/device qualifier that lets the
// scalar rounding core, the format descriptor and the template type run inside CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define MINIFLOAT_HD __host__ __device__
#else
#define MINIFLOAT_HD
#endif
