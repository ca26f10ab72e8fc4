// python/src/distributed.cpp — the two passes of minifloat.distributed's communication hook, for
// minifloat._core: the sender's (divide by the world size, add the kept residual, round with
// counts, write codes, keep the new residual) and the receiver's (decode every rank's codes and
// add them in rank order, decode_accumulate.hpp). Each is one pass over the bucket: the work runs
// in chunks that stay in cache, every rounding is bulk.hpp's / block.hpp's, every code
// encode.hpp's / block.hpp's, and the arithmetic around them (x / W, + residual, x − value) is
// the float arithmetic torch does (tensor.div, +, −), element by element, so the bits are those of
// the same steps done with torch. See binding.hpp for the
// conventions; python/minifloat/distributed.py for the wire layout.
#include <pybind11/stl.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/bulk.hpp>
#include <minifloat/decode_accumulate.hpp>
#include <minifloat/detail/simd.hpp>
#include <minifloat/encode.hpp>

#include "binding.hpp"
#include "block_tuples.hpp"

namespace minifloat::python {

namespace {

/// Values per chunk of the sender's pass (x, its rounded value and its codes stay in L1/L2).
constexpr std::size_t send_chunk = 2048;

/// x[i] = in[i] / world (+ residual[i]): what the hook sends, before rounding. Division, as
/// torch's tensor.div(world_size) divides.
void scaled_input(const float* in, const float* residual, float world, std::span<float> x) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = in[i] / world;
  if (residual != nullptr)
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += residual[i];
}

/// residual[i] = x[i] − value[i], or 0 where that is not finite (a non-finite error is not kept).
void keep_residual(std::span<const float> x, const float* value, float* residual) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float e = x[i] - value[i];
    residual[i] = std::isfinite(e) ? e : 0.0f;
  }
}

/// out[i] = the code of q[i], a value of the format already (quantize's result, or NaN/Inf where
/// the format has their codes): encode.hpp's layout change alone (detail::code_lanes, what
/// bulk.hpp's encode applies to the values it has rounded), a register at a time.
template <class C>
void codes_of_values(std::span<const float> q, C* out, const detail::codec_plan<float>& plan) {
  using V = detail::simd_t<std::uint32_t>;
  constexpr std::size_t lanes = detail::simd_lanes<std::uint32_t>;
  using CV = typename detail::vector_of<C, lanes * sizeof(C)>::type;
  std::size_t i = 0;
  for (; i + lanes <= q.size(); i += lanes) {
    V bits;
    std::memcpy(&bits, q.data() + i, sizeof bits);
    const CV narrow = __builtin_convertvector(detail::code_lanes(plan, bits), CV);
    std::memcpy(out + i, &narrow, sizeof narrow);
  }
  for (; i < q.size(); ++i) out[i] = static_cast<C>(detail::code_lanes(plan, std::bit_cast<std::uint32_t>(q[i])));
}

/// Sender's pass for a scalar format: codes[i] = code of round(x[i]), with the rounding's counts;
/// residual_out (when given) gets x − round(x). Values without a code in a format without NaN
/// (NaN, ±Inf) are sent as the code of +0 and counted in the last field of the result: the Python
/// layer then flags the rank's contribution as NaN. Returns (values, overflows, underflows, nans,
/// infinities, non-finite results).
template <class C>
py::tuple send_scalar_typed(std::uintptr_t in, std::size_t n, float world, std::uintptr_t residual_in,
                            std::uintptr_t residual_out, std::uintptr_t codes, const format& f,
                            const rounding_options& o, int threads) {
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat.distributed: codes of " + to_string(f) + " do not fit " +
                                std::to_string(sizeof(C) * 8) + "-bit integers");
  const rounder<float> r(f, o);  // validates before anything is written
  // q is already a value of f: nearest-even rounding with Inf kept is the identity on it, so this
  // only changes layout (what minifloat.encode(q, fmt) did).
  const rounder<float> exact(f, rounding_options{rounding::nearest_even, overflow::infinity});
  const bool widened = rounds_through_double<float>(f);  // (E8M0-like) codes through bulk encode's double path
  const detail::codec_plan<float> plan = widened ? detail::codec_plan<float>{} : detail::make_codec_plan<float>(f);
  const bool has_nan = f.has_nan();
  const std::size_t workers = worker_count(n, threads);
  std::vector<rounding_stats> stats(workers);
  std::vector<std::size_t> nonfinite(workers, 0);
  {
    py::gil_scoped_release unlocked;
    for_ranges(n, threads, [&](std::size_t worker, std::size_t start, std::size_t count) {
      float x[send_chunk], q[send_chunk];
      for (std::size_t s = start; s < start + count; s += send_chunk) {
        const std::size_t m = std::min(send_chunk, start + count - s);
        const std::span<float> xs(x, m), qs(q, m);
        scaled_input(at<const float>(in) + s, residual_in ? at<const float>(residual_in) + s : nullptr, world, xs);
        quantize(std::span<const float>(xs), qs, r.advanced(s), stats[worker]);  // adds to the counts
        if (residual_out) keep_residual(xs, q, at<float>(residual_out) + s);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < m; ++i) bad += std::isfinite(q[i]) ? 0 : 1;
        nonfinite[worker] += bad;
        if (bad != 0 && !has_nan)
          for (std::size_t i = 0; i < m; ++i)
            if (!std::isfinite(q[i])) q[i] = 0.0f;  // sent as +0; the rank's flag says NaN
        if (!widened)
          codes_of_values(std::span<const float>(qs), at<C>(codes) + s, plan);
        else if (try_encode(std::span<const float>(qs), std::span<C>(at<C>(codes) + s, m), exact.advanced(s)) < m)
          throw std::logic_error("minifloat.distributed: a rounded value has no code");  // cannot happen: see above
      }
    });
  }
  rounding_stats total;
  for (const auto& s : stats) total += s;
  std::size_t bad = 0;
  for (const auto k : nonfinite) bad += k;
  return py::make_tuple(total.values, total.overflows, total.underflows, total.nans, total.infinities, bad);
}

