// GEMM operand quantization (operand.hpp) against a plainly written scalar reference: blocks
// gathered by hand along the reduction axis or over 2-D tiles, each block's scale from the rule's
// formula (MX: floor(log2 amax) - emax_elem by std::ilogb; NVFP4: e4m3(amax / 6 / S_t)), each
// element rounded one at a time by the scalar core (round.hpp, tested against MPFR elsewhere)
// with the element index the rule names. None of it goes through block.hpp's kernels.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <minifloat/operand.hpp>

namespace mf = minifloat;

namespace {

std::vector<float> normal_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen) * std::ldexp(1.0f, static_cast<int>(gen() % 9) - 4);
  return v;
}

/// One block by the rule, scalar: values and their draw indices; `scale_target` is the value the
/// block's largest magnitude maps to for E4M3 scales (6 standard, 4 for "4 over 6").
std::vector<float> reference_block(const std::vector<float>& v, const std::vector<std::uint64_t>& index,
                                   const mf::block_format& f, const mf::block_options& o, float tensor_scale,
                                   float scale_target = 6) {
  float amax = 0;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  std::vector<float> out(v.size());
  const mf::rounding_options element{o.mode, mf::overflow::saturate, o.random_bits, o.seed, 0};
  if (f.scaling == mf::block_scaling::e8m0) {
    int s = amax > 0 ? std::ilogb(amax) - f.element.emax() : -127;  // OCP MX v1.0 §6.3, floor rule
    s = std::clamp(s, -127, 127);
    for (std::size_t i = 0; i < v.size(); ++i) {
      mf::rounding_options e = element;
      e.index = index[i];
      out[i] = std::ldexp(mf::round(std::ldexp(v[i], -s), f.element, e), s);
    }
    return out;
  }
  const float d = mf::round(amax / scale_target / tensor_scale, mf::e4m3, {mf::rounding::nearest_even, mf::overflow::saturate}) *
                  tensor_scale;
  for (std::size_t i = 0; i < v.size(); ++i) {
    mf::rounding_options e = element;
    e.index = index[i];
    out[i] = d > 0 ? mf::round(v[i] / d, f.element, e) * d : v[i] * 0.0f;
  }
  return out;
}

float finite_amax_scale(const std::vector<float>& x) {
  float amax = 0;
  for (float v : x)
    if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
  return amax > 0 ? amax / (6.0f * 448.0f) : 1.0f;
}

