// Compiles the scalar core and the template type for the GPU: one kernel rounds an array to
// three formats on the device. CI only compiles this file (no GPU there); run it by hand with
// `nvcc -std=c++20 --expt-relaxed-constexpr -Iinclude tests/cuda/device_rounding.cu -o dr && ./dr`.
#include <minifloat/fp.hpp>

#include <cstdio>
#include <vector>

namespace {

__global__ void round_on_device(const float* in, float* out16, float* out434, float* out_sr, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out16[i] = static_cast<float>(minifloat::binary16_t(in[i]));
  out434[i] = static_cast<float>(minifloat::fp_4_3_4_t(in[i]));
  const minifloat::rounding_options sr{minifloat::rounding::stochastic, minifloat::overflow::saturate, 0, 7,
                                       static_cast<std::uint64_t>(i)};
  out_sr[i] = static_cast<float>(minifloat::e5m2_t(in[i], sr));
}

}  // namespace

int main() {
  constexpr int n = 1 << 16;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i - n / 2) * 0.37f;
  float *in = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
  if (cudaMalloc(&in, n * sizeof(float)) != cudaSuccess) {
    std::printf("no CUDA device: compiled only\n");
    return 0;
  }
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  cudaMalloc(&c, n * sizeof(float));
  cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  round_on_device<<<(n + 255) / 256, 256>>>(in, a, b, c, n);
  std::vector<float> r16(n), r434(n), rsr(n);
  cudaMemcpy(r16.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(r434.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(rsr.data(), c, n * sizeof(float), cudaMemcpyDeviceToHost);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const minifloat::rounding_options sr{minifloat::rounding::stochastic, minifloat::overflow::saturate, 0, 7,
                                         static_cast<std::uint64_t>(i)};
    mismatches += r16[i] != static_cast<float>(minifloat::binary16_t(host[i]));
    mismatches += r434[i] != static_cast<float>(minifloat::fp_4_3_4_t(host[i]));
    mismatches += rsr[i] != static_cast<float>(minifloat::e5m2_t(host[i], sr));
  }
  std::printf("device vs host: %d mismatches of %d\n", mismatches, 3 * n);
  cudaFree(in);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return mismatches == 0 ? 0 : 1;
}
