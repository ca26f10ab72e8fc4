// Block scaling (block.hpp) against an independent, deliberately obvious implementation written
// from the OCP Microscaling Formats v1.0 text (§6.3: shared_exp = floor(log2(max|V_i|)) −
// emax_elem, X = 2^shared_exp, P_i = V_i / X rounded to the element format, clamped to its max
// normal) and NVIDIA's NVFP4 recipe. The reference rounds by searching the element format's
// value table (built from the spec's value formula and the emax/max table), in double: it shares
// no code with the library's rounding core.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <minifloat/block.hpp>

namespace mf = minifloat;

namespace {

const float nan_float = std::numeric_limits<float>::quiet_NaN();

/// An element format as the spec's tables describe it: emax_elem, and every non-negative value.
struct spec_element {
  int emax;
  int mantissa_bits;  // of the values in [1, 2) (MXINT8: 6, the spacing 2^-6)
  std::vector<double> values;  // ascending; index = code magnitude (so parity = last mantissa bit)
  double max() const { return values.back(); }
  /// |y| ≥ this saturates (max + half the spacing just below max).
  double overflow_threshold() const { return max() + (max() - values[values.size() - 2]) / 2; }
};

spec_element float_element(int e, int m, int bias, bool top_code_is_nan, bool top_binade_is_special) {
  spec_element s{};
  for (int exponent = 0; exponent < (1 << e); ++exponent)
    for (int mantissa = 0; mantissa < (1 << m); ++mantissa) {
      if (top_binade_is_special && exponent == (1 << e) - 1) continue;
      if (top_code_is_nan && exponent == (1 << e) - 1 && mantissa == (1 << m) - 1) continue;
      const double frac = mantissa / double(1 << m);
      s.values.push_back(exponent == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1 + frac, exponent - bias));
    }
  return s;
}

// OCP MX v1.0 Table 1 (element formats and their emax)
const spec_element ref_e4m3 = [] { auto s = float_element(4, 3, 7, true, false); s.emax = 8; s.mantissa_bits = 3; return s; }();
const spec_element ref_e5m2 = [] { auto s = float_element(5, 2, 15, false, true); s.emax = 15; s.mantissa_bits = 2; return s; }();
const spec_element ref_e3m2 = [] { auto s = float_element(3, 2, 3, false, false); s.emax = 4; s.mantissa_bits = 2; return s; }();
const spec_element ref_e2m3 = [] { auto s = float_element(2, 3, 1, false, false); s.emax = 2; s.mantissa_bits = 3; return s; }();
const spec_element ref_e2m1 = [] { auto s = float_element(2, 1, 1, false, false); s.emax = 2; s.mantissa_bits = 1; return s; }();
const spec_element ref_int8 = [] {  // MXINT8: two's complement with an implicit scale 2^-6, emax 0
  spec_element s{};
  s.emax = 0;
  s.mantissa_bits = 6;
  for (int k = 0; k <= 127; ++k) s.values.push_back(k / 64.0);
  return s;
}();

/// Nearest table value to |y| (ties to the even index), saturating; the sign put back.
double ref_round_nearest_even(const spec_element& t, double y) {
  const double a = std::fabs(y);
  double r;
  if (a >= t.max()) r = t.max();
  else {
    std::size_t k = 0;
    while (t.values[k + 1] <= a) ++k;  // values[k] <= a < values[k+1]
    const double lo = t.values[k], hi = t.values[k + 1];
    if (a - lo < hi - a) r = lo;
    else if (hi - a < a - lo) r = hi;
    else r = (k % 2 == 0) ? lo : hi;
  }
  return std::signbit(y) ? -r : r;
}

struct ref_counts {
  std::uint64_t overflows = 0, underflows = 0, clamped = 0, nan_blocks = 0;
};

/// The unclamped scale exponent of a block with largest magnitude amax > 0, from each rule's
/// definition in double (frexp, not the library's bit arithmetic): OCP MX's floor, and torchao's
/// RCEIL, CEIL and EVEN as its ScaleCalculationMode documents them.
int ref_scale_exponent(const spec_element& t, double amax, mf::scale_rule rule) {
  int e = 0;
  const double m = std::frexp(amax, &e);  // amax = m * 2^e, m in [0.5, 1)
  const int floor_log2 = e - 1;
  switch (rule) {
    case mf::scale_rule::floor: return floor_log2 - t.emax;
    case mf::scale_rule::rceil: {  // the smallest power of two X with amax / X <= max
      int s = floor_log2 - t.emax - 2;
      while (amax / std::ldexp(1.0, s) > t.max()) ++s;
      return s;
    }
    case mf::scale_rule::torchao_ceil: return (m == 0.5 ? floor_log2 : floor_log2 + 1) - t.emax;
    case mf::scale_rule::torchao_even: {  // amax rounded to 1 + mantissa_bits significant bits, ties up
      const double top = std::ldexp(1.0, t.mantissa_bits + 1);
      const double rounded = std::floor(std::ldexp(m, t.mantissa_bits + 1) + 0.5);  // in [top / 2, top]
      return (rounded == top ? floor_log2 + 1 : floor_log2) - t.emax;
    }
  }
  return 0;
}

