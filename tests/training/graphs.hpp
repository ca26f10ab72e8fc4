// Hand-made networks for the training-layer tests, with element counts small enough to check
// group sizes, demotion and bit ratios by hand (the sums are written out next to each graph).
#pragma once

#include <minifloat/training/graph.hpp>

namespace test_graphs {

namespace mt = minifloat::training;

/// x(8) -> fc1 -> relu1 -> fc2 -> relu2 -> fc3 -> loss, batch 2, no biases.
///   x: Y 8 (no GY)                       fc1: Y 6, GY 6, W 12 (+ grad 12)
///   relu1: Y 6, GY 6                     fc2: Y 6, GY 6, W 9 (+ grad 9)
///   relu2: Y 6, GY 6                     fc3: Y 4, GY 4, W 6 (+ grad 6)
///   loss: Y 1, GY 1
/// Groups: G0 x      = x.Y 8 + fc1.W/grad 24                       = 32
///         G1 fc1    = fc1 12 + relu1 12 + fc2.W/grad 18            = 42
///         G2 fc2    = fc2 12 + relu2 12 + fc3.W/grad 12            = 36
///         G3 fc3    = fc3 8 + loss 2                               = 10   (total 120)
inline mt::graph mlp() {
  mt::graph g;
  g.add_input("x", 8);
  const auto fc1 = g.add_module("fc1", mt::module_kind::gemm, 6);
  g.add_parameter(fc1, "weight", 12);
  g.add_module("relu1", mt::module_kind::other, 6);
  const auto fc2 = g.add_module("fc2", mt::module_kind::gemm, 6);
  g.add_parameter(fc2, "weight", 9);
  g.add_module("relu2", mt::module_kind::other, 6);
  const auto fc3 = g.add_module("fc3", mt::module_kind::gemm, 4);
  g.add_parameter(fc3, "weight", 6);
  g.add_module("loss", mt::module_kind::other, 1);
  return g;
}

/// x(2x1x4x4) -> conv1(2ch) -> bn1 -> relu1 -> pool1 -> conv2(4ch) -> bn2 -> relu2 -> pool2 -> fc -> loss.
///   x: Y 32                 conv1: Y/GY 64 each, W 18     bn1: Y/GY 64, gamma 2, beta 2
///   relu1: Y/GY 64          pool1: Y/GY 16                conv2: Y/GY 32, W 72
///   bn2: Y/GY 32, gamma 4, beta 4      relu2: Y/GY 32     pool2: Y/GY 8
///   fc: Y/GY 6, W 12        loss: Y/GY 1
/// Groups: G0 x     = 32 + conv1.W 36                                       = 68
///         G1 conv1 = (64+64+64+16)*2 + bn1 params 8 + conv2.W 144          = 568
///         G2 conv2 = (32+32+32+8)*2 + bn2 params 16 + fc.W 24              = 248
///         G3 fc    = 6*2 + 1*2                                             = 14   (total 898)
inline mt::graph cnn() {
  mt::graph g;
  g.add_input("x", 32);
  const auto conv1 = g.add_module("conv1", mt::module_kind::gemm, 64);
  g.add_parameter(conv1, "weight", 18);
  const auto bn1 = g.add_module("bn1", mt::module_kind::other, 64);
  g.add_parameter(bn1, "gamma", 2);
  g.add_parameter(bn1, "beta", 2);
  g.add_module("relu1", mt::module_kind::other, 64);
  g.add_module("pool1", mt::module_kind::other, 16);
  const auto conv2 = g.add_module("conv2", mt::module_kind::gemm, 32);
  g.add_parameter(conv2, "weight", 72);
  const auto bn2 = g.add_module("bn2", mt::module_kind::other, 32);
  g.add_parameter(bn2, "gamma", 4);
  g.add_parameter(bn2, "beta", 4);
  g.add_module("relu2", mt::module_kind::other, 32);
  g.add_module("pool2", mt::module_kind::other, 8);
  const auto fc = g.add_module("fc", mt::module_kind::gemm, 6);
  g.add_parameter(fc, "weight", 12);
  g.add_module("loss", mt::module_kind::other, 1);
  return g;
}

/// Group sizes 10, 20, 20, 5 (a tie between G1 and G2): x(4) -> a -> b -> c (GEMMs) -> out.
///   G0 x = x.Y 4 + a.W 3+3 = 10         G1 a = a Y/GY 4+4 + b.W 6+6 = 20
///   G2 b = b Y/GY 5+5 + c.W 5+5 = 20    G3 c = c Y/GY 2+2 + out.Y 1 = 5     (total 55)
inline mt::graph ties() {
  mt::graph g;
  g.add_input("x", 4);
  const auto a = g.add_module("a", mt::module_kind::gemm, 4);
  g.add_parameter(a, "weight", 3);
  const auto b = g.add_module("b", mt::module_kind::gemm, 5);
  g.add_parameter(b, "weight", 6);
  const auto c = g.add_module("c", mt::module_kind::gemm, 2);
  g.add_parameter(c, "weight", 5);
  g.add_module("out", mt::module_kind::other, 1, /*output_gradient=*/false);
  return g;
}

}  // namespace test_graphs
