// python/src/torch_ops.cpp — the CPU kernels of the torch operators minifloat::quantize,
// quantize_with_stats, quantize_, quantize_ste (its forward), encode, decode and
// quantize_blocks, registered in torch's dispatcher, so that a compiled graph (torch.compile,
// torch.export) calls the rounding with no Python in between.
//
// Built as its own library (minifloat/_torch_ops.so) only where the build finds torch's CMake
// package, and loaded by python/minifloat/_custom_ops.py, which defines the schemas, the fake
// (meta) and autograd implementations and the CUDA kernels, and keeps the Python CPU kernels
// as the fallback wherever this library is absent or does not load. The arguments are the ones
// the extension minifloat._core takes: the format key (exponent bits, mantissa bits, bias,
// subnormals, specials index) and the option indices, seed and index (signed in torch's schema,
// the same 64 bits); a block format as that key followed by block size, scaling index and
// integer elements. Nothing here makes a numeric decision: every value is rounded, encoded or
// decoded by minifloat/bulk.hpp (quantize, try_encode, decode) and block.hpp (quantize_blocks),
// as the extension's functions call them, and bad arguments are refused by the headers' own
// validation (rounder, conversion_problem, block_format::validate), raised as ValueError.
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/bulk.hpp>
#include <minifloat/format.hpp>
#include <minifloat/round.hpp>
#include <minifloat/storage/bitpack.hpp>

namespace minifloat::python {
namespace {

/// Elements per piece of work handed to one of torch's threads (the extension's piece size).
constexpr std::int64_t elements_per_piece = std::int64_t{1} << 16;

/// The enumerator at `index`, refused when past `last` (the enumeration's last enumerator).
template <class E>
E enumerator(std::int64_t index, E last, const char* what) {
  TORCH_CHECK_VALUE(index >= 0 && index <= static_cast<std::int64_t>(last), "minifloat: ", what, " index ", index,
                    " is unknown");
  return static_cast<E>(index);
}

format to_format(c10::IntArrayRef key) {
  TORCH_CHECK_VALUE(key.size() == 5, "minifloat: a format key has 5 entries, not ", key.size());
  return format{static_cast<int>(key[0]), static_cast<int>(key[1]), static_cast<int>(key[2]), key[3] != 0,
                enumerator(key[4], specials::unsigned_exponent, "specials")};
}

rounding_options to_options(std::int64_t mode, std::int64_t on_overflow, std::int64_t random_bits, std::int64_t seed,
                            std::int64_t index) {
  TORCH_CHECK_VALUE(random_bits >= 0 && random_bits <= 64, "minifloat: random_bits = ", random_bits,
                    " is outside 0..64");
  return {enumerator(mode, rounding::to_odd, "rounding"), enumerator(on_overflow, overflow::infinity, "overflow"),
          static_cast<int>(random_bits), static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(index)};
}

/// The headers' validation (rounder's constructor), its std::invalid_argument raised as ValueError.
template <class S>
rounder<S> make_rounder(const format& f, const rounding_options& o) {
  try {
    return rounder<S>(f, o);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

void check_values(const at::Tensor& x, const char* who) {
  TORCH_CHECK_TYPE(x.layout() == at::kStrided, who, ": x has layout ", x.layout(), "; only dense tensors are supported");
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, who, ": x has dtype ",
                   x.scalar_type(), "; expected float32 or float64");
}

/// out = x rounded (both contiguous, of element type S), split over torch's threads by element
/// range; each piece starts its rounder at its first element's index, so the bits are the same
/// for any thread count. The counts of every piece when want_stats.
template <class S>
rounding_stats round_into(const at::Tensor& x, const at::Tensor& out, const rounder<S>& r, bool want_stats) {
  const S* in = x.const_data_ptr<S>();
  S* target = out.mutable_data_ptr<S>();
  rounding_stats total;
  std::mutex adding;
  at::parallel_for(0, x.numel(), elements_per_piece, [&](std::int64_t begin, std::int64_t end) {
    const auto start = static_cast<std::size_t>(begin), count = static_cast<std::size_t>(end - begin);
    const std::span<const S> source(in + start, count);
    const std::span<S> destination(target + start, count);
    if (!want_stats) return quantize(source, destination, r.advanced(start));
    rounding_stats piece;
    quantize(source, destination, r.advanced(start), piece);
    const std::lock_guard lock(adding);
    total += piece;
  });
  return total;
}

/// x rounded into `out` (a new contiguous tensor when absent); the checks all come first.
rounding_stats round_values(const at::Tensor& x, const at::Tensor& out, c10::IntArrayRef fmt, std::int64_t mode,
                            std::int64_t on_overflow, std::int64_t seed, std::int64_t index, std::int64_t random_bits,
                            bool want_stats) {
  const format f = to_format(fmt);
  const rounding_options o = to_options(mode, on_overflow, random_bits, seed, index);
  if (x.scalar_type() == at::kDouble) return round_into(x, out, make_rounder<double>(f, o), want_stats);
  return round_into(x, out, make_rounder<float>(f, o), want_stats);
}

at::Tensor quantize_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode, std::int64_t on_overflow,
                       std::int64_t seed, std::int64_t index, std::int64_t random_bits) {
  check_values(x, "minifloat.quantize");
  const at::Tensor source = x.resolve_neg().contiguous();
  at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  round_values(source, result, fmt, mode, on_overflow, seed, index, random_bits, false);
  return result;
}

std::tuple<at::Tensor, at::Tensor> quantize_with_stats_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode,
                                                          std::int64_t on_overflow, std::int64_t seed,
                                                          std::int64_t index, std::int64_t random_bits) {
  check_values(x, "minifloat.quantize");
  const at::Tensor source = x.resolve_neg().contiguous();
  at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  const rounding_stats s = round_values(source, result, fmt, mode, on_overflow, seed, index, random_bits, true);
  at::Tensor counts = at::empty({5}, x.options().dtype(at::kLong));
  std::int64_t* c = counts.mutable_data_ptr<std::int64_t>();
  c[0] = static_cast<std::int64_t>(s.values);
  c[1] = static_cast<std::int64_t>(s.overflows);
  c[2] = static_cast<std::int64_t>(s.underflows);
  c[3] = static_cast<std::int64_t>(s.nans);
  c[4] = static_cast<std::int64_t>(s.infinities);
  return {result, counts};
}

void quantize_in_place_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode, std::int64_t on_overflow,
                          std::int64_t seed, std::int64_t index, std::int64_t random_bits) {
  check_values(x, "minifloat.quantize_");
  TORCH_CHECK_VALUE(at::has_internal_overlap(x) != at::MemOverlap::Yes,
                    "minifloat.quantize_: x has elements that share memory; write into a tensor with one location "
                    "per element");
  if (x.is_contiguous() && !x.is_neg()) {
    round_values(x, x, fmt, mode, on_overflow, seed, index, random_bits, false);
    return;
  }
  const at::Tensor source = x.resolve_neg().contiguous();
  const at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  round_values(source, result, fmt, mode, on_overflow, seed, index, random_bits, false);
  x.copy_(result);
}


