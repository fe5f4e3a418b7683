// Host-only check of the harness's buffer hash words (kl::kl_word_at): each word of a buffer at any
// address is its own 8 bytes, little-endian, the last one zero-padded. (A shifted buffer's words
// read on to the buffer's end: wrong values and a quadratic hash, 30 s and more per verifier run.)
#include "kernelloop_harness.cuh"

#include <cstdio>
#include <vector>

int main() {
  std::vector<unsigned char> storage(4096 + 64);
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = (unsigned char)(i * 37 + 11);
  int bad = 0, checked = 0;
  for (size_t shift = 0; shift < 16; ++shift) {
    for (size_t bytes : {1ul, 7ul, 8ul, 9ul, 63ul, 64ul, 1000ul, 4096ul}) {
      const unsigned char* data = storage.data() + shift;
      for (size_t w = 0; w < (bytes + 7) / 8; ++w) {
        uint64_t expect = 0;
        for (size_t k = 0; k < 8 && 8 * w + k < bytes; ++k) expect |= (uint64_t)data[8 * w + k] << (8 * k);
        bad += kl::kl_word_at(data, bytes, w) != expect;
        ++checked;
      }
    }
  }
  printf("checked %d bad %d\n", checked, bad);
  return bad != 0;
}
