// Host-only check of the wider-integer draws (kl::UniformInt with `widen`, the verifier's experiment
// for ranges nobody stated): every bit length of the type occurs, negatives only where every bit
// pattern is asked for, and the plain draw stays in [lo, hi).
#include "kernelloop_harness.cuh"

#include <cstdio>

template <class T> int check(const char* name) {
  int bad = 0;
  constexpr int span = 8 * sizeof(T);
  for (int widen = 0; widen <= 2; ++widen) {
    kl::UniformInt<T> g{0, 16, true, widen};
    bool length_seen[65] = {};
    bool negative = false;
    for (uint64_t i = 0; i < 200000; ++i) {
      const T v = g.value(kl::mix64(i * 0x9E3779B97F4A7C15ull + 12345), (size_t)i, 0);
      if (widen == 0 && (v < 0 || v >= 16)) ++bad;
      if (v < 0) { negative = true; continue; }
      int length = 0;
      for (uint64_t u = (uint64_t)v; u; u >>= 1) ++length;
      length_seen[length] = true;
    }
    if (widen == 0) continue;
    const int longest = std::is_signed<T>::value ? span - 1 : span;
    for (int length = 1; length <= longest; ++length)
      if (!length_seen[length]) { printf("%s widen %d: no value of bit length %d\n", name, widen, length); ++bad; }
    if (std::is_signed<T>::value && (widen == 1) != negative) {
      printf("%s widen %d: negatives %s\n", name, widen, negative ? "drawn" : "missing");
      ++bad;
    }
  }
  return bad;
}

int main() {
  const int bad = check<uint8_t>("uint8") + check<int8_t>("int8") + check<int16_t>("int16") +
                  check<uint32_t>("uint32") + check<int32_t>("int32") + check<int64_t>("int64") +
                  check<uint64_t>("uint64");
  printf("bad %d\n", bad);
  return bad != 0;
}
