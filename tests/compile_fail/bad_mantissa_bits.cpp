#include <minifloat/fp.hpp>
minifloat::fp<5, 60> x;  // mantissa_bits outside 0..52
