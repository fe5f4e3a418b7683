// kl::call_scale on the host (no GPU): the scale exponent of 4000 stress draws, printed on one line.
#include <cstdio>
#include <kernelloop_harness.cuh>

int main() {
  for (uint64_t r = 0; r < 4000; ++r) printf("%d ", kl::call_scale(kl::mix64(r)));
  printf("\n");
  return 0;
}
