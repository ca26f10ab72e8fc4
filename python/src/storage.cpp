// python/src/storage.cpp — the storage layer for minifloat._core: k-bit packing (bitpack.hpp),
// Gecko exponent and tensor codecs (gecko.hpp, gecko_tensor.hpp), split and low-precision-only
// weights (split.hpp, low_tensor.hpp), MX block-scaled weights (low_block_tensor.hpp) and the
// optimizers that step them (optimizers.hpp).
// A thin layer; see binding.hpp for the conventions.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <minifloat/block.hpp>

#include <minifloat/storage/bitpack.hpp>
#include <minifloat/storage/gecko.hpp>
#include <minifloat/storage/gecko_tensor.hpp>
#include <minifloat/storage/low_block_tensor.hpp>
#include <minifloat/storage/low_tensor.hpp>
#include <minifloat/storage/optimizers.hpp>
#include <minifloat/storage/split.hpp>

#include "binding.hpp"

namespace minifloat::python {

namespace {

namespace ms = minifloat::storage;

// Name tables in enumerator order (see binding.hpp).
const std::vector<std::string> gecko_variant_names{"faithful", "improved"};
const std::vector<std::string> split_mode_names{"truncate", "stochastic"};
const std::vector<std::string> first_moment_names{"lerp", "scale_add"};

/// Values handed to the packer, widened to 32 bits a block at a time (their bits zero-extended:
/// an int16 code -1 is 0xffff). Values of 8-byte items above 32 bits are reported as too wide.
class widened_values {
 public:
  widened_values(std::uintptr_t address, int item_bytes, std::size_t count)
      : address_(address), item_bytes_(item_bytes), count_(count) {
    if (item_bytes != 1 && item_bytes != 2 && item_bytes != 4 && item_bytes != 8)
      throw std::invalid_argument("minifloat.pack: integer items of " + std::to_string(item_bytes) + " bytes");
  }
  /// Values [start, start + out.size()) widened; returns the index of the first one above
  /// 32 bits, or out.size().
  std::size_t read(std::size_t start, std::span<std::uint32_t> out) const {
    const auto* bytes = at<const unsigned char>(address_) + start * static_cast<std::size_t>(item_bytes_);
    // One loop per item width, so that each is a fixed-size load the compiler vectorises (a
    // memcpy of a run-time size per value cost about 8 ns a value).
    switch (item_bytes_) {
      case 1: return widen<std::uint8_t>(bytes, out);
      case 2: return widen<std::uint16_t>(bytes, out);
      case 4: return widen<std::uint32_t>(bytes, out);
      default: return widen<std::uint64_t>(bytes, out);
    }
  }
  std::size_t size() const { return count_; }

 private:
  template <class U>
  static std::size_t widen(const unsigned char* bytes, std::span<std::uint32_t> out) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      U v;
      std::memcpy(&v, bytes + i * sizeof(U), sizeof(U));
      if constexpr (sizeof(U) == 8) {
        if (v >> 32) return i;
      }
      out[i] = static_cast<std::uint32_t>(v);
    }
    return out.size();
  }

  std::uintptr_t address_;
  int item_bytes_;
  std::size_t count_;
};

constexpr std::size_t pack_block = 4096;  // a multiple of 32: blocks start at whole words

void pack_codes(std::uintptr_t values, int item_bytes, std::size_t n, int bits, std::uintptr_t words,
                std::size_t nwords) {
  const widened_values source(values, item_bytes, n);
  const auto target = span_at<std::uint32_t>(words, nwords);
  (void)ms::packed_words(n, bits);  // validates bits before anything is read
  if (nwords < ms::packed_words(n, bits))
    throw std::invalid_argument("minifloat.pack: the output holds " + std::to_string(nwords) + " words, " +
                                std::to_string(ms::packed_words(n, bits)) + " needed");
  std::vector<std::uint32_t> block(pack_block);
  // Every value is checked before any word is written.
  for (std::size_t start = 0; start < n; start += pack_block) {
    const std::span<std::uint32_t> part(block.data(), std::min(pack_block, n - start));
    const std::size_t k = source.read(start, part);
    const std::size_t wide = k < part.size() ? k : ms::detail::first_too_wide(part, bits);
    if (wide < part.size())
      throw std::invalid_argument("minifloat.pack: the value at flat index " + std::to_string(start + wide) +
                                  " does not fit in " + std::to_string(bits) + " bits");
  }
  for (std::size_t start = 0; start < n; start += pack_block) {
    const std::span<std::uint32_t> part(block.data(), std::min(pack_block, n - start));
    source.read(start, part);
    ms::pack(part, bits, target.subspan(start / 32 * static_cast<std::size_t>(bits)));
  }
}

