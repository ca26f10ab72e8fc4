// minifloat/training/candidates.hpp — the precision-candidate assignment C : TS × {lo, hi} → FP
// of the precision-assignment paper (§3.1, §5.2): the high and low format of every tensor,
// chosen by its role.
//
// Default = the paper's C (from Sun et al. 2019): high = fp(6,9,0) for every tensor; low =
// fp(4,3,4) for forward tensors (Y, P) and fp(5,2,0) for backward ones (GY, GP). The paper keeps
// every weight gradient dθ in high precision in all its assignments (§5.2, "following Sun et
// al."); `weight_gradients_stay_high` says so, and the assignments in assignment.hpp obey it.
#pragma once

#include "../format.hpp"
#include "site.hpp"

namespace minifloat::training {

struct precision_candidates {
  format_pair activation{fp_6_9_0, fp_4_3_4};
  format_pair activation_gradient{fp_6_9_0, fp_5_2_0};
  format_pair weight{fp_6_9_0, fp_4_3_4};
  format_pair weight_gradient{fp_6_9_0, fp_5_2_0};
  bool weight_gradients_stay_high = true;

  constexpr const format_pair& operator[](role r) const {
    switch (r) {
      case role::activation: return activation;
      case role::activation_gradient: return activation_gradient;
      case role::weight: return weight;
      case role::weight_gradient: return weight_gradient;
    }
    return activation;
  }
  /// Whether an assignment may put a tensor of role r in low precision at all.
  constexpr bool may_go_low(role r) const { return !(r == role::weight_gradient && weight_gradients_stay_high); }

  friend constexpr bool operator==(const precision_candidates&, const precision_candidates&) = default;
};

}  // namespace minifloat::training
