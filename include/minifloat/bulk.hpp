// minifloat/bulk.hpp — rounding, encoding and decoding whole spans.
//
// Every operation here reads the same way: check the arguments, build the plan (the core's
// rounding_plan, round.hpp), choose the backend once from it (backends/choice.hpp), and loop over
// registers of lanes. The reference backend is the core's lane kernels (round_bits on SIMD
// registers, backends/register_paths.hpp); the others (backends/float_arithmetic.hpp,
// hardware_conversion.hpp, stochastic_float.hpp) give the same bits faster where they apply, and
// rounding_options::backend or the environment variable MINIFLOAT_REFERENCE_CORE (backend.hpp)
// forces the reference.
// Stochastic rounding draws element i's random word from (seed, options.index + i), so a span can
// be cut into chunks and rounded by any number of threads: give each chunk its own subspan and
// options.index = the chunk's offset, and the result is bit-identical to one call over the whole
// span. In-place rounding is allowed (in and out may be the same span).
// Every function also takes any contiguous range (std::vector, std::array, C arrays, spans of
// const or mutable elements), and arrays of fp<> values stand for their codes: quantize(floats,
// fp_values) rounds into them, decode(fp_values, floats) reads them back.
#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstdint>
#include <ranges>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "backends/choice.hpp"
#include "backends/float_arithmetic.hpp"
#include "backends/hardware_conversion.hpp"
#include "backends/lane_counts.hpp"
#include "backends/lane_random.hpp"
#include "backends/register_paths.hpp"
#include "detail/simd.hpp"
#include "encode.hpp"
#include "fp.hpp"
#include "round.hpp"
#include "stats.hpp"

