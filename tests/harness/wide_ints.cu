// Host-only check of the wider-integer draws (kl::UniformInt with `widen`, the verifier's experiment
// for ranges nobody stated): every bit length of the type occurs; negatives only where every bit
// pattern is asked for; the bands come in stretches, so groups of 32 neighbours (a warp) are all small
// in some places and hold large values in others (red team round 220); one band stays in it; the
// plain draw stays in [lo, hi).
#include "kernelloop_harness.cuh"

#include <cstdio>

template <class T> int bit_length(T v) {
  int length = 0;
  for (uint64_t u = (uint64_t)v; u; u >>= 1) ++length;
  return length;
}

template <class T> int check(const char* name) {
  int bad = 0;
  constexpr int span = 8 * sizeof(T);
  const int longest = std::is_signed<T>::value ? span - 1 : span;
  for (int widen = 0; widen <= 3; ++widen) {
    kl::UniformInt<T> g{0, 16, true, widen, longest / 2};
    bool length_seen[65] = {};
    bool negative = false;
    int small_warps = 0, large_warps = 0;
    for (uint64_t call = 0; call < 40; ++call) {
      const uint64_t key = kl::mix64(call + 77);
      int warp_max = 0;
      for (size_t i = 0; i < 65536; ++i) {
        const T v = g.value(kl::mix64(key ^ kl::mix64(i)), i, key);
        if (widen == 0 && (v < 0 || v >= 16)) ++bad;
        if (widen == 3 && (v < 0 || bit_length(v) > longest / 2)) ++bad;
        if (v < 0) { negative = true; warp_max = span; continue; }
        length_seen[bit_length(v)] = true;
        if (bit_length(v) > warp_max) warp_max = bit_length(v);
        if (i % 32 == 31) {
          if (warp_max <= span / 2) ++small_warps; else ++large_warps;
          warp_max = 0;
        }
      }
    }
    if (widen == 0) continue;
    // one band is uniform in [0, 2^k): its top length always occurs, short ones rarely
    const int top = widen == 3 ? longest / 2 : longest;
    for (int length = widen == 3 ? top : 1; length <= top; ++length)
      if (!length_seen[length]) { printf("%s widen %d: no value of bit length %d\n", name, widen, length); ++bad; }
    if (std::is_signed<T>::value && (widen == 1) != negative) {
      printf("%s widen %d: negatives %s\n", name, widen, negative ? "drawn" : "missing");
      ++bad;
    }
    if (widen != 3 && (small_warps < 100 || large_warps < 100)) {
      printf("%s widen %d: %d warps all small, %d with a large value\n", name, widen, small_warps, large_warps);
      ++bad;
    }
  }
  if (std::is_signed<T>::value) {  // the negative band: [-top, 0)
    kl::UniformInt<T> g{0, 16, true, 3, -(longest / 2)};
    for (uint64_t i = 0; i < 100000; ++i) {
      const T v = g.value(kl::mix64(i + 5), (size_t)i, kl::mix64(i / 1000));
      if (v >= 0 || bit_length((T)(-(v + 1))) > longest / 2) { ++bad; break; }
    }
  }
  {  // the largest value of a band marks no power of two: its top varies within the octave
    kl::UniformInt<T> g{0, 16, true, 3, longest / 2};
    int below_top = 0;
    for (uint64_t call = 0; call < 64; ++call) {
      const uint64_t key = kl::mix64(call + 991);
      uint64_t largest = 0;
      for (size_t i = 0; i < 4096; ++i) {
        const uint64_t v = (uint64_t)g.value(kl::mix64(key ^ kl::mix64(i)), i, key);
        if (v > largest) largest = v;
      }
      const int k = longest / 2;
      if (k >= 6 && (largest >> (k - 4)) != 15) ++below_top;  // not in the top sixteenth of the octave
    }
    if (longest / 2 >= 6 && below_top < 16) { printf("%s: the band's largest value sits at its octave's top\n", name); ++bad; }
  }
  {  // a band given as a bound (red team round 223): within [lo, lo + top), tops drawn in (top/2, top] per
     // call (exact: top itself, so the largest value is near it), multiples of 2^shift, rising runs
    const unsigned long long bound = sizeof(T) == 1 ? 100 : 5000;
    for (int shape = 0; shape < 5; ++shape) {
      kl::UniformInt<T> g{0, 16, true, 3, 0};
      g.wide_top = shape == 1 ? bound / 8 : bound;
      g.wide_lo = shape == 1 ? bound / 2 : 0;
      g.wide_shift = shape == 2 ? 3 : 0;
      g.wide_sorted = shape == 3;
      g.wide_exact = shape == 4;
      unsigned long long overall_max = 0;
      int calls_below_half = 0, runs_down = 0;
      for (uint64_t call = 0; call < 32; ++call) {
        const uint64_t key = kl::mix64(call + 4242);
        unsigned long long largest = 0, previous = 0;
        for (size_t i = 0; i < 8192; ++i) {
          const unsigned long long v = (unsigned long long)g.value(kl::mix64(key ^ kl::mix64(i)), i, key);
          if (v < g.wide_lo || v >= g.wide_lo + g.wide_top) { printf("%s shape %d: %llu outside\n", name, shape, v); ++bad; break; }
          if (shape == 2 && v % 8) { printf("%s shape 2: %llu not a multiple of 8\n", name, v); ++bad; break; }
          if (shape == 3 && i && v < previous) ++runs_down;
          previous = v;
          if (v > largest) largest = v;
        }
        if (largest - g.wide_lo + (1ull << g.wide_shift) <= g.wide_top / 2) ++calls_below_half;
        if (largest > overall_max) overall_max = largest;
        if (shape == 4 && largest + 1 + g.wide_top / 64 < g.wide_top) { printf("%s exact: largest %llu\n", name, largest); ++bad; }
      }
      if (shape != 3 && calls_below_half) { printf("%s shape %d: a call's values all below half its band\n", name, shape); ++bad; }
      if (shape == 3 && (runs_down == 0 || runs_down > 32 * 64)) { printf("%s sorted: %d falls\n", name, runs_down); ++bad; }
      if (shape == 0 && overall_max + 1 + bound / 16 < bound) { printf("%s bound: nothing near it\n", name); ++bad; }
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
