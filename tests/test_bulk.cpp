// The bulk span kernels (quantize, encode, decode) against the scalar functions, bit for bit,
// and their statistics against a hand count.
//
// Oracle: the scalar minifloat::round / encode / decode (themselves pinned to MPFR, F16C and
// AVX512-BF16 by the other test programs), and for the statistics a direct count of the
// definitions in stats.hpp and docs/semantics.md §2 (overflow: |x| >=
// format.overflow_threshold() on the unrounded input, NaN and Inf included; underflow: a finite
// nonzero input whose result is zero).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <minifloat/minifloat.hpp>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "support.hpp"

namespace mf = minifloat;

namespace {

constexpr bool kSanitize = test_support::sanitize;
using test_support::bits_of;
using test_support::to_bits;

const std::size_t kLengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000};
const mf::rounding kModes[] = {mf::rounding::nearest_even,    mf::rounding::nearest_away,
                               mf::rounding::toward_zero,     mf::rounding::stochastic,
                               mf::rounding::toward_positive, mf::rounding::toward_negative,
                               mf::rounding::to_odd};
const mf::overflow kPolicies[] = {mf::overflow::saturate, mf::overflow::infinity};

std::vector<mf::format> formats() {
  std::vector<mf::format> v = {mf::binary16, mf::bfloat16, mf::e4m3, mf::e5m2, mf::fp_4_3_4, mf::fp_5_2_0, mf::fp_6_9_0,
                               mf::binary32, mf::format{4, 0, 7, true, mf::specials::all_finite},
                               mf::format{2, 1, 0, true, mf::specials::nan_only},
                               mf::format{8, 22, 127, true, mf::specials::ieee}};
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) {
    mf::format f = v[i];
    f.subnormals = false;
    v.push_back(f);
  }
  return v;
}

/// A value for f: specials, zeros, source subnormals, ties, the overflow threshold, values far
/// outside the format, and ordinary values of its range.
template <class S>
S any_value(const mf::format& f, std::mt19937_64& rng) {
  using L = std::numeric_limits<S>;
  const S sign = (rng() & 1) ? S(-1) : S(1);
  const int M = f.mantissa_bits;
  switch (rng() % 16) {
    case 0: return std::bit_cast<S>(static_cast<bits_of<S>>(to_bits(L::infinity()) | (rng() % 1000 + 1))) * sign;  // NaN
    case 1: return sign * L::infinity();
    case 2: return sign * S(0);
    case 3: return sign * L::denorm_min() * static_cast<S>(rng() % 1000 + 1);
    case 4: return std::bit_cast<S>(static_cast<bits_of<S>>(rng()));
    case 5: {
      const double t = f.overflow_threshold();
      if (t > static_cast<double>(L::max())) return sign * L::max();
      const S ts = static_cast<S>(t);
      return sign * (rng() % 3 == 0 ? ts : rng() % 2 ? std::nextafter(ts, S(0)) : std::nextafter(ts, L::infinity()));
    }
    case 6: {  // a tie of the format's normal range
      const int e = f.emin() + static_cast<int>(rng() % static_cast<unsigned>(f.emax() - f.emin() + 1));
      const double j = static_cast<double>(rng() % (std::uint64_t{1} << M));
      return sign * static_cast<S>(std::ldexp(1.0 + (j + 0.5) * std::ldexp(1.0, -M), e));
    }
    case 7: return sign * static_cast<S>(f.min_subnormal() * std::ldexp(static_cast<double>(rng() % 4096), -10));
    default: {
      const int lo = std::max(f.emin() - M - 3, L::min_exponent - 1);
      const int e = lo + static_cast<int>(rng() % static_cast<unsigned>(std::min(f.emax() + 2, L::max_exponent - 2) - lo));
      return sign * static_cast<S>(std::ldexp(1.0 + std::ldexp(static_cast<double>(rng() >> 11), -53), e));
    }
  }
}

/// Only zeros and finite values at or above the smallest normal: whole registers take the bulk
/// kernels' single-binade path.
template <class S>
S normal_value(const mf::format& f, std::mt19937_64& rng) {
  const S sign = (rng() & 1) ? S(-1) : S(1);
  if (rng() % 50 == 0) return sign * S(0);
  const int hi = std::min(f.emax() + 1, std::numeric_limits<S>::max_exponent - 2);
  const int e = f.emin() + static_cast<int>(rng() % static_cast<unsigned>(hi - f.emin() + 1));
  return sign * static_cast<S>(std::ldexp(1.0 + std::ldexp(static_cast<double>(rng() >> 11), -53), e));
}

template <class S>
std::vector<S> make_values(const mf::format& f, std::size_t n, bool normal_only, std::mt19937_64& rng) {
  std::vector<S> v(n);
  for (auto& x : v) x = normal_only ? normal_value<S>(f, rng) : any_value<S>(f, rng);
  return v;
}

template <class S>
mf::rounding_stats hand_count(const mf::format& f, const std::vector<S>& in, const std::vector<S>& rounded) {
  mf::rounding_stats st;
  const double threshold = f.overflow_threshold();  // exact in double for these formats
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double a = std::fabs(static_cast<double>(in[i]));
    st.values += 1;
    st.overflows += std::isnan(a) || a >= threshold;
    st.underflows += std::isfinite(a) && a != 0 && rounded[i] == 0;
    st.nans += std::isnan(a);
    st.infinities += std::isinf(a);
  }
  return st;
}

