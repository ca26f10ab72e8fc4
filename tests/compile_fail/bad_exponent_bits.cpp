#include <minifloat/fp.hpp>
minifloat::fp<12, 3> x;  // exponent_bits outside 1..11
