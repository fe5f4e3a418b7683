// Host-only check of kernelloop_harness.cuh's GroupShape (no GPU needed): every position a call's
// aimed samples take lies inside the special-value group it was drawn from (same-size outputs),
// and inside the output for outputs of another size (one element per row).
#include <kernelloop_harness.cuh>
#include <cstdio>

int main() {
  using kl::GroupShape;
  size_t bad = 0, checked = 0;
  for (uint64_t key = 1; key < 3000; ++key) {
    for (int periodic = 0; periodic < 2; ++periodic) {
      const size_t n = 1 + (size_t)(kl::mix64(key) % 200000);
      const GroupShape g = GroupShape::draw(n, kl::mix64(key * 7 + 3), periodic);
      if (g.first + g.len > n || g.len == 0) ++bad;
      for (uint64_t h = 0; h < 64; ++h) {
        const size_t rows = 1 + n / 97;
        if (g.sample(kl::mix64(h + key), rows) >= rows) ++bad;
        if (g.residue >= n) continue;  // an empty group: a period longer than the buffer
        const size_t at = g.sample(kl::mix64(h + key), n);
        ++checked;
        if (at >= n || at < g.first || at >= g.first + g.len || at % g.period != g.residue) ++bad;
      }
    }
  }
  printf("checked %zu bad %zu\n", checked, bad);
  return bad != 0 || checked == 0;
}