std::string describe(const mf::rounding_stats& s) {
  std::ostringstream o;
  o << "{values " << s.values << ", overflows " << s.overflows << ", underflows " << s.underflows << ", nans " << s.nans
    << ", infinities " << s.infinities << "}";
  return o.str();
}

template <class S>
void bulk_matches_scalar() {
  std::mt19937_64 rng(sizeof(S) * 1000 + 1);
  std::uint64_t spans = 0;
  const auto all = formats();
  for (std::size_t fi = 0; fi < all.size(); fi += kSanitize ? 3 : 1) {
    const mf::format f = all[fi];
    if (!mf::source_problem<S>(f).empty()) continue;
    for (const auto mode : kModes)
      for (const auto pol : kPolicies)
        for (const std::size_t n : kLengths)
          for (const bool normal_only : {false, true}) {
            mf::rounding_options o;
            o.mode = mode;
            o.on_overflow = pol;
            o.seed = rng();
            o.index = rng() % 100000;
            o.flush = rng() % 2 ? mf::flush_mode::onto_values : mf::flush_mode::after_rounding;
            if (mode == mf::rounding::stochastic && rng() % 2 == 0)
              o.random_bits = static_cast<int>(rng() % (sizeof(S) * 8 + 1));  // 0 (whole word) .. width
            const std::vector<S> in = make_values<S>(f, n, normal_only, rng);
            std::vector<S> want(n);
            for (std::size_t i = 0; i < n; ++i) {
              mf::rounding_options oi = o;
              oi.index = o.index + i;
              want[i] = mf::round(in[i], f, oi);
            }
            INFO((sizeof(S) == 4 ? "float " : "double ") << mf::to_string(f) << " mode " << static_cast<int>(mode)
                                                         << " policy " << static_cast<int>(pol) << " flush "
                                                         << static_cast<int>(o.flush) << " n " << n
                                                         << (normal_only ? " normal-range values" : " mixed values"));
            auto same = [&](const std::vector<S>& got) {
              std::size_t bad = 0;
              for (std::size_t i = 0; i < n; ++i) bad += to_bits(got[i]) != to_bits(want[i]);
              return bad;
            };
            // Out of place, plain overload (output padded to catch writes past the span).
            std::vector<S> out(n + 3, S(7));
            mf::quantize(std::span<const S>(in), std::span<S>(out.data(), n), f, o);
            CHECK(same(out) == 0);
            CHECK((out[n] == S(7) && out[n + 1] == S(7) && out[n + 2] == S(7)));
            // Out of place, counting overload: the same values, and the hand count.
            std::vector<S> counted(n);
            mf::rounding_stats st;
            mf::quantize(std::span<const S>(in), std::span<S>(counted), f, o, st);
            CHECK(same(counted) == 0);
            const mf::rounding_stats expected = hand_count(f, in, want);
            INFO("stats " << describe(st) << " expected " << describe(expected));
            CHECK(st == expected);
            // In place, both overloads.
            std::vector<S> inplace = in;
            mf::quantize(std::span<S>(inplace), f, o);
            CHECK(same(inplace) == 0);
            std::vector<S> inplace_counted = in;
            mf::rounding_stats st2;
            mf::quantize(std::span<S>(inplace_counted), f, o, st2);
            CHECK(same(inplace_counted) == 0);
            CHECK(st2 == expected);
            // Through a prebuilt rounder, whose first index is options.index.
            std::vector<S> via_rounder(n);
            mf::quantize(std::span<const S>(in), std::span<S>(via_rounder), mf::rounder<S>(f, o));
            CHECK(same(via_rounder) == 0);
            ++spans;
          }
  }
  CHECK(spans > (kSanitize ? 300u : 1500u));
}

}  // namespace

TEST_CASE("bulk quantize agrees bit for bit with scalar round for every mode, format and policy (float)",
          "[bulk][quantize]") {
  bulk_matches_scalar<float>();
}

TEST_CASE("bulk quantize agrees bit for bit with scalar round for every mode, format and policy (double)",
          "[bulk][quantize]") {
  bulk_matches_scalar<double>();
}

TEST_CASE("bulk statistics add to what the stats object already holds", "[bulk][stats]") {
  std::vector<float> v = {1.0f, 1e9f, std::numeric_limits<float>::quiet_NaN(), 1e-30f};
  mf::rounding_stats st;
  mf::quantize(std::span<const float>(v), std::span<float>(v), mf::binary16, {}, st);
  mf::quantize(std::span<const float>(v), std::span<float>(v), mf::binary16, {}, st);
  // Second pass sees 1, Inf (1e9 overflowed), NaN, 0.
  CHECK(st.values == 8);
  CHECK(st.overflows == 4);
  CHECK(st.underflows == 1);
  CHECK(st.nans == 2);
  CHECK(st.infinities == 1);
  CHECK(st.overflow_ratio() == 0.5);
  CHECK(st.underflow_ratio() == 0.125);
  CHECK(mf::rounding_stats{}.overflow_ratio() == 0.0);
}