namespace minifloat {

namespace detail {
inline void check_same_size(std::size_t in, std::size_t out) {
  if (in != out) throw std::invalid_argument("minifloat: input and output spans differ in size");
}

/// f.template operator()<Mode>() for the rounding mode m: the one switch from a run-time mode to
/// the kernels' compile-time one.
template <class F>
decltype(auto) with_rounding_mode(rounding m, F&& f) {
  switch (m) {
    case rounding::nearest_even: return f.template operator()<rounding::nearest_even>();
    case rounding::nearest_away: return f.template operator()<rounding::nearest_away>();
    case rounding::toward_zero: return f.template operator()<rounding::toward_zero>();
    case rounding::stochastic: return f.template operator()<rounding::stochastic>();
    case rounding::toward_positive: return f.template operator()<rounding::toward_positive>();
    case rounding::toward_negative: return f.template operator()<rounding::toward_negative>();
    case rounding::to_odd: break;
  }
  return f.template operator()<rounding::to_odd>();
}

/// Values a widened rounder<float> (rounds_through_double: E8M0) widens to double per pass: the
/// double kernels round them, and the results narrow back exactly.
inline constexpr std::size_t widen_chunk = 1024;

/// The widen-to-double loop: step(start, chunk) for the values start..start+chunk.size()-1 of n,
/// widen_chunk at a time, with a buffer of doubles as `chunk`; step returns how many of them it
/// handled. Returns the first value not handled (at the first short step), or n.
template <class Step>
std::size_t through_double_chunks(std::size_t n, Step step) {
  double buffer[widen_chunk];
  for (std::size_t start = 0; start < n; start += widen_chunk) {
    const std::size_t m = std::min(widen_chunk, n - start);
    if (const std::size_t done = step(start, std::span<double>(buffer, m)); done < m) return start + done;
  }
  return n;
}
/// Doubles that are floats (results for a format whose values all are) narrowed exactly.
inline void narrow_into(std::span<const double> in, std::span<float> out) {
  std::ranges::transform(in, out.begin(), [](double x) { return static_cast<float>(x); });
}

/// stochastic_run's loop over `registers` whole registers, for a plan of the shape Shape.
template <bool Count, float_add_shape Shape, std::floating_point S, class V>
[[gnu::always_inline]] inline void stochastic_registers(const rounding_plan<S>& p, const lane_random<V>& draw,
                                                        bool float_form, std::uint64_t first_index, const S* in,
                                                        S* out, std::size_t registers, std::size_t n,
                                                        lane_counts<V>& counts) {
  constexpr std::size_t lanes = sizeof(V) / sizeof(S);
  // Inlined by request: without it GCC 12 calls the lambda per register where the caller's
  // clone (IPA-SRA, Count false) loses gnu::flatten, a third slower in cache.
  draw.aligned_run(first_index, registers, [&](std::size_t k, V random) __attribute__((always_inline)) {
    const std::size_t i = k * lanes;
    prefetch_stream(in, out, i, n);
    store_lanes(out + i,
                round_lanes<rounding::stochastic, Count, Shape>(p, load_lanes<V>(in + i), random, counts, ~V{}, float_form));
  });
}

/// Stochastic rounding's loop, for the reference core and the stochastic float form alike
/// (`float_form`): rounds every whole register of `in`, for a first index (of the rounder's
/// numbering) that is a multiple of the register's lanes, the usual case: the words come from
/// whole ARS blocks in order (lane_random::aligned_run, whose counters advance by one vector add
/// per register), and the plan's overflow result is decided here once (float_add_shape), not per
/// register. Returns the index after the last whole register. Never inlined, with counters and
/// copies of the plan and the generator of its own, for the reasons given at float_add_run
/// (backends/float_arithmetic.hpp).
template <bool Count, std::floating_point S, class V>
[[gnu::noinline, gnu::flatten]] std::size_t stochastic_run(const rounding_plan<S>& plan, const lane_random<V>& words,
                                                           bool float_form, std::uint64_t first_index, const S* in, S* out,
                                                           std::size_t n, lane_counts<V>& counts) {
  constexpr std::size_t lanes = sizeof(V) / sizeof(S);
  const rounding_plan<S> p = plan;
  const lane_random<V> draw = words;
  const std::size_t registers = n / lanes;
  lane_counts<V> local;
  if (p.saturates())
    stochastic_registers<Count, float_add_shape::saturating>(p, draw, float_form, first_index, in, out, registers, n, local);
  else
    stochastic_registers<Count, float_add_shape::to_overflow_result>(p, draw, float_form, first_index, in, out, registers,
                                                                     n, local);
  if constexpr (Count) counts.merge(local);
  return registers * lanes;
}

// The SIMD kernels below are host code. In a CUDA translation unit nvcc's device pass
// (__CUDA_ARCH__) still instantiates host templates that host functions use, and its compiler
// aborts on GCC vector code there, so that pass sees these three kernels with empty bodies; the
// host pass, which is what runs, compiles them in full.

/// Rounds n values by r on `backend` (chosen once by the caller): the backend's own loop over the
/// whole registers where it has one (float arithmetic, the hardware conversions; for stochastic
/// rounding the loop with whole ARS blocks of words), then the register loop of round_lanes for
/// the rest, the tail padded with zeros. Never inlined into a caller: there GCC 12 would see the
/// size of the caller's array (a one-float std::vector in a test) and, not tracking n through the
/// runs above, report the whole-register loads as -Warray-bounds.
template <rounding Mode, bool Count, std::floating_point S>
[[gnu::flatten, gnu::noinline]] void quantize_lanes(const S* in, S* out, std::size_t n, const rounder<S>& r,
                                                    bulk_backend backend, rounding_stats* st) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see the note above quantize_lanes)
  using bits = typename source_layout<S>::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  const rounding_plan<S> p = r.plan();  // a local copy: stores to out cannot alias it
  lane_random<V> draw(r.rng());
  lane_counts<V> counts;
  const bool float_form = register_float_form(backend);
  std::size_t i = 0;
  if constexpr (std::same_as<S, float>) {
    switch (backend) {
      case bulk_backend::float_arithmetic: i = float_add_run<Mode, Count>(p, in, out, i, n, counts); break;
      case bulk_backend::f16c_conversion:
        i = hardware_conversion_run<Mode, Count>(hardware_form::f16c, p, in, out, n, counts);
        break;
      case bulk_backend::bf16_conversion:
        i = hardware_conversion_run<Mode, Count>(hardware_form::bf16, p, in, out, n, counts);
        break;
      case bulk_backend::reference_core:
      case bulk_backend::stochastic_float: break;
    }
  }
  if constexpr (Mode == rounding::stochastic) {
    if (r.first_index() % lanes == 0) i = stochastic_run<Count>(p, draw, float_form, r.first_index(), in, out, n, counts);
  }
  for (; i + lanes <= n; i += lanes) {
    prefetch_stream(in, out, i, n);
    const V u = load_lanes<V>(in + i);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    store_lanes(out + i, round_lanes<Mode, Count>(p, u, random, counts, ~V{}, float_form));
  }
  if (i < n) {
    const std::size_t m = n - i;
    const V u = load_lanes<V>(in + i, m);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    const V valid = select(lane_indices<V>() < static_cast<bits>(m), ~V{}, V{});
    store_lanes(out + i, round_lanes<Mode, Count>(p, u, random, counts, valid, float_form), m);
  }
  if constexpr (Count) counts.flush(*st, n);
#else
  (void)in, (void)out, (void)n, (void)r, (void)backend, (void)st;
#endif
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
[[gnu::flatten]] std::size_t encode_lanes(std::span<const S> in, std::span<C> out, const rounder<S>& r,
                                          [[maybe_unused]] bulk_backend backend) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see the note above quantize_lanes)
  using src = source_layout<S>;
  using bits = typename src::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  const rounding_plan<S> p = r.plan();
  const codec_plan<S> c = make_codec_plan<S>(p.fmt);
  const bool all_finite = p.fmt.encoding == specials::all_finite;
  lane_random<V> draw(r.rng());
  lane_counts<V> unused;
  const bool float_form = register_float_form(backend);
  const std::size_t n = in.size();
  // Returns the lane of the first value without a code, or m. Called with m = lanes in the main
  // loop, so its copies have a constant size once inlined.
  const auto step = [&](std::size_t i, std::size_t m) {
    const V u = load_lanes<V>(in.data() + i, m);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    const V rounded = round_lanes<Mode, false>(p, u, random, unused, ~V{}, float_form);
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
  for (; i + lanes <= n; i += lanes) {
    prefetch_stream(in.data(), out.data(), i, n);
    if (const std::size_t k = step(i, lanes); k < lanes) return i + k;
  }
  if (i < n)
    if (const std::size_t k = step(i, n - i); k < n - i) return i + k;
  return n;
#else
  (void)in, (void)out, (void)r, (void)backend;
  return 0;
#endif
}

