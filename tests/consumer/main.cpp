// A user's program that only knows the installed package: the core, and the Gecko tensor codec,
// whose checksum needs zlib through the package's dependency.
#include <minifloat/minifloat.hpp>
#include <minifloat/storage/gecko_tensor.hpp>

#include <vector>

int main() {
  const float rounded = minifloat::round(0.1f, minifloat::binary16);
  const std::vector<float> values{1.5f, -0.25f, 3.0f};
  const auto decoded = minifloat::storage::gecko_decode_tensor(minifloat::storage::gecko_encode_tensor(values));
  return rounded == 0.0999755859375f && decoded.values == values ? 0 : 1;
}