TEST_CASE("bulk statistics count the §2 overflow threshold exactly at its edge", "[bulk][stats]") {
  // fp(4,3,4): threshold 31. fp(5,2,0): 122880. binary16: 65520. All exact in float.
  for (const auto& f : {mf::fp_4_3_4, mf::fp_5_2_0, mf::binary16, mf::e4m3}) {
    const float t = static_cast<float>(f.overflow_threshold());
    std::vector<float> v;
    for (int i = 0; i < 40; ++i) {  // more than one register, edge values in every lane position
      v.push_back(t);
      v.push_back(std::nextafter(t, 0.0f));
      v.push_back(-t);
      v.push_back(-std::nextafter(t, 0.0f));
      v.push_back(static_cast<float>(f.max_finite()));
    }
    for (auto mode : kModes) {
      mf::rounding_stats st;
      std::vector<float> out(v.size());
      mf::rounding_options o;
      o.mode = mode;
      mf::quantize(std::span<const float>(v), std::span<float>(out), f, o, st);
      INFO(mf::to_string(f) << " mode " << static_cast<int>(mode));
      CHECK(st.values == 200);
      CHECK(st.overflows == 80);
      CHECK(st.underflows == 0);
    }
  }
}

TEST_CASE("bulk encode and decode agree with the scalar encode and decode", "[bulk][encode]") {
  std::mt19937_64 rng(99);
  for (const auto& f : formats()) {
    if (f.bit_width() > 32) continue;
    for (auto mode : kModes)
      for (auto pol : kPolicies)
        for (std::size_t n : kLengths) {
          mf::rounding_options o;
          o.mode = mode;
          o.on_overflow = pol;
          o.seed = 5;
          o.index = 1000;
          std::vector<float> in = make_values<float>(f, n, false, rng);
          if (f.encoding == mf::specials::all_finite)  // NaN / Inf results have no code here
            for (auto& x : in)
              if (!std::isfinite(mf::round(x, f, o)) || !std::isfinite(x)) x = 1.0f;
          if (f.encoding == mf::specials::all_finite && pol == mf::overflow::infinity && mode != mf::rounding::toward_zero)
            for (auto& x : in)
              if (std::fabs(static_cast<double>(x)) >= f.max_finite()) x = 0.5f;  // stochastic may still go up
          std::vector<std::uint32_t> codes(n);
          mf::encode(std::span<const float>(in), std::span<std::uint32_t>(codes), f, o);
          std::vector<float> back(n);
          mf::decode(std::span<const std::uint32_t>(codes), std::span<float>(back), f);
          std::vector<double> back_d(n);
          mf::decode(std::span<const std::uint32_t>(codes), std::span<double>(back_d), f);
          std::size_t bad_code = 0, bad_decode = 0;
          for (std::size_t i = 0; i < n; ++i) {
            mf::rounding_options oi = o;
            oi.index = o.index + i;
            bad_code += codes[i] != mf::encode(in[i], f, oi);
            const float d = mf::decode<float>(codes[i], f);
            const double dd = mf::decode<double>(codes[i], f);
            bad_decode += std::isnan(d) ? !(std::isnan(back[i]) && std::isnan(back_d[i]))
                                        : (to_bits(d) != to_bits(back[i]) || to_bits(dd) != to_bits(back_d[i]));
          }
          INFO(mf::to_string(f) << " mode " << static_cast<int>(mode) << " n " << n);
          CHECK(bad_code == 0);
          CHECK(bad_decode == 0);
        }
  }
}

TEST_CASE("bulk kernels reject spans of different sizes and code types too narrow for the format", "[bulk][errors]") {
  std::vector<float> a(16), b(17);
  std::vector<double> ad(5), bd(4);
  std::vector<std::uint16_t> c(16), c17(17);
  std::vector<std::uint8_t> c8(16);
  CHECK_THROWS_AS(mf::quantize(std::span<const float>(a), std::span<float>(b), mf::binary16), std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize(std::span<const double>(ad), std::span<double>(bd), mf::binary16), std::invalid_argument);
  mf::rounding_stats st;
  CHECK_THROWS_AS(mf::quantize(std::span<const float>(a), std::span<float>(b), mf::binary16, {}, st),
                  std::invalid_argument);
  CHECK_THROWS_AS(mf::quantize(std::span<const float>(b), std::span<float>(a), mf::rounder<float>(mf::e4m3)),
                  std::invalid_argument);
  CHECK_THROWS_AS(mf::encode(std::span<const float>(a), std::span<std::uint16_t>(c17), mf::binary16),
                  std::invalid_argument);
  CHECK_THROWS_AS(mf::decode(std::span<const std::uint16_t>(c17), std::span<float>(a), mf::binary16),
                  std::invalid_argument);
  CHECK_THROWS_AS(mf::encode(std::span<const float>(a), std::span<std::uint8_t>(c8), mf::binary16),
                  std::invalid_argument);
  CHECK(st.values == 0);  // nothing was counted by the rejected call
  CHECK_NOTHROW(mf::encode(std::span<const float>(a), std::span<std::uint8_t>(c8), mf::e4m3));
  CHECK_NOTHROW(mf::encode(std::span<const float>(a), std::span<std::uint16_t>(c), mf::binary16));
}