py::array_t<std::uint8_t> to_array(const std::vector<std::uint8_t>& bytes) {
  py::array_t<std::uint8_t> a(static_cast<py::ssize_t>(bytes.size()));
  if (!bytes.empty()) std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
  return a;
}

[[noreturn]] void gecko_failure(ms::gecko_errc e) { throw std::invalid_argument(std::string(ms::gecko_message(e))); }

ms::gecko_variant to_variant(int v) { return enumerator<ms::gecko_variant>(v, gecko_variant_names, "gecko variant"); }

py::array_t<std::uint32_t> words_of(const ms::packed_array& a) {
  py::array_t<std::uint32_t> out(static_cast<py::ssize_t>(a.words().size()));
  if (!a.words().empty()) std::memcpy(out.mutable_data(), a.words().data(), a.words().size() * sizeof(std::uint32_t));
  return out;
}
ms::packed_array array_of(std::uintptr_t words, std::size_t nwords, std::size_t size, int bits) {
  return ms::packed_array::from_words(span_at<const std::uint32_t>(words, nwords), size, bits);
}

/// Split storage for one parameter tensor.
struct split_weights {
  ms::split_tensor tensor;
  split_weights(std::uintptr_t values, std::size_t n, const format_tuple& visible, int extra_bits, int mode,
                std::uint64_t seed)
      : tensor(span_at<const float>(values, n), layout(visible, extra_bits, mode), seed) {}
  explicit split_weights(ms::split_tensor t) : tensor(std::move(t)) {}
  /// (visible words, extra words, size, seed, generation): what from_parts takes back.
  py::tuple parts() const {
    return py::make_tuple(words_of(tensor.visible()), words_of(tensor.extra()), tensor.size(), tensor.seed(),
                          tensor.generation());
  }
  static split_weights from_parts(const format_tuple& visible, int extra_bits, int mode, std::uint64_t seed,
                                  std::uint64_t generation, std::size_t size, std::uintptr_t visible_words,
                                  std::size_t visible_count, std::uintptr_t extra_words, std::size_t extra_count) {
    const ms::split_layout l = layout(visible, extra_bits, mode);
    return split_weights(ms::split_tensor::from_parts(l, seed, generation,
                                                      array_of(visible_words, visible_count, size, l.visible_bits()),
                                                      array_of(extra_words, extra_count, size, l.extra_bits)));
  }
  static ms::split_layout layout(const format_tuple& visible, int extra_bits, int mode) {
    return {to_format(visible), extra_bits, enumerator<ms::split_mode>(mode, split_mode_names, "split mode")};
  }
  std::size_t nbytes() const { return (tensor.visible().words().size() + tensor.extra().words().size()) * 4; }
  void restore(std::uintptr_t out) const { tensor.reconstruct(span_at<float>(out, tensor.size())); }
  void visible(std::uintptr_t out) const { tensor.visible_values(span_at<float>(out, tensor.size())); }
};

/// Low-precision-only storage for one parameter tensor.
struct low_weights {
  ms::low_tensor tensor;
  low_weights(std::uintptr_t values, std::size_t n, const format_tuple& f, int mode, std::uint64_t seed)
      : tensor(span_at<const float>(values, n), to_format(f), checked_mode(mode), seed) {}
  explicit low_weights(ms::low_tensor t) : tensor(std::move(t)) {}
  /// (code words, size, seed, generation): what from_parts takes back.
  py::tuple parts() const {
    return py::make_tuple(words_of(tensor.codes()), tensor.size(), tensor.seed(), tensor.generation());
  }
  static low_weights from_parts(const format_tuple& f, int mode, std::uint64_t seed, std::uint64_t generation,
                                std::size_t size, std::uintptr_t words, std::size_t count) {
    const format fmt = to_format(f);
    return low_weights(ms::low_tensor::from_parts(fmt, checked_mode(mode), seed, generation,
                                                  array_of(words, count, size, ms::code_bits(fmt, ms::sign_storage::stored))));
  }
  static rounding checked_mode(int mode) { return enumerator<rounding>(mode, rounding_names, "rounding"); }
  std::size_t nbytes() const { return tensor.codes().words().size() * 4; }
  void restore(std::uintptr_t out) const { tensor.decode(span_at<float>(out, tensor.size())); }
  void visible(std::uintptr_t out) const { restore(out); }  // the stored values are the visible ones
};