/// quantize_ste's forward: x rounded as quantize rounds it, the gradient's format and options
/// checked now (against x's type) rather than first when backward runs.
at::Tensor quantize_ste_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode, std::int64_t on_overflow,
                           std::int64_t seed, std::int64_t index, std::int64_t random_bits,
                           at::OptionalIntArrayRef grad_fmt, std::int64_t grad_mode, std::int64_t grad_overflow,
                           std::int64_t grad_seed, std::int64_t grad_index, std::int64_t grad_random_bits) {
  check_values(x, "minifloat.quantize_ste");
  if (grad_fmt.has_value()) {
    const format g = to_format(*grad_fmt);
    const rounding_options o = to_options(grad_mode, grad_overflow, grad_random_bits, grad_seed, grad_index);
    if (x.scalar_type() == at::kDouble) (void)make_rounder<double>(g, o);
    else (void)make_rounder<float>(g, o);
  }
  return quantize_op(x, fmt, mode, on_overflow, seed, index, random_bits);
}

/// The integer dtype of codes of `bytes` bytes, as the eager encode returns them for a tensor.
at::ScalarType code_dtype(int bytes) {
  switch (bytes) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 4: return at::kInt;
    default: return at::kLong;
  }
}

/// The unsigned type of a code of `bytes` bytes, passed to `visit` as a value of that type.
template <class Visit>
auto with_code_type(std::int64_t bytes, Visit visit) {
  switch (bytes) {
    case 1: return visit(std::uint8_t{});
    case 2: return visit(std::uint16_t{});
    case 4: return visit(std::uint32_t{});
    case 8: return visit(std::uint64_t{});
  }
  TORCH_CHECK_TYPE(false, "minifloat: codes of ", bytes, " bytes are not 1, 2, 4 or 8 bytes wide");
}