/// One MX block, straight from the spec text.
std::vector<double> ref_mx_block(const spec_element& t, const std::vector<float>& v, mf::scale_rule rule, ref_counts& n,
                                 int* scale_exponent = nullptr) {
  for (const float x : v)
    if (std::isnan(x) || std::isinf(x)) {
      ++n.nan_blocks;
      n.overflows += v.size() - static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](float q) { return std::isfinite(q); }));
      if (scale_exponent) *scale_exponent = 128;  // NaN
      return std::vector<double>(v.size(), std::nan(""));
    }
  double amax = 0;
  for (const float x : v) amax = std::max(amax, std::fabs(double(x)));
  int s = -127;
  if (amax > 0) {
    s = ref_scale_exponent(t, amax, rule);
    if (s < -127 || s > 127) ++n.clamped;
    s = std::clamp(s, -127, 127);
  }
  if (scale_exponent) *scale_exponent = s;
  std::vector<double> out;
  for (const float x : v) {
    const double y = double(x) / std::ldexp(1.0, s);
    const double p = ref_round_nearest_even(t, y);
    n.overflows += std::fabs(y) >= t.overflow_threshold();
    n.underflows += x != 0 && p == 0;
    // MXINT8 is two's complement: no -0. A value beyond float's range (the ceil rule at the top
    // of float: 255.99 * 2^120 rounds to 2^128) is Inf, as the float conversion makes it.
    out.push_back(static_cast<float>(t.emax == 0 && p == 0 ? 0.0 : p * std::ldexp(1.0, s)));
  }
  return out;
}

/// A whole tensor (rows × cols, blocks along `axis`) through the reference.
std::vector<double> ref_mx(const spec_element& t, const std::vector<float>& x, std::size_t rows, std::size_t cols,
                           int axis, int block, mf::scale_rule rule, ref_counts& n) {
  std::vector<double> out(x.size());
  const std::size_t along = axis == 1 ? cols : rows, lines = axis == 1 ? rows : cols;
  for (std::size_t line = 0; line < lines; ++line)
    for (std::size_t begin = 0; begin < along; begin += block) {
      std::vector<std::size_t> where;
      for (std::size_t j = begin; j < std::min(along, begin + block); ++j)
        where.push_back(axis == 1 ? line * cols + j : j * cols + line);
      std::vector<float> v;
      for (const std::size_t w : where) v.push_back(x[w]);
      const std::vector<double> q = ref_mx_block(t, v, rule, n);
      for (std::size_t j = 0; j < where.size(); ++j) out[where[j]] = q[j];
    }
  return out;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b)); }

struct mx_case {
  const char* name;
  mf::block_format f;
  const spec_element* ref;
};
const mx_case mx_cases[] = {
    {"mxfp8_e4m3", mf::mxfp8_e4m3, &ref_e4m3}, {"mxfp8_e5m2", mf::mxfp8_e5m2, &ref_e5m2},
    {"mxfp6_e3m2", mf::mxfp6_e3m2, &ref_e3m2}, {"mxfp6_e2m3", mf::mxfp6_e2m3, &ref_e2m3},
    {"mxfp4", mf::mxfp4, &ref_e2m1},           {"mxint8", mf::mxint8, &ref_int8},
};

std::vector<float> random_tensor(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<double> wide(-30, 30);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (gen() % 4) {
      case 0: x[i] = normal(gen); break;
      case 1: x[i] = static_cast<float>(std::exp2(wide(gen)) * (gen() % 2 ? 1 : -1)); break;
      case 2: x[i] = normal(gen) * 1e-3f; break;
      default: x[i] = std::round(normal(gen) * 8) / 8; break;  // many exact ties
    }
  }
  return x;
}

/// Checks the fast kernels (fake quantization, codes, decode, counts) against the reference.
void check_against_reference(const mx_case& c, const std::vector<float>& x, std::size_t rows, std::size_t cols,
                             int axis, mf::scale_rule rule) {
  INFO(c.name << " rows " << rows << " cols " << cols << " axis " << axis << " rule " << mf::to_string(rule));
  ref_counts want;
  const std::vector<double> ref = ref_mx(*c.ref, x, rows, cols, axis, c.f.block_size, rule, want);
  const mf::block_layout layout{rows, cols, axis};
  const mf::block_options o{.rule = rule};
  std::vector<float> got(x.size());
  mf::block_stats st;
  mf::quantize_blocks(x, got, c.f, o, layout, st);
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << " x = " << x[i]);
    REQUIRE(same(got[i], ref[i]));
  }
  CHECK(st.elements.values == x.size());
  CHECK(st.elements.overflows == want.overflows);
  CHECK(st.elements.underflows == want.underflows);
  CHECK(st.scale_clamped == want.clamped);
  CHECK(st.nan_blocks == want.nan_blocks);
  CHECK(st.blocks == mf::block_count(x.size(), c.f, layout));
  // codes decode to the same values, bit for bit
  std::vector<std::uint8_t> elements(x.size()), scales(mf::block_count(x.size(), c.f, layout));
  mf::encode_blocks(x, elements, scales, c.f, o, layout);
  std::vector<float> back(x.size());
  mf::decode_blocks(elements, scales, back, c.f, layout);
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(back[i], got[i]));
}

