// The stochastic-rounding generator (random.hpp): ARS-5 on the AES round function.
//
// Oracles nobody here wrote: the AES S-box values of FIPS 197, the aesenc / aesenclast
// instructions of the CPU (AES-NI) for the software round, and the published known-answer
// vectors of Random123 (tests/kat_vectors and tests/old_kat_vectors of the Random123 library,
// D. E. Shaw Research) for ARS with 7 and 10 rounds. Then: the documented index -> (block, word)
// mapping, compile-time evaluation, and the bulk kernels' vector draws against the scalar ones.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include <minifloat/bulk.hpp>
#include <minifloat/random.hpp>

namespace mf = minifloat;
using mf::detail::block128;

namespace {

struct known_answer {
  int rounds;
  block128 counter, key, expected;
};

// Random123 lists a block as four 32-bit words, word 0 first: "ars4x32 R ctr[0..3] key[0..3] out[0..3]".
constexpr known_answer random123_vectors[] = {
    {10, {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, {{0x8d73ee19, 0x506401ef, 0x13c2dbe4, 0x0cbe9c0d}}},
    {10,
     {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0, 0x082efa98, 0xec4e6c89}},
     {{0xa516e7d6, 0x8357ad74, 0x5b59b3ec, 0x8763fff3}}},
    {10,
     {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff, 0, 0}},
     {{0xbb3743b1, 0x9f635551, 0xecbc87fc, 0xa19478a9}}},
    {7, {{1, 0, 0, 0}}, {{1, 0, 0, 0}}, {{0x3523162b, 0xdc14d20c, 0x79184077, 0x72184193}}},
    {7, {{0x01000000, 0, 0, 0}}, {{0x01000000, 0, 0, 0}}, {{0x00d8b708, 0x3a583109, 0xa0b663ce, 0xdc387c79}}},
    {7, {{0, 0x00010000, 0, 0}}, {{0, 0x00010000, 0, 0}}, {{0x21987c11, 0xf47b221c, 0x1bd108f9, 0x4a89ea4c}}},
    {7, {{0, 0, 0x00000100, 0}}, {{0, 0, 0x00000100, 0}}, {{0xed9ce0e1, 0x072c7948, 0x03c30fb2, 0xac016e8b}}},
    {7, {{0, 0, 0, 1}}, {{0, 0, 0, 1}}, {{0x34d40c7a, 0xc5526b8f, 0x0b35e113, 0xbcd830c6}}},
    {7, {{0x80000000, 0, 0, 0}}, {{0x80000000, 0, 0, 0}}, {{0x241b7c12, 0xdac5702f, 0x035aaf92, 0x367de6b0}}},
    {7, {{0, 0, 0xff000000, 0}}, {{0, 0, 0xff000000, 0}}, {{0xf9abe8ab, 0x34ae560f, 0xc23b89c5, 0xffb47ec7}}},
    {7, {{0x00000100, 0, 0, 0}}, {{0x00000001, 0, 0, 0}}, {{0x6fb6e62d, 0x68b661a4, 0x6f1280f3, 0x22cdb932}}},
    {7,
     {{0x886a3f24, 0xd308a385, 0x2e8a1913, 0x44737003}},
     {{0, 0, 0, 0x00800000}},
     {{0x133d5d06, 0x256a441d, 0x70bf8e82, 0x6cd6089d}}},
    {7,
     {{0x886a3f24, 0xd308a385, 0x2e8a1913, 0x44737003}},
     {{0, 0, 0, 0x80000000}},
     {{0x31e3f0cc, 0x92d1e3cc, 0xa2fdaa6c, 0x902c741b}}},
};

[[maybe_unused]] block128 random_block(std::mt19937_64& rng) { return block128::from(rng(), rng()); }

template <class V>
void vector_draws_equal_scalar(const mf::counter_rng& gen, std::uint64_t start) {
  using B = std::remove_cvref_t<decltype(V{}[0])>;
  constexpr std::size_t lanes = sizeof(V) / sizeof(B);
  mf::detail::lane_random<V> draw(gen);
  // A run of consecutive registers (the kernels' access pattern), then a jump back.
  for (std::uint64_t first : {start, start + lanes, start + 2 * lanes, start + 3 * lanes, start + 1, start}) {
    const V v = draw(first);
    for (std::size_t k = 0; k < lanes; ++k) {
      INFO("register of " << sizeof(V) << " bytes, " << sizeof(B) * 8 << "-bit draws, first " << first << ", lane "
                          << k);
      if constexpr (sizeof(B) == 4) CHECK(v[k] == gen.bits32(first + k));
      else CHECK(v[k] == gen.bits64(first + k));
    }
  }
}

