// Compiles the scalar core, encode/decode and the template type for the GPU: one kernel rounds
// an array through every device-callable entry point (round with every mode, encode, decode,
// fp<> conversions, arithmetic and <cmath> overloads) and the host checks it against the same
// calls on the CPU. CI only compiles this file (no GPU there); run it by hand with
// `nvcc -std=c++20 --expt-relaxed-constexpr -Iinclude tests/cuda/device_rounding.cu -o dr && ./dr`.
#include <minifloat/minifloat.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kOutputs = 12;

/// Every output of one input, computed the same way on the host and on the device.
__host__ __device__ void all_outputs(float x, std::uint64_t i, float* out) {
  namespace mf = minifloat;
  // Namespace-scope constants are host variables: device code takes constexpr copies of them.
  constexpr mf::format e4m3 = mf::e4m3, e5m2 = mf::e5m2, binary16 = mf::binary16, bfloat16 = mf::bfloat16;
  const mf::rounding_options sr{mf::rounding::stochastic, mf::overflow::saturate, 0, 7, i};
  out[0] = static_cast<float>(mf::binary16_t(x));
  out[1] = static_cast<float>(mf::fp_4_3_4_t(x));
  out[2] = static_cast<float>(mf::e5m2_t(x, sr));
  out[3] = mf::round(x, e4m3, {mf::rounding::toward_positive, mf::overflow::saturate});
  out[4] = mf::round(x, bfloat16, {mf::rounding::to_odd});
  out[5] = static_cast<float>(mf::encode(x, binary16, {mf::rounding::toward_negative}));
  out[6] = mf::decode<float>(mf::encode(x, e5m2), e5m2);
  const mf::binary16_t h(x);
  const mf::binary16_t g = h * h + mf::binary16_t(0.5f) - h / mf::binary16_t(3.0f);
  out[7] = static_cast<float>(g);
  out[8] = static_cast<float>(sqrt(abs(h)));
  out[9] = static_cast<float>(mf::bfloat16_t(mf::paper_fp<5, 2, 0>(x)));
  out[10] = static_cast<float>(fma(h, h, -h));
  out[11] = static_cast<float>(nextafter(h, mf::binary16_t(0.0f)));
}

__global__ void round_on_device(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) all_outputs(in[i], static_cast<std::uint64_t>(i), out + kOutputs * i);
}

}  // namespace

int main() {
  constexpr int n = 1 << 16;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i - n / 2) * 0.37f;
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, n * sizeof(float)) != cudaSuccess) {
    std::printf("no CUDA device: compiled only\n");
    return 0;
  }
  cudaMalloc(&out, kOutputs * n * sizeof(float));
  cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  round_on_device<<<(n + 255) / 256, 256>>>(in, out, n);
  std::vector<float> device(static_cast<std::size_t>(kOutputs) * n);
  cudaMemcpy(device.data(), out, device.size() * sizeof(float), cudaMemcpyDeviceToHost);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    float want[kOutputs];
    all_outputs(host[i], static_cast<std::uint64_t>(i), want);
    for (int k = 0; k < kOutputs; ++k)  // bitwise, so NaN results compare too
      mismatches += std::memcmp(&want[k], &device[static_cast<std::size_t>(kOutputs) * i + k], sizeof(float)) != 0;
  }
  std::printf("device vs host: %d mismatches of %d\n", mismatches, kOutputs * n);
  cudaFree(in);
  cudaFree(out);
  return mismatches == 0 ? 0 : 1;
}
