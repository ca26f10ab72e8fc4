// Stands in for gemm_eigen.cpp when CMake found no Eigen.
#include <stdexcept>

#include "nn/gemm.hpp"

namespace nn::detail {
bool have_eigen() { return false; }
void gemm_eigen(const gemm_args&) { throw std::logic_error("nn::gemm: built without Eigen"); }
}  // namespace nn::detail