std::vector<float> block_of(std::size_t n, float fill) { return std::vector<float>(n, fill); }

}  // namespace

TEST_CASE("MX fake quantization equals the spec-text reference on random data, every scale rule", "[block]") {
  for (const auto& c : mx_cases)
    for (const auto& [name, rule] : mf::named_scale_rules)
      for (const std::size_t n : {std::size_t{1}, std::size_t{31}, std::size_t{32}, std::size_t{33}, std::size_t{1000},
                                  std::size_t{4099}})
        check_against_reference(c, random_tensor(n, n * 7 + 1), 1, n, 1, rule);
}

TEST_CASE("MX blocks along either axis of a 2-D tensor, odd shapes, short last blocks", "[block]") {
  for (const auto& c : mx_cases)
    for (const int axis : {0, 1})
      for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{37, 45}, {64, 32}, {5, 70}, {70, 3}})
        check_against_reference(c, random_tensor(rows * cols, rows + cols), rows, cols, axis, mf::scale_rule::floor);
}

TEST_CASE("MX edge blocks: zero, one huge value, NaN, Inf, subnormals, amax at a power of two", "[block]") {
  std::vector<float> x;
  const auto add = [&](std::vector<float> b) {
    b.resize(32, 0.0f);
    x.insert(x.end(), b.begin(), b.end());
  };
  add(block_of(32, 0.0f));                                    // all zero
  add({-0.0f, 0.0f, -0.0f});                                  // signed zeros
  add({1e30f, 1.0f, -3.0f, 1e-3f});                           // one huge value: the rest underflow
  add({nan_float, 1.0f, 2.0f});                                    // NaN
  add({std::numeric_limits<float>::infinity(), 1.0f});       // Inf
  add({-std::numeric_limits<float>::infinity(), -1.0f});
  add({1e-40f, -3e-41f, 1e-45f});                             // float subnormals: scale clamps at 2^-127
  add({0x1p-130f, 0x1p-149f});
  add({4.0f, 1.0f, 0.75f, 3.0f});                             // amax exactly a power of two
  add({0x1p127f, 0x1.fffffep127f, 1.0f});                     // the top of float
  add({7.5f, 6.0f, 5.0f, -7.0f, 0.25f});                      // saturation at the top of the floor rule
  add({448.0f, 464.0f, 480.0f, 511.0f});
  // again after 16 ordinary blocks, so that groups of 16 blocks meet them too
  std::vector<float> edges = x;
  x = random_tensor(16 * 32, 5);
  x.insert(x.end(), edges.begin(), edges.end());
  x.insert(x.end(), edges.begin(), edges.end());
  for (const auto& c : mx_cases)
    for (const auto& [name, rule] : mf::named_scale_rules) check_against_reference(c, x, 1, x.size(), 1, rule);
}

TEST_CASE("MX worked examples by hand", "[block]") {
  // MXFP8 E4M3: amax 1.0 -> shared exponent floor(log2 1) - 8 = -8, X = 2^-8 (E8M0 code 119).
  // 0.3 / X = 76.8 lies between the E4M3 values 72 and 80 (spacing 8 in [64, 128)): 80, i.e. 0.3125.
  std::vector<float> x(32, 0.3f);
  x[5] = 1.0f;
  std::vector<std::uint8_t> elements(32), scales(1);
  mf::encode_blocks(x, elements, scales, mf::mxfp8_e4m3);
  CHECK(scales[0] == 119);
  CHECK(elements[5] == 0x78);  // 256 = 2^8: exponent field 15, mantissa 0
  CHECK(elements[0] == 0x6A);  // 80 = 1.25 * 2^6: exponent field 13, mantissa 010
  std::vector<float> y(32);
  mf::quantize_blocks(x, y, mf::mxfp8_e4m3);
  CHECK(y[0] == 0.3125f);
  CHECK(y[5] == 1.0f);

  // MXFP4: amax 7 -> floor(log2 7) - 2 = 0, X = 1: 7 saturates to 6 (counted), 0.7 -> 0.5,
  // 2.5 -> 2 (a tie between 2 and 3: the even code 0b0100), -5 -> -4 (tie, even code).
  std::vector<float> f4(32, 0.0f);
  f4[0] = 7.0f, f4[1] = 0.7f, f4[2] = 2.5f, f4[3] = -5.0f;
  mf::block_stats st;
  mf::quantize_blocks(f4, y, mf::mxfp4, {}, {}, st);
  CHECK(y[0] == 6.0f);
  CHECK(y[1] == 0.5f);
  CHECK(y[2] == 2.0f);
  CHECK(y[3] == -4.0f);
  CHECK(st.elements.overflows == 1);
  // The ceil rule picks X = 2 instead (7 / 6 > 1): 7 / 2 = 3.5 ties to 4 -> 8; 0.7 / 2 -> 0.5 -> 1.
  mf::quantize_blocks(f4, y, mf::mxfp4, {.rule = mf::scale_rule::rceil});
  CHECK(y[0] == 8.0f);
  CHECK(y[1] == 1.0f);
  mf::encode_blocks(f4, elements, scales, mf::mxfp4, {.rule = mf::scale_rule::rceil});
  CHECK(scales[0] == 128);

  // MXINT8: amax 1.5 -> X = 2^0; elements are round(V * 64) / 64 in two's complement:
  // 1.5 -> 96, 0.01 -> 0.64 -> 1, -1.99 -> -127.36 -> -127 (0x81).
  std::vector<float> i8(32, 0.0f);
  i8[0] = 1.5f, i8[1] = 0.01f, i8[2] = -1.99f;
  i8[3] = -1.5f;
  mf::encode_blocks(i8, elements, scales, mf::mxint8);
  CHECK(scales[0] == 127);
  CHECK(elements[0] == 96);
  CHECK(elements[1] == 1);
  CHECK(elements[3] == 0xA0);  // -96
  mf::quantize_blocks(i8, y, mf::mxint8);
  CHECK(y[2] == -127.0f / 64);
  std::vector<float> back(32);
  mf::decode_blocks(elements, scales, back, mf::mxint8);
  CHECK(back[2] == -127.0f / 64);
  elements[4] = 0x80;  // k = -128 decodes to -2 though quantization never writes it
  mf::decode_blocks(elements, scales, back, mf::mxint8);
  CHECK(back[4] == -2.0f);

  // A NaN makes the scale NaN (E8M0 0xFF) and every element of its block NaN.
  std::vector<float> n8(32, 1.0f);
  n8[7] = nan_float;
  mf::encode_blocks(n8, elements, scales, mf::mxfp8_e4m3);
  CHECK(scales[0] == 0xFF);
  mf::decode_blocks(elements, scales, back, mf::mxfp8_e4m3);
  CHECK(std::isnan(back[0]));
}

