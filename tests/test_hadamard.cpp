// The blockwise random Hadamard transform (hadamard.hpp) against independent oracles: the dense
// Sylvester matrix H[i][j] = (-1)^popcount(i & j) applied in double, exact integer arithmetic for
// orthogonality and the product identity, and the documented fp32 error bounds.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include <minifloat/hadamard.hpp>

namespace mf = minifloat;

namespace {

constexpr double float_unit = 0x1p-24;  // unit roundoff of fp32, nearest-even

int hadamard_entry(std::size_t i, std::size_t j) { return std::popcount(i & j) % 2 == 0 ? 1 : -1; }

/// M v = H D v / sqrt(b) (forward) or D H v / sqrt(b) (inverse), in double, from the dense matrix.
std::vector<double> dense_transform(const std::vector<float>& v, const std::vector<float>& signs, bool inverse) {
  const std::size_t b = v.size();
  std::vector<double> y(b, 0.0);
  for (std::size_t i = 0; i < b; ++i) {
    for (std::size_t j = 0; j < b; ++j)
      y[i] += hadamard_entry(i, j) * static_cast<double>(v[j]) * (inverse ? 1.0 : signs[j]);
    y[i] /= std::sqrt(static_cast<double>(b));
    if (inverse) y[i] *= signs[i];
  }
  return y;
}

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

std::vector<float> normal_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen) * std::ldexp(1.0f, static_cast<int>(gen() % 21) - 10);
  return v;
}

}  // namespace

TEST_CASE("hadamard signs are the top bits of the seed's 32-bit draws, reproducibly", "[hadamard]") {
  for (std::size_t b : {1u, 2u, 16u, 32u, 256u}) {
    const auto s = mf::hadamard_signs(1234, b);
    REQUIRE(s.size() == b);
    const mf::counter_rng rng{1234};
    for (std::size_t i = 0; i < b; ++i) CHECK(s[i] == ((rng.bits32(i) & 0x80000000u) ? -1.0f : 1.0f));
    CHECK(mf::hadamard_signs(1234, b) == s);
  }
  const auto a = mf::hadamard_signs(1, 256), c = mf::hadamard_signs(2, 256);
  CHECK(a != c);
  int negative = 0;
  for (float x : a) negative += x < 0;
  CHECK(negative > 96);  // about half: P(|Bin(256, 1/2) - 128| >= 32) < 1e-4
  CHECK(negative < 160);
  // a step and a layer folded into the seed give their own vectors
  CHECK(mf::hadamard_signs(mf::fold_seed(1u, 7u), 16) != mf::hadamard_signs(mf::fold_seed(1u, 8u), 16));
}

TEST_CASE("hadamard_signs refuses a block size that is not a power of two in 1..4096", "[hadamard]") {
  for (std::size_t b : {0u, 3u, 12u, 8192u}) CHECK_THROWS_AS(mf::hadamard_signs(0, b), std::invalid_argument);
}

TEST_CASE("the Walsh-Hadamard butterflies are the Sylvester matrix, and H H = b I, in exact integers", "[hadamard]") {
  std::mt19937 gen(5);
  for (std::size_t b = 1; b <= 256; b *= 2) {
    std::vector<long long> v(b), w(b);
    for (auto& x : v) x = static_cast<long long>(gen() % 2001) - 1000;
    w = v;
    mf::walsh_hadamard(w.data(), b);
    for (std::size_t i = 0; i < b; ++i) {
      long long expected = 0;
      for (std::size_t j = 0; j < b; ++j) expected += hadamard_entry(i, j) * v[j];
      REQUIRE(w[i] == expected);
    }
    mf::walsh_hadamard(w.data(), b);
    for (std::size_t i = 0; i < b; ++i) REQUIRE(w[i] == static_cast<long long>(b) * v[i]);
  }
}