namespace {

template <mf::rounding Mode, mf::detail::lane_path Path>
std::uint32_t round_path(const mf::rounding_plan<float>& plan, std::uint32_t u, std::uint32_t r) {
  return mf::detail::round_bits<Mode, Path>(plan, u, r);
}

/// round_bits through `Path` and through lane_path::any, for the plan's mode.
template <mf::detail::lane_path Path>
std::pair<std::uint32_t, std::uint32_t> both_paths(const mf::rounding_plan<float>& plan, std::uint32_t u,
                                                   std::uint32_t r) {
  using mf::detail::lane_path;
  switch (plan.mode) {
    case mf::rounding::nearest_even:
      return {round_path<mf::rounding::nearest_even, Path>(plan, u, r),
              round_path<mf::rounding::nearest_even, lane_path::any>(plan, u, r)};
    case mf::rounding::nearest_away:
      return {round_path<mf::rounding::nearest_away, Path>(plan, u, r),
              round_path<mf::rounding::nearest_away, lane_path::any>(plan, u, r)};
    case mf::rounding::toward_zero:
      return {round_path<mf::rounding::toward_zero, Path>(plan, u, r),
              round_path<mf::rounding::toward_zero, lane_path::any>(plan, u, r)};
    case mf::rounding::stochastic:
      return {round_path<mf::rounding::stochastic, Path>(plan, u, r),
              round_path<mf::rounding::stochastic, lane_path::any>(plan, u, r)};
    case mf::rounding::toward_positive:
      return {round_path<mf::rounding::toward_positive, Path>(plan, u, r),
              round_path<mf::rounding::toward_positive, lane_path::any>(plan, u, r)};
    case mf::rounding::toward_negative:
      return {round_path<mf::rounding::toward_negative, Path>(plan, u, r),
              round_path<mf::rounding::toward_negative, lane_path::any>(plan, u, r)};
    case mf::rounding::to_odd:
      return {round_path<mf::rounding::to_odd, Path>(plan, u, r),
              round_path<mf::rounding::to_odd, lane_path::any>(plan, u, r)};
  }
  return {0, 1};
}

/// Checks that round_bits<Mode, Path> equals round_bits<Mode, any> on inputs drawn by `draw`
/// (which returns false for inputs outside the path's documented precondition).
template <mf::detail::lane_path Path, class Draw>
void path_agrees_with_general(bool need_mantissa_bit, Draw&& draw) {
  std::mt19937_64 rng(17);
  std::uint64_t checked = 0, differ = 0;
  std::string first;
  for (const auto& f : formats()) {
    if (need_mantissa_bit && f.mantissa_bits < 1) continue;
    for (const auto pol : kPolicies)
      for (int R : {0, 5, 32}) {
        mf::rounding_options o;
        o.on_overflow = pol;
        o.random_bits = R;
        for (const auto mode : kModes) {
          o.mode = mode;
          const auto plan = mf::make_plan<float>(f, o);
          for (int i = 0; i < (kSanitize ? 200 : 3000); ++i) {
            float x;
            if (!draw(f, rng, x)) continue;
            const auto u = to_bits(x), r = static_cast<std::uint32_t>(rng());
            const auto [a, b] = both_paths<Path>(plan, u, r);
            ++checked;
            if (a != b && differ++ < 5) {
              std::ostringstream s;
              s << "\n  " << mf::to_string(f) << " mode " << static_cast<int>(mode) << std::hex << " u=0x" << u
                << " r=0x" << r << " narrowed path=0x" << a << " general=0x" << b;
              first += s.str();
            }
          }
        }
      }
  }
  INFO(checked << " checked, " << differ << " differ" << first);
  CHECK(differ == 0);
  CHECK(checked > 10000);
}

}  // namespace

TEST_CASE("the single-binade fast path gives the general path's bits on normal-range inputs", "[bulk][core]") {
  // round.hpp: lane_path::plain gives lane_path::any's bits when every input is zero or at least
  // the smallest normal and below the overflow threshold, and the format has a mantissa bit.
  path_agrees_with_general<mf::detail::lane_path::plain>(true, [](const mf::format& f, std::mt19937_64& rng, float& x) {
    x = normal_value<float>(f, rng);
    return std::fabs(static_cast<double>(x)) < f.overflow_threshold();
  });
}

TEST_CASE("the finite-input path gives the general path's bits on every finite input", "[bulk][core]") {
  // round.hpp: lane_path::finite gives lane_path::any's bits when no input is NaN or Inf —
  // zeros, source subnormals, the format's subnormal range, ties and overflows included.
  path_agrees_with_general<mf::detail::lane_path::finite>(false, [](const mf::format& f, std::mt19937_64& rng, float& x) {
    x = any_value<float>(f, rng);
    return static_cast<bool>(std::isfinite(x));
  });
}

