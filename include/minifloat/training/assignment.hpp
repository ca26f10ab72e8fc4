// minifloat/training/assignment.hpp — precision assignments π ∈ Π(C) of the precision-assignment
// paper: the baselines of §3.1 (all-high, uniform π_unif, operator-based π_op and its variant
// π_op') and the paper's size-ordered precision demotion π_ours,r (§4.1, Algorithm 1) with the
// increasing- and random-order ablations of §5.4.
//
// An assignment is a precision level per site; apply() puts it into the graph's sites with the
// formats of the graph's precision_candidates. Every assignment here leaves a tensor whose role
// the candidates keep high (by default every weight gradient GP, as in all of the paper's
// experiments, §5.2) in high precision.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "../random.hpp"
#include "graph.hpp"
#include "grouping.hpp"

namespace minifloat::training {

/// level[s] is the precision of site s (indexed like graph::sites()).
struct assignment {
  std::vector<precision> level;

  std::vector<site_id> low_sites() const {
    std::vector<site_id> out;
    for (site_id s = 0; s < level.size(); ++s)
      if (level[s] == precision::low) out.push_back(s);
    return out;
  }
};

namespace detail {
inline void set_low(const graph& g, assignment& a, site_id s) {
  if (s != no_site && g.candidates().may_go_low(g.at(s).kind())) a.level[s] = precision::low;
}
inline std::vector<std::size_t> gemm_modules(const graph& g) {
  std::vector<std::size_t> out;
  for (std::size_t m = 0; m < g.modules().size(); ++m)
    if (g.modules()[m].is_gemm) out.push_back(m);
  return out;
}
}  // namespace detail

/// π_hi: every tensor high (the paper's π_ours,0).
inline assignment all_high(const graph& g) { return {std::vector<precision>(g.sites().size(), precision::high)}; }

/// π_unif: every tensor low — Y, P and GY; GP too only if the candidates allow it (by default
/// they do not, as in the paper's experiments, so π_unif = π_ours,1, §C.1).
inline assignment uniform(const graph& g) {
  assignment a = all_high(g);
  for (site_id s = 0; s < a.level.size(); ++s) detail::set_low(g, a, s);
  return a;
}

/// π_op (eq. 2): for every GEMM except the first and the last, its inputs go low — the input
/// activation (Y of the module feeding it), its weights P, and the gradient of its output GY.
inline assignment operator_based(const graph& g) {
  assignment a = all_high(g);
  const std::vector<std::size_t> gemms = detail::gemm_modules(g);
  for (std::size_t k = 1; k + 1 < gemms.size(); ++k) {
    const module& m = g.modules()[gemms[k]];
    if (m.input) detail::set_low(g, a, g.modules()[*m.input].y);
    for (site_id p : m.params) detail::set_low(g, a, p);
    detail::set_low(g, a, m.gy);
  }
  return a;
}

/// π_op' (Kalamkar et al.): as π_op plus the outputs of those GEMMs and all their gradients —
/// {v_i, θ_i, v_{i+1}, dv_i, dθ_i, dv_{i+1}}; dθ_i only where the candidates allow GP low.
inline assignment operator_based_variant(const graph& g) {
  assignment a = operator_based(g);
  const std::vector<std::size_t> gemms = detail::gemm_modules(g);
  for (std::size_t k = 1; k + 1 < gemms.size(); ++k) {
    const module& m = g.modules()[gemms[k]];
    detail::set_low(g, a, m.y);
    if (m.input) detail::set_low(g, a, g.modules()[*m.input].gy);
    for (site_id gp : m.param_grads) detail::set_low(g, a, gp);
  }
  return a;
}

enum class demotion_order : std::uint8_t {
  decreasing,  ///< the paper's: largest group first (ties: earlier group first)
  increasing,  ///< ablation π_ours[inc]: smallest first (ties: earlier group first)
  random,      ///< ablation π_ours[rand]: a seeded permutation
};

/// Group indices in the order demotion visits them.
inline std::vector<std::size_t> demotion_sequence(const std::vector<tensor_group>& groups, demotion_order order,
                                                  std::uint64_t seed = 0) {
  std::vector<std::size_t> seq(groups.size());
  std::iota(seq.begin(), seq.end(), std::size_t{0});
  switch (order) {
    case demotion_order::decreasing:
      std::stable_sort(seq.begin(), seq.end(), [&](std::size_t a, std::size_t b) { return groups[a].size > groups[b].size; });
      break;
    case demotion_order::increasing:
      std::stable_sort(seq.begin(), seq.end(), [&](std::size_t a, std::size_t b) { return groups[a].size < groups[b].size; });
      break;
    case demotion_order::random: {
      // Fisher–Yates on the core's counter RNG with rejection sampling: the permutation depends
      // only on the seed, on every platform and standard library (std::shuffle's does not).
      const counter_rng rng{seed};
      std::uint64_t draw = 0;
      for (std::size_t i = seq.size(); i > 1; --i) {
        const std::uint64_t n = i;
        constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
        const std::uint64_t limit = top - top % n;  // accept draws below a multiple of n
        std::uint64_t x;
        do x = rng.bits64(draw++);
        while (x >= limit);
        std::swap(seq[i - 1], seq[static_cast<std::size_t>(x % n)]);
      }
      break;
    }
  }
  return seq;
}

struct demotion_result {
  assignment levels;
  std::vector<std::size_t> groups_demoted;  ///< group indices, in demotion order
  double demoted_share = 0;                 ///< Σ size of demoted groups / Σ size of all groups
};

/// π_ours,r (Algorithm 1): start all-high, visit the groups in `order` and demote one group at a
/// time — Y and P to their low format, GY to its low format, GP only if the candidates allow —
/// stopping *before* a group once the demoted share has reached r. So the group whose demotion
/// crosses r is included and the share ends at or above r (or at 1 when the groups run out):
/// "until ratio_lo(π) ≥ r is first satisfied". r = 0 demotes nothing; r = 1 demotes every group.
///
/// The share compared with r is the one of the reference code (get_ids_chosen): the demoted
/// groups' element count over all elements of TS, each group counted whole, GP included. The
/// reported bit ratio of footprint.hpp excludes the GP that stays high, so it ends below r.
inline demotion_result demote_by_size(const graph& g, const std::vector<tensor_group>& groups, double r,
                                      demotion_order order = demotion_order::decreasing, std::uint64_t seed = 0) {
  if (!(r >= 0.0 && r <= 1.0))
    throw std::invalid_argument("minifloat::training::demote_by_size: r = " + std::to_string(r) + " is outside [0, 1]");
  demotion_result res{all_high(g), {}, 0.0};
  const std::uint64_t total = total_size(groups);
  std::uint64_t demoted = 0;
  for (std::size_t k : demotion_sequence(groups, order, seed)) {
    // Integer counts, one correctly rounded division: a share equal to r in exact arithmetic
    // compares equal to the double nearest r.
    res.demoted_share = total == 0 ? 1.0 : static_cast<double>(demoted) / static_cast<double>(total);
    if (r < 1.0 && res.demoted_share >= r) break;  // r = 1 also takes empty groups, as the reference does
    for (site_id s : groups[k].sites) detail::set_low(g, res.levels, s);
    res.groups_demoted.push_back(k);
    demoted += groups[k].size;
    res.demoted_share = total == 0 ? 1.0 : static_cast<double>(demoted) / static_cast<double>(total);
  }
  return res;
}

inline demotion_result demote_by_size(const graph& g, double r, demotion_order order = demotion_order::decreasing,
                                      std::uint64_t seed = 0) {
  return demote_by_size(g, group_tensors(g), r, order, seed);
}

/// Puts `a` into the sites: each site's formats become its role's candidates and its level
/// a.level[s]; rounding is enabled.
inline void apply(graph& g, const assignment& a) {
  if (a.level.size() != g.sites().size())
    throw std::invalid_argument("minifloat::training::apply: the assignment has " + std::to_string(a.level.size()) +
                                " levels for " + std::to_string(g.sites().size()) + " sites");
  for (site_id s = 0; s < a.level.size(); ++s) {
    site& t = g.at(s);
    t.set_formats(g.candidates()[t.kind()]);
    t.set_level(a.level[s]);
    t.set_enabled(true);
  }
}

/// π_fp32: every site passes values through unrounded.
inline void disable_rounding(graph& g) {
  for (site& t : g.sites()) t.set_enabled(false);
}

}  // namespace minifloat::training
