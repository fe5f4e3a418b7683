// copy_bandwidth.cu: the DRAM bandwidth a plain copy kernel reaches on this GPU (the
// denominator of "% of measured DRAM bandwidth"). 1 GiB read + 1 GiB written per call,
// float4 grid-stride copy. Prints "COPY_GBPS <median of 15 calls>" (bytes read + written).
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, size_t count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}

int main() {
  const size_t bytes = (size_t)1 << 30, count = bytes / sizeof(float4);
  float4 *in, *out;
  cudaMalloc(&in, bytes); cudaMalloc(&out, bytes);
  cudaMemset(in, 1, bytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = sms * 8, threads = 256;
  for (int i = 0; i < 3; ++i) copy_kernel<<<blocks, threads>>>(in, out, count);
  cudaDeviceSynchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start); cudaEventCreate(&stop);
  std::vector<double> gbps;
  for (int i = 0; i < 15; ++i) {
    cudaEventRecord(start);
    copy_kernel<<<blocks, threads>>>(in, out, count);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    gbps.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  printf("COPY_GBPS %.1f\n", gbps[gbps.size() / 2]);
  return 0;
}
