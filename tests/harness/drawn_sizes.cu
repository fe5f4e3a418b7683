// The harness's own size() on the host (no GPU): its State mapped where the harness keeps it, every call's
// options from argv ("4096,3001" each), one draw per line on stdin, the sizes it returns one line per draw.
// tests/test_size_relations.py runs the gate's own draws, refusals and redraws through it.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <kernelloop_harness.cuh>

int main(int argc, char** argv) {
  void* at = mmap(reinterpret_cast<void*>(kl::kStateAddress), kl::kStateBytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (at != reinterpret_cast<void*>(kl::kStateAddress)) return 2;
  std::vector<std::vector<long long>> calls;
  for (int a = 1; a < argc; ++a) {
    std::vector<long long> options;
    for (char* p = argv[a]; *p;) {
      options.push_back(strtoll(p, &p, 10));
      if (*p == ',') ++p;
    }
    if (options.size() != 2) return 3;
    calls.push_back(options);
  }
  // size() reads and writes only the State: no constructor (which would open the GPU) runs
  alignas(64) static unsigned char storage[sizeof(kl::Harness)];
  kl::Harness& h = *reinterpret_cast<kl::Harness*>(storage);
  kl::State& s = *reinterpret_cast<kl::State*>(kl::kStateAddress);
  unsigned long long draw;
  while (scanf("%llu", &draw) == 1) {
    memset(&s, 0, sizeof s);
    s.size_draw = draw;
    s.size_index = -1;
    for (size_t c = 0; c < calls.size(); ++c)
      printf(c ? " %lld" : "%lld", h.size<long long>({calls[c][0], calls[c][1]}));
    printf("\n");
    fflush(stdout);  // one answer per draw: the test feeds the next draw from this one's answer
  }
  return 0;
}
