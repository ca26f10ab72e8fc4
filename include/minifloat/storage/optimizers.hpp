// minifloat/storage/optimizers.hpp — SGD and Adam/AdamW on fp32 weights and on split storage
// (extra-mantissa-bits paper §3.1: "reconstruct -> fp32 optimizer step -> split again";
// docs/semantics.md §8), with PyTorch's update rules (torch.optim.SGD, Adam, AdamW,
// single-tensor path): momentum buffer cloned from the first gradient, dampening, Nesterov,
// L2 or decoupled weight decay, bias-corrected Adam moments in fp32, maximize.
//
// Both kinds of weights go through the same per-element update, so a split step is bit for bit
// the fp32 step whenever the split is lossless (bf16 + 16 truncating: always, NaN aside). Each
// `*_step(split_tensor&, ...)` works in chunks: restore a chunk to fp32, update it, split it
// again as the tensor's next generation. Any other chunked weight store with the same interface
// (the concept chunked_weights: low_tensor.hpp's low-precision-only weights) steps the same way. The multi-tensor ("fused") overloads take many
// (params, grads, state) groups in one call and check every group before touching any.
// Scalars follow PyTorch: hyperparameters are doubles (Python floats), per-step factors (bias
// corrections, 1 - lr * weight_decay, ...) are computed in double and rounded to float once;
// every multiply-add that PyTorch writes as add/addcmul with a scalar is one fma, and addcdiv is
// ATen's self + (value * t1) / t2 (checked bit for bit against torch.optim by python/tests/).
//
// Errors: std::invalid_argument for invalid hyperparameters (PyTorch's checks) and for gradient
// or state sizes that do not match the parameters; std::domain_error when the update would give
// a weight the storage cannot hold (NaN, or ±Inf, in an all_finite visible format: a NaN or Inf
// gradient, or an update that overflows float). Every step is all-or-nothing: on any of these
// errors the weights, their generation, the optimizer state and its step count are exactly as
// before the call — for a multi-tensor step, those of every group. The storability check costs
// nothing for weights whose format holds every float result (IEEE and OCP-E4M3-style formats).
// For an all_finite format a step first bounds its result from the largest gradient and state
// magnitudes (one read of the gradients and the state, no decoding): when every updated weight
// is provably finite it commits at once; only otherwise (a non-finite or huge input) it runs the
// update on scratch copies of each chunk to find the first weight it could not store, before
// committing anything (bench_split_optimizers, docs/performance.md).
//
// Threads: the chunked-weights overloads also take a `minifloat::threads` count (parallel.hpp)
// and run the check and the update on contiguous ranges of weights, each a multiple of
// parallel_grain (or of the weights' own thread_grain(): low_block_tensor's blocks are never cut),
// one per thread. Every weight's update, split and stochastic draw depend only
// on its own values and index, so the weights, state and errors are bit-identical to the
// one-thread step for any thread count (tests/storage/test_optimizers.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/simd.hpp"
#include "../parallel.hpp"

#include "low_tensor.hpp"
#include "split.hpp"

namespace minifloat::storage {

struct sgd_options {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;

  void validate() const {
    const char* who = "minifloat::storage::sgd_options: ";
    if (!(lr >= 0)) throw std::invalid_argument(std::string(who) + "invalid learning rate " + std::to_string(lr));
    if (!(momentum >= 0)) throw std::invalid_argument(std::string(who) + "invalid momentum " + std::to_string(momentum));
    if (!(weight_decay >= 0))
      throw std::invalid_argument(std::string(who) + "invalid weight_decay " + std::to_string(weight_decay));
    if (nesterov && (momentum <= 0 || dampening != 0))
      throw std::invalid_argument(std::string(who) + "Nesterov momentum requires a momentum and zero dampening");
  }
};
/// The momentum buffer is created (a copy of the first update direction) on the first step.
struct sgd_state {
  std::vector<float> momentum_buffer;
  std::int64_t steps = 0;
};

/// How Adam's first moment moves toward the gradient. PyTorch changed its kernel in 2.0; both
/// are kept so that a step can match the PyTorch a user runs bit for bit.
enum class adam_first_moment : std::uint8_t {
  lerp,       ///< exp_avg.lerp_(grad, 1 - beta1): ATen's two-sided lerp (PyTorch >= 2.0)
  scale_add,  ///< exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1): one fma (PyTorch 1.x)
};

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  ///< true: AdamW (weights scaled by 1 - lr * weight_decay)
  bool maximize = false;
  adam_first_moment first_moment = adam_first_moment::lerp;