template <class B>
void vector_draws_equal_scalar_every_width(const mf::counter_rng& gen, std::uint64_t start) {
  vector_draws_equal_scalar<typename mf::detail::vector_of<B, 16>::type>(gen, start);
  // Wider registers only where the ISA has them (passing them otherwise changes the ABI).
  if constexpr (mf::detail::simd_bytes >= 32) vector_draws_equal_scalar<typename mf::detail::vector_of<B, 32>::type>(gen, start);
  if constexpr (mf::detail::simd_bytes >= 64) vector_draws_equal_scalar<typename mf::detail::vector_of<B, 64>::type>(gen, start);
}

}  // namespace

TEST_CASE("the AES S-box has the values of FIPS 197 and is a permutation", "[random][aes]") {
  // FIPS 197 Figure 7 (S-box), four entries, and the worked example of Section 5.1.1 (0x53 -> 0xed).
  CHECK(mf::detail::aes_sbox(0x00) == 0x63);
  CHECK(mf::detail::aes_sbox(0x01) == 0x7c);
  CHECK(mf::detail::aes_sbox(0x53) == 0xed);
  CHECK(mf::detail::aes_sbox(0xff) == 0x16);
  CHECK(mf::detail::aes_sbox_computed(0x53) == 0xed);
  std::array<bool, 256> seen{};
  for (int a = 0; a < 256; ++a) {
    const auto s = mf::detail::aes_sbox_computed(static_cast<std::uint8_t>(a));
    CHECK(s == mf::detail::aes_sbox(static_cast<std::uint8_t>(a)));
    CHECK_FALSE(seen[s]);
    seen[s] = true;
  }
}