TEST_CASE("the stochastic decisions a split takes without rounding are where the core's stochastic rounding moves "
          "away from zero, below the format's top binade",
          "[bulk][core][stochastic]") {
  // round.hpp: plain_stochastic_carries is whether the plain path's addend carries into the kept
  // bits; bulk.hpp: stochastic_float_decide's mask is where the float form rounds up. Below the
  // top binade no rounding saturates, so both are exactly the lanes whose result (the general
  // path's) lies farther from zero than the input: the flags the split stores (storage/split.hpp).
  std::mt19937_64 rng(29);
  std::uint64_t plain_checked = 0, float_checked = 0, differ = 0;
  std::string first;
  const auto farther = [](std::uint32_t u, std::uint32_t result) { return (result & 0x7fffffffU) > (u & 0x7fffffffU); };
  const auto general = [](const mf::rounding_plan<float>& plan, std::uint32_t u, std::uint32_t r) {
    return mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::any>(plan, u, r);
  };
  const auto record = [&](const mf::format& f, const char* which, std::uint32_t u, std::uint32_t r) {
    if (differ++ >= 5) return;
    std::ostringstream s;
    s << "\n  " << mf::to_string(f) << " " << which << std::hex << " u=0x" << u << " r=0x" << r;
    first += s.str();
  };
  const int n = kSanitize ? 160 : 4000;
  for (const auto& f : formats()) {
    if (f.mantissa_bits < 1) continue;  // no plain path
    const double top = std::ldexp(1.0, f.emax());  // the top binade's first value
    for (const int R : {0, 5, 32}) {
      mf::rounding_options o;
      o.mode = mf::rounding::stochastic;
      o.random_bits = R;
      const auto plan = mf::make_plan<float>(f, o);
      for (int i = 0; i < n; ++i) {
        const float x = normal_value<float>(f, rng);
        if (!(std::fabs(static_cast<double>(x)) < top)) continue;
        const std::uint32_t u = to_bits(x), r = static_cast<std::uint32_t>(rng());
        ++plain_checked;
        if (mf::detail::plain_stochastic_carries(plan, u, r) != farther(u, general(plan, u, r))) record(f, "plain", u, r);
      }
#if defined(__AVX512F__)
      if (!mf::detail::stochastic_float_applies(plan)) continue;
      using V = mf::detail::simd_t<std::uint32_t>;
      for (int i = 0; i < n / 16; ++i) {
        std::uint32_t u[16], r[16];
        for (int j = 0; j < 16; ++j) {
          float x;
          do x = any_value<float>(f, rng);
          while (!(std::isfinite(x) && std::fabs(static_cast<double>(x)) < top));
          u[j] = to_bits(x) & 0x7fffffffU;  // the magnitudes it takes
          r[j] = static_cast<std::uint32_t>(rng());
        }
        V uv, rv;
        std::memcpy(&uv, u, sizeof uv);
        std::memcpy(&rv, r, sizeof rv);
        const __mmask16 up = mf::detail::stochastic_float_decide(plan, uv, rv).up;
        for (int j = 0; j < 16; ++j) {
          ++float_checked;
          if (static_cast<bool>((up >> j) & 1) != farther(u[j], general(plan, u[j], r[j]))) record(f, "float form", u[j], r[j]);
        }
      }
#endif
    }
  }
  INFO(plain_checked << " plain and " << float_checked << " float-form lanes checked, " << differ << " differ" << first);
  CHECK(differ == 0);
  CHECK(plain_checked > (kSanitize ? 1000u : 50000u));
#if defined(__AVX512F__)
  CHECK(float_checked > (kSanitize ? 1000u : 50000u));
#endif
}

namespace {

/// The benchmark data sets (bench_quantize.cpp): N(0,1) and N(0,1)·2^U[-40,40], with every
/// `sparse`-th value replaced by a special (NaN, Inf, a source subnormal, a huge value, zero,
/// the format's overflow threshold or a tie), so that registers take every path of the kernels.
template <class S>
std::vector<S> benchmark_like(const mf::format& f, std::size_t n, bool wide, std::size_t sparse, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<S> v(n);
  for (auto& x : v) {
    x = static_cast<S>(wide ? std::ldexp(normal(rng), exponent(rng)) : normal(rng));
    if (sparse != 0 && rng() % sparse == 0) x = any_value<S>(f, rng);
  }
  return v;
}

template <class S>
void bulk_matches_scalar_on_benchmark_data() {
  std::mt19937_64 rng(sizeof(S) * 77 + 5);
  const std::size_t n = kSanitize ? 2000 : 20000;
  const mf::rounding modes[] = {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero,
                                mf::rounding::stochastic};
  std::vector<mf::format> all = formats();
  for (const auto& f : {mf::e4m3fnuz, mf::e5m2fnuz, mf::e8m0, mf::e2m3, mf::e3m2, mf::e2m1, mf::int8_mx})
    if (mf::source_problem<S>(f).empty()) all.push_back(f);
  std::size_t spans = 0;
  for (const auto& f : all)
    for (const auto mode : modes)
      for (const auto pol : kPolicies)
        for (const bool wide : {false, true})
          for (const std::size_t sparse : {std::size_t{0}, std::size_t{300}, std::size_t{5000}}) {
            mf::rounding_options o;
            o.mode = mode;
            o.on_overflow = pol;
            o.seed = rng();
            o.index = rng() % 1000;
            const std::vector<S> in = benchmark_like<S>(f, n, wide, sparse, rng);
            std::vector<S> want(n);
            mf::rounding_stats want_stats;
            for (std::size_t i = 0; i < n; ++i) {
              mf::rounding_options oi = o;
              oi.index = o.index + i;
              want[i] = mf::round(in[i], f, oi, want_stats);
            }
            std::vector<S> got(n), counted(n);
            mf::rounding_stats st;
            mf::quantize(std::span<const S>(in), std::span<S>(got), f, o);
            mf::quantize(std::span<const S>(in), std::span<S>(counted), f, o, st);
            std::size_t bad = 0, bad_counted = 0;
            for (std::size_t i = 0; i < n; ++i) {
              bad += to_bits(got[i]) != to_bits(want[i]);
              bad_counted += to_bits(counted[i]) != to_bits(want[i]);
            }
            INFO((sizeof(S) == 4 ? "float " : "double ") << mf::to_string(f) << " mode " << static_cast<int>(mode)
                                                         << " policy " << static_cast<int>(pol)
                                                         << (wide ? " wide" : " normal") << " sparse " << sparse);
            CHECK(bad == 0);
            CHECK(bad_counted == 0);
            CHECK(st == want_stats);
            ++spans;
          }
  CHECK(spans == all.size() * 4 * 2 * 2 * 3);
}

}  // namespace