/// Receiver's pass for a scalar format: out[i] = the fp32 sum, in rank order, of the values of
/// codes[r * n + i] (contributions back to back); every value NaN when a rank is flagged.
template <class C>
void receive_scalar_typed(std::uintptr_t codes, std::size_t n, std::size_t contributions, bool any_flagged,
                          std::uintptr_t out, const format& f, int threads) {
  if (auto p = conversion_problem<float>(f); !p.empty()) throw std::invalid_argument("minifloat.format: " + p);
  py::gil_scoped_release unlocked;
  for_ranges(n, threads, [&](std::size_t, std::size_t start, std::size_t count) {
    const auto sum = span_at<float>(out, n).subspan(start, count);
    if (any_flagged) {
      std::fill(sum.begin(), sum.end(), std::numeric_limits<float>::quiet_NaN());
      return;
    }
    std::vector<std::span<const C>> parts;
    for (std::size_t r = 0; r < contributions; ++r) parts.push_back(span_at<const C>(codes + r * n * sizeof(C), n).subspan(start, count));
    decode_sum(std::span<const std::span<const C>>(parts), sum, f);
  });
}

/// Chunks of whole blocks (and whole bytes of 4-bit codes) for the block passes, handed out in
/// pieces of about elements_per_piece values.
struct block_chunks {
  /// Values per chunk, before rounding up to whole blocks: every call of the block codec makes
  /// its tables first, so chunks are larger than the scalar passes' (4 × 128 KiB stay in L2).
  static constexpr std::size_t target = 32768;
  std::size_t n, chunk;
  explicit block_chunks(std::size_t values, std::size_t block) : n(values) {
    std::size_t k = (target + block - 1) / block;
    chunk = block * (k + (block * k) % 2);  // an even number of values
  }
  std::size_t count() const { return (n + chunk - 1) / chunk; }
  /// work(worker, first value, values) over pieces of whole chunks, on binding.hpp's thread split.
  template <class Work>
  void run(int threads, Work work) const {
    const std::size_t per_piece = std::max<std::size_t>(1, elements_per_piece / chunk);
    const std::size_t pieces = (count() + per_piece - 1) / per_piece;
    for_ranges(pieces * elements_per_piece, threads, [&](std::size_t worker, std::size_t start, std::size_t count) {
      const std::size_t first = start / elements_per_piece * per_piece * chunk;
      const std::size_t end = std::min(n, (start + count) / elements_per_piece * per_piece * chunk);
      if (first < end) work(worker, first, end - first);
    });
  }
  std::size_t workers(int threads) const {
    const std::size_t per_piece = std::max<std::size_t>(1, elements_per_piece / chunk);
    return worker_count((count() + per_piece - 1) / per_piece * elements_per_piece, threads);
  }
};

