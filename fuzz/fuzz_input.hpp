// fuzz/fuzz_input.hpp — what the fuzz targets share: reading little-endian fields off the front
// of a fuzz input, and a check that stops the run (libFuzzer records the input) when an
// invariant fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <span>

namespace minifloat_fuzz {

/// Consumes fields from the front of the input; what remains is the payload.
class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : rest_(data, size) {}
  /// The next n <= 8 bytes as a little-endian integer, or `fallback` when fewer remain.
  std::uint64_t take(std::size_t n, std::uint64_t fallback = 0) {
    if (rest_.size() < n) return fallback;
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{rest_[i]} << (8 * i);
    rest_ = rest_.subspan(n);
    return v;
  }
  std::span<const std::uint8_t> rest() const { return rest_; }

 private:
  std::span<const std::uint8_t> rest_;
};

inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
    std::abort();
  }
}

}  // namespace minifloat_fuzz
