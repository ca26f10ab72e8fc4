// minifloat/bulk.hpp — rounding, encoding and decoding whole spans.
//
// Every kernel applies the one core of round.hpp to each element. Stochastic rounding draws
// element i's random word from (seed, options.index + i), so a span can be cut into chunks and
// rounded by any number of threads: give each chunk its own subspan and options.index = the
// chunk's offset, and the result is bit-identical to one call over the whole span.
// In-place rounding is allowed (in and out may be the same span).
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <algorithm>
#include <type_traits>

#include "detail/simd.hpp"
#include "encode.hpp"
#include "round.hpp"
#include "stats.hpp"

namespace minifloat {

namespace detail {
inline void check_same_size(std::size_t in, std::size_t out) {
  if (in != out) throw std::invalid_argument("minifloat: input and output spans differ in size");
}

/// Random words of stochastic rounding for lanes first..first+lanes-1, identical to
/// counter_rng::bits32 / bits64 of each index.
template <class V>
struct lane_random {
  counter_rng rng;
  std::uint32_t high = 0;
  std::uint64_t key = 0, second_key = 0;
  counter_rng second{};

  explicit lane_random(const counter_rng& r) : rng(r), second{mix64(r.seed ^ 0x5851f42d4c957f2dULL)} { rekey(0); }
  void rekey(std::uint32_t h) {
    high = h;
    key = rng.key(h);
    second_key = second.key(h);
  }
  V operator()(std::uint64_t first) {
    using B = std::remove_cvref_t<decltype(V{}[0])>;
    constexpr std::size_t lanes = sizeof(V) / sizeof(B);
    const auto low = static_cast<std::uint32_t>(first);
    if (low > 0xffffffffU - (lanes - 1)) {  // the lanes straddle two key blocks: draw one by one
      V v{};
      for (std::size_t k = 0; k < lanes; ++k) {
        if constexpr (sizeof(B) == 4) v[k] = rng.bits32(first + k);
        else v[k] = rng.bits64(first + k);
      }
      return v;
    }
    if (static_cast<std::uint32_t>(first >> 32) != high) rekey(static_cast<std::uint32_t>(first >> 32));
    if constexpr (sizeof(B) == 4) {
      return counter_rng::bits32_keyed(low + lane_indices<V>(), key);
    } else {
      using half = simd_with_lanes_of<std::uint32_t, std::uint64_t>;
      const half lows = low + lane_indices<half>();
      const V hi = __builtin_convertvector(counter_rng::bits32_keyed(lows, key), V);
      const V lo = __builtin_convertvector(counter_rng::bits32_keyed(lows, second_key), V);
      return (hi << 32) | lo;
    }
  }
};

/// Counters of one kernel call, kept in SIMD lanes until the end.
template <class V>
struct lane_counts {
  V overflows{}, underflows{}, nans{}, infinities{};
  /// Counts a register that took the full core; without NaN/Inf lanes (`Finite`) only
  /// overflows and underflows can occur.
  template <bool Finite, std::floating_point S>
  void add(const rounding_plan<S>& p, V u, V result, V valid) {
    using src = source_layout<S>;
    const V a = u & src::abs_mask;
    // Comparison masks are all ones (-1) where true: subtracting them counts.
    overflows -= (a >= p.threshold_bits) & valid;
    if constexpr (Finite) {
      underflows -= (a != 0) & ((result & src::abs_mask) == 0) & valid;
    } else {
      underflows -= (a != 0) & (a < src::inf_bits) & ((result & src::abs_mask) == 0) & valid;
      nans -= (a > src::inf_bits) & valid;
      infinities -= (a == src::inf_bits) & valid;
    }
  }
  void flush(rounding_stats& st, std::uint64_t values) const {
    st.values += values;
    st.overflows += sum_lanes(overflows);
    st.underflows += sum_lanes(underflows);
    st.nans += sum_lanes(nans);
    st.infinities += sum_lanes(infinities);
  }
};

/// Rounds one register (and counts it) on the cheapest path its lanes allow: the single-binade
/// shortcut, the full core without NaN/Inf handling, or the full core. Plain lanes lie between
/// the smallest normal and the overflow threshold (or are zero): nothing there is counted.
template <rounding Mode, bool Count, std::floating_point S, class V>
[[gnu::always_inline]] inline V round_lanes(const rounding_plan<S>& p, V u, V random,
                                            [[maybe_unused]] lane_counts<V>& counts, [[maybe_unused]] V valid) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  const V twice = u << 1;  // drops the sign
  const bits normal2 = (p.emin_field << src::mantissa_bits) << 1;
  const bits plain_span2 = (p.threshold_bits << 1) - normal2;
  if (p.plain_path && !any_lane((twice - normal2 >= plain_span2) & (twice != 0))) {
    return round_bits<Mode, lane_path::plain>(p, u, random);
  }
  if (any_lane(twice >= (src::inf_bits << 1))) {
    const V result = round_bits<Mode, lane_path::any>(p, u, random);
    if constexpr (Count) counts.template add<false>(p, u, result, valid);
    return result;
  }
  const V result = round_bits<Mode, lane_path::finite>(p, u, random);
  if constexpr (Count) counts.template add<true>(p, u, result, valid);
  return result;
}

template <rounding Mode, bool Count, std::floating_point S>
[[gnu::flatten]] void quantize_lanes(const S* in, S* out, std::size_t n, const rounder<S>& r, rounding_stats* st) {
  using bits = typename source_layout<S>::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  const rounding_plan<S> p = r.plan();  // a local copy: stores to out cannot alias it
  lane_random<V> draw(r.rng());
  lane_counts<V> counts;
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const V u = load_lanes<V>(in + i);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    store_lanes(out + i, round_lanes<Mode, Count>(p, u, random, counts, ~V{}));
  }
  if (i < n) {  // the tail goes through the same register path, padded with zeros
    const std::size_t m = n - i;
    const V u = load_lanes<V>(in + i, m);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    const V valid = select(lane_indices<V>() < static_cast<bits>(m), ~V{}, V{});
    store_lanes(out + i, round_lanes<Mode, Count>(p, u, random, counts, valid), m);
  }
  if constexpr (Count) counts.flush(*st, n);
}