/// MX block-scaled storage for one parameter tensor: rows x cols, blocks along each row.
struct block_weights {
  ms::low_block_tensor tensor;
  block_weights(std::uintptr_t values, std::size_t n, const std::string& name, std::size_t rows, int mode,
                std::uint64_t seed)
      : tensor(span_at<const float>(values, n), named(name), rows, low_weights::checked_mode(mode), seed) {}
  explicit block_weights(ms::low_block_tensor t) : tensor(std::move(t)) {}
  static block_format named(const std::string& name) {
    const std::optional<block_format> f = find_block_format(name);
    if (!f) throw std::invalid_argument("minifloat.optim.BlockStorage: no block format named '" + name + "'");
    return *f;
  }
  /// (element words, scale codes, size, rows, seed, generation): what from_parts takes back.
  py::tuple parts() const {
    const auto& scales = tensor.scales();
    py::array_t<std::uint8_t> s(static_cast<py::ssize_t>(scales.size()));
    if (!scales.empty()) std::memcpy(s.mutable_data(), scales.data(), scales.size());
    return py::make_tuple(words_of(tensor.elements()), s, tensor.size(), tensor.rows(), tensor.seed(),
                          tensor.generation());
  }
  /// The stored tensor whose parts these are. low_block_tensor has no constructor from codes, so
  /// the codes are decoded and encoded again (the decoded values of a block give back its scale
  /// and its codes), the generation counted up to the saved one, and the result compared with
  /// the saved codes: a checkpoint either comes back exactly or is refused.
  static block_weights from_parts(const std::string& name, std::size_t rows, int mode, std::uint64_t seed,
                                  std::uint64_t generation, std::size_t size, std::uintptr_t words, std::size_t nwords,
                                  std::uintptr_t scales, std::size_t nscales) {
    const block_format f = named(name);
    if (rows == 0 || size % rows != 0)
      throw std::invalid_argument("minifloat.optim.load_state_dict: " + std::to_string(rows) + " rows for " +
                                  std::to_string(size) + " weights");
    const block_layout layout{rows, size / rows, 1};
    const auto saved = ms::packed_block_tensor::from_parts(
        f, layout, size, span_at<const std::uint32_t>(words, nwords), span_at<const std::uint8_t>(scales, nscales));
    std::vector<float> values(size);
    saved.decode(values);
    ms::low_block_tensor t(values, f, rows, low_weights::checked_mode(mode), seed);
    for (std::uint64_t g = 0; g < generation; ++g) t.next_generation();
    const ms::packed_block_tensor again = t.packed();
    if (!(again.elements() == saved.elements()) ||
        !std::equal(again.scales().begin(), again.scales().end(), saved.scales().begin(), saved.scales().end()))
      throw std::invalid_argument("minifloat.optim.load_state_dict: the stored block codes are not codes this "
                                  "storage writes (another format, or damaged)");
    return block_weights(std::move(t));
  }
  std::size_t nbytes() const { return tensor.bytes(); }
  void restore(std::uintptr_t out) const { tensor.decode(span_at<float>(out, tensor.size())); }
  void visible(std::uintptr_t out) const { restore(out); }  // the stored values are the visible ones
};

/// Gradients of a step refused when one is NaN or infinite (low-precision and block storage: an
/// infinite gradient would saturate the weight and leave ±Inf in the optimizer state for good).
void check_finite_gradients(const std::vector<std::span<const float>>& grads, const char* who) {
  for (std::size_t p = 0; p < grads.size(); ++p)
    for (std::size_t i = 0; i < grads[p].size(); ++i)
      if (!std::isfinite(grads[p][i]))
        throw std::domain_error(std::string(who) + ": the gradient of parameter " + std::to_string(p) + " is " +
                                (std::isnan(grads[p][i]) ? "NaN" : "infinite") + " at flat index " + std::to_string(i) +
                                ", which this storage refuses; nothing was changed");
}