TEST_CASE("bulk quantize agrees bit for bit with scalar round on both benchmark data sets, specials sprinkled in",
          "[bulk][quantize]") {
  // Wide data sends registers down the finite path (and, for nearest-even and toward-zero from
  // float with AVX-512, its float-arithmetic form); the sprinkled specials send some down the
  // general path; N(0,1) mostly takes the single-binade path.
  bulk_matches_scalar_on_benchmark_data<float>();
  bulk_matches_scalar_on_benchmark_data<double>();
}

namespace {

/// One lane that sends a register of binary16 / bfloat16 values off the hardware conversion
/// (bulk.hpp's hardware_form) or that the conversion handles differently from the core unless
/// corrected: NaN payloads (the hardware truncates them), Inf, finite overflows (Inf in the
/// hardware, max under saturate), float subnormals (vcvtneps2bf16 flushes them), values whose
/// roundings are subnormals, ties, signed zeros.
float odd_lane(const mf::format& f, std::size_t kind, std::mt19937_64& rng) {
  const float sign = (rng() & 1) ? -1.0f : 1.0f;
  const auto threshold = static_cast<float>(f.overflow_threshold());
  switch (kind % 12) {
    case 0: return std::bit_cast<float>(0x7f800000U | static_cast<std::uint32_t>(rng() % 0x7fffffU + 1)) * sign;
    case 1: return sign * std::numeric_limits<float>::infinity();
    case 2: return sign * threshold;                                       // the first value that overflows
    case 3: return sign * std::nextafter(threshold, 0.0f);                 // the last that does not
    case 4: return sign * std::numeric_limits<float>::max();
    case 5: return sign * std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 100000 + 1);
    case 6: return sign * static_cast<float>(f.min_subnormal() * std::ldexp(static_cast<double>(rng() % 4096), -9));
    case 7: return sign * static_cast<float>(std::ldexp(1.0, f.emin()));   // the smallest normal
    case 8: return sign * 0.0f;
    case 9: {  // a tie between two of the format's values
      const double j = static_cast<double>(rng() % (std::uint64_t{1} << f.mantissa_bits));
      return sign * static_cast<float>(std::ldexp(1.0 + (j + 0.5) * std::ldexp(1.0, -f.mantissa_bits), static_cast<int>(rng() % 8)));
    }
    case 10: return sign * std::nextafter(static_cast<float>(std::ldexp(1.0, f.emin())), 0.0f);
    default: return sign * static_cast<float>(f.max_finite());
  }
}

}  // namespace

TEST_CASE("bulk quantize to binary16 and bfloat16 gives the core's bits where hardware conversions serve it",
          "[bulk][quantize][hardware]") {
  // Registers of 16 ordinary values, each with 0, 1 or 3 lanes from odd_lane: whole registers
  // take F16C (binary16 nearest-even and toward-zero) or vcvtneps2bf16 (bfloat16 nearest-even)
  // where the compiler enables them; the odd lanes check the fall-back to the core and the
  // saturating correction. The other modes and the lengths that leave a tail go through the
  // same kernel and must agree as well.
  std::mt19937_64 rng(1612);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  const std::size_t n = (kSanitize ? 64 : 1024) * 16 + 5;
  std::size_t spans = 0;
  for (const mf::format& f : {mf::binary16, mf::bfloat16})
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::toward_zero, mf::rounding::nearest_away})
      for (const auto pol : kPolicies) {
        std::vector<float> in(n);
        for (std::size_t i = 0; i < n; ++i) in[i] = std::ldexp(normal(rng), exponent(rng));
        for (std::size_t reg = 0; reg * 16 < n; ++reg) {
          const std::size_t odd = reg % 4 == 0 ? 0 : reg % 4 == 3 ? 3 : 1;
          for (std::size_t k = 0; k < odd; ++k)
            in[std::min(n - 1, reg * 16 + rng() % 16)] = odd_lane(f, reg / 4 + k, rng);
        }
        const mf::rounding_options o{mode, pol};
        std::vector<float> want(n);
        mf::rounding_stats want_stats;
        for (std::size_t i = 0; i < n; ++i) want[i] = mf::round(in[i], f, o, want_stats);
        std::vector<float> got(n), counted(n);
        mf::rounding_stats st;
        mf::quantize(std::span<const float>(in), std::span<float>(got), f, o);
        mf::quantize(std::span<const float>(in), std::span<float>(counted), f, o, st);
        std::size_t bad = 0, bad_counted = 0;
        std::string first;
        for (std::size_t i = 0; i < n; ++i) {
          bad_counted += to_bits(counted[i]) != to_bits(want[i]);
          if (to_bits(got[i]) != to_bits(want[i]) && bad++ < 5) {
            std::ostringstream s;
            s << std::hex << "\n  input 0x" << to_bits(in[i]) << ": bulk 0x" << to_bits(got[i]) << ", core 0x"
              << to_bits(want[i]);
            first += s.str();
          }
        }
        INFO(mf::to_string(f) << " mode " << static_cast<int>(mode) << " policy " << static_cast<int>(pol) << first);
        CHECK(bad == 0);
        CHECK(bad_counted == 0);
        INFO("stats " << describe(st) << " expected " << describe(want_stats));
        CHECK(st == want_stats);
        CHECK(want_stats.nans > 0);
        CHECK(want_stats.overflows > want_stats.nans + want_stats.infinities);  // finite overflows too
        ++spans;
      }
  CHECK(spans == 12);
}