/// The codes of x rounded (try_encode over torch's threads, each piece's rounder at its first
/// index), in the narrowest integer dtype that holds them; ValueError at the first value without
/// a code, naming its flat index.
template <class S, class C>
void encode_into(const at::Tensor& x, const at::Tensor& codes, const rounder<S>& r) {
  const S* in = x.const_data_ptr<S>();
  C* out = static_cast<C*>(codes.mutable_data_ptr());
  const auto n = static_cast<std::size_t>(x.numel());
  std::size_t first_bad = n;
  std::mutex finding;
  at::parallel_for(0, x.numel(), elements_per_piece, [&](std::int64_t begin, std::int64_t end) {
    const auto start = static_cast<std::size_t>(begin), count = static_cast<std::size_t>(end - begin);
    const std::size_t k = try_encode(std::span<const S>(in + start, count), std::span<C>(out + start, count),
                                     r.advanced(start));
    if (k == count) return;
    const std::lock_guard lock(finding);
    first_bad = std::min(first_bad, start + k);
  });
  TORCH_CHECK_VALUE(first_bad == n, "minifloat.encode: the value at flat index ", first_bad, " (", in[first_bad],
                    ") has no code in ", to_string(r.plan().fmt));
}

/// Codes of 4-bit values two a byte along the last dimension (torch.float4_e2m1fn_x2), value 2i
/// in the low nibble of byte i: storage/bitpack.hpp's 4-bit fields of little-endian words.
at::Tensor packed_pairs(const at::Tensor& codes32) {
  const auto n = static_cast<std::size_t>(codes32.numel());
  std::vector<std::uint32_t> words(storage::packed_words(n, 4));
  storage::pack<4>(std::span<const std::uint32_t>(static_cast<const std::uint32_t*>(codes32.const_data_ptr()), n),
                   words);
  std::vector<std::int64_t> shape(codes32.sizes().begin(), codes32.sizes().end());
  shape.back() /= 2;
  at::Tensor bytes = at::empty(shape, codes32.options().dtype(at::kByte));
  std::memcpy(bytes.mutable_data_ptr(), words.data(), n / 2);
  return bytes.view(at::kFloat4_e2m1fn_x2);
}

/// A floating dtype of one or two bytes (float8, bfloat16, float16): codes as values.
bool holds_codes(at::ScalarType t) {
  return at::isFloatingType(t) && at::elementSize(t) <= 2;
}

/// The codes of x rounded: integer codes (the narrowest integer dtype that holds them) when
/// dtype is absent, else viewed as dtype, a dtype that holds codes of fmt (minifloat.encode and
/// the fake implementation check which format a dtype holds; here its width), or packed two a
/// byte for float4_e2m1fn_x2.
at::Tensor encode_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode, std::int64_t on_overflow,
                     std::int64_t seed, std::int64_t index, std::int64_t random_bits,
                     std::optional<at::ScalarType> dtype) {
  check_values(x, "minifloat.encode");
  const format f = to_format(fmt);
  const rounding_options o = to_options(mode, on_overflow, random_bits, seed, index);
  const int bytes = f.bit_width() <= 8 ? 1 : f.bit_width() <= 16 ? 2 : f.bit_width() <= 32 ? 4 : 8;
  const bool is_double = x.scalar_type() == at::kDouble;
  // the rounder and the dtype first: a bad argument is refused before the output is allocated
  std::optional<rounder<double>> wide;
  std::optional<rounder<float>> narrow;
  if (is_double) wide.emplace(make_rounder<double>(f, o));
  else narrow.emplace(make_rounder<float>(f, o));
  const bool pairs = dtype == at::kFloat4_e2m1fn_x2;
  if (pairs) {
    TORCH_CHECK_VALUE(f.bit_width() == 4, "minifloat.encode: dtype ", *dtype, " holds 4-bit codes, not codes of ",
                      to_string(f));
    TORCH_CHECK_VALUE(x.dim() > 0 && x.size(-1) % 2 == 0, "minifloat.encode: two e2m1 codes go into each byte of ",
                      *dtype, ", so the last dimension must be even");
  } else if (dtype) {
    TORCH_CHECK_TYPE(holds_codes(*dtype) && static_cast<int>(at::elementSize(*dtype)) == bytes, "minifloat.encode: ",
                     "dtype ", *dtype, " does not hold codes of ", to_string(f));
  }
  const at::Tensor source = x.resolve_neg().contiguous();
  at::Tensor codes = at::empty(source.sizes(), source.options().dtype(code_dtype(pairs ? 4 : bytes)));
  with_code_type(pairs ? 4 : bytes, [&]<class C>(C) {
    if (is_double) encode_into<double, C>(source, codes, *wide);
    else encode_into<float, C>(source, codes, *narrow);
  });
  if (pairs) return packed_pairs(codes);
  return dtype ? codes.view(*dtype) : codes;
}