/// Codes of one register's lanes, narrowed or widened to C and stored (count lanes).
template <class C, class V>
inline void store_codes(C* out, V codes, std::size_t count) {
  using B = std::remove_cvref_t<decltype(codes[0])>;
  using CV = typename vector_of<C, sizeof(V) / sizeof(B) * sizeof(C)>::type;
  const CV narrow = __builtin_convertvector(codes, CV);
  std::memcpy(out, &narrow, count * sizeof(C));
}

/// Rounds and encodes; returns the index of the first value without a code, or in.size().
template <rounding Mode, std::floating_point S, std::unsigned_integral C>
[[gnu::flatten]] std::size_t encode_lanes(std::span<const S> in, std::span<C> out, const rounder<S>& r) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  const rounding_plan<S> p = r.plan();
  const codec_plan<S> c = make_codec_plan<S>(p.fmt);
  const bool all_finite = p.fmt.encoding == specials::all_finite;
  lane_random<V> draw(r.rng());
  lane_counts<V> unused;
  const std::size_t n = in.size();
  // Returns the lane of the first value without a code, or m. Called with m = lanes in the main
  // loop, so its copies have a constant size once inlined.
  const auto step = [&](std::size_t i, std::size_t m) {
    const V u = load_lanes<V>(in.data() + i, m);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    const V rounded = round_lanes<Mode, false>(p, u, random, unused, ~V{});
    const V codes = code_lanes(c, rounded);
    if (all_finite && any_lane((rounded << 1) >= (src::inf_bits << 1))) {
      std::size_t k = 0;
      while (k < m && (rounded[k] << 1) < (src::inf_bits << 1)) ++k;
      store_codes(out.data() + i, codes, k);
      return k;
    }
    store_codes(out.data() + i, codes, m);
    return m;
  };
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    if (const std::size_t k = step(i, lanes); k < lanes) return i + k;
  if (i < n)
    if (const std::size_t k = step(i, n - i); k < n - i) return i + k;
  return n;
}

template <std::floating_point S, std::unsigned_integral C>
[[gnu::flatten]] void decode_lanes(std::span<const C> in, std::span<S> out, const codec_plan<S>& c) {
  using bits = typename source_layout<S>::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  using CV = typename vector_of<C, lanes * sizeof(C)>::type;
  const auto step = [&](std::size_t i, std::size_t m) {
    CV narrow{};  // loaded in place: a function returning a register wider than the ISA's would change ABI
    std::memcpy(&narrow, in.data() + i, m * sizeof(C));
    const V codes = __builtin_convertvector(narrow, V);
    store_lanes(out.data() + i, value_lanes(c, codes, [](V v) { return integer_to_float_bits(v); }), m);
  };
  std::size_t i = 0;
  for (; i + lanes <= in.size(); i += lanes) step(i, lanes);
  if (i < in.size()) step(i, in.size() - i);
}