/// Sender's pass for a block format (a flat bucket, blocks of consecutive values): element codes
/// (a byte each, or two a byte when `packed`: value 2i in the low nibble of byte i) and a scale
/// code per block, residual_out (when given) x − decoded value. NVFP4's per-tensor scale needs the
/// whole of x first: x is then made in one pass before the codes. Returns (tensor scale, stats).
py::tuple send_blocks(std::uintptr_t in, std::size_t n, float world, std::uintptr_t residual_in,
                      std::uintptr_t residual_out, std::uintptr_t elements, bool packed, std::uintptr_t scales,
                      const block_format& f, block_options o, int threads) {
  constexpr const char* who = "minifloat.distributed";
  f.validate();
  (void)rounder<float>(f.element, {o.mode, o.on_overflow, o.random_bits, o.seed, o.index});
  if (packed && f.element.bit_width() != 4)
    throw std::invalid_argument(std::string(who) + ": packed codes are for 4-bit elements, not " + to_string(f.element));
  const block_chunks chunks(n, static_cast<std::size_t>(f.block_size));
  std::vector<float> whole;  // NVFP4: x, made first
  if (f.scaling == block_scaling::e4m3_times_tensor) {
    whole.resize(n);
    scaled_input(at<const float>(in), residual_in ? at<const float>(residual_in) : nullptr, world, whole);
    if (o.tensor_scale == 0) o.tensor_scale = nvfp4_tensor_scale(whole);
    if (!(o.tensor_scale > 0) || !std::isfinite(o.tensor_scale))
      throw std::invalid_argument(std::string(who) + ": tensor_scale = " + std::to_string(o.tensor_scale) +
                                  " is not a positive finite float");
  }
  const float decode_scale = f.scaling == block_scaling::e4m3_times_tensor ? o.tensor_scale : 1.0f;
  const auto B = static_cast<std::size_t>(f.block_size);
  std::vector<block_stats> stats(chunks.workers(threads));
  {
    py::gil_scoped_release unlocked;
    chunks.run(threads, [&](std::size_t worker, std::size_t first, std::size_t count) {
      std::vector<float> x(chunks.chunk), values(residual_out ? chunks.chunk : 0);
      std::vector<std::uint8_t> codes(chunks.chunk);
      for (std::size_t s = first; s < first + count; s += chunks.chunk) {
        const std::size_t m = std::min(chunks.chunk, first + count - s);
        const std::span<float> xs(x.data(), m);
        if (whole.empty())
          scaled_input(at<const float>(in) + s, residual_in ? at<const float>(residual_in) + s : nullptr, world, xs);
        else
          std::copy_n(whole.data() + s, m, xs.data());
        block_options piece = o;
        piece.index = o.index + s;
        const std::span<std::uint8_t> cs(codes.data(), m);
        const auto sc = span_at<std::uint8_t>(scales, (n + B - 1) / B).subspan(s / B, (m + B - 1) / B);
        encode_blocks(std::span<const float>(xs), cs, sc, f, piece, {}, &stats[worker]);
        if (residual_out) {
          decode_blocks(std::span<const std::uint8_t>(cs), std::span<const std::uint8_t>(sc),
                        std::span<float>(values.data(), m), f, {}, decode_scale);
          keep_residual(xs, values.data(), at<float>(residual_out) + s);
        }
        auto* bytes = at<std::uint8_t>(elements);
        if (packed) {  // s is even (block_chunks): value s is the low nibble of byte s / 2
          std::uint8_t* out_bytes = bytes + s / 2;
          for (std::size_t j = 0; j < m / 2; ++j)
            out_bytes[j] = static_cast<std::uint8_t>((codes[2 * j] & 0xFu) | (codes[2 * j + 1] & 0xFu) << 4);
          if (m % 2 != 0) out_bytes[m / 2] = static_cast<std::uint8_t>(codes[m - 1] & 0xFu);
        } else {
          std::copy_n(codes.data(), m, bytes + s);
        }
      }
    });
  }
  block_stats total;
  for (const auto& s : stats) total += s;
  return py::make_tuple(decode_scale, stats_tuple(total));
}

