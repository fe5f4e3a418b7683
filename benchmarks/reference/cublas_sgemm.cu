// cublas_sgemm.cu: the vendor library's time for the suite's matmul (a reference point only;
// kernelloop's candidates may not call cuBLAS). C = A * B, row-major n x n fp32, computed as
// the column-major product B^T-view * A^T-view, which is the same memory layout.
// Prints "CUBLAS_MS <median of 15 timed batches of 20 calls, per call>".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1024;
  const size_t bytes = (size_t)n * n * sizeof(float);
  std::vector<float> h(n * (size_t)n);
  for (size_t i = 0; i < h.size(); ++i) h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
  float *A, *B, *C;
  cudaMalloc(&A, bytes); cudaMalloc(&B, bytes); cudaMalloc(&C, bytes);
  cudaMemcpy(A, h.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(B, h.data(), bytes, cudaMemcpyHostToDevice);
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);  // true fp32, no TF32: the suite's arithmetic
  const float one = 1.0f, zero = 0.0f;
  auto call = [&] { cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, C, n); };
  for (int i = 0; i < 5; ++i) call();
  cudaDeviceSynchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start); cudaEventCreate(&stop);
  std::vector<float> per_call;
  for (int batch = 0; batch < 15; ++batch) {
    cudaEventRecord(start);
    for (int i = 0; i < 20; ++i) call();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    per_call.push_back(ms / 20);
  }
  std::sort(per_call.begin(), per_call.end());
  printf("CUBLAS_MS %.6f\n", per_call[per_call.size() / 2]);
  return 0;
}