template <bool Count, std::floating_point S>
void quantize_span(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats* st) {
  check_same_size(in.size(), out.size());
  // Counts are kept in 32-bit (float) lanes: cut very long spans into pieces that cannot overflow them.
  constexpr std::size_t piece = std::size_t{1} << 30;
  for (std::size_t start = 0; start < in.size(); start += piece) {
    const std::size_t n = std::min(piece, in.size() - start);
    const rounder<S> at = r.advanced(start);
    const S* src = in.data() + start;
    S* dst = out.data() + start;
    switch (r.plan().mode) {
      case rounding::nearest_even: quantize_lanes<rounding::nearest_even, Count>(src, dst, n, at, st); break;
      case rounding::nearest_away: quantize_lanes<rounding::nearest_away, Count>(src, dst, n, at, st); break;
      case rounding::toward_zero: quantize_lanes<rounding::toward_zero, Count>(src, dst, n, at, st); break;
      case rounding::stochastic: quantize_lanes<rounding::stochastic, Count>(src, dst, n, at, st); break;
      case rounding::toward_positive: quantize_lanes<rounding::toward_positive, Count>(src, dst, n, at, st); break;
      case rounding::toward_negative: quantize_lanes<rounding::toward_negative, Count>(src, dst, n, at, st); break;
      case rounding::to_odd: quantize_lanes<rounding::to_odd, Count>(src, dst, n, at, st); break;
    }
  }
}
}  // namespace detail

/// out[i] = in[i] rounded by r (element index r.first_index() + i).
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const rounder<S>& r) {
  detail::quantize_span<false>(in, out, r, nullptr);
}
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats& st) {
  detail::quantize_span<true>(in, out, r, &st);
}
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const format& f, const rounding_options& o = {}) {
  quantize(in, out, rounder<S>(f, o));
}
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const format& f, const rounding_options& o,
              rounding_stats& st) {
  quantize(in, out, rounder<S>(f, o), st);
}
/// In place.
template <std::floating_point S>
void quantize(std::span<S> values, const format& f, const rounding_options& o = {}) {
  quantize(std::span<const S>(values), values, rounder<S>(f, o));
}
template <std::floating_point S>
void quantize(std::span<S> values, const format& f, const rounding_options& o, rounding_stats& st) {
  quantize(std::span<const S>(values), values, rounder<S>(f, o), st);
}

/// out[i] = code of in[i] rounded by r, up to the first value without a code (NaN or Inf into
/// an all_finite format); returns that value's index, or in.size() when every value has a code.
template <std::floating_point S, std::unsigned_integral C>
std::size_t try_encode(std::span<const S> in, std::span<C> out, const rounder<S>& r) {
  detail::check_same_size(in.size(), out.size());
  const format& f = r.plan().fmt;
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat::encode: codes of " + to_string(f) + " do not fit the output type");
  switch (r.plan().mode) {
    case rounding::nearest_even: return detail::encode_lanes<rounding::nearest_even>(in, out, r);
    case rounding::nearest_away: return detail::encode_lanes<rounding::nearest_away>(in, out, r);
    case rounding::toward_zero: return detail::encode_lanes<rounding::toward_zero>(in, out, r);
    case rounding::stochastic: return detail::encode_lanes<rounding::stochastic>(in, out, r);
    case rounding::toward_positive: return detail::encode_lanes<rounding::toward_positive>(in, out, r);
    case rounding::toward_negative: return detail::encode_lanes<rounding::toward_negative>(in, out, r);
    case rounding::to_odd: return detail::encode_lanes<rounding::to_odd>(in, out, r);
  }
  return 0;
}

/// out[i] = code of in[i] rounded to f. Throws std::domain_error at the first value without a
/// code (NaN or Inf into an all_finite format); the codes before it are written.
template <std::floating_point S, std::unsigned_integral C>
void encode(std::span<const S> in, std::span<C> out, const rounder<S>& r) {
  if (const std::size_t first = try_encode(in, out, r); first < in.size())
    throw std::domain_error("minifloat::encode: element " + std::to_string(first) + " has no code in " +
                            to_string(r.plan().fmt));
}
template <std::floating_point S, std::unsigned_integral C>
void encode(std::span<const S> in, std::span<C> out, const format& f, const rounding_options& o = {}) {
  encode(in, out, rounder<S>(f, o));
}

/// out[i] = value of code in[i]; bits above the format's width are ignored.
template <std::floating_point S, std::unsigned_integral C>
void decode(std::span<const C> in, std::span<S> out, const format& f) {
  detail::check_same_size(in.size(), out.size());
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  detail::decode_lanes(in, out, detail::make_codec_plan<S>(f));
}

}  // namespace minifloat
