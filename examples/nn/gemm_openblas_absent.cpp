// Stands in for gemm_openblas.cpp when CMake found no OpenBLAS.
#include <stdexcept>

#include "nn/gemm.hpp"

namespace nn::detail {
bool have_openblas() { return false; }
void gemm_openblas(const gemm_args&) { throw std::logic_error("nn::gemm: built without OpenBLAS"); }
}  // namespace nn::detail
