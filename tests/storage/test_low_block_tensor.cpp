// low_block_tensor (minifloat/storage/low_block_tensor.hpp): weights kept only as an OCP MX
// block-scaled tensor with blocks along rows. The stored values equal a separate whole-tensor
// quantize_blocks call (block.hpp's kernel, itself checked against the spec-text reference in
// tests/test_block_scaling.cpp) of the same fp32 values; an optimizer step is the fp32 step
// re-quantized in whole blocks; the result does not depend on how a rewrite is chunked; bad
// input is refused without changing anything; the byte count is the packed size.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/random.hpp>
#include <minifloat/storage/low_block_tensor.hpp>
#include <minifloat/storage/optimizers.hpp>

#include "support.hpp"

namespace mf = minifloat;
namespace ms = minifloat::storage;

namespace {

using test_support::normal_floats;
using test_support::same_bits;

/// The rule the header states: generation g draws from mix64(seed + golden64 · (g + 1)), element
/// i of the tensor at index i.
std::uint64_t generation_seed(std::uint64_t seed, std::uint64_t generation) {
  return mf::detail::mix64(seed + mf::detail::golden64 * (generation + 1));
}

/// The oracle: one quantize_blocks call over the whole rows × cols tensor.
std::vector<float> requantized(const std::vector<float>& x, const mf::block_format& f, std::size_t rows,
                               mf::rounding mode, std::uint64_t seed, std::uint64_t generation) {
  std::vector<float> out(x.size());
  mf::block_options o;
  o.mode = mode;
  o.seed = generation_seed(seed, generation);
  mf::quantize_blocks(x, out, f, o, {rows, x.size() / rows, 1});
  return out;
}

std::vector<float> decoded(const ms::low_block_tensor& t) {
  std::vector<float> out(t.size());
  t.decode(out);
  return out;
}


const mf::block_format mx_formats[] = {mf::mxfp8_e4m3, mf::mxfp8_e5m2, mf::mxfp6_e3m2, mf::mxfp6_e2m3, mf::mxfp4, mf::mxint8};

/// Stores y into t as a new generation, `chunk` values per store() call.
void rewrite(ms::low_block_tensor& t, const std::vector<float>& y, std::size_t chunk) {
  t.next_generation();
  for (std::size_t start = 0; start < y.size(); start += chunk)
    t.store(start, std::span<const float>(y).subspan(start, std::min(chunk, y.size() - start)));
}

}  // namespace

TEST_CASE("MXFP4 weights by hand: blocks along rows, the spec's scale, ties to even, packed size") {
  // 2 rows of 40: blocks [0,32) [32,40) in each row. Row 0's first block has amax 3:
  // floor(log2 3) - emax(e2m1) = 1 - 2 = -1, X = 1/2, E8M0 code 126. Elements V/X: 1 -> 2 (exact),
  // 0.3 -> 0.6 -> 0.5 (so 0.25), -2.5 -> -5, a tie between 4 and 6 -> 4 (even) (so -2), 3 -> 6.
  std::vector<float> x(80, 0.0f);
  x[0] = 1.0f, x[1] = 0.3f, x[2] = -2.5f, x[3] = 3.0f;
  x[32] = 0.75f;  // its own block: floor(log2 0.75) - 2 = -3, X = 1/8, 0.75 / X = 6 exactly
  x[40] = 100.0f;  // row 1's first block: 6 - 2 = 4, X = 16, 100 / 16 = 6.25 -> 6 (so 96)
  const ms::low_block_tensor t(x, mf::mxfp4, 2);
  const std::vector<float> v = decoded(t);
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == 0.25f);
  CHECK(v[2] == -2.0f);
  CHECK(v[3] == 3.0f);
  CHECK(v[32] == 0.75f);
  CHECK(v[40] == 96.0f);
  REQUIRE(t.scales().size() == 4);
  CHECK(t.scales()[0] == 126);
  CHECK(t.scales()[1] == 124);
  CHECK(t.scales()[2] == 131);
  CHECK(t.scales()[3] == 0);  // an all-zero block: s = -127
  // 80 codes of 4 bits = 10 words = 40 bytes, and 4 scale bytes.
  CHECK(t.elements().words().size() == 10);
  CHECK(t.bytes() == 44);
  CHECK(same_bits(t.packed().decode(), v));
}

TEST_CASE("stored MX weights equal a whole-tensor quantize_blocks of the same values, nearest and stochastic") {
  for (const mf::block_format& f : mx_formats)
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::stochastic}) {
      const std::size_t rows = 7, cols = 75;  // rows end inside a block
      const auto x = normal_floats(rows * cols, 3, 0.2f);
      const ms::low_block_tensor t(x, f, rows, mode, 42);
      INFO(mf::to_string(f) << " mode " << static_cast<int>(mode));
      CHECK(same_bits(decoded(t), requantized(x, f, rows, mode, 42, 0)));
      CHECK(t.bytes() == ms::packed_block_tensor::bytes_for(x.size(), f, {rows, cols, 1}));
      CHECK(t.scales().size() == rows * 3);
    }
}

