#include "data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

namespace data {
namespace {

struct gz_closer {
  void operator()(gzFile f) const { gzclose(f); }
};
using gz_file = std::unique_ptr<std::remove_pointer_t<gzFile>, gz_closer>;

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw idx_error(path.string() + ": " + what);
}

// gzread reads plain files too (zlib's transparent mode), so an unpacked copy also works.
class reader {
 public:
  explicit reader(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
    if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not an IDX file");
    errno = 0;
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) fail(path, std::string("cannot open: ") + (errno != 0 ? std::strerror(errno) : "out of memory"));
  }

  /// Reads up to `n` bytes; fewer only at the end of the data. Throws on corrupt compressed data.
  std::size_t read(std::uint8_t* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1U << 30));
      const int r = gzread(file_.get(), out + got, chunk);
      if (r < 0) throw_zlib_error();
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    // A stream cut short reads as a clean end; zlib only reports it through gzerror.
    if (got < n) check_clean_end();
    return got;
  }

  void check_clean_end() {
    int code = Z_OK;
    gzerror(file_.get(), &code);
    if (code != Z_OK) throw_zlib_error();
  }

 private:
  [[noreturn]] void throw_zlib_error() {
    int code = Z_OK;
    const char* message = gzerror(file_.get(), &code);
    std::string what = code == Z_ERRNO ? std::strerror(errno) : (message ? message : "unknown zlib error");
    // zlib prefixes its message with the path, which fail() adds anyway.
    if (const std::string prefix = path_.string() + ": "; what.starts_with(prefix)) what.erase(0, prefix.size());
    if (code == Z_BUF_ERROR) what += " (the gzip stream is truncated)";
    fail(path_, "corrupt gzip data: " + what);
  }

  std::filesystem::path path_;
  gz_file file_;
};

std::uint32_t big_endian(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

idx_array read_idx(const std::filesystem::path& path, std::size_t rank, std::size_t max_bytes) {
  reader in(path);
  std::array<std::uint8_t, 4> magic{};
  if (in.read(magic.data(), 4) != 4) fail(path, "shorter than the 4-byte IDX magic number");
  const std::uint32_t expected_magic = 0x00000800U | static_cast<std::uint32_t>(rank);
  if (big_endian(magic.data()) != expected_magic)
    fail(path, "bad magic number " + hex(big_endian(magic.data())) + ", expected " + hex(expected_magic) +
                   " (unsigned bytes, " + std::to_string(rank) + " dimensions)");
  idx_array out;
  std::size_t total = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    std::array<std::uint8_t, 4> word{};
    if (in.read(word.data(), 4) != 4) fail(path, "header ends inside dimension " + std::to_string(d));
    const std::size_t dim = big_endian(word.data());
    if (dim == 0) fail(path, "dimension " + std::to_string(d) + " is zero");
    if (dim > max_bytes / total)
      fail(path, "dimensions promise more than " + std::to_string(max_bytes) + " bytes");
    total *= dim;
    out.dims.push_back(dim);
  }
  out.values.resize(total);
  const std::size_t got = in.read(out.values.data(), total);
  if (got != total)
    fail(path, "truncated: the header promises " + std::to_string(total) + " data bytes, the file has " +
                   std::to_string(got));
  std::uint8_t extra = 0;
  if (in.read(&extra, 1) != 0) fail(path, "longer than its header says (" + std::to_string(total) + " data bytes)");
  return out;
}

}  // namespace data
