// The harness's input shapes on the host (no GPU): kl::shaped_value over a uniform grid of [lo, hi) for each power
// kl::shape_power draws, one line each: "power v0 v1 ... v999". tests/test_input_shapes.py reads it.
#include <cstdio>

#include <kernelloop_harness.cuh>

int main() {
  const float lo = -1.0f, hi = 3.0f;
  for (int k = 0; k < kl::kShapeKinds; ++k) {
    const float power = kl::shape_power(k);
    printf("%g", power);
    for (int i = 0; i < 1000; ++i) printf(" %.9g", kl::shaped_value(lo + (hi - lo) * (i + 0.5f) / 1000.0f, lo, hi, power));
    printf("\n");
  }
  return 0;
}