TEST_CASE("a chunked rewrite gives the same codes and scales at any chunk size") {
  const std::size_t rows = 30, cols = 150;  // 4500 weights: more than one optimizer chunk
  for (const mf::block_format& f : {mf::mxfp4, mf::mxfp8_e4m3, mf::mxint8}) {
    const auto x = normal_floats(rows * cols, 5, 0.1f);
    auto y = x;
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += 1e-3f * static_cast<float>(i % 7);
    std::vector<ms::low_block_tensor> results;
    for (const std::size_t chunk : {std::size_t{4500}, std::size_t{2048}, std::size_t{100}, std::size_t{37}, std::size_t{1}}) {
      ms::low_block_tensor t(x, f, rows, mf::rounding::stochastic, 9);
      rewrite(t, y, chunk);
      results.push_back(t);
    }
    INFO(mf::to_string(f));
    for (const auto& r : results) CHECK(r == results.front());
    CHECK(same_bits(decoded(results.front()), requantized(y, f, rows, mf::rounding::stochastic, 9, 1)));
    // Another generation draws afresh: stochastic rounding of the same values differs somewhere.
    ms::low_block_tensor again = results.front();
    rewrite(again, y, 2048);
    CHECK_FALSE(same_bits(decoded(again), decoded(results.front())));
  }
}

TEST_CASE("a block a store ends inside keeps its old values until the next store completes it") {
  const std::size_t rows = 2, cols = 75;
  const auto x = normal_floats(rows * cols, 6, 0.3f);
  ms::low_block_tensor t(x, mf::mxfp8_e4m3, rows);
  const auto before = decoded(t);
  std::vector<float> y(x.size(), 0.5f);
  t.next_generation();
  t.store(0, std::span<const float>(y).subspan(0, 80));  // row 1's block [75, 107) unfinished
  std::vector<float> window(32);
  t.load(75, window);  // fields 75.. share a packed word with row 0's last block: still the old values
  CHECK(same_bits(window, std::vector<float>(before.begin() + 75, before.begin() + 107)));
  t.load(32, window);
  CHECK(window == std::vector<float>(32, 0.5f));  // row 0 is committed
  CHECK_THROWS_AS(t.next_generation(), std::logic_error);
  CHECK_THROWS_AS(t.store(96, std::span<const float>(y).subspan(96, 10)), std::out_of_range);  // not where it goes on
  t.store(80, std::span<const float>(y).subspan(80));
  CHECK(decoded(t) == y);
  t.next_generation();  // complete now
}

TEST_CASE("SGD and AdamW steps on MX weights are the fp32 steps re-quantized in whole blocks") {
  for (const mf::block_format& f : mx_formats)
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::stochastic}) {
      const std::size_t rows = 33, cols = 131;  // 4323 weights: chunks of 2048 end inside blocks
      const auto x = normal_floats(rows * cols, 7, 0.05f);
      const auto g = normal_floats(rows * cols, 8, 1.0f);
      INFO(mf::to_string(f) << " mode " << static_cast<int>(mode));
      {
        ms::low_block_tensor t(x, f, rows, mode, 11);
        std::vector<float> reference = decoded(t);
        ms::sgd_state s_block, s_ref;
        const ms::sgd_options o{0.01, 0.9, 0, 1e-3};
        for (std::uint64_t step = 1; step <= 3; ++step) {
          ms::sgd_step(t, g, s_block, o);
          ms::sgd_step(std::span<float>(reference), g, s_ref, o);
          reference = requantized(reference, f, rows, mode, 11, step);
          CHECK(same_bits(decoded(t), reference));
        }
        CHECK(s_block.momentum_buffer == s_ref.momentum_buffer);
      }
      {
        ms::low_block_tensor t(x, f, rows, mode, 12);
        std::vector<float> reference = decoded(t);
        ms::adam_state s_block, s_ref;
        const ms::adam_options o{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
        for (std::uint64_t step = 1; step <= 2; ++step) {
          ms::adam_step(t, g, s_block, o);
          ms::adam_step(std::span<float>(reference), g, s_ref, o);
          reference = requantized(reference, f, rows, mode, 12, step);
          CHECK(same_bits(decoded(t), reference));
        }
      }
    }
}