  void validate() const {
    const char* who = "minifloat::storage::adam_options: ";
    if (!(lr >= 0)) throw std::invalid_argument(std::string(who) + "invalid learning rate " + std::to_string(lr));
    if (!(eps >= 0)) throw std::invalid_argument(std::string(who) + "invalid epsilon " + std::to_string(eps));
    if (!(beta1 >= 0 && beta1 < 1)) throw std::invalid_argument(std::string(who) + "invalid beta1 " + std::to_string(beta1));
    if (!(beta2 >= 0 && beta2 < 1)) throw std::invalid_argument(std::string(who) + "invalid beta2 " + std::to_string(beta2));
    if (!(weight_decay >= 0))
      throw std::invalid_argument(std::string(who) + "invalid weight_decay " + std::to_string(weight_decay));
  }
};
/// fp32 first and second moments, zero until the first step.
struct adam_state {
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
  std::int64_t steps = 0;
};

/// Weights an optimizer steps a chunk at a time: load(start, out) restores weights [start,
/// start + out.size()) to fp32, store(start, x) writes them back, next_generation() starts a
/// rewrite (fresh stochastic draws); starts are multiples of 32. stores_every_float() says
/// whether store() accepts any float; when it does not, first_rejected(x) is the index of the
/// first value of x it would reject (x.size() if none) and stored_format() names the format, so
/// a step can check before it changes anything.
template <class W>
concept chunked_weights = requires(W& w, const W& cw, std::size_t start, std::span<float> out) {
  { cw.size() } -> std::convertible_to<std::size_t>;
  cw.load(start, out);
  w.store(start, std::span<const float>(out));
  w.next_generation();
  { cw.stores_every_float() } -> std::convertible_to<bool>;
  { cw.first_rejected(std::span<const float>(out)) } -> std::convertible_to<std::size_t>;
  { cw.stored_format() } -> std::convertible_to<format>;
};

/// One tensor of a multi-tensor step: split weights (the default) or low-precision-only ones.
template <class State, chunked_weights W = split_tensor>
struct split_group {
  W* params;
  std::span<const float> grads;
  State* state;
};

namespace detail {

/// Weights per chunk of a split step: restored, updated and split again while in L1.
inline constexpr std::size_t optimizer_chunk = 2048;

inline void check_sizes(std::size_t params, std::size_t grads, const char* who) {
  if (grads != params)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(grads) + " gradients for " +
                                std::to_string(params) + " parameters");
}
inline void check_state(std::size_t params, std::size_t state, const char* what, const char* who) {
  if (state != 0 && state != params)
    throw std::invalid_argument(std::string(who) + ": the " + what + " holds " + std::to_string(state) + " values for " +
                                std::to_string(params) + " parameters");
}

/// An SGD step's float factors.
struct sgd_factors {
  float lr, momentum, dampening_complement, weight_decay;
  bool use_momentum, nesterov, maximize, first;
};

inline void check(const sgd_state& s, std::size_t n, std::size_t grads, const char* who) {
  check_sizes(n, grads, who);
  check_state(n, s.momentum_buffer.size(), "momentum buffer", who);
}
/// The factors of the next step on state s (s is not changed).
inline sgd_factors next_factors(const sgd_state& s, const sgd_options& o) {
  const bool first = o.momentum != 0 && s.momentum_buffer.empty();
  return {static_cast<float>(o.lr), static_cast<float>(o.momentum), static_cast<float>(1 - o.dampening),
          static_cast<float>(o.weight_decay), o.momentum != 0, o.nesterov, o.maximize, first};
}
/// Creates the state on the first step and counts the step.
inline void begin_step(sgd_state& s, std::size_t n, const sgd_factors& c) {
  if (c.first) s.momentum_buffer.resize(n);
  ++s.steps;
}

/// Calls f with std::true_type or std::false_type: a run-time flag turned into a template argument.
template <class F>
void with_flag(bool flag, F f) {
  if (flag) f(std::true_type{});
  else f(std::false_type{});
}

/// Weights as a plain float array, for the loops below: the fp32 step's weights, and the tiles
/// a split step restores (step_tiles).
struct float_weights {
  float* p;
  float get(std::size_t i) const { return p[i]; }
  void set(std::size_t i, float x) const { p[i] = x; }
};

