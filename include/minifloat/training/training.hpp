// minifloat/training/training.hpp — the whole training layer: rounding sites, the network
// description, tensor grouping, precision assignments (baselines and size-ordered demotion),
// overflow-driven promotion, dynamic loss scaling, FP32 master weights and the footprint
// measures of the precision-assignment paper; and the dynamic containers of Schrödinger's FP
// (QM/QE/QI, BitWave, their footprint, and the epoch/step controller both trainers drive:
// docs/dynamic-containers.md), and the per-parameter seed rule. docs/training.md shows a
// training step.
#pragma once

#include "assignment.hpp"
#include "bitwave.hpp"
#include "candidates.hpp"
#include "container_footprint.hpp"
#include "container_quantize.hpp"
#include "dynamic_controller.hpp"
#include "footprint.hpp"
#include "graph.hpp"
#include "grouping.hpp"
#include "loss_scale.hpp"
#include "master_weights.hpp"
#include "parameter_seed.hpp"
#include "promotion.hpp"
#include "quantum.hpp"
#include "site.hpp"