TEST_CASE("NVFP4 equals the recipe written out in fp32", "[block]") {
  for (const std::size_t n : {std::size_t{16}, std::size_t{17}, std::size_t{250}, std::size_t{4096}}) {
    INFO("n = " << n);
    std::vector<float> x = random_tensor(n, n);
    if (n == 250) x[40] = 0, x[41] = 1e-12f;  // a block far below the tensor's amax
    // S_t = amax / (6 * 448); D = e4m3(amax_b / 6 / S_t); element = e2m1(V / (D * S_t))
    float amax = 0;
    for (const float v : x) amax = std::max(amax, std::fabs(v));
    const float st_scale = amax / (6.0f * 448.0f);
    const spec_element e4m3_table = ref_e4m3;
    std::vector<float> want(n);
    for (std::size_t b = 0; b < n; b += 16) {
      const std::size_t m = std::min<std::size_t>(16, n - b);
      float bmax = 0;
      for (std::size_t j = 0; j < m; ++j) bmax = std::max(bmax, std::fabs(x[b + j]));
      const float d = static_cast<float>(ref_round_nearest_even(e4m3_table, bmax / 6.0f / st_scale));
      const float dscale = d * st_scale;
      for (std::size_t j = 0; j < m; ++j) {
        const float y = dscale > 0 ? x[b + j] / dscale : x[b + j] * 0.0f;
        want[b + j] = static_cast<float>(ref_round_nearest_even(ref_e2m1, y)) * dscale;
      }
    }
    std::vector<float> got(n);
    mf::quantize_blocks(x, got, mf::nvfp4);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("element " << i << " x = " << x[i]);
      REQUIRE(same(got[i], want[i]));
    }
    std::vector<std::uint8_t> elements(n), scales(mf::block_count(n, mf::nvfp4, {}));
    const float used = mf::encode_blocks(x, elements, scales, mf::nvfp4);
    CHECK(used == st_scale);
    std::vector<float> back(n);
    mf::decode_blocks(elements, scales, back, mf::nvfp4, {}, used);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(same(back[i], got[i]));
  }
  // a given per-tensor scale too small for a block saturates its E4M3 scale (counted)
  std::vector<float> x(16, 1000.0f), y(16);
  mf::block_stats st;
  mf::quantize_blocks(x, y, mf::nvfp4, {.tensor_scale = 0.01f}, {}, st);
  CHECK(st.scale_clamped == 1);
  CHECK(y[0] == 6.0f * (448.0f * 0.01f));
  CHECK_THROWS_WITH(mf::quantize_blocks(x, y, mf::nvfp4, {.tensor_scale = -1.0f}), Catch::Contains("tensor_scale"));
}

TEST_CASE("stochastic rounding of block elements is unbiased", "[block]") {
  // amax 6 fixes X = 1 for MXFP4; 2.3 lies between 2 and 3: E[result] = 2.3
  std::vector<float> x(32, 2.3f);
  x[0] = 6.0f;
  std::vector<float> y(32);
  double sum = 0;
  std::size_t count = 0;
  for (std::uint64_t seed = 0; seed < 2000; ++seed) {
    mf::quantize_blocks(x, y, mf::mxfp4, {.mode = mf::rounding::stochastic, .seed = seed});
    for (std::size_t i = 1; i < 32; ++i) {
      REQUIRE((y[i] == 2.0f || y[i] == 3.0f));
      sum += y[i];
      ++count;
    }
  }
  // 62000 Bernoulli(0.3) draws: standard error of the mean 0.0018
  CHECK(std::fabs(sum / static_cast<double>(count) - 2.3) < 0.01);
}