/// torch.optim.SGD's update of n weights w with gradients g and momentum buffer b (unused without
/// momentum), with the step's flags as template arguments: the loop has no branches and no
/// conditional store, so it vectorizes wherever it is inlined (a run-time flag inside the loop kept
/// it scalar inside the split step's chunk lambda).
template <bool Maximize, bool Decay, bool Momentum, bool First, bool Nesterov, class Weights>
void sgd_loop(Weights w, std::size_t n, const float* g, float* b, const sgd_factors c) {
  for (std::size_t i = 0; i < n; ++i) {
    const float weight = w.get(i);
    float d = Maximize ? -g[i] : g[i];
    if constexpr (Decay) d = std::fma(c.weight_decay, weight, d);  // d_p.add(param, alpha=weight_decay)
    if constexpr (Momentum) {
      // buf = clone(d_p) on the first step, else buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
      const float buf = First ? d : std::fma(c.dampening_complement, d, b[i] * c.momentum);
      b[i] = buf;
      d = Nesterov ? std::fma(c.momentum, buf, d) : buf;  // d_p.add(buf, alpha=momentum)
    }
    w.set(i, std::fma(-c.lr, d, weight));  // param.add_(d_p, alpha=-lr)
  }
}
/// Calls f(loop) with the sgd_loop for c's flags, as a callable loop(w, n, g, b, c): the flags
/// are turned into template arguments once, outside any loop over the weights.
template <class F>
void with_sgd_loop(const sgd_factors& c, F f) {
  with_flag(c.maximize, [&](auto maximize) {
    with_flag(c.weight_decay != 0, [&](auto decay) {
      constexpr bool Maximize = decltype(maximize)::value, Decay = decltype(decay)::value;
      if (!c.use_momentum) {
        f([](auto w, std::size_t n, const float* g, float* b, const sgd_factors& k) {
          sgd_loop<Maximize, Decay, false, false, false>(w, n, g, b, k);
        });
        return;
      }
      with_flag(c.first, [&](auto first) {
        with_flag(c.nesterov, [&](auto nesterov) {
          f([](auto w, std::size_t n, const float* g, float* b, const sgd_factors& k) {
            sgd_loop<Maximize, Decay, true, decltype(first)::value, decltype(nesterov)::value>(w, n, g, b, k);
          });
        });
      });
    });
  });
}
template <class Weights>
void update(Weights w, std::size_t n, const float* g, float* b, const sgd_factors& c) {
  with_sgd_loop(c, [&](auto loop) { loop(w, n, g, b, c); });
}
inline void update(std::span<float> p, const float* g, float* b, const sgd_factors& c) {
  update(float_weights{p.data()}, p.size(), g, b, c);
}

/// An Adam step's float factors.
struct adam_factors {
  float lerp_weight, beta1, beta2, beta2_complement, bias_correction2_sqrt, eps, neg_step_size, weight_decay, decay;
  bool decoupled, maximize;
  adam_first_moment first_moment;
};

inline void check(const adam_state& s, std::size_t n, std::size_t grads, const char* who) {
  check_sizes(n, grads, who);
  check_state(n, s.exp_avg.size(), "first moment", who);
  check_state(n, s.exp_avg_sq.size(), "second moment", who);
}
/// Creates the moments (zero) on the first step and counts the step.
inline void begin_step(adam_state& s, std::size_t n, const adam_factors&) {
  if (s.exp_avg.empty()) s.exp_avg.assign(n, 0.0f);
  if (s.exp_avg_sq.empty()) s.exp_avg_sq.assign(n, 0.0f);
  ++s.steps;
}
/// The factors of the next step on state s (s is not changed).
inline adam_factors next_factors(const adam_state& s, const adam_options& o) {
  const double step = static_cast<double>(s.steps + 1);
  const double bias_correction1 = 1 - std::pow(o.beta1, step);
  const double bias_correction2 = 1 - std::pow(o.beta2, step);
  return {static_cast<float>(1 - o.beta1),
          static_cast<float>(o.beta1),
          static_cast<float>(o.beta2),
          static_cast<float>(1 - o.beta2),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(o.eps),
          static_cast<float>(-(o.lr / bias_correction1)),
          static_cast<float>(o.weight_decay),
          static_cast<float>(1 - o.lr * o.weight_decay),
          o.decoupled_weight_decay,
          o.maximize,
          o.first_moment};
}

