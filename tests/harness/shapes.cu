// The harness's input shapes on the host (no GPU): kl::shaped_element over one buffer, as kl_shape_kernel maps it.
//   shapes MODE KNOT KEY N SORTED LO HI: N values on [LO, HI), from a sorted grid (SORTED 1) or from the generator's own
//   uniform values (multiples of 2^-24 of the range, hashed from the index), mapped under the shape KEY draws in MODE
//   (knots KNOT elements apart); one value per line. tests/test_input_shapes.py reads it.
#include <cstdio>
#include <cstdlib>

#include <kernelloop_harness.cuh>

int main(int argc, char** argv) {
  if (argc != 8) return 2;
  const int mode = atoi(argv[1]);
  const size_t knot = strtoull(argv[2], nullptr, 10), n = strtoull(argv[4], nullptr, 10);
  const uint64_t key = strtoull(argv[3], nullptr, 10);
  const bool sorted = atoi(argv[5]) != 0;
  const float lo = strtof(argv[6], nullptr), hi = strtof(argv[7], nullptr);
  for (size_t i = 0; i < n; ++i) {
    const float u = sorted ? (i + 0.5f) / (float)n : (float)(kl::mix64(i * 0x9E3779B97F4A7C15ull + 7) >> 40) * 5.9604645e-8f;
    printf("%.9g\n", kl::shaped_element(lo + (hi - lo) * u, lo, hi, i, mode, knot, key));
  }
  return 0;
}