TEST_CASE("stochastic block rounding is reproducible at any chunking by whole blocks", "[block]") {
  for (const auto& c : mx_cases) {
    INFO(c.name);
    for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{64, 40}, {2, 1064}})
    for (const int axis : {0, 1}) {
      const std::vector<float> x = random_tensor(rows * cols, 99);
      const mf::block_options o{.mode = mf::rounding::stochastic, .seed = 1234};
      std::vector<float> whole(x.size());
      mf::quantize_blocks(x, whole, c.f, o, {rows, cols, axis});
      // axis 1: cut into row ranges; axis 0: into ranges of whole block-rows (multiples of 32 rows)
      const std::size_t step = axis == 1 ? 7 : 32;
      std::vector<float> parts(x.size());
      for (std::size_t r = 0; r < rows; r += step) {
        const std::size_t nr = std::min(step, rows - r);
        mf::block_options oc = o;
        oc.index = r * cols;
        mf::quantize_blocks(std::span(x).subspan(r * cols, nr * cols), std::span(parts).subspan(r * cols, nr * cols),
                            c.f, oc, {nr, cols, axis});
      }
      for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(parts[i], whole[i]));
      if (axis == 0) continue;
      // each element is the core's scalar stochastic rounding of V/X with its own index
      const mf::rounder<float> r(c.f.element, {mf::rounding::stochastic, mf::overflow::saturate, 0, 1234});
      for (std::size_t begin = 0; begin < x.size(); begin += c.f.block_size) {
        const std::size_t row_end = (begin / cols + 1) * cols;
        const std::size_t end = std::min(begin + c.f.block_size, row_end);
        float amax = 0;
        for (std::size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
        const int s = mf::mx_scale_for(amax, c.f.element, mf::scale_rule::floor).exponent;
        for (std::size_t i = begin; i < end; ++i) {
          float want = r(static_cast<float>(std::ldexp(double(x[i]), -s)), i);
          want = static_cast<float>(std::ldexp(double(want), s));
          if (c.f.integer_elements && want == 0) want = 0;
          REQUIRE(same(whole[i], want));
        }
        if (end == row_end) begin = row_end - c.f.block_size;  // the next row starts a new block
      }
    }
  }
}

TEST_CASE("quantize(x, mxfp4) is quantize_blocks in place", "[block]") {
  std::vector<float> x = random_tensor(100, 4), want(100);
  mf::block_stats expected, got;
  mf::quantize_blocks(x, want, mf::mxfp4, {}, {}, expected);
  mf::quantize(x, mf::mxfp4, {}, got);
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(x[i], want[i]));
  CHECK(got == expected);
  mf::quantize(x, mf::mxfp4);  // idempotent: already on the grid of the same scales
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(x[i], want[i]));
}

TEST_CASE("bad block formats, layouts and spans are rejected with the field named", "[block]") {
  std::vector<float> x(10), y(10);
  CHECK_THROWS_WITH(mf::quantize_blocks(x, y, mf::block_format{mf::e2m1, 0}), Catch::Contains("block_size"));
  CHECK_THROWS_WITH(mf::quantize_blocks(x, y, mf::block_format{mf::binary16}), Catch::Contains("wider than 8 bits"));
  CHECK_THROWS_WITH(mf::quantize_blocks(x, y, mf::mxfp4, {}, {3, 3, 1}), Catch::Contains("does not hold"));
  CHECK_THROWS_WITH(mf::quantize_blocks(x, y, mf::mxfp4, {}, {2, 5, 2}), Catch::Contains("axis"));
  std::vector<float> shorter(9);
  CHECK_THROWS(mf::quantize_blocks(x, shorter, mf::mxfp4));
  std::vector<std::uint8_t> e(10), s(2);
  CHECK_THROWS_WITH(mf::encode_blocks(x, e, s, mf::mxfp4), Catch::Contains("scales has 2 codes for 1 blocks"));
  CHECK(mf::mxfp4.bits_per_value() == 4.25);
  CHECK(mf::nvfp4.bits_per_value() == 4.5);
  CHECK(mf::mxfp8_e4m3.bits_per_value() == 8.25);
}