/// The reference of 1-D blocks of `b` along axis 1 (rows) or 0 (columns) of a rows × cols
/// matrix; element (r, c) draws with index o.index + r * cols + c.
std::vector<float> reference_lines(const std::vector<float>& x, std::size_t rows, std::size_t cols, int axis,
                                   const mf::block_format& f, const mf::block_options& o) {
  const std::size_t b = static_cast<std::size_t>(f.block_size);
  const float t = o.tensor_scale != 0 ? o.tensor_scale : finite_amax_scale(x);
  std::vector<float> out(x.size());
  const std::size_t lines = axis == 1 ? rows : cols, length = axis == 1 ? cols : rows;
  for (std::size_t line = 0; line < lines; ++line)
    for (std::size_t begin = 0; begin < length; begin += b) {
      std::vector<float> v;
      std::vector<std::uint64_t> at;
      for (std::size_t j = begin; j < std::min(length, begin + b); ++j) {
        const std::size_t pos = axis == 1 ? line * cols + j : j * cols + line;
        v.push_back(x[pos]);
        at.push_back(pos);
      }
      std::vector<std::uint64_t> index = at;
      for (auto& i : index) i += o.index;
      const auto q = reference_block(v, index, f, o, t);
      for (std::size_t i = 0; i < at.size(); ++i) out[at[i]] = q[i];
    }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

std::vector<float> transposed(const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  std::vector<float> t(x.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

const mf::block_format test_formats[] = {mf::mxfp8_e4m3, mf::mxfp4, mf::nvfp4};
const mf::rounding test_modes[] = {mf::rounding::nearest_even, mf::rounding::stochastic, mf::rounding::toward_zero};

}  // namespace

TEST_CASE("the reduction axis of A, A^T, B and B^T as stored", "[operand]") {
  using mf::gemm_side;
  STATIC_REQUIRE(mf::reduction_axis({4, 8, gemm_side::left, false}) == 1);   // A: M x K
  STATIC_REQUIRE(mf::reduction_axis({8, 4, gemm_side::left, true}) == 0);    // A^T stored: K x M
  STATIC_REQUIRE(mf::reduction_axis({8, 4, gemm_side::right, false}) == 0);  // B: K x N
  STATIC_REQUIRE(mf::reduction_axis({4, 8, gemm_side::right, true}) == 1);   // B^T stored (nn.Linear's W): N x K
  STATIC_REQUIRE(mf::reduction_blocks({3, 5, gemm_side::right, false}) == mf::block_layout{3, 5, 0});
}

TEST_CASE("operands are blocked along the reduction axis exactly as the scalar reference blocks them", "[operand]") {
  const std::size_t rows = 37, cols = 70;  // neither a multiple of 16 nor of 32: short last blocks
  const auto x = normal_floats(rows * cols, 1);
  for (const auto& f : test_formats)
    for (const auto mode : test_modes)
      for (const auto side : {mf::gemm_side::left, mf::gemm_side::right})
        for (const bool t : {false, true}) {
          const mf::operand_layout l{rows, cols, side, t};
          mf::block_options o;
          o.mode = mode;
          o.seed = 42;
          o.index = 1000;
          std::vector<float> out(x.size());
          mf::quantize_operand(x, out, f, o, l);
          INFO(mf::to_string(f) << " mode " << static_cast<int>(mode) << " side " << static_cast<int>(side) << " transposed " << t);
          REQUIRE(same_bits(out, reference_lines(x, rows, cols, mf::reduction_axis(l), f, o)));
          mf::block_stats st;
          std::vector<float> counted(x.size());
          mf::quantize_operand(x, counted, f, o, l, st);
          CHECK(same_bits(counted, out));
          CHECK(st.elements.values == x.size());
        }
}

TEST_CASE("B stored as K x N and as its transpose N x K get the same blocks along K", "[operand]") {
  const std::size_t k = 64, n = 24;
  const auto b = normal_floats(k * n, 2);
  const auto bt = transposed(b, k, n);
  for (const auto& f : test_formats) {
    std::vector<float> q(b.size()), qt(b.size());
    mf::quantize_operand(b, q, f, {}, {k, n, mf::gemm_side::right, false});
    mf::quantize_operand(bt, qt, f, {}, {n, k, mf::gemm_side::right, true});
    CHECK(same_bits(transposed(q, k, n), qt));
  }
}

TEST_CASE("NVFP4 operands take the tensor scale amax / (6 * 448) of the finite values when none is given", "[operand]") {
  auto x = normal_floats(16 * 20, 3);
  x[5] = 1000.0f;
  const float t = 1000.0f / (6.0f * 448.0f);
  std::vector<float> automatic(x.size()), given(x.size());
  mf::quantize_operand(x, automatic, mf::nvfp4, {}, {16, 20, mf::gemm_side::left, false});
  mf::block_options o;
  o.tensor_scale = t;
  mf::quantize_operand(x, given, mf::nvfp4, o, {16, 20, mf::gemm_side::left, false});
  CHECK(same_bits(automatic, given));
  CHECK(mf::nvfp4_tensor_scale(x) == t);
}

TEST_CASE("2-D tiles: every tile shares one scale and each value draws at its tile-major index", "[operand][tiles]") {
  const std::size_t rows = 37, cols = 21;
  const auto w = normal_floats(rows * cols, 4);
  for (const mf::tile_shape tile : {mf::tile_shape{16, 16}, mf::tile_shape{8, 32}, mf::tile_shape{1, 1}})
    for (const auto& f : test_formats)
      for (const auto mode : test_modes) {
        mf::block_options o;
        o.mode = mode;
        o.seed = 9;
        o.index = 77;
        // the reference: tiles of the canonical W, index = o.index + tile-major position
        const std::size_t across = (cols + tile.cols - 1) / tile.cols;
        const float t = finite_amax_scale(w);
        std::vector<float> expected(w.size());
        for (std::size_t ti = 0; ti * tile.rows < rows; ++ti)
          for (std::size_t tj = 0; tj * tile.cols < cols; ++tj) {
            std::vector<float> v;
            std::vector<std::uint64_t> index, at;
            for (std::size_t i = ti * tile.rows; i < std::min(rows, (ti + 1) * tile.rows); ++i)
              for (std::size_t j = tj * tile.cols; j < std::min(cols, (tj + 1) * tile.cols); ++j) {
                v.push_back(w[i * cols + j]);
                at.push_back(i * cols + j);
                index.push_back(o.index + (ti * across + tj) * tile.rows * tile.cols + (i % tile.rows) * tile.cols +
                                j % tile.cols);
              }
            const auto q = reference_block(v, index, f, o, t);
            for (std::size_t i = 0; i < at.size(); ++i) expected[at[i]] = q[i];
          }
        INFO(mf::to_string(f) << " tile " << tile.rows << "x" << tile.cols << " mode " << static_cast<int>(mode));
        std::vector<float> out(w.size()), out_t(w.size());
        mf::block_stats st;
        mf::quantize_tiles(w, out, f, o, rows, cols, false, tile, &st);
        REQUIRE(same_bits(out, expected));
        CHECK(st.elements.values == w.size());
        // W^T stored (cols x rows), tiles named in W's orientation: the same values, transposed
        mf::quantize_tiles(transposed(w, rows, cols), out_t, f, o, cols, rows, true, tile);
        REQUIRE(same_bits(out_t, transposed(out, rows, cols)));
      }
}

TEST_CASE("4 over 6 keeps, per NVFP4 block, the candidate with the smaller squared error", "[operand][four-over-six]") {
  SECTION("a block by hand: 5 and 6 with S_t = 1") {
    // to 6: D = 1, 5 ties between 4 and 6 and goes to 4 (even): error 1. To 4: D = 1.5,
    // 5 / 1.5 = 3.33 -> 3 -> 4.5, 6 / 1.5 = 4 -> 6: error 0.25. 4 wins.
    std::vector<float> x(16, 0.0f), out(16);
    x[0] = 5;
    x[1] = 6;
    mf::block_options o;
    o.tensor_scale = 1;
    const auto st = mf::quantize_four_over_six(x, out, mf::nvfp4, o);
    CHECK(st.blocks == 1);
    CHECK(st.scaled_to_four == 1);
    CHECK(out[0] == 4.5f);
    CHECK(out[1] == 6.0f);
    std::vector<float> standard(16);
    mf::quantize_blocks(x, standard, mf::nvfp4, o);
    CHECK(standard[0] == 4.0f);
  }
  SECTION("random blocks against the scalar reference, along rows and down columns") {
    const std::size_t rows = 48, cols = 40;
    const auto x = normal_floats(rows * cols, 5);
    for (const int axis : {1, 0})
      for (const auto mode : test_modes) {
        mf::block_options o;
        o.mode = mode;
        o.seed = 3;
        o.index = 11;
        o.tensor_scale = 0.75f * finite_amax_scale(x);  // room for some blocks' 4-scale below 448
        std::vector<float> out(x.size()), standard(x.size());
        const auto st = mf::quantize_four_over_six(x, out, mf::nvfp4, o, {rows, cols, axis});
        mf::quantize_blocks(x, standard, mf::nvfp4, o, {rows, cols, axis});
        std::uint64_t fours = 0, blocks = 0;
        const std::size_t lines = axis == 1 ? rows : cols, length = axis == 1 ? cols : rows;
        for (std::size_t line = 0; line < lines; ++line)
          for (std::size_t begin = 0; begin < length; begin += 16) {
            std::vector<float> v;
            std::vector<std::uint64_t> at, index;
            for (std::size_t j = begin; j < std::min(length, begin + 16); ++j) {
              const std::size_t pos = axis == 1 ? line * cols + j : j * cols + line;
              v.push_back(x[pos]);
              at.push_back(pos);
              index.push_back(o.index + pos);
            }
            const auto six = reference_block(v, index, mf::nvfp4, o, o.tensor_scale, 6);
            const auto four = reference_block(v, index, mf::nvfp4, o, o.tensor_scale, 4);
            double e6 = 0, e4 = 0, e_out = 0;
            for (std::size_t i = 0; i < v.size(); ++i) {
              e6 += std::pow(static_cast<double>(six[i]) - v[i], 2);
              e4 += std::pow(static_cast<double>(four[i]) - v[i], 2);
              e_out += std::pow(static_cast<double>(out[at[i]]) - v[i], 2);
            }
            const auto& pick = e4 < e6 ? four : six;
            fours += e4 < e6;
            ++blocks;
            for (std::size_t i = 0; i < v.size(); ++i) {
              REQUIRE(std::bit_cast<std::uint32_t>(out[at[i]]) == std::bit_cast<std::uint32_t>(pick[i]));
              REQUIRE(std::bit_cast<std::uint32_t>(standard[at[i]]) == std::bit_cast<std::uint32_t>(six[i]));
            }
            REQUIRE(e_out <= e6);
          }
        CHECK(st.blocks == blocks);
        CHECK(st.scaled_to_four == fours);
        CHECK(fours > 0);           // Gaussian blocks do pick 4 sometimes ...
        CHECK(fours < blocks);      // ... and 6 other times
      }
  }
}

TEST_CASE("operand functions refuse bad arguments before writing", "[operand][errors]") {
  std::vector<float> x(64, 1.0f), out(64, 7.0f);
  CHECK_THROWS_AS(mf::quantize_tiles(x, out, mf::mxfp4, {}, 8, 8, false, {64, 32}), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize_tiles(x, out, mf::mxfp4, {}, 8, 7, false), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize_tiles(x, out, mf::mxfp4, {}, 64, 0, false), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize_tiles(x, std::span<float>(out).first(32), mf::mxfp4, {}, 8, 8, false), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize_four_over_six(x, out, mf::mxfp4, {}), std::invalid_argument);
  mf::block_options bad_scale;
  bad_scale.tensor_scale = -1;
  CHECK_THROWS_AS(mf::quantize_four_over_six(x, out, mf::nvfp4, bad_scale), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize_four_over_six(x, out, mf::nvfp4, {}, {3, 5, 1}), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize_operand(x, out, mf::nvfp4, {}, {3, 5, mf::gemm_side::left, false}), std::invalid_argument);
  CHECK(out == std::vector<float>(64, 7.0f));
  try {
    mf::quantize_four_over_six(x, out, mf::mxfp4, {});
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("E8M0") != std::string::npos);
  }
}