#if defined(__SSE__)
TEST_CASE("bulk quantize keeps the core's bits for float subnormals when MXCSR has denormals-are-zero set",
          "[bulk][quantize][hardware]") {
  // Under DAZ the vector unit reads float subnormals as zero: vcvtneps2bf16 flushes them (the
  // kernel must send their registers to the core, which rounds them to bfloat16 subnormals), and
  // vfpclassps calls them zero, so the bfloat16 register test may not rely on it then. Registers
  // of ordinary values, one in two with a float subnormal lane; every format and mode of the
  // register paths, compared with the core computed with DAZ clear.
  std::mt19937_64 rng(4417);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = (kSanitize ? 32 : 512) * 16;
  std::vector<float> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = normal(rng);
  for (std::size_t reg = 0; reg * 16 < n; reg += 2)
    in[reg * 16 + rng() % 16] = std::bit_cast<float>(static_cast<std::uint32_t>(((rng() & 1) << 31) | (1 + rng() % 0x7fffff)));
  std::size_t spans = 0;
  for (const mf::format& f : {mf::bfloat16, mf::binary16, mf::e4m3, mf::e5m2})
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::toward_zero, mf::rounding::nearest_away})
      for (const bool counting : {false, true}) {
        const mf::rounding_options o{mode, mf::overflow::saturate};
        std::vector<float> want(n), got(n);
        for (std::size_t i = 0; i < n; ++i) want[i] = mf::round(in[i], f, o);
        const unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x40U);  // DAZ
        mf::rounding_stats st;
        if (counting) mf::quantize(std::span<const float>(in), std::span<float>(got), f, o, st);
        else mf::quantize(std::span<const float>(in), std::span<float>(got), f, o);
        _mm_setcsr(csr);
        std::size_t bad = 0, subnormal_results = 0;
        for (std::size_t i = 0; i < n; ++i) {
          bad += to_bits(got[i]) != to_bits(want[i]);
          subnormal_results += std::fpclassify(want[i]) == FP_SUBNORMAL;
        }
        INFO(mf::to_string(f) << " mode " << static_cast<int>(mode) << (counting ? " counting" : ""));
        CHECK(bad == 0);
        if (f == mf::bfloat16) CHECK(subnormal_results > 0);
        ++spans;
      }
  CHECK(spans == 24);
}
#endif

TEST_CASE("bulk counting finds underflows and overflows exactly at their boundaries", "[bulk][stats]") {
  // The float-arithmetic and hardware paths count underflows from the input alone, against the
  // first magnitude whose rounding is nonzero (bulk.hpp's first_nonzero_magnitude): inputs a few
  // float ulps either side of every candidate boundary (half the smallest subnormal, the
  // smallest subnormal, the smallest normal less half that, the smallest normal) and of the
  // overflow threshold, both signs, with and without subnormals and flushing.
  std::size_t spans = 0;
  for (mf::format f : {mf::binary16, mf::bfloat16, mf::e4m3, mf::e5m2, mf::fp_4_3_4}) {
    for (const bool subnormals : {true, false}) {
      f.subnormals = subnormals;
      const double q = f.min_subnormal();
      std::vector<float> in;
      for (const double edge : {q / 2, q, f.min_normal() - q / 2, f.min_normal(), f.overflow_threshold()}) {
        const auto e = static_cast<float>(edge);
        if (!std::isfinite(e) || static_cast<double>(e) != edge) continue;  // not a float
        for (int d = -3; d <= 3; ++d) {
          const float x = std::bit_cast<float>(static_cast<std::uint32_t>(static_cast<std::int64_t>(to_bits(e)) + d));
          in.push_back(x);
          in.push_back(-x);
        }
      }
      while (in.size() % 16 != 0) in.push_back(1.0f);
      for (const auto mode : {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero})
        for (const auto pol : kPolicies)
          for (const auto flush : {mf::flush_mode::after_rounding, mf::flush_mode::onto_values}) {
            const mf::rounding_options o{mode, pol, 0, 0, 0, flush};
            std::vector<float> want(in.size()), got(in.size());
            mf::rounding_stats want_stats, st;
            for (std::size_t i = 0; i < in.size(); ++i) want[i] = mf::round(in[i], f, o, want_stats);
            mf::quantize(std::span<const float>(in), std::span<float>(got), f, o, st);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < in.size(); ++i) bad += to_bits(got[i]) != to_bits(want[i]);
            INFO(mf::to_string(f) << " mode " << static_cast<int>(mode) << " policy " << static_cast<int>(pol)
                                  << " flush " << static_cast<int>(flush) << " stats " << describe(st) << " expected "
                                  << describe(want_stats));
            CHECK(bad == 0);
            CHECK(st == want_stats);
            CHECK(want_stats.underflows > 0);
            ++spans;
          }
    }
  }
  CHECK(spans == 5 * 2 * 3 * 2 * 2);
}

namespace {

/// N(0,1) values scaled by 2^-40..2^40 with NaN, Inf and float subnormals sprinkled in: registers
/// for every path of every backend.
std::vector<float> backend_data(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(normal(rng), exponent(rng));
  for (std::size_t i = 0; i < n; i += 97) {
    const float special[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::denorm_min() * 77.0f, -0.0f};
    v[i] = special[(i / 97) % 4];
  }
  return v;
}

std::vector<std::uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  std::transform(v.begin(), v.end(), b.begin(), [](float x) { return to_bits(x); });
  return b;
}