/// The values of codes (bits above the format's width ignored, as bulk.hpp's decode): integer
/// codes, codes held as values (float8, bfloat16, float16: read as their bits), or
/// float4_e2m1fn_x2's pairs (the last dimension doubled).
at::Tensor decode_op(const at::Tensor& codes, c10::IntArrayRef fmt, bool is_double) {
  constexpr const char* who = "minifloat.decode";
  const at::ScalarType t = codes.scalar_type();
  const bool pairs = t == at::kFloat4_e2m1fn_x2;
  TORCH_CHECK_TYPE(codes.layout() == at::kStrided, who, ": codes has layout ", codes.layout(),
                   "; only dense tensors are supported");
  TORCH_CHECK_TYPE(pairs || holds_codes(t) || at::isIntegralType(t, /*includeBool=*/false), who,
                   ": codes has dtype ", t, "; expected an integer dtype or one holding codes");
  const format f = to_format(fmt);
  TORCH_CHECK_VALUE(!pairs || f.bit_width() == 4, who, ": codes of dtype ", t, " are 4-bit codes, not codes of ",
                    to_string(f));
  const std::string problem = is_double ? conversion_problem<double>(f) : conversion_problem<float>(f);
  TORCH_CHECK_VALUE(problem.empty(), who, ": ", problem);
  at::Tensor source = codes.contiguous();
  std::vector<std::int64_t> shape(source.sizes().begin(), source.sizes().end());
  if (pairs) {  // the 4-bit fields, as bitpack.hpp unpacks them, one uint32 each
    const auto m = static_cast<std::size_t>(source.numel());
    std::vector<std::uint32_t> words(storage::packed_words(2 * m, 4));
    std::memcpy(words.data(), source.const_data_ptr(), m);
    shape.back() *= 2;
    at::Tensor fields = at::empty(shape, source.options().dtype(at::kInt));
    storage::unpack<4>(words, 2 * m, std::span<std::uint32_t>(static_cast<std::uint32_t*>(fields.mutable_data_ptr()), 2 * m));
    source = fields;
  }
  at::Tensor values = at::empty(shape, source.options().dtype(is_double ? at::kDouble : at::kFloat));
  with_code_type(source.element_size(), [&]<class C>(C) {
    const C* in = static_cast<const C*>(source.const_data_ptr());
    const auto decode_typed = [&]<class S>(S* out) {
      at::parallel_for(0, source.numel(), elements_per_piece, [&](std::int64_t begin, std::int64_t end) {
        const auto start = static_cast<std::size_t>(begin), count = static_cast<std::size_t>(end - begin);
        decode(std::span<const C>(in + start, count), std::span<S>(out + start, count), f);
      });
    };
    if (is_double) decode_typed(values.mutable_data_ptr<double>());
    else decode_typed(values.mutable_data_ptr<float>());
  });
  return values;
}

