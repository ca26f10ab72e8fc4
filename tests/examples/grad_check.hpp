// tests/examples/grad_check.hpp — central finite differences against analytic gradients, for
// the example trainer's layer tests.
//
// Verdict per element: |analytic − numeric| <= abs_tol · max|numeric| + rel_tol · |numeric|.
// Every comparison also proves it can fail: the same analytic gradient scaled by 1.03, and with
// its largest element moved by 2% of the tensor's scale, must both be rejected.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "nn/tensor.hpp"

namespace grad_check {

inline constexpr double abs_tol = 1e-3;
inline constexpr double rel_tol = 1e-2;

inline void fill_normal(std::span<float> v, std::mt19937_64& rng, float sigma = 1.0f) {
  std::normal_distribution<float> d(0.0f, sigma);
  for (float& x : v) x = d(rng);
}

/// Values whose magnitudes stay at least `gap` away from 0 (no ReLU kink within reach of h).
inline void fill_away_from_zero(std::span<float> v, std::mt19937_64& rng, float gap) {
  std::uniform_real_distribution<float> d(gap, 1.5f);
  std::bernoulli_distribution sign(0.5);
  for (float& x : v) x = sign(rng) ? d(rng) : -d(rng);
}

/// Distinct values at least `gap` apart in random order (max pooling without near-ties).
inline void fill_distinct(std::span<float> v, std::mt19937_64& rng, float gap) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = gap * (static_cast<float>(i) - static_cast<float>(v.size()) / 2);
  std::shuffle(v.begin(), v.end(), rng);
}

/// Every index when there are at most `limit`, else `limit` distinct random ones.
inline std::vector<std::size_t> pick(std::size_t n, std::size_t limit, std::mt19937_64& rng) {
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  if (n <= limit) return all;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(limit);
  return all;
}

/// (loss(v_i + h) − loss(v_i − h)) / (the step actually taken in float), for each picked i.
inline std::vector<double> numeric(std::span<float> v, const std::vector<std::size_t>& idx,
                                   const std::function<double()>& loss, float h) {
  std::vector<double> g;
  for (std::size_t i : idx) {
    const float saved = v[i];
    const float up = saved + h, down = saved - h;
    v[i] = up;
    const double lu = loss();
    v[i] = down;
    const double ld = loss();
    v[i] = saved;
    g.push_back((lu - ld) / (static_cast<double>(up) - static_cast<double>(down)));
  }
  return g;
}

struct verdict {
  double worst = 0.0;  // largest |a − n| / (abs_tol · scale + rel_tol · |n|); passes when <= 1
  double scale = 0.0;  // max |numeric|
};

inline verdict compare(std::span<const float> analytic, const std::vector<std::size_t>& idx,
                       const std::vector<double>& num) {
  verdict v;
  for (double n : num) v.scale = std::max(v.scale, std::abs(n));
  for (std::size_t j = 0; j < idx.size(); ++j) {
    const double a = analytic[idx[j]];
    v.worst = std::max(v.worst, std::abs(a - num[j]) / (abs_tol * v.scale + rel_tol * std::abs(num[j])));
  }
  return v;
}

/// Checks `analytic` against finite differences of `loss` over `values`, and that the check
/// would catch a wrong gradient.
inline void require_match(const std::string& what, std::span<const float> analytic, std::span<float> values,
                          const std::function<double()>& loss, float h, const std::vector<std::size_t>& idx) {
  INFO(what);
  REQUIRE(analytic.size() == values.size());
  REQUIRE(!idx.empty());
  const auto num = numeric(values, idx, loss, h);
  const verdict ok = compare(analytic, idx, num);
  INFO("worst error / tolerance = " << ok.worst << ", gradient scale " << ok.scale);
  REQUIRE(ok.scale > 1e-3);  // a vanishing gradient would make the check vacuous
  CHECK(ok.worst <= 1.0);

  std::vector<float> scaled(analytic.begin(), analytic.end());
  for (float& a : scaled) a *= 1.03f;
  CHECK(compare(scaled, idx, num).worst > 1.0);
  std::vector<float> moved(analytic.begin(), analytic.end());
  std::size_t big = 0;
  for (std::size_t j = 0; j < idx.size(); ++j)
    if (std::abs(num[j]) > std::abs(num[big])) big = j;
  moved[idx[big]] += static_cast<float>(0.02 * ok.scale);
  CHECK(compare(moved, idx, num).worst > 1.0);
}

inline void require_match(const std::string& what, std::span<const float> analytic, std::span<float> values,
                          const std::function<double()>& loss, float h, std::size_t limit, std::mt19937_64& rng) {
  require_match(what, analytic, values, loss, h, pick(values.size(), limit, rng));
}

/// Σ r_i y_i in double: a loss whose gradient with respect to y is r.
inline double project(const nn::tensor& y, const nn::tensor& r) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.numel(); ++i) s += static_cast<double>(r.values[i]) * y.values[i];
  return s;
}

}  // namespace grad_check
