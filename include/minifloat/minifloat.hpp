// minifloat/minifloat.hpp — everything of the core layer in one include.
#pragma once

#include "block.hpp"
#include "bulk.hpp"
#include "emulated_gemm.hpp"
#include "encode.hpp"
#include "format.hpp"
#include "format_name.hpp"
#include "fp.hpp"
#include "fp_math.hpp"
#include "hadamard.hpp"
#include "operand.hpp"
#include "parallel.hpp"
#include "random.hpp"
#include "round.hpp"
#include "stats.hpp"
#include "version.hpp"