mf::rounding_options with_backend(mf::rounding mode, mf::backend_policy b) {
  mf::rounding_options o{mode, mf::overflow::saturate, 0, 42};
  o.backend = b;
  return o;
}

}  // namespace

TEST_CASE("the backend switch changes the chosen backend: a policy, or MINIFLOAT_REFERENCE_CORE in the environment",
          "[bulk][backend]") {
  using mf::detail::bulk_backend;
  const auto chosen = [](const mf::format& f, mf::rounding mode, mf::backend_policy b) {
    return mf::detail::choose_bulk_backend(mf::make_plan<float>(f, with_backend(mode, b)));
  };
  for (const mf::format& f : {mf::e4m3, mf::e5m2, mf::binary16, mf::bfloat16, mf::e2m1, mf::fp_4_3_4})
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero,
                            mf::rounding::stochastic, mf::rounding::to_odd})
      CHECK(chosen(f, mode, mf::backend_policy::reference_core) == bulk_backend::reference_core);
  // The backends this build and CPU have (the project builds with -march=native).
  bulk_backend e4m3_nearest = bulk_backend::reference_core, e4m3_stochastic = bulk_backend::reference_core,
               binary16_nearest = bulk_backend::reference_core;
#if defined(__AVX512F__)
  e4m3_nearest = bulk_backend::float_arithmetic;
  e4m3_stochastic = bulk_backend::stochastic_float;
  binary16_nearest = bulk_backend::float_arithmetic;
#if defined(__AVX512DQ__) && defined(__F16C__)
  binary16_nearest = bulk_backend::f16c_conversion;
#endif
#endif
  CHECK(chosen(mf::e4m3, mf::rounding::nearest_even, mf::backend_policy::fastest) == e4m3_nearest);
  CHECK(chosen(mf::e4m3, mf::rounding::stochastic, mf::backend_policy::fastest) == e4m3_stochastic);
  CHECK(chosen(mf::binary16, mf::rounding::nearest_even, mf::backend_policy::fastest) == binary16_nearest);
  // The environment's switch: the ctest entries *_reference_core run this program with
  // MINIFLOAT_REFERENCE_CORE=1, the plain entries without it.
  const char* env = std::getenv("MINIFLOAT_REFERENCE_CORE");
  const bool forced = env != nullptr && std::string(env) != "" && std::string(env) != "0";
  INFO("MINIFLOAT_REFERENCE_CORE " << (env ? env : "(unset)"));
  CHECK(chosen(mf::e4m3, mf::rounding::nearest_even, mf::backend_policy::from_environment) ==
        (forced ? bulk_backend::reference_core : e4m3_nearest));
  CHECK(chosen(mf::e4m3, mf::rounding::stochastic, mf::backend_policy::from_environment) ==
        (forced ? bulk_backend::reference_core : e4m3_stochastic));
}

TEST_CASE("every backend gives the reference core's bits and counts: quantize, encode and block kernels",
          "[bulk][backend]") {
  const std::size_t n = (kSanitize ? 256 : 4096) * 16 + 11;
  const std::vector<float> in = backend_data(n, 2718);
  for (const mf::format& f : {mf::e4m3, mf::e5m2, mf::binary16, mf::bfloat16, mf::e2m1, mf::fp_4_3_4})
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero,
                            mf::rounding::stochastic, mf::rounding::toward_positive, mf::rounding::to_odd}) {
      INFO(mf::to_string(f) << " mode " << static_cast<int>(mode));
      std::vector<float> fast(n), reference(n);
      mf::rounding_stats fast_stats, reference_stats;
      mf::quantize(std::span<const float>(in), std::span<float>(fast), f,
                   with_backend(mode, mf::backend_policy::fastest), fast_stats);
      mf::quantize(std::span<const float>(in), std::span<float>(reference), f,
                   with_backend(mode, mf::backend_policy::reference_core), reference_stats);
      CHECK(float_bits(fast) == float_bits(reference));
      CHECK(fast_stats == reference_stats);
      if (f.encoding == mf::specials::all_finite) continue;  // NaN has no code there
      std::vector<std::uint16_t> fast_codes(n), reference_codes(n);
      mf::encode(std::span<const float>(in), std::span<std::uint16_t>(fast_codes), f,
                 with_backend(mode, mf::backend_policy::fastest));
      mf::encode(std::span<const float>(in), std::span<std::uint16_t>(reference_codes), f,
                 with_backend(mode, mf::backend_policy::reference_core));
      CHECK(fast_codes == reference_codes);
    }
  for (const mf::block_format& f : {mf::mxfp8_e4m3, mf::mxfp4, mf::nvfp4})
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::stochastic}) {
      INFO(mf::to_string(f) << " mode " << static_cast<int>(mode));
      std::vector<float> fast(n - 11), reference(n - 11);
      const std::span<const float> values(in.data(), n - 11);
      mf::block_stats fast_stats, reference_stats;
      mf::block_options o{mode};
      o.seed = 7;
      o.backend = mf::backend_policy::fastest;
      mf::quantize_blocks(values, fast, f, o, {}, fast_stats);
      o.backend = mf::backend_policy::reference_core;
      mf::quantize_blocks(values, reference, f, o, {}, reference_stats);
      CHECK(float_bits(fast) == float_bits(reference));
      CHECK(fast_stats == reference_stats);
    }
}