/// One optimizer step over many parameters, all or nothing: every parameter's options, sizes
/// and storability are checked (optimizers.hpp's step plans) before any parameter is changed,
/// so an error leaves every weight and every state as it was. Each parameter has its own
/// options (its parameter group's). One thread per parameter: low_block_tensor's threaded
/// steps are not used from Python.
template <class W, class State, class Options>
void step_all(const std::vector<W*>& weights, const std::vector<std::uintptr_t>& grads,
              const std::vector<std::size_t>& sizes, const std::vector<State*>& states,
              const std::vector<Options>& options, bool refuse_non_finite, const char* who) {
  const std::size_t n = weights.size();
  if (grads.size() != n || sizes.size() != n || states.size() != n || options.size() != n)
    throw std::invalid_argument(std::string(who) + ": mismatched argument lists");
  std::vector<std::span<const float>> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (weights[i] == nullptr || states[i] == nullptr) throw std::invalid_argument(std::string(who) + ": None given");
    for (std::size_t j = 0; j < i; ++j)
      if (weights[j] == weights[i] || states[j] == states[i])
        throw std::invalid_argument(std::string(who) + ": a weight store or state given twice");
    options[i].validate();
    ms::detail::check(*states[i], weights[i]->tensor.size(), sizes[i], who);
    g[i] = span_at<const float>(grads[i], sizes[i]);
  }
  using plan = ms::detail::step_plan<decltype(weights[0]->tensor), State,
                                     decltype(ms::detail::next_factors(std::declval<const State&>(), options[0]))>;
  py::gil_scoped_release unlocked;
  if (refuse_non_finite) check_finite_gradients(g, who);
  std::vector<plan> plans;
  plans.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    plans.push_back({weights[i]->tensor, g[i], *states[i], ms::detail::next_factors(*states[i], options[i]), {1}});
  for (const plan& p : plans) p.check(who);
  for (plan& p : plans) p.commit();
}

using sgd_tuple = std::tuple<double, double, double, double, bool, bool>;
using adam_tuple = std::tuple<double, double, double, double, double, bool, bool, int>;

py::array_t<float> copy_of(const std::vector<float>& v) {
  py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
  return a;
}

ms::sgd_options sgd_opts(double lr, double momentum, double dampening, double weight_decay, bool nesterov, bool maximize) {
  return {lr, momentum, dampening, weight_decay, nesterov, maximize};
}
ms::adam_options adam_opts(double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                           bool maximize, int first_moment) {
  ms::adam_options o{lr, beta1, beta2, eps, weight_decay, decoupled, maximize};
  o.first_moment = enumerator<ms::adam_first_moment>(first_moment, first_moment_names, "first-moment rule");
  return o;
}

/// The Python class of a weight store: built from values (init) or from_parts, read back as the
/// restored or visible values, its parts and its size in bytes.
template <class W, class Init>
void bind_weights(py::module_& m, const char* name, Init init) {
  py::class_<W>(m, name)
      .def(init)
      .def_property_readonly("size", [](const W& w) { return w.tensor.size(); })
      .def_property_readonly("nbytes", &W::nbytes)
      .def_property_readonly("generation", [](const W& w) { return w.tensor.generation(); })
      .def("restore", &W::restore)
      .def("visible", &W::visible)
      .def("parts", &W::parts)
      .def_static("from_parts", &W::from_parts);
}

template <class W>
void bind_steps(py::module_& m) {
  m.def("sgd_step", [](W& w, std::uintptr_t grads, std::size_t n, ms::sgd_state& s, double lr, double momentum,
                       double dampening, double weight_decay, bool nesterov, bool maximize) {
    const auto o = sgd_opts(lr, momentum, dampening, weight_decay, nesterov, maximize);
    py::gil_scoped_release unlocked;
    ms::sgd_step(w.tensor, span_at<const float>(grads, n), s, o);
  });
  m.def("adam_step", [](W& w, std::uintptr_t grads, std::size_t n, ms::adam_state& s, double lr, double beta1,
                        double beta2, double eps, double weight_decay, bool decoupled, bool maximize, int first_moment) {
    const auto o = adam_opts(lr, beta1, beta2, eps, weight_decay, decoupled, maximize, first_moment);
    py::gil_scoped_release unlocked;
    ms::adam_step(w.tensor, span_at<const float>(grads, n), s, o);
  });
}

