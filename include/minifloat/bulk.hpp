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

#include "encode.hpp"
#include "round.hpp"
#include "stats.hpp"

namespace minifloat {

namespace detail {
inline void check_same_size(std::size_t in, std::size_t out) {
  if (in != out) throw std::invalid_argument("minifloat: input and output spans differ in size");
}

template <bool Count, std::floating_point S>
void quantize_span(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats* st) {
  check_same_size(in.size(), out.size());
  using bits = typename source_layout<S>::bits;
  rounding_stats local;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const bits u = std::bit_cast<bits>(in[i]);
    const bits v = round_one(r.plan(), u, r.rng(), r.first_index() + i);
    if constexpr (Count) count(r.plan(), u, v, local);
    out[i] = std::bit_cast<S>(v);
  }
  if constexpr (Count) *st += local;
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

/// out[i] = code of in[i] rounded to f. Throws std::domain_error at the first value without a
/// code (NaN or Inf into an all_finite format); the codes before it are written.
template <std::floating_point S, std::unsigned_integral C>
void encode(std::span<const S> in, std::span<C> out, const format& f, const rounding_options& o = {}) {
  detail::check_same_size(in.size(), out.size());
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat::encode: codes of " + to_string(f) + " do not fit the output type");
  using bits = typename source_layout<S>::bits;
  const rounder<S> r(f, o);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const bits v = detail::round_one(r.plan(), std::bit_cast<bits>(in[i]), r.rng(), o.index + i);
    const code_result c = detail::code_of_rounded<S>(f, v);
    if (!c.representable)
      throw std::domain_error("minifloat::encode: element " + std::to_string(i) + " has no code in " + to_string(f));
    out[i] = static_cast<C>(c.code);
  }
}

/// out[i] = value of code in[i].
template <std::floating_point S, std::unsigned_integral C>
void decode(std::span<const C> in, std::span<S> out, const format& f) {
  detail::check_same_size(in.size(), out.size());
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = std::bit_cast<S>(detail::bits_of_code<S>(f, in[i]));
}

}  // namespace minifloat