/// torch.optim.Adam / AdamW's update of weights p with gradients g and moments m, v, with the
/// step's flags as template arguments so the loops have no branches and vectorize.
/// ScaleAdd: PyTorch 1.x's first moment (SmallWeight unused). Each tile takes three passes
/// (moments, square roots, weights) so that the square roots go through the vector instruction:
/// under a user's default -fmath-errno, std::sqrt in the loop would keep it scalar. Every element
/// sees the same operations in the same order as in one fused loop.
template <bool Maximize, bool Decay, bool Decoupled, bool SmallWeight, bool ScaleAdd, class Weights>
void adam_loop(Weights w, std::size_t size, const float* g, float* m, float* v, const adam_factors c) {
  constexpr std::size_t tile = 1024;
  float root[tile];
  for (std::size_t start = 0; start < size; start += tile) {
    const std::size_t n = std::min(tile, size - start);
    const float* const gt = g + start;
    float* const mt = m + start;
    float* const vt = v + start;
    for (std::size_t i = 0; i < n; ++i) {
      float grad = Maximize ? -gt[i] : gt[i];
      if constexpr (Decay && !Decoupled) grad = std::fma(c.weight_decay, w.get(start + i), grad);  // grad.add(param, alpha=wd)
      if constexpr (ScaleAdd) {
        mt[i] = std::fma(c.lerp_weight, grad, mt[i] * c.beta1);  // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
      } else {
        // exp_avg.lerp_(grad, 1 - beta1), with ATen's lerp: exact at both ends, whichever side the weight is on
        const float diff = grad - mt[i];
        mt[i] = SmallWeight ? std::fma(c.lerp_weight, diff, mt[i]) : std::fma(-diff, 1.0f - c.lerp_weight, grad);
      }
      vt[i] = std::fma(c.beta2_complement * grad, grad, vt[i] * c.beta2);  // mul_(beta2).addcmul_(grad, grad, 1 - beta2)
    }
    minifloat::detail::sqrt_floats(vt, root, n);
    for (std::size_t i = 0; i < n; ++i) {
      float weight = w.get(start + i);
      // param.mul_(1 - lr * weight_decay), rounded on its own: written as w * decay, GCC's default
      // -ffp-contract=fast fuses it into the final add (fma + -0 is the product, -0 kept).
      if constexpr (Decay && Decoupled) weight = std::fma(weight, c.decay, -0.0f);
      const float denom = root[i] / c.bias_correction2_sqrt + c.eps;  // (sqrt / bc2_sqrt).add_(eps)
      w.set(start + i, weight + c.neg_step_size * mt[i] / denom);  // addcdiv_(exp_avg, denom, value=-step_size): self + value * t1 / t2
    }
  }
}
/// Calls f(loop) with the adam_loop for c's flags, as a callable loop(w, n, g, m, v, c).
template <class F>
void with_adam_loop(const adam_factors& c, F f) {
  with_flag(c.maximize, [&](auto maximize) {
    with_flag(c.weight_decay != 0, [&](auto decay) {
      with_flag(c.decoupled, [&](auto decoupled) {
        constexpr bool Maximize = decltype(maximize)::value, Decay = decltype(decay)::value,
                       Decoupled = decltype(decoupled)::value;
        if (c.first_moment == adam_first_moment::scale_add) {
          f([](auto w, std::size_t n, const float* g, float* m, float* v, const adam_factors& k) {
            adam_loop<Maximize, Decay, Decoupled, false, true>(w, n, g, m, v, k);
          });
          return;
        }
        with_flag(std::fabs(c.lerp_weight) < 0.5f, [&](auto small) {
          f([](auto w, std::size_t n, const float* g, float* m, float* v, const adam_factors& k) {
            adam_loop<Maximize, Decay, Decoupled, decltype(small)::value, false>(w, n, g, m, v, k);
          });
        });
      });
    });
  });
}
template <class Weights>
void update(Weights w, std::size_t n, const float* g, float* m, float* v, const adam_factors& c) {
  with_adam_loop(c, [&](auto loop) { loop(w, n, g, m, v, c); });
}
inline void update(std::span<float> p, const float* g, float* m, float* v, const adam_factors& c) {
  update(float_weights{p.data()}, p.size(), g, m, v, c);
}

/// Calls f(chunk, offset) for the chunks of at most optimizer_chunk weights of [0, n), in order
/// within each of the ranges for_each_chunk gives the threads (each range a multiple of `grain`,
/// itself a multiple of parallel_grain, so every chunk starts at a multiple of 32 and ends at one
/// or at n), with a buffer of its own per thread.
template <class F>
void for_each_optimizer_chunk(std::size_t n, minifloat::threads parallel, F f,
                              std::size_t grain = minifloat::parallel_grain) {
  minifloat::detail::for_each_chunk(
      n, parallel,
      [&](std::size_t, std::size_t begin, std::size_t length) {
        float w[optimizer_chunk];
        for (std::size_t start = begin; start < begin + length; start += optimizer_chunk)
          f(std::span<float>(w, std::min(optimizer_chunk, begin + length - start)), start);
      },
      grain);
}

/// Where threads may cut t's weights: at multiples of t.thread_grain() where W has one (weights
/// whose blocks share a scale: low_block_tensor), else of parallel_grain.
template <chunked_weights W>
std::size_t thread_grain(const W& t) {
  if constexpr (requires { { t.thread_grain() } -> std::convertible_to<std::size_t>; }) return t.thread_grain();
  else return minifloat::parallel_grain;
}
/// Throws when t cannot start a step now (W's check_steppable, where it has one: low_block_tensor
/// with a block left unfinished), before the step changes anything.
template <chunked_weights W>
void check_steppable(const W& t) {
  if constexpr (requires { t.check_steppable(); }) t.check_steppable();
}

