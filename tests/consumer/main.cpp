// A user's program that only knows the installed package.
#include <minifloat/minifloat.hpp>

int main() {
  const float rounded = minifloat::round(0.1f, minifloat::binary16);
  return rounded == 0.0999755859375f ? 0 : 1;
}