/// quantize_blocks(x) against the scalar core's rounding of V/X for every value, in every mode
/// and every scale rule, with the overflow and underflow counts, and encode/decode round trips.
void check_against_scalar_core(const std::vector<float>& x) {
  for (const auto& c : mx_cases)
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero,
                            mf::rounding::toward_positive, mf::rounding::toward_negative, mf::rounding::to_odd,
                            mf::rounding::stochastic})
      for (const auto& [rule_name, rule] : mf::named_scale_rules) {
        INFO(c.name << " mode " << int(mode) << " rule " << rule_name);
        const mf::block_options o{.mode = mode, .rule = rule, .seed = 5};
        std::vector<float> got(x.size());
        mf::block_stats st;
        mf::quantize_blocks(x, got, c.f, o, {}, st);
        const mf::rounder<float> r(c.f.element, {mode, mf::overflow::saturate, 0, 5});
        mf::rounding_stats want;
        for (std::size_t begin = 0; begin < x.size(); begin += 32) {
          const std::size_t end = std::min(begin + 32, x.size());
          float amax = 0;
          for (std::size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
          const int s = mf::mx_scale_for(amax, c.f.element, rule).exponent;
          for (std::size_t i = begin; i < end; ++i) {
            const float y = static_cast<float>(std::ldexp(double(x[i]), -s));
            const float q = r(y, i);
            float expect = static_cast<float>(std::ldexp(double(q), s));
            if (c.f.integer_elements && expect == 0) expect = 0;
            INFO("element " << i);
            REQUIRE(same(got[i], expect));
            want.overflows += std::fabs(y) >= std::bit_cast<float>(r.plan().threshold_bits);
            want.underflows += y != 0 && q == 0;
          }
        }
        CHECK(st.elements.overflows == want.overflows);
        CHECK(st.elements.underflows == want.underflows);
        std::vector<std::uint8_t> elements(x.size()), scales(mf::block_count(x.size(), c.f, {}));
        mf::encode_blocks(x, elements, scales, c.f, o);
        std::vector<float> back(x.size());
        mf::decode_blocks(elements, scales, back, c.f);
        for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(back[i], got[i]));
      }
}

TEST_CASE("groups of 16 blocks on either core path give the scalar core's rounding of V/X in every mode, with counts",
          "[block]") {
  // N(0, 1) data: MXFP8 blocks mostly take the core's one-binade path, MXFP4/MXFP6/MXINT8 blocks
  // the general finite path (their scaled values fall below the element's smallest normal);
  // one block in the middle saturates, one holds a float subnormal, one is all zero.
  std::mt19937_64 gen(77);
  std::normal_distribution<float> normal;
  std::vector<float> x(40 * 32 + 17);
  for (auto& v : x) v = normal(gen);
  for (std::size_t i = 0; i < 32; ++i) x[64 + i] = 0.0f;
  x[200] = 1e-40f;
  x[300] = 511.0f, x[301] = 470.0f;
  check_against_scalar_core(x);
}