/// Restores each chunk of t, applies `step(chunk, offset)`, stores it again as a new generation.
template <chunked_weights W, class Step>
void update_split(W& t, Step step, minifloat::threads parallel) {
  t.next_generation();
  for_each_optimizer_chunk(t.size(), parallel, [&](std::span<float> chunk, std::size_t start) {
    t.load(start, chunk);
    step(chunk, start);
    t.store(start, chunk);
  }, thread_grain(t));
}

/// Copies `n` values of a state vector from `at` into scratch, or zeros when the state is not
/// created yet; returns scratch.
inline float* scratch_copy(const std::vector<float>& state, std::size_t at, std::size_t n, float* scratch) {
  if (state.empty()) std::fill(scratch, scratch + n, 0.0f);
  else std::copy(state.begin() + static_cast<std::ptrdiff_t>(at), state.begin() + static_cast<std::ptrdiff_t>(at + n), scratch);
  return scratch;
}

/// The largest magnitude in `values` as a float: NaN or +Inf when one of them is not finite
/// (integer max of the magnitude bits, which orders finite floats, Inf and NaN; it vectorizes).
inline float max_magnitude(std::span<const float> values) noexcept {
  std::uint32_t m = 0;
  for (const float x : values) m = std::max(m, std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFU);
  return std::bit_cast<float>(m);
}

/// As max_magnitude, but NaN also when a value has its sign bit set (a second moment must not be
/// negative: its square root would be NaN).
inline float max_of_nonnegative(std::span<const float> values) noexcept {
  std::uint32_t m = 0;
  for (const float x : values) m = std::max(m, std::bit_cast<std::uint32_t>(x));
  return m >= 0x80000000U ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(m);
}

/// Whether every bound (double, each computed from magnitudes, so above every float
/// intermediate it bounds but for rounding) stays below half of float's largest value: then no
/// float operation of the step overflows or meets a NaN, and every result is finite.
inline bool all_safely_finite(std::initializer_list<double> bounds) noexcept {
  for (const double b : bounds)
    if (!(b < 0.5 * static_cast<double>(std::numeric_limits<float>::max()))) return false;
  return true;
}

/// The largest magnitude a weight of t can hold: the stored format's largest finite value, doubled
/// for the restored value of a split (its extra bits stay below the next binade).
template <chunked_weights W>
double largest_stored(const W& t) {
  return 2.0 * format(t.stored_format()).max_finite();
}

/// The check before a step that may be rejected: runs `dry(chunk, offset, scratch...)` — the
/// step's arithmetic on a copy of each chunk and of its state — and throws std::domain_error,
/// naming the first weight t could not store, before anything is changed. The commit that follows
/// repeats the same arithmetic on the same inputs, so it stores exactly the checked values.
/// With several threads each stops at its first rejected weight, and the error of the first range
/// is thrown: the same first weight, the same message.
template <chunked_weights W, class Dry>
void check_storable(const W& t, Dry dry, const char* who, minifloat::threads parallel) {
  for_each_optimizer_chunk(t.size(), parallel, [&](std::span<float> chunk, std::size_t start) {
    t.load(start, chunk);
    dry(chunk, start);
    if (const std::size_t i = t.first_rejected(std::span<const float>(chunk)); i < chunk.size())
      throw std::domain_error(std::string(who) + ": the update makes weight " + std::to_string(start + i) + " " +
                              (std::isnan(chunk[i]) ? "NaN" : chunk[i] > 0 ? "+Inf" : "-Inf") + ", which " +
                              to_string(format(t.stored_format())) +
                              " cannot store (a non-finite gradient or an overflowing update); nothing was changed");
  }, thread_grain(t));
}

/// Weights per tile of a one-pass step over byte-wide split fields: restored into 512 bytes of
/// floats (L1), updated and split again before the next tile is read, so every stream (fields,
/// gradients, state) advances together. A tile's restore, update and split (about 300
/// instructions for 128 weights) fit in the core's out-of-order window, so the next tile's
/// loads start while it computes. Smaller tiles pay the loop overhead more often, larger ones
/// leave the window; 128 measured fastest on the Intel machines of docs/performance.md.
inline constexpr std::size_t field_tile = 128;

/// How far ahead of the tile being updated a step requests lines: four tiles. The tile loop
/// requests the fields for writing (every step rewrites them in place), and an SGD step its
/// gradient and momentum lines (2 KiB of floats ahead). The restore and split between tiles
/// leave the hardware prefetcher no stream to follow, so the steps request the lines themselves;
/// closer requests arrive late, farther ones are evicted before use.
/// Adam's tile step, whose arithmetic covers its loads, gains nothing from requests for its
/// gradient and moments and makes none.
inline constexpr std::size_t tile_prefetch_distance = 4 * field_tile;

