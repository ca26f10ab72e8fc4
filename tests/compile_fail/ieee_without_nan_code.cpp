#include <minifloat/fp.hpp>
minifloat::fp<5, 0> x;  // an ieee encoding with no mantissa bit has no NaN code