/// sgd_steps / adam_steps on a list of one kind of weight store (see step_all).
template <class W>
void bind_multi_steps(py::module_& m) {
  m.def("sgd_steps", [](const std::vector<W*>& weights, const std::vector<std::uintptr_t>& grads,
                        const std::vector<std::size_t>& sizes, const std::vector<ms::sgd_state*>& states,
                        const std::vector<sgd_tuple>& settings, bool refuse_non_finite) {
    std::vector<ms::sgd_options> o;
    for (const auto& [lr, momentum, dampening, weight_decay, nesterov, maximize] : settings)
      o.push_back(sgd_opts(lr, momentum, dampening, weight_decay, nesterov, maximize));
    step_all(weights, grads, sizes, states, o, refuse_non_finite, "minifloat::storage::sgd_step");
  });
  m.def("adam_steps", [](const std::vector<W*>& weights, const std::vector<std::uintptr_t>& grads,
                         const std::vector<std::size_t>& sizes, const std::vector<ms::adam_state*>& states,
                         const std::vector<adam_tuple>& settings, bool refuse_non_finite) {
    std::vector<ms::adam_options> o;
    for (const auto& [lr, beta1, beta2, eps, weight_decay, decoupled, maximize, first] : settings)
      o.push_back(adam_opts(lr, beta1, beta2, eps, weight_decay, decoupled, maximize, first));
    step_all(weights, grads, sizes, states, o, refuse_non_finite, "minifloat::storage::adam_step");
  });
}

}  // namespace