/// An optimizer's step on one tile of restored weights, called as (tile, at, n): the tile holds
/// weights [at, at + n). Type-erased, so that the tile loop over a layout's fields
/// (step_tiles) is compiled once per layout kind rather than once per optimizer flag variant
/// (SGD and Adam have 16 to 32 each): with the field code inlined into every variant, a program
/// that steps every layout took minutes to compile.
class tile_step {
 public:
  /// Holds a reference to `step`, which must outlive this object. A whole tile (n == field_tile)
  /// calls step with the constant size, so its loops compile to full-register loads and stores
  /// (one body taking the size as an argument was several times slower).
  template <class Step>
  explicit tile_step(Step& step) : object_(&step), call_(&call<Step>) {}
  void operator()(float* tile, std::size_t at, std::size_t n) const { call_(object_, tile, at, n); }

 private:
  template <class Step>
  [[gnu::flatten]] static void call(void* object, float* tile, std::size_t at, std::size_t n) {
    Step& step = *static_cast<Step*>(object);
    if (n == field_tile) step(tile, at, field_tile);
    else step(tile, at, std::min(n, field_tile));  // the bound (n < field_tile) lets GCC see the loops stay in bounds
  }
  void* object_;
  void (*call_)(void*, float*, std::size_t, std::size_t);
};

/// Runs step(tile, at, n) on every tile of n <= field_tile weights of `fields`
/// (byte_field_weights) in [begin, end) (begin a multiple of field_tile), restored into `tile`,
/// and stores the tile back. The restore and the split (each register of the tile drawn,
/// decided and split in one loop: pair_splitter::split_run) are flattened into this loop, one
/// copy per layout kind (GCC makes no copy per step: the object file of
/// tests/storage/test_optimizers.cpp holds the same ten as with `noclone`, which clang does not
/// know). The weights are a local copy whose address nothing outside sees, so GCC keeps their constants and the generator's
/// keys in registers across the field stores through byte pointers; in an out-of-line call per
/// tile it reloaded them every register.
template <class Fields>
[[gnu::noinline, gnu::flatten]] void step_tiles(const Fields& fields, tile_step step, std::size_t begin,
                                                std::size_t end) {
  static_assert(field_tile == Fields::tile_values, "a tile is restored and split in one call each");
  static_assert(minifloat::parallel_grain % field_tile == 0, "a thread's weights are whole tiles");
  Fields w = fields;
  alignas(64) float tile[field_tile];
  std::size_t start = begin;
  for (; start + field_tile <= end; start += field_tile) {
    w.prefetch_tile(start + tile_prefetch_distance);
    w.load_tile(start, field_tile, tile);
    step(tile, start, field_tile);
    w.store_tile(start, field_tile, tile);
  }
  const std::size_t m = end - start;
  w.load_tile(start, m, tile);
  step(tile, start, m);
  w.store_tile(start, m, tile);
}

/// step_tiles over all of `fields`, the ranges of up to t threads (for_each_chunk: multiples of
/// parallel_grain, hence of field_tile), each thread with its own copy of the fields' splitter.
template <class Fields>
void step_tiles_on(const Fields& fields, tile_step step, minifloat::threads t) {
  minifloat::detail::for_each_chunk(fields.size(), t, [&](std::size_t, std::size_t begin, std::size_t length) {
    step_tiles(fields, step, begin, begin + length);
  });
}

/// Starts a new generation of t and runs `step` on every tile of its byte-wide fields
/// (split_tensor::rewrite_byte_fields); false, stepping nothing, for other layouts. The step is
/// type-erased before the layout's field types are chosen, so each field kind's tile loop is
/// instantiated once, not once per field kind and optimizer flag variant.
template <class Split>
bool step_byte_fields(Split& t, tile_step step, minifloat::threads parallel) {
  return t.rewrite_byte_fields([&](auto fields) { step_tiles_on(fields, step, parallel); });
}

/// A step in two phases — check, then commit — so that a multi-tensor step can check every group
/// before it commits any. The optimizer's parts are the overloads below for its state.
template <chunked_weights W, class State, class Factors>
struct step_plan {
  W& params;
  std::span<const float> grads;
  State& state;
  Factors factors;
  minifloat::threads parallel{1};

  void check(const char* who) const {
    check_steppable(params);
    if (params.stores_every_float() || provably_storable(*this)) return;
    check_storable(params, [&](std::span<float> w, std::size_t at) { scratch_update(*this, w, at); }, who, parallel);
  }
  void commit() {
    begin_step(state, params.size(), factors);
    // Layouts with 8- and 16-bit fields step a small tile at a time in one pass.
    if constexpr (std::same_as<W, split_tensor>) {
      if (tile_update(*this)) return;
    }
    update_split(params, [&](std::span<float> w, std::size_t at) { state_update(*this, w, at); }, parallel);
  }
};
template <chunked_weights W>
using sgd_plan = step_plan<W, sgd_state, sgd_factors>;
template <chunked_weights W>
using adam_plan = step_plan<W, adam_state, adam_factors>;