TEST_CASE("groups that skip the look for one-binade blocks and groups that take it give the same rounding",
          "[block]") {
  // After a group of 16 blocks without a one-binade block the kernel stops looking for 8 groups.
  // Phases of 12 groups: N(0, 1) (MXFP4's blocks miss the one-binade path), then magnitudes in
  // [1, 1.5) (every MXFP4, MXFP6 and MXFP8 block fits it), then N(0, 1) with every block's
  // smallest magnitude raised to 1/4 of the block's largest, and one all-zero group inside.
  std::mt19937_64 gen(78);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> one_to_1_5(1.0f, 1.5f);
  std::vector<float> x(3 * 12 * 16 * 32 + 5);
  const std::size_t phase = 12 * 16 * 32;
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = i / phase == 1 ? (i % 3 == 0 ? -1.0f : 1.0f) * one_to_1_5(gen) : normal(gen);
  for (std::size_t b = 2 * phase; b + 32 <= x.size(); b += 32) {
    float amax = 0;
    for (std::size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (std::size_t i = b; i < b + 32; ++i)
      if (std::fabs(x[i]) < amax / 4) x[i] = std::copysign(amax / 4, x[i]);
  }
  for (std::size_t i = phase + 4 * 16 * 32; i < phase + 5 * 16 * 32; ++i) x[i] = 0.0f;
  check_against_scalar_core(x);
}

TEST_CASE("each MX scale rule at amax on, just below and just above powers of two and the element max", "[block]") {
  for (const auto& c : mx_cases) {
    // amax candidates: powers of two and their float neighbours across the element's binades and
    // at the ends of E8M0's range, the element max and its neighbours, and the values where the
    // rules part (EVEN's rounding tie, just below and above it)
    std::vector<float> amaxes;
    const auto around = [&](double v) {
      const auto f = static_cast<float>(v);
      for (const float a : {std::nextafter(f, 0.0f), f, std::nextafter(f, 3e38f)})
        if (a > 0 && std::isfinite(a)) amaxes.push_back(a);
    };
    for (const int k : {-149, -140, -127, -126, -125, -20, -1, 0, 1, 2, 3, 8, 9, 15, 16, 100, 120, 125, 126, 127})
      around(std::ldexp(1.0, k));
    for (const int k : {-130, -3, 0, 7, 100, 126}) {
      around(std::ldexp(c.ref->max(), k));
      around(std::ldexp(2.0 - std::ldexp(1.0, -c.ref->mantissa_bits - 1), k));  // EVEN's tie
    }
    amaxes.push_back(std::numeric_limits<float>::max());
    amaxes.push_back(std::numeric_limits<float>::denorm_min());
    for (const auto& [name, rule] : mf::named_scale_rules) {
      std::vector<float> x;  // one block per amax, whose other elements lie below it
      for (const float amax : amaxes) {
        INFO(c.name << " rule " << name << " amax " << amax);
        const int want = ref_scale_exponent(*c.ref, amax, rule);
        const mf::mx_scale got = mf::mx_scale_for(amax, c.f.element, rule);
        CHECK(got.exponent == std::clamp(want, -127, 127));
        CHECK(got.clamped == (want < -127 || want > 127));
        for (int j = 0; j < 32; ++j) x.push_back(j == 5 ? -amax : amax * static_cast<float>(j) / 37.0f);
      }
      // and through the kernels (groups of 16 blocks and blocks on their own), values and codes
      check_against_reference(c, x, 1, x.size(), 1, rule);
    }
  }
}

TEST_CASE("the scale rules by hand on e4m3: 448, 480 and 496 part floor, rceil, torchao's ceil and even", "[block]") {
  const auto s = [](float amax, mf::scale_rule rule) { return mf::mx_scale_for(amax, mf::e4m3, rule).exponent; };
  using r = mf::scale_rule;
  // 448 = 1.75 * 2^8, e4m3's max: floor and rceil keep 2^0; ceil rounds log2 up (2^1); EVEN's
  // 1.75 needs no rounding at 3 mantissa bits (2^0).
  CHECK(s(448, r::floor) == 0);
  CHECK(s(448, r::rceil) == 0);
  CHECK(s(448, r::torchao_ceil) == 1);
  CHECK(s(448, r::torchao_even) == 0);
  // 480 = 1.875 * 2^8 > 448: rceil moves up, EVEN (1.875 has 3 mantissa bits) does not.
  CHECK(s(480, r::floor) == 0);
  CHECK(s(480, r::rceil) == 1);
  CHECK(s(480, r::torchao_ceil) == 1);
  CHECK(s(480, r::torchao_even) == 0);
  // 496 = 1.9375 * 2^8: 1.9375 is a tie at 3 mantissa bits, rounded up to 2: EVEN moves up too.
  CHECK(s(496, r::torchao_even) == 1);
  // 256 = 2^8: ceil stays where floor is.
  CHECK(s(256, r::torchao_ceil) == 0);
}

TEST_CASE("scale rules by torchao's names, and back", "[block]") {
  CHECK(mf::find_scale_rule("floor") == mf::scale_rule::floor);
  CHECK(mf::find_scale_rule("rceil") == mf::scale_rule::rceil);
  CHECK(mf::find_scale_rule("ceil") == mf::scale_rule::torchao_ceil);
  CHECK(mf::find_scale_rule("even") == mf::scale_rule::torchao_even);
  CHECK_FALSE(mf::find_scale_rule("FLOOR").has_value());
  CHECK_FALSE(mf::find_scale_rule("").has_value());
  for (const auto& [name, rule] : mf::named_scale_rules) CHECK(mf::to_string(rule) == name);
}

TEST_CASE("directed modes and to_odd give an element below float's range its smallest value on their side",
          "[block]") {
  // amax 1e30 puts s near 99 - emax: V / 2^s of 1e-30 or 1e-40 lies below 2^-150, where the float
  // product is 0. The exact quotient is a tiny nonzero value: toward_positive makes a positive one
  // the element's smallest subnormal, toward_negative a negative one, to_odd both; nearest and
  // toward_zero give 0. Every such element underflows in the nearest modes.
  const std::vector<float> tiny{1e-30f, -1e-30f, 1e-40f, -1e-40f, 0x1p-149f};
  for (const auto& c : mx_cases) {
    std::vector<float> x(64, 0.0f);  // two blocks: one on its own path, one after it
    for (const std::size_t b : {std::size_t{0}, std::size_t{32}}) {
      x[b] = 1e30f;
      std::copy(tiny.begin(), tiny.end(), x.begin() + static_cast<std::ptrdiff_t>(b + 1));
    }
    const double smallest = c.ref->values[1] * std::ldexp(1.0, ref_scale_exponent(*c.ref, 1e30, mf::scale_rule::floor));
    for (const auto mode : {mf::rounding::toward_positive, mf::rounding::toward_negative, mf::rounding::to_odd,
                            mf::rounding::nearest_even, mf::rounding::toward_zero}) {
      INFO(c.name << " mode " << int(mode));
      std::vector<float> y(x.size());
      mf::block_stats st;
      mf::quantize_blocks(x, y, c.f, {.mode = mode}, {}, st);
      for (const std::size_t b : {std::size_t{0}, std::size_t{32}})
        for (std::size_t j = 0; j < tiny.size(); ++j) {
          const float v = tiny[j];
          double want = 0;
          if (mode == mf::rounding::to_odd) want = std::copysign(smallest, v);
          if (mode == mf::rounding::toward_positive && v > 0) want = smallest;
          if (mode == mf::rounding::toward_negative && v < 0) want = -smallest;
          INFO("value " << v);
          CHECK(y[b + 1 + j] == static_cast<float>(want));
        }
      if (mode == mf::rounding::nearest_even) CHECK(st.elements.underflows == 2 * tiny.size());
      // the codes say the same
      std::vector<std::uint8_t> codes(x.size()), scales(2);
      mf::encode_blocks(x, codes, scales, c.f, {.mode = mode});
      std::vector<float> back(x.size());
      mf::decode_blocks(codes, scales, back, c.f);
      CHECK(back == y);
    }
  }
}

TEST_CASE("layouts whose rows x cols wraps past 2^64, empty tensors with many rows, block_size 0", "[block]") {
  std::vector<float> x(16, 1.5f), y(16);
  std::vector<std::uint8_t> codes(16), scales(4);
  const mf::block_layout wraps{(std::size_t{1} << 62) + 4, 4, 1};  // (2^62 + 4) * 4 = 16 mod 2^64
  CHECK_THROWS_WITH(mf::quantize_blocks(x, y, mf::mxfp8_e4m3, {}, wraps), Catch::Contains("does not hold 16 values"));
  CHECK_THROWS_WITH(mf::encode_blocks(x, codes, scales, mf::mxfp8_e4m3, {}, wraps), Catch::Contains("does not hold"));
  CHECK_THROWS_WITH(mf::decode_blocks(codes, scales, y, mf::mxfp8_e4m3, wraps), Catch::Contains("does not hold"));
  CHECK_THROWS_WITH(mf::block_count(16, mf::mxfp8_e4m3, wraps), Catch::Contains("minifloat::block_count"));
  CHECK_THROWS_WITH(mf::block_count(16, mf::mxfp8_e4m3, {4, (std::size_t{1} << 62) + 4, 0}), Catch::Contains("does not hold"));
  CHECK(y == std::vector<float>(16, 0.0f));  // nothing written
  // no values, 2^62 empty rows: nothing to do, at once
  const mf::block_layout empty_rows{std::size_t{1} << 62, 0, 1};
  std::vector<float> none;
  std::vector<std::uint8_t> no_codes;
  mf::quantize_blocks(none, none, mf::mxfp4, {}, empty_rows);
  CHECK(mf::block_count(0, mf::mxfp4, empty_rows) == 0);
  CHECK(mf::encode_blocks(none, no_codes, no_codes, mf::mxfp4, {}, empty_rows) == 1.0f);
  mf::decode_blocks(no_codes, no_codes, std::span<float>(none), mf::mxfp4, empty_rows);
  CHECK_THROWS_WITH(mf::block_count(64, mf::block_format{mf::e2m1, 0}, {}), Catch::Contains("block_size = 0"));
}

TEST_CASE("quantize_blocks refuses spans that overlap without being the same, and names the spans of a bad size",
          "[block]") {
  std::vector<float> buffer(96);
  for (std::size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<float>(i) * 0.37f - 9.0f;
  const std::vector<float> before = buffer;
  const std::span<float> all(buffer);
  CHECK_THROWS_WITH(mf::quantize_blocks(all.subspan(0, 64), all.subspan(32, 64), mf::mxfp4),
                    Catch::Contains("quantize_blocks") && Catch::Contains("overlap"));
  CHECK_THROWS_WITH(mf::quantize_blocks(all.subspan(32, 64), all.subspan(0, 64), mf::mxfp4), Catch::Contains("overlap"));
  CHECK(buffer == before);
  // the same span (in place) and neighbouring spans are fine
  std::vector<float> want(32);
  mf::quantize_blocks(all.subspan(0, 32), want, mf::mxfp4);
  mf::quantize_blocks(all.subspan(0, 32), all.subspan(32, 32), mf::mxfp4);
  CHECK(std::vector<float>(buffer.begin() + 32, buffer.begin() + 64) == want);
  mf::quantize_blocks(all.subspan(0, 32), all.subspan(0, 32), mf::mxfp4);
  CHECK(std::vector<float>(buffer.begin(), buffer.begin() + 32) == want);
  std::vector<float> x(32), shorter(31);
  CHECK_THROWS_WITH(mf::quantize_blocks(x, shorter, mf::mxfp4),
                    Catch::Contains("minifloat::quantize_blocks") && Catch::Contains("out"));
  std::vector<std::uint8_t> codes(31), scales(1);
  CHECK_THROWS_WITH(mf::encode_blocks(x, codes, scales, mf::mxfp4),
                    Catch::Contains("minifloat::encode_blocks") && Catch::Contains("elements"));
  CHECK_THROWS_WITH(mf::decode_blocks(codes, scales, std::span<float>(x), mf::mxfp4),
                    Catch::Contains("minifloat::decode_blocks") && Catch::Contains("elements"));
}

TEST_CASE("NVFP4 scale codes decode with their sign, as E4M3 codes", "[block]") {
  // element code 2 of e2m1 is 1.0; scale codes 0x38 = +1.0 and 0xB8 = -1.0
  const std::vector<std::uint8_t> codes(32, 2), scales{0x38, 0xB8};
  std::vector<float> out(32);
  mf::decode_blocks(codes, scales, std::span<float>(out), mf::nvfp4, {}, 2.0f);
  CHECK(out[0] == 2.0f);
  CHECK(out[16] == -2.0f);
}