/// Receiver's pass for a block format: out[i] = the fp32 sum, in rank order, of every rank's
/// decoded value i; rank r's element codes at elements[r] (a byte each, or packed as send_blocks
/// writes them), its scale codes at scales[r], its per-tensor scale tensor_scales[r].
void receive_blocks(const std::vector<std::uintptr_t>& elements, bool packed, const std::vector<std::uintptr_t>& scales,
                    const std::vector<float>& tensor_scales, std::uintptr_t out, std::size_t n, const block_format& f,
                    int threads) {
  f.validate();
  const std::size_t ranks = elements.size();
  if (scales.size() != ranks || tensor_scales.size() != ranks)
    throw std::invalid_argument("minifloat.distributed: element codes, scale codes and tensor scales of " +
                                std::to_string(ranks) + ", " + std::to_string(scales.size()) + " and " +
                                std::to_string(tensor_scales.size()) + " ranks");
  const block_chunks chunks(n, static_cast<std::size_t>(f.block_size));
  const auto B = static_cast<std::size_t>(f.block_size);
  py::gil_scoped_release unlocked;
  chunks.run(threads, [&](std::size_t, std::size_t first, std::size_t count) {
    std::vector<std::uint8_t> codes(packed ? chunks.chunk : 0);
    sum_decoded(span_at<float>(out, n).subspan(first, count), ranks, chunks.chunk,
                [&](std::size_t r, std::size_t s, std::span<float> dst) {
                  const std::size_t g = first + s, m = dst.size();  // g: a multiple of the chunk, so even
                  std::span<const std::uint8_t> cs;
                  if (packed) {
                    const auto* bytes = at<const std::uint8_t>(elements[r]) + g / 2;
                    for (std::size_t j = 0; j < m / 2; ++j) {
                      codes[2 * j] = bytes[j] & 0xFu;
                      codes[2 * j + 1] = bytes[j] >> 4;
                    }
                    if (m % 2 != 0) codes[m - 1] = bytes[m / 2] & 0xFu;
                    cs = std::span<const std::uint8_t>(codes.data(), m);
                  } else {
                    cs = span_at<const std::uint8_t>(elements[r], n).subspan(g, m);
                  }
                  const auto sc = span_at<const std::uint8_t>(scales[r], (n + B - 1) / B).subspan(g / B, (m + B - 1) / B);
                  decode_blocks(cs, sc, dst, f, {}, tensor_scales[r]);
                });
  });
}

}  // namespace

void bind_distributed(py::module_& m) {
  m.def("comm_send", [](std::uintptr_t in, std::size_t n, float world, std::uintptr_t residual_in,
                        std::uintptr_t residual_out, std::uintptr_t codes, int code_bytes, const format_tuple& t,
                        const options_tuple& o, int threads) {
    const format f = to_format(t);
    const rounding_options ro = to_options(o);
    switch (code_bytes) {
      case 1: return send_scalar_typed<std::uint8_t>(in, n, world, residual_in, residual_out, codes, f, ro, threads);
      case 2: return send_scalar_typed<std::uint16_t>(in, n, world, residual_in, residual_out, codes, f, ro, threads);
      case 4: return send_scalar_typed<std::uint32_t>(in, n, world, residual_in, residual_out, codes, f, ro, threads);
    }
    throw std::invalid_argument("minifloat.distributed: code size " + std::to_string(code_bytes) + " is not 1, 2 or 4 bytes");
  });
  m.def("comm_receive", [](std::uintptr_t codes, int code_bytes, std::size_t n, std::size_t contributions,
                           bool any_flagged, std::uintptr_t out, const format_tuple& t, int threads) {
    const format f = to_format(t);
    switch (code_bytes) {
      case 1: return receive_scalar_typed<std::uint8_t>(codes, n, contributions, any_flagged, out, f, threads);
      case 2: return receive_scalar_typed<std::uint16_t>(codes, n, contributions, any_flagged, out, f, threads);
      case 4: return receive_scalar_typed<std::uint32_t>(codes, n, contributions, any_flagged, out, f, threads);
    }
    throw std::invalid_argument("minifloat.distributed: code size " + std::to_string(code_bytes) + " is not 1, 2 or 4 bytes");
  });
  m.def("comm_send_blocks", [](std::uintptr_t in, std::size_t n, float world, std::uintptr_t residual_in,
                               std::uintptr_t residual_out, std::uintptr_t elements, bool packed, std::uintptr_t scales,
                               const block_format_tuple& t, const block_options_tuple& o, int threads) {
    return send_blocks(in, n, world, residual_in, residual_out, elements, packed, scales, to_block_format(t),
                       to_block_options(o), threads);
  });
  m.def("comm_receive_blocks", [](const std::vector<std::uintptr_t>& elements, bool packed,
                                  const std::vector<std::uintptr_t>& scales, const std::vector<float>& tensor_scales,
                                  std::uintptr_t out, std::size_t n, const block_format_tuple& t, int threads) {
    receive_blocks(elements, packed, scales, tensor_scales, out, n, to_block_format(t), threads);
  });
}

}  // namespace minifloat::python