/// From magnitudes alone: every weight SGD updates is finite (the common case; see the header).
template <chunked_weights W>
bool provably_storable(const sgd_plan<W>& s) {
  const sgd_factors& c = s.factors;
  const double g = max_magnitude(s.grads), p = largest_stored(s.params);
  const double b = c.use_momentum && !c.first ? double{max_magnitude(s.state.momentum_buffer)} : 0.0;
  const double d = g + std::fabs(double{c.weight_decay}) * p;
  const double buf = c.first ? d : std::fabs(double{c.dampening_complement}) * d + std::fabs(double{c.momentum}) * b;
  const double direction = !c.use_momentum ? d : c.nesterov ? std::fabs(double{c.momentum}) * buf + d : buf;
  return all_safely_finite({g, b, d, buf, direction, p + std::fabs(double{c.lr}) * direction});
}
/// SGD on chunk w of the weights with a scratch copy of the momentum buffer.
template <chunked_weights W>
void scratch_update(const sgd_plan<W>& s, std::span<float> w, std::size_t at) {
  float buffer[optimizer_chunk];
  float* b = nullptr;
  if (s.factors.use_momentum) b = s.factors.first ? buffer : scratch_copy(s.state.momentum_buffer, at, w.size(), buffer);
  update(w, s.grads.data() + at, b, s.factors);
}
/// SGD on chunk w of the weights and the momentum buffer itself.
template <chunked_weights W>
void state_update(const sgd_plan<W>& s, std::span<float> w, std::size_t at) {
  float* buffer = s.state.momentum_buffer.data();
  update(w, s.grads.data() + at, buffer == nullptr ? nullptr : buffer + at, s.factors);
}

/// SGD on byte-wide split fields, a tile at a time, and the momentum buffer; false, stepping
/// nothing, for other layouts.
template <chunked_weights W>
bool tile_update(const sgd_plan<W>& s) {
  const float* g = s.grads.data();
  float* b = s.state.momentum_buffer.data();
  bool stepped = false;
  with_sgd_loop(s.factors, [&](auto loop) {
    auto step = [&](float* tile, std::size_t at, std::size_t n) {
      const std::size_t ahead = at + tile_prefetch_distance, size = s.grads.size();
      minifloat::detail::prefetch_range(g, ahead, n, size);
      if (b != nullptr) minifloat::detail::prefetch_range<true>(b, ahead, n, size);
      loop(float_weights{tile}, n, g + at, b == nullptr ? nullptr : b + at, s.factors);
    };
    stepped = step_byte_fields(s.params, tile_step(step), s.parallel);
  });
  return stepped;
}

/// From magnitudes alone: every weight Adam updates is finite.
template <chunked_weights W>
bool provably_storable(const adam_plan<W>& s) {
  const adam_factors& c = s.factors;
  if (!(c.eps > 0)) return false;  // a zero denominator: 0 / 0 is possible
  const double g = max_magnitude(s.grads), p = largest_stored(s.params);
  const double m = max_magnitude(s.state.exp_avg), v = max_of_nonnegative(s.state.exp_avg_sq);
  const double wd = std::fabs(double{c.weight_decay});
  const double grad = g + (c.decoupled ? 0.0 : wd * p);
  const double w = c.decoupled ? p * std::fabs(double{c.decay}) : p;
  const double m_new = 3.0 * (m + grad);  // either lerp formula, weights in [0, 1]
  const double v_new = v + std::fabs(double{c.beta2_complement}) * grad * grad;
  const double root = std::sqrt(v_new) / double{c.bias_correction2_sqrt};
  const double step = std::fabs(double{c.neg_step_size}) * m_new / double{c.eps};
  return all_safely_finite({g, m, v, grad, w, m_new, v_new, grad * grad, root, step, w + step});
}
template <chunked_weights W>
void scratch_update(const adam_plan<W>& s, std::span<float> w, std::size_t at) {
  float m[optimizer_chunk], v[optimizer_chunk];
  update(w, s.grads.data() + at, scratch_copy(s.state.exp_avg, at, w.size(), m),
         scratch_copy(s.state.exp_avg_sq, at, w.size(), v), s.factors);
}
template <chunked_weights W>
void state_update(const adam_plan<W>& s, std::span<float> w, std::size_t at) {
  update(w, s.grads.data() + at, s.state.exp_avg.data() + at, s.state.exp_avg_sq.data() + at, s.factors);
}

