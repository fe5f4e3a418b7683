// The special-value kinds a call and buffer get (kl::kinds_subset), on the host (no GPU): for each mask asked for
// on the command line, one line "asked s0 s1 ... s999" of the subsets drawn from 1000 keys.
// tests/test_input_shapes.py reads it.
#include <cstdio>
#include <cstdlib>

#include <kernelloop_harness.cuh>

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    const int asked = atoi(argv[a]);
    printf("%d", asked);
    for (uint64_t k = 0; k < 1000; ++k) printf(" %d", kl::kinds_subset(asked, kl::mix64(k ^ 0x4B494E445355ull)));
    printf("\n");
  }
  return 0;
}
