// minifloat/version.hpp — the library's version, written in this one place: CMake's project()
// and the Python package's metadata (pyproject.toml, through scikit-build-core's regex provider)
// both read it from the line below, and the extension reports it as minifloat.__version__.
#pragma once

namespace minifloat {

inline constexpr char version[] = "0.2.0";

}  // namespace minifloat
