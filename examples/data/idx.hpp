// data/idx.hpp — reads one IDX file (the MNIST family's format), gzip-compressed or plain, and
// validates it completely: the magic number (two zero bytes, element type 0x08 = unsigned byte,
// the rank), every dimension, and that the payload is exactly as long as the dimensions say.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace data {

/// Every failure to read an IDX file; the message names the file and the problem.
class idx_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct idx_array {
  std::vector<std::size_t> dims;     // outermost first: {count, rows, cols} for images
  std::vector<std::uint8_t> values;  // row-major, dims' product of them
};

/// Reads `path` and checks that it holds unsigned bytes of rank `rank`. Files larger than
/// `max_bytes` once decompressed are refused (a corrupt header must not allocate gigabytes).
[[nodiscard]] idx_array read_idx(const std::filesystem::path& path, std::size_t rank,
                                 std::size_t max_bytes = std::size_t{1} << 30);

}  // namespace data