TEST_CASE("H D applied to both operands leaves their dot product unchanged in exact integer arithmetic",
          "[hadamard][exact]") {
  // <H D a, H D c> = a^T D H H D c = b <a, c>: the identity that makes the transform safe on
  // both GEMM operands, checked on the library's own butterflies with integers (no rounding)
  std::mt19937 gen(11);
  for (std::size_t b = 2; b <= 128; b *= 2)
    for (int trial = 0; trial < 20; ++trial) {
      const auto signs = mf::hadamard_signs(gen(), b);
      std::vector<long long> x(b), y(b);
      long long dot = 0;
      for (std::size_t i = 0; i < b; ++i) {
        const long long p = static_cast<long long>(gen() % (1u << 20)) - (1 << 19);
        const long long q = static_cast<long long>(gen() % (1u << 20)) - (1 << 19);
        dot += p * q;
        x[i] = p * static_cast<long long>(signs[i]);
        y[i] = q * static_cast<long long>(signs[i]);
      }
      mf::walsh_hadamard(x.data(), b);
      mf::walsh_hadamard(y.data(), b);
      long long transformed = 0;
      for (std::size_t i = 0; i < b; ++i) transformed += x[i] * y[i];
      REQUIRE(transformed == static_cast<long long>(b) * dot);
    }
}

TEST_CASE("a 16-wide GEMM product is unchanged, exactly, when both operands are transformed along K",
          "[hadamard][exact]") {
  // Small integers: every butterfly sum is exact in fp32 and the 1/4 scale is exact, so the
  // float transform is exact and <4 Ma, 4 Mc> = 16 <a, c> holds in integers.
  const std::size_t m = 3, n = 5, k = 48;
  const auto signs = mf::hadamard_signs(99, 16);
  std::mt19937 gen(3);
  std::vector<float> a(m * k), b(k * n);
  for (auto& x : a) x = static_cast<float>(static_cast<int>(gen() % 2001) - 1000);
  for (auto& x : b) x = static_cast<float>(static_cast<int>(gen() % 2001) - 1000);
  std::vector<float> ta(a.size()), tb(b.size());
  mf::hadamard_transform(a, ta, signs, {m, k, 1});  // A: K along its rows
  mf::hadamard_transform(b, tb, signs, {k, n, 0});  // B: K down its columns
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      long long exact = 0, transformed = 0;
      for (std::size_t l = 0; l < k; ++l) {
        exact += static_cast<long long>(a[i * k + l]) * static_cast<long long>(b[l * n + j]);
        const float qa = 4 * ta[i * k + l], qb = 4 * tb[l * n + j];
        REQUIRE(qa == std::trunc(qa));  // the float transform was exact
        REQUIRE(qb == std::trunc(qb));
        transformed += static_cast<long long>(qa) * static_cast<long long>(qb);
      }
      REQUIRE(transformed == 16 * exact);
    }
}

TEST_CASE("the fp32 transform is within (log2 b + 1) u |x| of the exact one, and a round trip within twice that",
          "[hadamard]") {
  for (std::size_t b = 2; b <= 512; b *= 2) {
    const auto signs = mf::hadamard_signs(b, b);
    const double levels = std::log2(static_cast<double>(b));
    double worst_forward = 0, worst_round_trip = 0;
    for (unsigned trial = 0; trial < 40; ++trial) {
      const auto x = normal_floats(b, static_cast<unsigned>(b * 100 + trial));
      std::vector<float> y(b), back(b);
      mf::hadamard_transform(x, y, signs);
      mf::hadamard_transform(y, back, signs, {}, mf::hadamard_direction::inverse);
      const auto exact = dense_transform(x, signs, false);
      std::vector<double> forward_error(b), round_trip_error(b), xd(x.begin(), x.end());
      for (std::size_t i = 0; i < b; ++i) {
        forward_error[i] = y[i] - exact[i];
        round_trip_error[i] = static_cast<double>(back[i]) - x[i];
      }
      worst_forward = std::max(worst_forward, norm2(forward_error) / ((levels + 1) * float_unit * norm2(xd)));
      worst_round_trip = std::max(worst_round_trip, norm2(round_trip_error) / (2 * (levels + 1) * float_unit * norm2(xd)));
      // the inverse against the dense inverse too
      const auto exact_inverse = dense_transform(y, signs, true);
      std::vector<float> inv(b);
      mf::hadamard_transform(y, inv, signs, {}, mf::hadamard_direction::inverse);
      std::vector<double> inverse_error(b), yd(y.begin(), y.end());
      for (std::size_t i = 0; i < b; ++i) inverse_error[i] = inv[i] - exact_inverse[i];
      REQUIRE(norm2(inverse_error) <= (levels + 1) * float_unit * norm2(yd) * 1.001);
    }
    INFO("b = " << b << ": forward error / bound " << worst_forward << ", round trip / bound " << worst_round_trip);
    CHECK(worst_forward <= 1.001);
    CHECK(worst_round_trip <= 1.001);
  }
}

