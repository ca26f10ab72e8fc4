// python/src/containers.cpp — Schrödinger's FP's dynamic fp32 containers (quantum.hpp: QM/QE
// bitlength learning; bitwave.hpp: BitWave; container_footprint.hpp: what they store) for
// minifloat.training.DynamicContainers. Every rule, every quantization and every bit count is the
// headers'; this file only moves indices and raw float buffers across.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <minifloat/training/bitwave.hpp>
#include <minifloat/training/container_footprint.hpp>
#include <minifloat/training/quantum.hpp>

#include "binding.hpp"

namespace minifloat::python {

namespace {

namespace mt = minifloat::training;

const std::vector<std::string> footprint_variant_names{"fp32", "mantissa", "exponent", "exponent_gecko", "both",
                                                       "both_gecko"};

const std::vector<std::string> gecko_names{"faithful", "improved"};  // storage::gecko_variant's order

/// t, or IndexError naming what it indexes.
std::size_t checked_index(std::size_t t, std::size_t size, const char* what) {
  if (t >= size) throw py::index_error(std::string(what) + " index " + std::to_string(t) + " is out of range (" +
                                       std::to_string(size) + ")");
  return t;
}

mt::tensor_class class_of(bool is_weight) { return is_weight ? mt::tensor_class::weight : mt::tensor_class::activation; }

/// (mantissa bits, full range, emin, emax, exponent bits) of a container.
py::tuple container_tuple(const mt::container& c) {
  return py::make_tuple(c.mantissa_bits, c.range.full, c.range.emin, c.range.emax, c.exponent_bits());
}

py::tuple totals_tuple(const mt::footprint_totals& t) {
  return py::make_tuple(t.elements, t.sign_bits, t.mantissa_bits, t.exponent_bits, t.gecko_bits, t.gecko_elements);
}

}  // namespace

void bind_containers(py::module_& m) {
  m.attr("footprint_variant_names") = footprint_variant_names;

  py::class_<mt::quantum_containers>(m, "QuantumContainers")
      .def(py::init([](bool fixed_point, bool learn_mantissa, bool learn_exponent, double gamma_mantissa,
                       double gamma_exponent, double learning_rate, bool element_share, bool linearised,
                       std::uint64_t seed) {
        mt::quantum_options o;
        o.kind = fixed_point ? mt::container_kind::fixed_point : mt::container_kind::floating_point;
        o.learn_mantissa = learn_mantissa;
        o.learn_exponent = learn_exponent;
        o.gamma_mantissa = gamma_mantissa;
        o.gamma_exponent = gamma_exponent;
        o.learning_rate = learning_rate;
        o.weighting = element_share ? mt::lambda_rule::element_share : mt::lambda_rule::footprint_share;
        o.exponent_rule = linearised ? mt::exponent_gradient::linearised : mt::exponent_gradient::finite_difference;
        o.seed = seed;
        return mt::quantum_containers(o);  // validates the options (ValueError naming the field)
      }))
      .def("add", [](mt::quantum_containers& c, const std::string& name, bool is_weight, std::size_t numel) {
        return c.add(name, class_of(is_weight), numel);
      })
      .def("size", [](const mt::quantum_containers& c) { return c.tensors().size(); })
      // (name, is_weight, numel, n_m, n_e, k_m, k_e, container)
      .def("tensor", [](const mt::quantum_containers& c, std::size_t t) {
        const mt::quantum_tensor& q = c.tensors()[checked_index(t, c.tensors().size(), "tensor")];
        return py::make_tuple(q.name(), q.cls() == mt::tensor_class::weight, q.numel(), q.mantissa_length(),
                              q.exponent_length(), q.mantissa_bits(), q.exponent_bits(), container_tuple(q.current()));
      })
      .def("set_lengths", [](mt::quantum_containers& c, std::size_t t, double mantissa, double exponent) {
        c.tensors()[checked_index(t, c.tensors().size(), "tensor")].set_lengths(mantissa, exponent);
      })
      .def_property_readonly("learning", &mt::quantum_containers::learning)
      .def("set_learning", &mt::quantum_containers::set_learning)
      .def("begin_step", &mt::quantum_containers::begin_step)
      .def("begin_evaluation", &mt::quantum_containers::begin_evaluation)
      .def("end_step", &mt::quantum_containers::end_step)
      // BitWave's network-wide container imposed on every tensor.
      .def("impose_all", [](mt::quantum_containers& c, int mantissa_bits, int narrowing) {
        const mt::container k{mantissa_bits, mt::exponent_range::narrowed(narrowing)};
        (void)mt::mantissa_keep_mask(mantissa_bits);  // throws for bits outside 0..23
        for (mt::quantum_tensor& t : c.tensors()) t.impose(k);
      })
      .def("forward", [](mt::quantum_containers& c, std::size_t t, std::uintptr_t address, std::size_t n, bool training) {
        checked_index(t, c.tensors().size(), "tensor");
        const auto values = span_at<float>(address, n);
        py::gil_scoped_release unlocked;
        c.forward(t, values, training);
      })
      .def("backward", [](mt::quantum_containers& c, std::size_t t, std::uintptr_t address, std::size_t n) {
        checked_index(t, c.tensors().size(), "tensor");
        const auto grad = span_at<float>(address, n);
        py::gil_scoped_release unlocked;
        c.backward(t, grad);
      })
      // A forward whose unquantized input is kept with the call rather than in the container:
      // the forward runs on a copy of tensor t (whose own kept input stays empty, so the copy is
      // small) and the copy, holding this forward's input and draw, is returned for the matching
      // backward_kept. Several forwards before one backward (gradient accumulation, a module
      // called twice) then each get their own input's bitlength gradient. None in evaluation.
      .def("forward_kept",
           [](mt::quantum_containers& c, std::size_t t, std::uintptr_t address, std::size_t n,
              bool training) -> py::object {
             checked_index(t, c.tensors().size(), "tensor");
             const auto values = span_at<float>(address, n);
             if (!training) {
               py::gil_scoped_release unlocked;
               c.forward(t, values, false);
               return py::none();
             }
             auto kept = std::make_unique<mt::quantum_tensor>(c.tensors()[t]);
             {
               py::gil_scoped_release unlocked;
               kept->forward(values, true);
             }
             return py::cast(std::move(kept));
           })
      // The backward of a forward_kept: tensor t's state swapped for the kept one for the call
      // (the container's own backward, which adds to tensor t's bitlength gradients), then back.
      .def("backward_kept", [](mt::quantum_containers& c, std::size_t t, mt::quantum_tensor& kept,
                               std::uintptr_t address, std::size_t n) {
        checked_index(t, c.tensors().size(), "tensor");
        if (kept.name() != c.tensors()[t].name())
          throw std::invalid_argument("backward_kept: the kept forward is of " + kept.name() + ", not of " +
                                      c.tensors()[t].name());
        const auto grad = span_at<float>(address, n);
        py::gil_scoped_release unlocked;
        std::swap(c.tensors()[t], kept);
        try {
          c.backward(t, grad);
        } catch (...) {
          std::swap(c.tensors()[t], kept);
          throw;
        }
        std::swap(c.tensors()[t], kept);
      })
      .def("task_gradient", [](const mt::quantum_containers& c, std::size_t t) {
        const mt::bitlength_gradients& g = c.task_gradient(t);
        return py::make_tuple(g.mantissa, g.exponent);
      });

  py::class_<mt::quantum_tensor>(m, "KeptContainerForward");  // opaque: what backward_kept takes back

  py::class_<mt::bitlength_schedule>(m, "BitlengthSchedule")
      .def(py::init<std::size_t, std::size_t>())
      .def("learning_rate_changed", &mt::bitlength_schedule::learning_rate_changed)
      .def("learning_in", &mt::bitlength_schedule::learning_in);

  py::class_<mt::bitwave>(m, "BitWave")
      .def(py::init([](std::size_t history, double threshold, std::size_t cadence, bool adjust_mantissa,
                       bool adjust_exponent, int initial_mantissa_bits, int initial_narrowing) {
        return mt::bitwave(mt::bitwave_options{history, threshold, cadence, adjust_mantissa, adjust_exponent,
                                               initial_mantissa_bits, initial_narrowing});
      }))
      .def("observe", [](mt::bitwave& b, double loss) { return static_cast<int>(b.observe(loss)); })
      .def_property_readonly("mantissa_bits", &mt::bitwave::mantissa_bits)
      .def_property_readonly("narrowing", &mt::bitwave::narrowing)
      .def_property_readonly("fixed", &mt::bitwave::fixed)
      .def_property_readonly("last_slope", &mt::bitwave::last_slope)
      .def_property_readonly("mean_mantissa_bits", &mt::bitwave::mean_mantissa_bits)
      .def_property_readonly("mean_narrowing", &mt::bitwave::mean_narrowing)
      .def("current", [](const mt::bitwave& b) { return container_tuple(b.current()); })
      .def("fix_at_average", &mt::bitwave::fix_at_average);

  py::class_<mt::footprint_totals>(m, "FootprintTotals")
      .def("counts", [](const mt::footprint_totals& t) { return totals_tuple(t); })
      .def_property_readonly("has_gecko", &mt::footprint_totals::has_gecko)
      .def("bits", [](const mt::footprint_totals& t, int v) {
        return t.bits(enumerator<mt::footprint_variant>(v, footprint_variant_names, "footprint variant"));
      })
      .def("reduction", [](const mt::footprint_totals& t, int v, int baseline_bits) {
        return t.reduction(enumerator<mt::footprint_variant>(v, footprint_variant_names, "footprint variant"),
                           baseline_bits);
      })
      .def("bits_per_element", [](const mt::footprint_totals& t, int v) {
        return t.bits_per_element(enumerator<mt::footprint_variant>(v, footprint_variant_names, "footprint variant"));
      })
      .def("shares", [](const mt::footprint_totals& t) {
        return py::make_tuple(t.mantissa_share(), t.exponent_share(), t.gecko_exponent_share());
      });

  py::class_<mt::container_ledger>(m, "ContainerLedger")
      .def(py::init([](const std::vector<bool>& is_weight) {
        std::vector<mt::tensor_class> classes;
        for (bool w : is_weight) classes.push_back(class_of(w));
        return mt::container_ledger(std::move(classes));
      }))
      .def("size", &mt::container_ledger::size)
      // Counts the stored (already quantized) values of tensor t: describe_stored's sign rule and,
      // with a Gecko variant, the exact size of their Gecko-encoded exponents.
      .def("record", [](mt::container_ledger& l, std::size_t t, std::uintptr_t address, std::size_t n, int mantissa_bits,
                        int exponent_bits, bool sign_always, std::optional<int> gecko) {
        checked_index(t, l.size(), "tensor");
        const auto values = span_at<const float>(address, n);
        std::optional<storage::gecko_variant> variant;
        if (gecko) variant = enumerator<storage::gecko_variant>(*gecko, gecko_names, "gecko variant");
        py::gil_scoped_release unlocked;
        l.record(t, mt::describe_stored(values, mantissa_bits, exponent_bits,
                                        sign_always ? mt::sign_rule::always : mt::sign_rule::omit_when_nonnegative,
                                        variant));
      })
      .def("tensor", [](const mt::container_ledger& l, std::size_t t) { return l.tensor(checked_index(t, l.size(), "tensor")); })
      .def("totals", [](const mt::container_ledger& l, std::optional<bool> is_weight) {
        return is_weight ? l.totals(class_of(*is_weight)) : l.totals();
      })
      .def("add", [](mt::container_ledger& l, const mt::container_ledger& o) { l += o; })
      .def("clear", &mt::container_ledger::clear);
}

}  // namespace minifloat::python