#if defined(__AES__)
TEST_CASE("the software AES round equals the aesenc and aesenclast instructions", "[random][aes]") {
  std::mt19937_64 rng(20261124);
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    const block128 state = random_block(rng), key = random_block(rng);
    const __m128i s = mf::detail::to_m128(state), k = mf::detail::to_m128(key);
    mismatches += !(mf::detail::aes_round<false>(state, key) == mf::detail::from_m128(_mm_aesenc_si128(s, k)));
    mismatches += !(mf::detail::aes_round<true>(state, key) == mf::detail::from_m128(_mm_aesenclast_si128(s, k)));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("ARS in software equals ARS on AES-NI for random counters and keys", "[random][aes]") {
  std::mt19937_64 rng(7);
  int mismatches = 0;
  for (int i = 0; i < 20000; ++i) {
    const block128 counter = random_block(rng), key = random_block(rng);
    mismatches += !(mf::detail::ars_software<5>(counter, key) == mf::detail::ars_aesni<5>(counter, key));
  }
  CHECK(mismatches == 0);
}
#endif

TEST_CASE("the table form of the AES round (the CUDA kernels' generator) equals the computed round",
          "[random][aes]") {
  const std::uint32_t* table = mf::detail::aes_round_table.data();
  for (int x = 0; x < 256; ++x) {  // byte 1 of each entry is the S-box, as the last round reads it
    CHECK(((mf::detail::aes_round_table[x] >> 8) & 0xffu) == mf::detail::aes_sbox_computed(static_cast<std::uint8_t>(x)));
  }
  std::mt19937_64 rng(20261128);
  int mismatches = 0;
  for (int i = 0; i < 100000; ++i) {
    const block128 state = random_block(rng), key = random_block(rng);
    mismatches += !(mf::detail::aes_round_tabled<false>(state, key, table) == mf::detail::aes_round<false>(state, key));
    mismatches += !(mf::detail::aes_round_tabled<true>(state, key, table) == mf::detail::aes_round<true>(state, key));
    mismatches += !(mf::detail::ars_tabled<5>(state, key, table) == mf::detail::ars_software<5>(state, key));
  }
  CHECK(mismatches == 0);
  for (const auto& v : random123_vectors) {
    if (v.rounds == 7) CHECK(mf::detail::ars_tabled<7>(v.counter, v.key, table) == v.expected);
    else CHECK(mf::detail::ars_tabled<10>(v.counter, v.key, table) == v.expected);
  }
}

TEST_CASE("ARS gives Random123's published known answers with 7 and 10 rounds", "[random][kat]") {
  for (const auto& v : random123_vectors) {
    INFO("rounds " << v.rounds << ", counter word 0 " << std::hex << v.counter.w[0]);
    if (v.rounds == 7) {
      CHECK(mf::detail::ars_software<7>(v.counter, v.key) == v.expected);
      CHECK(mf::detail::ars<7>(v.counter, v.key) == v.expected);
    } else {
      CHECK(mf::detail::ars_software<10>(v.counter, v.key) == v.expected);
      CHECK(mf::detail::ars<10>(v.counter, v.key) == v.expected);
    }
  }
}

TEST_CASE("the draw of index i is word i mod 4 of ARS-5 block i / 4 under the seed's SplitMix64 key",
          "[random][stream]") {
  // docs/formats.md, "The random stream": key = (mix64(seed + γ), mix64(seed + 2γ)); 32-bit draws
  // from counters (i / 4, 0), 64-bit draws from counters (i / 2, 1).
  std::mt19937_64 rng(3);
  for (int n = 0; n < 2000; ++n) {
    const std::uint64_t seed = rng(), index = rng() >> (n % 64);
    const mf::counter_rng gen{seed};
    const block128 key = block128::from(mf::detail::mix64(seed + 0x9e3779b97f4a7c15ULL),
                                        mf::detail::mix64(seed + 2 * 0x9e3779b97f4a7c15ULL));
    const block128 b32 = mf::detail::ars_software<5>(block128::from(index / 4, 0), key);
    const block128 b64 = mf::detail::ars_software<5>(block128::from(index / 2, 1), key);
    CHECK(gen.bits32(index) == b32.w[index % 4]);
    CHECK(gen.bits64(index) == (index % 2 ? b64.high() : b64.low()));
  }
}

TEST_CASE("the generator evaluated at compile time gives the run-time bits", "[random][constexpr]") {
  constexpr mf::counter_rng gen{0x0123456789abcdefULL};
  constexpr std::uint32_t at_compile_time32 = gen.bits32(1000003);
  constexpr std::uint64_t at_compile_time64 = gen.bits64(77);
  volatile std::uint64_t index32 = 1000003, index64 = 77;  // keeps the calls below at run time
  CHECK(at_compile_time32 == gen.bits32(index32));
  CHECK(at_compile_time64 == gen.bits64(index64));
}

TEST_CASE("the bulk kernels' vector draws equal the scalar draws at any start and register width",
          "[random][bulk]") {
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> starts = {0, 1, 3, 4, 15, 16, 17, 1000, (std::uint64_t{1} << 32) - 5,
                                       ~std::uint64_t{0} - 20, ~std::uint64_t{0} - 70};
  for (int i = 0; i < 50; ++i) starts.push_back(rng() >> (i % 64));
  for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0xfeedface}}) {
    const mf::counter_rng gen{seed};
    for (const std::uint64_t start : starts) {
      vector_draws_equal_scalar_every_width<std::uint32_t>(gen, start);
      vector_draws_equal_scalar_every_width<std::uint64_t>(gen, start);
    }
  }
}

TEST_CASE("fold_seed folds each key by the counter hash in turn, and any differing key gives another seed",
          "[random][fold_seed]") {
  constexpr std::uint64_t seed = 20261128;
  STATIC_REQUIRE(mf::fold_seed(seed) == seed);
  STATIC_REQUIRE(mf::fold_seed(seed, 7u) == mf::counter_rng{seed}.bits64(7));
  CHECK(mf::fold_seed(seed, 3u, 1u, 9u) ==
        mf::counter_rng{mf::counter_rng{mf::counter_rng{seed}.bits64(3)}.bits64(1)}.bits64(9));
  CHECK(mf::fold_seed(seed, std::uint8_t{3}, std::uint64_t{1}) == mf::fold_seed(seed, 3u, 1u));
  // Order matters: (step 1, rank 2) and (step 2, rank 1) are different contexts.
  CHECK(mf::fold_seed(seed, 1u, 2u) != mf::fold_seed(seed, 2u, 1u));
  CHECK(mf::fold_seed(seed, 1u, 2u) != mf::fold_seed(seed + 1, 1u, 2u));
}