template <std::floating_point S, std::unsigned_integral C>
[[gnu::flatten]] void decode_lanes(std::span<const C> in, std::span<S> out, const codec_plan<S>& c) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see the note above quantize_lanes)
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
  for (; i + lanes <= in.size(); i += lanes) {
    prefetch_stream(in.data(), out.data(), i, in.size());
    step(i, lanes);
  }
  if (i < in.size()) step(i, in.size() - i);
#else
  (void)in, (void)out, (void)c;
#endif
}


/// quantize, checked: the plan's backend is chosen here, once per call.
template <bool Count, std::floating_point S>
void quantize_span(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats* st) {
  check_same_size(in.size(), out.size());
  if constexpr (sizeof(S) == 4) {
    if (r.widened()) {  // rounds_through_double (E8M0): the double kernels, a chunk at a time
      const rounder<double> wide = r.through_double();
      through_double_chunks(in.size(), [&](std::size_t start, std::span<double> chunk) {
        std::ranges::copy(in.subspan(start, chunk.size()), chunk.begin());  // in place: read before written
        quantize_span<Count>(std::span<const double>(chunk), chunk, wide.advanced(start), st);
        narrow_into(chunk, out.subspan(start, chunk.size()));
        return chunk.size();
      });
      return;
    }
  }
  const bulk_backend backend = choose_bulk_backend(r.plan());
  // Counts are kept in 32-bit (float) lanes: cut very long spans into pieces that cannot overflow them.
  constexpr std::size_t piece = std::size_t{1} << 30;
  with_rounding_mode(r.plan().mode, [&]<rounding Mode>() {
    for (std::size_t start = 0; start < in.size(); start += piece)
      quantize_lanes<Mode, Count>(in.data() + start, out.data() + start, std::min(piece, in.size() - start),
                                  r.advanced(start), backend, st);
  });
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
  if constexpr (sizeof(S) == 4) {
    if (r.widened()) {  // rounds_through_double (E8M0): the double kernels, a chunk at a time
      const rounder<double> wide = r.through_double();
      return detail::through_double_chunks(in.size(), [&](std::size_t start, std::span<double> chunk) {
        std::ranges::copy(in.subspan(start, chunk.size()), chunk.begin());
        return try_encode(std::span<const double>(chunk), out.subspan(start, chunk.size()), wide.advanced(start));
      });
    }
  }
  const detail::bulk_backend backend = detail::choose_bulk_backend(r.plan(), detail::backend_offer::register_forms);
  return detail::with_rounding_mode(r.plan().mode, [&]<rounding Mode>() {
    return detail::encode_lanes<Mode>(in, out, r, backend);
  });
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
  if constexpr (sizeof(S) == 4) {
    if (rounds_through_double<S>(f)) {  // E8M0: every value is a float, 2^-127 a subnormal; via double
      const detail::codec_plan<double> c = detail::make_codec_plan<double>(f);
      detail::through_double_chunks(in.size(), [&](std::size_t start, std::span<double> chunk) {
        detail::decode_lanes(in.subspan(start, chunk.size()), chunk, c);
        detail::narrow_into(chunk, out.subspan(start, chunk.size()));
        return chunk.size();
      });
      return;
    }
  }
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  detail::decode_lanes(in, out, detail::make_codec_plan<S>(f));
}

