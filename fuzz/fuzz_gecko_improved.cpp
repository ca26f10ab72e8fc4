// libFuzzer target: improved Gecko exponent decoder (minifloat/storage/gecko.hpp).
#include "fuzz_gecko_exponents.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return minifloat_fuzz::fuzz_gecko_exponents(data, size, minifloat::storage::gecko_variant::improved);
}
