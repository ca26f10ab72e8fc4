#include <minifloat/fp.hpp>
minifloat::fp<8, 3, 5000> x;  // the range lies outside double's
