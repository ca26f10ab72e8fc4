// minifloat/training/grouping.hpp — tensor grouping of the precision-assignment paper (§4.1,
// Algorithm 1; docs/semantics.md §3): the unit that precision demotion moves to low
// precision as a whole.
//
// Walking the modules in execution order, a new group starts at the first module (the network
// input) and at every GEMM. A group holds Y and GY of its starting module and of every non-GEMM
// module after it up to the next GEMM, plus P and GP of every module whose input comes from a
// module of the group — in practice the group's BatchNorm parameters and the next GEMM's
// weights. (The first module has no input; its parameters, if any, stay in its own group.)
// Group size = total element count of its sites at the training batch size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graph.hpp"

namespace minifloat::training {

struct tensor_group {
  std::string name;                  ///< the starting module's name
  std::size_t first_module = 0;      ///< index of the starting module (the input or a GEMM)
  std::vector<std::size_t> modules;  ///< modules whose Y/GY belong here, in execution order
  std::vector<site_id> sites;        ///< Y, GY of those modules, then P, GP of the modules they feed
  std::uint64_t size = 0;            ///< Σ numel over `sites`
};

/// group_of[m] = index of the group holding module m's Y and GY.
inline std::vector<std::size_t> group_of_modules(const graph& g) {
  std::vector<std::size_t> group_of(g.modules().size());
  std::size_t current = 0;
  for (std::size_t m = 0; m < g.modules().size(); ++m) {
    if (m > 0 && g.modules()[m].is_gemm) ++current;
    group_of[m] = current;
  }
  return group_of;
}

/// The groups in order of their starting module; every site of `g` is in exactly one group.
inline std::vector<tensor_group> group_tensors(const graph& g) {
  const auto mods = g.modules();
  std::vector<tensor_group> groups;
  if (mods.empty()) return groups;
  const std::vector<std::size_t> group_of = group_of_modules(g);
  groups.resize(group_of.back() + 1);
  for (std::size_t m = 0; m < mods.size(); ++m) {
    tensor_group& grp = groups[group_of[m]];
    if (grp.modules.empty()) {
      grp.name = mods[m].name;
      grp.first_module = m;
    }
    grp.modules.push_back(m);
  }
  auto add = [&](std::size_t grp, site_id s) {
    if (s == no_site) return;
    groups[grp].sites.push_back(s);
    groups[grp].size += g.at(s).numel();
  };
  for (std::size_t m = 0; m < mods.size(); ++m) {
    add(group_of[m], mods[m].y);
    add(group_of[m], mods[m].gy);
  }
  for (std::size_t m = 0; m < mods.size(); ++m) {
    // A module's parameters go with the group its input comes from: a GEMM's weights join the
    // tensors that feed it, not the ones it produces.
    const std::size_t grp = mods[m].input ? group_of[*mods[m].input] : group_of[m];
    for (std::size_t k = 0; k < mods[m].params.size(); ++k) {
      add(grp, mods[m].params[k]);
      add(grp, mods[m].param_grads[k]);
    }
  }
  return groups;
}

/// Σ of all group sizes = the element count of TS.
inline std::uint64_t total_size(const std::vector<tensor_group>& groups) {
  std::uint64_t n = 0;
  for (const tensor_group& grp : groups) n += grp.size;
  return n;
}

}  // namespace minifloat::training
