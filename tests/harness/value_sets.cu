// The harness's other value sets on the host (no GPU): kl::value_set_element over one buffer of the generator's
// uniform values, as kl_value_set_kernel maps it.
//   value_sets SET KEY N LO HI: N values on [LO, HI), one per line. tests/test_input_shapes.py reads it.
#include <cstdio>
#include <cstdlib>

#include <kernelloop_harness.cuh>

int main(int argc, char** argv) {
  if (argc != 6) return 2;
  const int set = atoi(argv[1]);
  const uint64_t key = strtoull(argv[2], nullptr, 10);
  const size_t n = strtoull(argv[3], nullptr, 10);
  const float lo = strtof(argv[4], nullptr), hi = strtof(argv[5], nullptr);
  for (size_t i = 0; i < n; ++i) {
    const float u = (float)(kl::mix64(i * 0x9E3779B97F4A7C15ull + 7) >> 40) * 5.9604645e-8f;
    printf("%.9g\n", kl::value_set_element(lo + (hi - lo) * u, lo, hi, i, set, key));
  }
  return 0;
}
