// Writes the raw stream of the stochastic-rounding generator (random.hpp, ARS-5) to stdout for
// statistical test suites: the 32-bit draws counter_rng{seed}.bits32(0), bits32(1), ... (or the
// 64-bit draws bits64(i) with --bits 64) as little-endian words, through the bulk kernels' vector
// path (test_random checks it against the scalar draws). bench/dieharder.sh pipes it into
// `dieharder -a -g 200`. It runs until the reader closes the pipe or --count words are written.
//
//   random_stream [--seed S] [--bits 32|64] [--count N]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <minifloat/bulk.hpp>

namespace {

template <class B>
int write_stream(std::uint64_t seed, std::uint64_t count) {
  using V = minifloat::detail::simd_t<B>;
  constexpr std::size_t lanes = minifloat::detail::simd_lanes<B>;
  minifloat::detail::lane_random<V> draw(minifloat::counter_rng{seed});
  std::vector<B> buffer(std::size_t{1} << 16);
  for (std::uint64_t index = 0; index < count;) {
    for (std::size_t k = 0; k < buffer.size(); k += lanes) {
      const V v = draw(index + k);
      std::memcpy(buffer.data() + k, &v, sizeof v);
    }
    const std::size_t words = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), count - index));
    if (std::fwrite(buffer.data(), sizeof(B), words, stdout) != words) return 0;  // the reader has stopped
    index += words;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "random_stream: %s\nusage: random_stream [--seed S] [--bits 32|64] [--count N]\n", why);
  std::exit(2);
}

std::uint64_t number(const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 0);
  if (end == text || *end != '\0') usage((std::string(flag) + " needs a number, got '" + text + "'").c_str());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 0, bits = 32, count = std::numeric_limits<std::uint64_t>::max();
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage((flag + " needs a value").c_str());
    if (flag == "--seed") seed = number("--seed", argv[i + 1]);
    else if (flag == "--bits") bits = number("--bits", argv[i + 1]);
    else if (flag == "--count") count = number("--count", argv[i + 1]);
    else usage(("unknown option " + flag).c_str());
  }
  if (bits != 32 && bits != 64) usage("--bits is 32 or 64");
  return bits == 32 ? write_stream<std::uint32_t>(seed, count) : write_stream<std::uint64_t>(seed, count);
}