TEST_CASE("MX weights refuse NVFP4, bad shapes and non-finite values, and change nothing") {
  const auto x = normal_floats(64, 1, 1.0f);
  CHECK_THROWS_WITH(ms::low_block_tensor(x, mf::nvfp4), Catch::Contains("per-tensor scale"));
  CHECK_THROWS_AS(ms::low_block_tensor(x, mf::mxfp4, 5), std::invalid_argument);  // 5 rows do not divide 64
  CHECK_THROWS_AS(ms::low_block_tensor(x, mf::mxfp4, 1, mf::rounding::toward_zero), std::invalid_argument);
  ms::low_block_tensor t(x, mf::mxfp4, 2);
  const ms::low_block_tensor before = t;
  std::vector<float> y(32, 1.0f);
  y[5] = std::numeric_limits<float>::infinity();
  t.next_generation();
  CHECK_THROWS_WITH(t.store(0, y), Catch::Contains("weight 5 is infinite"));
  CHECK_THROWS_AS(t.store(16, std::span<const float>(y).subspan(0, 16)), std::out_of_range);  // not a block start
  CHECK_THROWS_AS(t.store(60, y), std::out_of_range);                                         // past the end
  CHECK(decoded(t) == decoded(before));
  // An optimizer step that would make a weight non-finite throws before anything changes.
  ms::low_block_tensor u(x, mf::mxfp8_e5m2, 2);
  const ms::low_block_tensor u_before = u;
  std::vector<float> g(64, 0.0f);
  g[40] = std::numeric_limits<float>::quiet_NaN();
  ms::sgd_state s;
  CHECK_THROWS_AS(ms::sgd_step(u, g, s, {0.1, 0.9, 0, 0}), std::domain_error);
  CHECK(u == u_before);
  CHECK(s.steps == 0);
  CHECK(s.momentum_buffer.empty());
}

TEST_CASE("steps on threads whose ranges would start inside a block equal one-thread steps bit for bit",
          "[threads]") {
  // 700 rows of 100: blocks of 32 do not tile a row, so a cut at a multiple of 1024 weights
  // would lie inside a block; 70,000 weights are enough for two threads' ranges. 300 rows of 256:
  // blocks tile every range, which threads then step side by side.
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{700, 100}, {300, 256}})
  for (const mf::block_format& f : {mf::mxfp4, mf::mxfp6_e2m3})
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::stochastic}) {
      INFO(rows << " x " << cols << " " << mf::to_string(f) << " mode " << static_cast<int>(mode));
      const auto x = normal_floats(rows * cols, 21, 0.05f);
      const auto g = normal_floats(rows * cols, 22, 1.0f);
      ms::low_block_tensor one(x, f, rows, mode, 3), two = one, three = one;
      ms::sgd_state s1, s2, s3;
      const ms::sgd_options o{0.01, 0.9, 0, 1e-3};
      for (int step = 0; step < 2; ++step) {
        ms::sgd_step(one, g, s1, o, mf::threads{1});
        ms::sgd_step(two, g, s2, o, mf::threads{2});
        ms::sgd_step(three, g, s3, o, mf::threads{3});
      }
      CHECK(two == one);
      CHECK(three == one);
      CHECK(s2.momentum_buffer == s1.momentum_buffer);
      CHECK(s3.steps == s1.steps);
      ms::adam_state a1, a2;
      const ms::adam_options ao{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
      ms::adam_step(one, g, a1, ao, mf::threads{1});
      ms::adam_step(two, g, a2, ao, mf::threads{2});
      CHECK(two == one);
      CHECK(a2.exp_avg == a1.exp_avg);
      CHECK(a2.exp_avg_sq == a1.exp_avg_sq);
    }
}

TEST_CASE("a step on weights whose last store left a block unfinished throws and changes nothing") {
  const std::size_t rows = 2, cols = 75;
  const auto x = normal_floats(rows * cols, 6, 0.3f);
  const auto g = normal_floats(rows * cols, 7, 1.0f);
  ms::low_block_tensor t(x, mf::mxfp8_e4m3, rows);
  t.next_generation();
  t.store(0, std::span<const float>(x).subspan(0, 80));  // row 1's first block unfinished
  const std::uint64_t generation = t.generation();
  const auto before = decoded(t);
  ms::sgd_state s;
  CHECK_THROWS_WITH(ms::sgd_step(t, g, s, {0.01, 0.9, 0, 0}), Catch::Contains("not stored completely"));
  CHECK(s.steps == 0);
  CHECK(s.momentum_buffer.empty());
  ms::adam_state a;
  CHECK_THROWS_WITH(ms::adam_step(t, g, a, {}), Catch::Contains("not stored completely"));
  CHECK(a.steps == 0);
  CHECK(a.exp_avg.empty());
  CHECK(a.exp_avg_sq.empty());
  CHECK(t.generation() == generation);
  CHECK(same_bits(decoded(t), before));
  // completing the store makes it steppable again
  t.store(80, std::span<const float>(x).subspan(80));
  ms::sgd_step(t, g, s, {0.01, 0.9, 0, 0});
  CHECK(s.steps == 1);
}