TEST_CASE("without sign flips the normalised 16-wide transform is its own inverse, exactly on small integers",
          "[hadamard]") {
  const std::vector<float> plus(16, 1.0f);
  std::vector<float> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 37 % 101) - 50);
  std::vector<float> once(64), twice(64);
  mf::hadamard_transform(x, once, plus);
  mf::hadamard_transform(once, twice, plus);  // forward twice: (H / 4)^2 = I
  CHECK(twice == x);
  const auto signs = mf::hadamard_signs(8, 16);
  mf::hadamard_transform(x, once, signs);
  mf::hadamard_transform(once, twice, signs, {}, mf::hadamard_direction::inverse);
  CHECK(twice == x);
}

TEST_CASE("the transform down columns equals the transform along rows of the transpose, bit for bit", "[hadamard]") {
  const std::size_t rows = 64, cols = 7;
  const auto x = normal_floats(rows * cols, 77);
  std::vector<float> xt(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
  const auto signs = mf::hadamard_signs(3, 32);
  for (auto dir : {mf::hadamard_direction::forward, mf::hadamard_direction::inverse}) {
    std::vector<float> down(x.size()), along(x.size());
    mf::hadamard_transform(x, down, signs, {rows, cols, 0}, dir);
    mf::hadamard_transform(xt, along, signs, {cols, rows, 1}, dir);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        REQUIRE(std::bit_cast<std::uint32_t>(down[r * cols + c]) == std::bit_cast<std::uint32_t>(along[c * rows + r]));
    // in place gives the same bits
    std::vector<float> in_place = x;
    mf::hadamard_transform(std::span<float>(in_place), signs, {rows, cols, 0}, dir);
    CHECK(in_place == down);
  }
}

TEST_CASE("hadamard_transform refuses bad signs, sizes and layouts before writing", "[hadamard][errors]") {
  std::vector<float> x(32, 1.0f), out(32, 7.0f);
  const auto signs = mf::hadamard_signs(0, 16);
  std::vector<float> bad = signs;
  bad[3] = 0.5f;
  CHECK_THROWS_AS(mf::hadamard_transform(x, out, bad), std::invalid_argument);
  CHECK_THROWS_AS(mf::hadamard_transform(x, out, std::vector<float>(12, 1.0f)), std::invalid_argument);
  CHECK_THROWS_AS(mf::hadamard_transform(x, out, signs, {4, 8, 1}), std::invalid_argument);  // 8 along the axis
  CHECK_THROWS_AS(mf::hadamard_transform(x, out, signs, {4, 7, 1}), std::invalid_argument);  // does not hold 32
  CHECK_THROWS_AS(mf::hadamard_transform(x, std::span<float>(out).first(16), signs), std::invalid_argument);
  CHECK_THROWS_AS(mf::hadamard_transform(x, out, signs, {2, 16, 2}), std::invalid_argument);  // axis
  CHECK_THROWS_AS(mf::hadamard_transform(std::span<const float>(x).first(31), std::span<float>(x).subspan(1), signs),
                  std::invalid_argument);
  CHECK(out == std::vector<float>(32, 7.0f));
  try {
    mf::hadamard_transform(x, out, bad);
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("signs[3]") != std::string::npos);
  }
}