void bind_storage(py::module_& m) {
  m.attr("gecko_variant_names") = gecko_variant_names;
  m.attr("split_mode_names") = split_mode_names;
  m.attr("first_moment_names") = first_moment_names;
  m.def("packed_words", [](std::size_t n, int bits) { return ms::packed_words(n, bits); });
  m.def("pack", &pack_codes);
  m.def("unpack", [](std::uintptr_t words, std::size_t nwords, int bits, std::size_t count, std::uintptr_t out) {
    ms::unpack(span_at<const std::uint32_t>(words, nwords), bits, count, span_at<std::uint32_t>(out, count));
  });

  m.def("gecko_encoded_size", [](std::uintptr_t values, std::size_t n, int variant) {
    const ms::gecko_size s = ms::gecko_encoded_size(span_at<const float>(values, n), to_variant(variant));
    return py::make_tuple(s.bits, s.bytes);
  });
  m.def("gecko_encode_exponents", [](std::uintptr_t values, std::size_t n, int variant) {
    return to_array(ms::gecko_encode_exponents(span_at<const float>(values, n), to_variant(variant)));
  });
  m.def("gecko_decode_exponents", [](std::uintptr_t buffer, std::size_t size, std::size_t count, int variant,
                                     std::uintptr_t out) {
    const ms::gecko_errc e = ms::gecko_decode_exponents(span_at<const std::uint8_t>(buffer, size), count,
                                                        span_at<std::uint8_t>(out, count), to_variant(variant));
    if (e != ms::gecko_errc::ok) gecko_failure(e);
  });
  m.def("gecko_encode_tensor", [](std::uintptr_t values, std::size_t n, int variant, int mantissa_bits,
                                  const options_tuple& rounding, bool checksum) {
    ms::gecko_tensor_options o{to_variant(variant), mantissa_bits, to_options(rounding)};
    o.checksum = checksum;
    return to_array(ms::gecko_encode_tensor(span_at<const float>(values, n), o));
  });
  m.def("gecko_tensor_header", [](std::uintptr_t buffer, std::size_t size) {
    ms::gecko_tensor_header h;
    if (const auto e = ms::gecko_read_tensor_header(span_at<const std::uint8_t>(buffer, size), h); e != ms::gecko_errc::ok)
      gecko_failure(e);
    return py::make_tuple(static_cast<int>(h.variant), h.mantissa_bits, h.count);
  });
  m.def("gecko_decode_tensor", [](std::uintptr_t buffer, std::size_t size, std::uintptr_t out, std::size_t n) {
    if (const auto e = ms::gecko_decode_tensor(span_at<const std::uint8_t>(buffer, size), span_at<float>(out, n));
        e != ms::gecko_errc::ok)
      gecko_failure(e);
  });

  bind_weights<split_weights>(m, "SplitWeights",
                              py::init<std::uintptr_t, std::size_t, const format_tuple&, int, int, std::uint64_t>());
  bind_weights<low_weights>(m, "LowWeights", py::init<std::uintptr_t, std::size_t, const format_tuple&, int, std::uint64_t>());
  py::class_<ms::sgd_state>(m, "SgdState")
      .def(py::init<>())
      .def_readonly("steps", &ms::sgd_state::steps)
      .def_property_readonly("nbytes", [](const ms::sgd_state& s) { return s.momentum_buffer.size() * sizeof(float); })
      .def("momentum_buffer", [](const ms::sgd_state& s) { return copy_of(s.momentum_buffer); })
      .def("set", [](ms::sgd_state& s, std::uintptr_t buffer, std::size_t n, std::int64_t steps) {
        s.momentum_buffer.assign(at<const float>(buffer), at<const float>(buffer) + n);
        s.steps = steps;
      });
  py::class_<ms::adam_state>(m, "AdamState")
      .def(py::init<>())
      .def_readonly("steps", &ms::adam_state::steps)
      .def_property_readonly("nbytes",
                             [](const ms::adam_state& s) { return (s.exp_avg.size() + s.exp_avg_sq.size()) * sizeof(float); })
      .def("exp_avg", [](const ms::adam_state& s) { return copy_of(s.exp_avg); })
      .def("exp_avg_sq", [](const ms::adam_state& s) { return copy_of(s.exp_avg_sq); })
      .def("set", [](ms::adam_state& s, std::uintptr_t exp_avg, std::uintptr_t exp_avg_sq, std::size_t n,
                     std::int64_t steps) {
        s.exp_avg.assign(at<const float>(exp_avg), at<const float>(exp_avg) + n);
        s.exp_avg_sq.assign(at<const float>(exp_avg_sq), at<const float>(exp_avg_sq) + n);
        s.steps = steps;
      });
  m.def("check_sgd", [](double lr, double momentum, double dampening, double weight_decay, bool nesterov, bool maximize) {
    sgd_opts(lr, momentum, dampening, weight_decay, nesterov, maximize).validate();
  });
  m.def("check_adam", [](double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                         bool maximize, int first_moment) {
    adam_opts(lr, beta1, beta2, eps, weight_decay, decoupled, maximize, first_moment).validate();
  });
  bind_weights<block_weights>(
      m, "BlockWeights", py::init<std::uintptr_t, std::size_t, const std::string&, std::size_t, int, std::uint64_t>());
  m.attr("block_storage_names") = [] {
    std::vector<std::string> names;
    for (const auto& [name, f] : named_block_formats)
      if (f.scaling == block_scaling::e8m0) names.emplace_back(name);  // NVFP4's tensor scale: see low_block_tensor.hpp
    return names;
  }();
  bind_steps<split_weights>(m);
  bind_steps<low_weights>(m);
  bind_steps<block_weights>(m);
  bind_multi_steps<split_weights>(m);
  bind_multi_steps<low_weights>(m);
  bind_multi_steps<block_weights>(m);
  // fp32 steps (the reference the tests compare the stored steps with)
  m.def("sgd_step_fp32", [](std::uintptr_t params, std::uintptr_t grads, std::size_t n, ms::sgd_state& s, double lr,
                            double momentum, double dampening, double weight_decay, bool nesterov, bool maximize) {
    ms::sgd_step(span_at<float>(params, n), span_at<const float>(grads, n), s,
                 sgd_opts(lr, momentum, dampening, weight_decay, nesterov, maximize));
  });
  m.def("adam_step_fp32", [](std::uintptr_t params, std::uintptr_t grads, std::size_t n, ms::adam_state& s, double lr,
                             double beta1, double beta2, double eps, double weight_decay, bool decoupled, bool maximize,
                             int first_moment) {
    ms::adam_step(span_at<float>(params, n), span_at<const float>(grads, n), s,
                  adam_opts(lr, beta1, beta2, eps, weight_decay, decoupled, maximize, first_moment));
  });
}

}  // namespace minifloat::python