/// A block format key: the element's format key, block size, scaling index, integer elements.
block_format to_block_format(c10::IntArrayRef key) {
  TORCH_CHECK_VALUE(key.size() == 8, "minifloat: a block format key has 8 entries, not ", key.size());
  const block_format f{to_format(key.slice(0, 5)), static_cast<int>(key[5]),
                       enumerator(key[6], block_scaling::e4m3_times_tensor, "block scaling"), key[7] != 0};
  try {
    f.validate();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  return f;
}

/// x fake-quantized in blocks along `axis` (block.hpp's quantize_blocks). The tensor is seen as
/// (before, length, after) with blocks along `length`, and cut into units of whole blocks, each
/// one quantize_blocks call with its first value's flat index as options.index: a run of blocks
/// of one row when after = 1, one leading index's (length × after) column layout otherwise. Every
/// kernel is keyed by flat index and block, so the bits are the extension's for any cut; NVFP4's
/// default per-tensor scale is found over the whole tensor first, so the units agree on it.
at::Tensor quantize_blocks_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t axis, std::int64_t mode,
                              std::int64_t rule, std::int64_t on_overflow, std::int64_t seed, std::int64_t index,
                              std::int64_t random_bits, std::optional<double> tensor_scale) {
  constexpr const char* who = "minifloat.quantize";
  TORCH_CHECK_TYPE(x.layout() == at::kStrided && x.scalar_type() == at::kFloat, who, ": x has dtype ",
                   x.scalar_type(), "; block formats take float32");
  const block_format f = to_block_format(fmt);
  const std::int64_t rank = std::max<std::int64_t>(x.dim(), 1);
  TORCH_CHECK_VALUE(axis >= -rank && axis < rank, who, ": axis = ", axis, " is out of range for ", rank,
                    " dimension", rank != 1 ? "s" : "");
  TORCH_CHECK_VALUE(rule >= 0 && rule < static_cast<std::int64_t>(std::size(named_scale_rules)), who,
                    ": scale rule index ", rule, " is unknown");
  TORCH_CHECK_VALUE(f.scaling == block_scaling::e8m0 || rule == 0, who, ": scale rule ",
                    named_scale_rules[rule].first, " is for E8M0 (MX) scales");
  const rounding_options element = to_options(mode, on_overflow, random_bits, seed, index);
  (void)make_rounder<float>(f.element, element);
  block_options o;
  o.mode = element.mode;
  o.on_overflow = element.on_overflow;
  o.random_bits = element.random_bits;
  o.seed = element.seed;
  o.index = element.index;
  o.rule = named_scale_rules[rule].second;
  const at::Tensor source = x.resolve_neg().contiguous();
  const auto n = static_cast<std::size_t>(source.numel());
  const std::span<const float> in(source.const_data_ptr<float>(), n);
  if (f.scaling == block_scaling::e8m0) {
    TORCH_CHECK_VALUE(!tensor_scale || *tensor_scale == 1, who, ": tensor_scale is for block formats with a "
                      "per-tensor scale (nvfp4), not ", to_string(f));
  } else {
    // a given scale rounded to float32 as blocks.py rounds it; one beyond float32's range is refused
    const bool in_range = !tensor_scale || std::fabs(*tensor_scale) <= std::numeric_limits<float>::max();
    o.tensor_scale = !in_range ? 0.0f : tensor_scale ? static_cast<float>(*tensor_scale) : nvfp4_tensor_scale(in);
    TORCH_CHECK_VALUE(o.tensor_scale > 0 && std::isfinite(o.tensor_scale), who, ": tensor_scale = ",
                      tensor_scale ? *tensor_scale : o.tensor_scale, " is not a positive finite float32");
  }
  at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  if (n == 0) return result;
  const std::int64_t dim = x.dim() == 0 ? 0 : (axis + rank) % rank;
  const auto sizes = x.sizes();
  std::size_t before = 1, length = x.dim() == 0 ? 1 : static_cast<std::size_t>(sizes[dim]), after = 1;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) before *= static_cast<std::size_t>(sizes[d]);
    if (d > dim) after *= static_cast<std::size_t>(sizes[d]);
  }
  const auto block = static_cast<std::size_t>(f.block_size);
  const std::size_t blocks_along = (length + block - 1) / block;
  const std::size_t blocks_per_run = std::max<std::size_t>(1, elements_per_piece / block);
  const std::size_t runs_per_row = after == 1 ? (blocks_along + blocks_per_run - 1) / blocks_per_run : 1;
  const std::size_t units = before * runs_per_row;
  const std::size_t unit_values = std::max<std::size_t>(1, n / units);
  float* out = result.mutable_data_ptr<float>();
  at::parallel_for(0, static_cast<std::int64_t>(units),
                   static_cast<std::int64_t>(std::max<std::size_t>(1, elements_per_piece / unit_values)),
                   [&](std::int64_t first_unit, std::int64_t end_unit) {
                     for (auto u = static_cast<std::size_t>(first_unit); u < static_cast<std::size_t>(end_unit); ++u) {
                       std::size_t first = u * length * after, count = length * after;
                       block_layout layout{length, after, 0};
                       if (after == 1) {
                         const std::size_t begin = (u % runs_per_row) * blocks_per_run * block;
                         first = (u / runs_per_row) * length + begin;
                         count = std::min(blocks_per_run * block, length - begin);
                         layout = block_layout{1, count, 1};
                       }
                       block_options piece = o;
                       piece.index = o.index + first;
                       quantize_blocks(in.subspan(first, count), std::span<float>(out + first, count), f, piece,
                                       layout);
                     }
                   });
  return result;
}

}  // namespace

TORCH_LIBRARY_IMPL(minifloat, CPU, m) {
  m.impl("quantize", &quantize_op);
  m.impl("quantize_with_stats", &quantize_with_stats_op);
  m.impl("quantize_", &quantize_in_place_op);
  m.impl("quantize_ste", &quantize_ste_op);
  m.impl("encode", &encode_op);
  m.impl("decode", &decode_op);
  m.impl("quantize_blocks", &quantize_blocks_op);
}

}  // namespace minifloat::python