// --- any contiguous range ---------------------------------------------------------------------

namespace detail {
template <class T>
inline constexpr bool is_fp_type = false;
template <format F>
inline constexpr bool is_fp_type<basic_fp<F>> = true;

/// A contiguous, sized range of elements of type satisfying Element (const or not).
template <class R>
concept contiguous_sized = std::ranges::contiguous_range<R> && std::ranges::sized_range<R>;
template <class R>
using element_t = std::remove_cv_t<std::ranges::range_value_t<R>>;
template <class R>
concept float_range = contiguous_sized<R> && std::floating_point<element_t<R>>;
template <class R>
concept mutable_range = contiguous_sized<R> &&
                        !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
template <class R>
concept fp_range = contiguous_sized<R> && is_fp_type<element_t<R>>;
template <class R>
concept code_range = contiguous_sized<R> && std::unsigned_integral<element_t<R>>;

template <class R>
auto const_span(const R& r) {
  return std::span<const element_t<R>>(std::ranges::data(r), std::ranges::size(r));
}
template <class R>
auto mutable_span(R& r) {
  return std::span<element_t<R>>(std::ranges::data(r), std::ranges::size(r));
}
/// Codes of an fp<> array pass through a small buffer: fp<> objects are copied as bytes
/// (trivially copyable, the size of their code) rather than aliased as integers.
inline constexpr std::size_t fp_chunk = 1024;
}  // namespace detail

/// In place, any mutable contiguous range of float or double.
template <class R>
  requires(detail::float_range<R> && detail::mutable_range<R>)
void quantize(R&& values, const format& f, const rounding_options& o = {}) {
  auto v = detail::mutable_span(values);
  quantize(std::span<const detail::element_t<R>>(v), v, f, o);
}
template <class R>
  requires(detail::float_range<R> && detail::mutable_range<R>)