/// Adam on byte-wide split fields, a tile at a time, and the moments; false, stepping nothing,
/// for other layouts.
template <chunked_weights W>
bool tile_update(const adam_plan<W>& s) {
  const float* g = s.grads.data();
  float* m = s.state.exp_avg.data();
  float* v = s.state.exp_avg_sq.data();
  bool stepped = false;
  with_adam_loop(s.factors, [&](auto loop) {
    auto step = [&](float* tile, std::size_t at, std::size_t n) {
      loop(float_weights{tile}, n, g + at, m + at, v + at, s.factors);
    };
    stepped = step_byte_fields(s.params, tile_step(step), s.parallel);
  });
  return stepped;
}

/// Multi-tensor step: every group's sizes, then every group's storability, then every commit.
template <class State, class Options, chunked_weights W>
void step_groups(std::span<const split_group<State, W>> groups, const Options& o, const char* who,
                 minifloat::threads parallel) {
  o.validate();
  for (const auto& g : groups) check(*g.state, g.params->size(), g.grads.size(), who);
  std::vector<step_plan<W, State, decltype(next_factors(std::declval<const State&>(), o))>> plans;
  plans.reserve(groups.size());
  for (const auto& g : groups) plans.push_back({*g.params, g.grads, *g.state, next_factors(*g.state, o), parallel});
  for (const auto& p : plans) p.check(who);
  for (auto& p : plans) p.commit();
}

}  // namespace detail

/// One SGD step on fp32 weights (the reference the split steps are compared with).
inline void sgd_step(std::span<float> params, std::span<const float> grads, sgd_state& s, const sgd_options& o) {
  o.validate();
  detail::check(s, params.size(), grads.size(), "minifloat::storage::sgd_step");
  const detail::sgd_factors c = detail::next_factors(s, o);
  detail::begin_step(s, params.size(), c);
  detail::update(params, grads.data(), s.momentum_buffer.data(), c);
}

/// One SGD step on split weights (or other chunked weights): restore, update in fp32, split again;
/// on up to `parallel` threads, bit-identical to one (see the header).
template <chunked_weights W>
void sgd_step(W& params, std::span<const float> grads, sgd_state& s, const sgd_options& o,
              minifloat::threads parallel = {1}) {
  const char* who = "minifloat::storage::sgd_step";
  o.validate();
  detail::check(s, params.size(), grads.size(), who);
  detail::sgd_plan<W> plan{params, grads, s, detail::next_factors(s, o), parallel};
  plan.check(who);
  plan.commit();
}

/// One Adam (or AdamW) step on fp32 weights.
inline void adam_step(std::span<float> params, std::span<const float> grads, adam_state& s, const adam_options& o) {
  o.validate();
  detail::check(s, params.size(), grads.size(), "minifloat::storage::adam_step");
  const detail::adam_factors c = detail::next_factors(s, o);
  detail::begin_step(s, params.size(), c);
  detail::update(params, grads.data(), s.exp_avg.data(), s.exp_avg_sq.data(), c);
}

/// One Adam (or AdamW) step on split weights (or other chunked weights); on up to `parallel`
/// threads, bit-identical to one.
template <chunked_weights W>
void adam_step(W& params, std::span<const float> grads, adam_state& s, const adam_options& o,
               minifloat::threads parallel = {1}) {
  const char* who = "minifloat::storage::adam_step";
  o.validate();
  detail::check(s, params.size(), grads.size(), who);
  detail::adam_plan<W> plan{params, grads, s, detail::next_factors(s, o), parallel};
  plan.check(who);
  plan.commit();
}

/// Multi-tensor SGD: every group checked (sizes, then storability) before any is stepped; each
/// group on up to `parallel` threads.
inline void sgd_step(std::span<const split_group<sgd_state>> groups, const sgd_options& o,
                     minifloat::threads parallel = {1}) {
  detail::step_groups(groups, o, "minifloat::storage::sgd_step", parallel);
}
inline void sgd_step(std::span<const split_group<sgd_state, low_tensor>> groups, const sgd_options& o,
                     minifloat::threads parallel = {1}) {
  detail::step_groups(groups, o, "minifloat::storage::sgd_step", parallel);
}
/// Multi-tensor Adam / AdamW: every group checked (sizes, then storability) before any is stepped.
inline void adam_step(std::span<const split_group<adam_state>> groups, const adam_options& o,
                      minifloat::threads parallel = {1}) {
  detail::step_groups(groups, o, "minifloat::storage::adam_step", parallel);
}
inline void adam_step(std::span<const split_group<adam_state, low_tensor>> groups, const adam_options& o,
                      minifloat::threads parallel = {1}) {
  detail::step_groups(groups, o, "minifloat::storage::adam_step", parallel);
}

}  // namespace minifloat::storage