void quantize(R&& values, const format& f, const rounding_options& o, rounding_stats& st) {
  auto v = detail::mutable_span(values);
  quantize(std::span<const detail::element_t<R>>(v), v, f, o, st);
}
/// Out of place, any contiguous ranges of the same floating type.
template <detail::float_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out, const format& f, const rounding_options& o = {}) {
  quantize(detail::const_span(in), detail::mutable_span(out), f, o);
}
template <detail::float_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out, const format& f, const rounding_options& o, rounding_stats& st) {
  quantize(detail::const_span(in), detail::mutable_span(out), f, o, st);
}
/// A sequential_rounder takes as many indices as there are values (see round.hpp).
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, sequential_rounder<S>& r) {
  detail::check_same_size(in.size(), out.size());
  quantize(in, out, r.take(in.size()));
}
template <class R>
  requires(detail::float_range<R> && detail::mutable_range<R>)
void quantize(R&& values, sequential_rounder<detail::element_t<R>>& r) {
  auto v = detail::mutable_span(values);
  quantize(std::span<const detail::element_t<R>>(v), v, r);
}

/// Floats rounded into an array of fp<> values (the format and the implicit overflow rule of
/// the element type unless `o` says otherwise). Throws std::domain_error at the first value
/// without a code (NaN into an all_finite type); the values before it are written.
template <detail::float_range In, class Out>
  requires(detail::fp_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out, const rounding_options& o) {
  using T = detail::element_t<Out>;
  using S = detail::element_t<In>;
  using C = typename T::storage_type;
  static_assert(sizeof(T) == sizeof(C) && std::is_trivially_copyable_v<T>);
  detail::check_same_size(std::ranges::size(in), std::ranges::size(out));
  const auto src = detail::const_span(in);
  T* dst = std::ranges::data(out);
  const rounder<S> r(T::fmt, o);
  C codes[detail::fp_chunk];
  for (std::size_t start = 0; start < src.size(); start += detail::fp_chunk) {
    const std::size_t n = std::min(detail::fp_chunk, src.size() - start);
    const std::size_t done = try_encode(src.subspan(start, n), std::span<C>(codes, n), r.advanced(start));
    std::memcpy(static_cast<void*>(dst + start), codes, done * sizeof(C));
    if (done < n)
      throw std::domain_error("minifloat::quantize: element " + std::to_string(start + done) + " has no code in " +
                              to_string(T::fmt));
  }
}
template <detail::float_range In, class Out>
  requires(detail::fp_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out) {
  using T = detail::element_t<Out>;
  quantize(in, out,
           rounding_options{rounding::nearest_even,
                            T::fmt.encoding == specials::all_finite ? overflow::saturate : overflow::infinity});
}
/// The values of an array of fp<> values, exactly, in float or double.
template <detail::fp_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void decode(const In& in, Out&& out) {
  using T = detail::element_t<In>;
  using C = typename T::storage_type;
  detail::check_same_size(std::ranges::size(in), std::ranges::size(out));
  const T* src = std::ranges::data(in);
  const auto dst = detail::mutable_span(out);
  C codes[detail::fp_chunk];
  for (std::size_t start = 0; start < dst.size(); start += detail::fp_chunk) {
    const std::size_t n = std::min(detail::fp_chunk, dst.size() - start);
    std::memcpy(codes, static_cast<const void*>(src + start), n * sizeof(C));
    decode(std::span<const C>(codes, n), dst.subspan(start, n), T::fmt);
  }
}

/// encode / decode of codes with any contiguous ranges.
template <detail::float_range In, class Out>
  requires(detail::code_range<Out> && detail::mutable_range<Out>)
void encode(const In& in, Out&& codes, const format& f, const rounding_options& o = {}) {
  encode(detail::const_span(in), detail::mutable_span(codes), f, o);
}
template <detail::code_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void decode(const In& codes, Out&& out, const format& f) {
  decode(detail::const_span(codes), detail::mutable_span(out), f);
}

}  // namespace minifloat
