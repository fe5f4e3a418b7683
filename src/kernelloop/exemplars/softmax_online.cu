// softmax_online.cu — exemplar; editable part for kernels/row_softmax.cu.
// Technique: ONLINE softmax (single-pass max and sum, Milakov & Gimelshein 2018), one warp
// per row.
// The textbook stable softmax reads the row three times: once for the max m, once for
// s = sum exp(x - m), once to write exp(x - m) / s. The online form finds m and s in ONE
// pass: each thread keeps a running max m and a running sum s relative to it, and when a
// larger value arrives rescales what it has so far,
//     m_new = max(m, x);   s = s * exp(m - m_new) + exp(x - m_new);   m = m_new,
// so s is always sum exp(x_i - m) over the elements seen. Partial (m, s) pairs combine the
// same way, (m, s) + (m', s') = (M, s * exp(m - M) + s' * exp(m' - M)) with M = max(m, m'),
// which is what the warp-shuffle butterfly does across the 32 lanes. A second pass then reads
// the row again and writes exp(x - m) / s: two reads of the row instead of three, and no
// limit on the row length (nothing is held in registers or shared memory), which is why
// this is the form used when a row does not fit on chip (and inside flash attention).
// Numerically it is as stable as the three-pass form: every exponent is <= 0.
// Details:
//   * One warp per row, lanes read consecutive float4s (coalesced 512-byte warp loads),
//     four float4 loads issued per lane before they are consumed; a float4 costs one rescale
//     exp plus four element exps. Rows whose length is not a multiple of 4, or unaligned
//     buffers, take the element-wise path (still coalesced).
//   * The butterfly uses __shfl_xor_sync, so every lane ends with the same (m, s).
//   * Lanes that saw no element (short rows) carry (-inf, 0); the rescale treats m = -inf
//     as an empty sum instead of computing exp(-inf - -inf) = NaN.
//   * The grid is capped at 4 blocks of 8 warps per SM and warps stride over the rows
//     (persistent warps): fewer rows are in flight at once, so a row is more likely to still be
//     in L1/L2 when the second pass re-reads it.
// Same function as the baseline (expf throughout; y = exp(x - m) * (1 / s) instead of a
// division, and a different summation order): within rtol 1e-3. Measured on an H200 by
// kernelloop verify: 0.0995 ms vs 0.9234 ms for the naive kernel (9.28x), every element checked.
#include <cstdint>
#include <cmath>

static const int kWarpsPerBlock = 8;  // 256 threads, one row per warp at a time
static const int kBatch = 4;          // float4 loads in flight per lane

// exp(x - m) for the running sum; -inf adds nothing even while the running max is still -inf
// (expf(-inf - -inf) is NaN: a row whose lane starts with a masked -inf would become NaN).
static __device__ __forceinline__ float exp_shifted(float x, float m) {
  return x == -INFINITY ? 0.0f : expf(x - m);
}

// s rescaled from running max m_old to m_new >= m_old; an empty sum (m_old = -inf) stays 0.
static __device__ __forceinline__ float rescale(float s, float m_old, float m_new) {
  return m_old == -INFINITY ? 0.0f : s * expf(m_old - m_new);
}

static __device__ __forceinline__ void online_add1(float x, float& m, float& s) {
  const float mn = fmaxf(m, x);
  s = rescale(s, m, mn) + exp_shifted(x, mn);
  m = mn;
}

static __device__ __forceinline__ void online_add4(float4 v, float& m, float& s) {
  const float mn = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  s = rescale(s, m, mn) + ((exp_shifted(v.x, mn) + exp_shifted(v.y, mn)) +
                             (exp_shifted(v.z, mn) + exp_shifted(v.w, mn)));
  m = mn;
}

// VEC: cols % 4 == 0 and both buffers 16-byte aligned, so every row starts 16-byte aligned.
template <bool VEC>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
online_softmax_kernel(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int lane = threadIdx.x & 31;
  const int warps_total = gridDim.x * kWarpsPerBlock;
  // row is the same for all 32 lanes of a warp, so whole warps enter and leave the loop.
  for (int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5); row < rows; row += warps_total) {
    const float* x = in + (size_t)row * cols;
    float* y = out + (size_t)row * cols;

    // Pass 1: running (max, sum) of this lane's elements.
    float m = -INFINITY, s = 0.0f;
    if (VEC) {
      const float4* x4 = reinterpret_cast<const float4*>(x);
      const int nvec = cols >> 2;
      int i = lane;
      for (; i + (kBatch - 1) * 32 < nvec; i += kBatch * 32) {
        float4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) v[u] = x4[i + u * 32];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) online_add4(v[u], m, s);
      }
      for (; i < nvec; i += 32) online_add4(x4[i], m, s);
    } else {
      for (int c = lane; c < cols; c += 32) online_add1(x[c], m, s);
    }

    // Combine the 32 lanes' (m, s) pairs; afterwards every lane holds the row's (m, s).
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float mo = __shfl_xor_sync(0xffffffffu, m, o);
      const float so = __shfl_xor_sync(0xffffffffu, s, o);
      const float mn = fmaxf(m, mo);
      s = rescale(s, m, mn) + rescale(so, mo, mn);
      m = mn;
    }
    const float inv = 1.0f / s;

    // Pass 2: read the row again, write exp(x - m) / s.
    if (VEC) {
      const float4* x4 = reinterpret_cast<const float4*>(x);
      float4* y4 = reinterpret_cast<float4*>(y);
      const int nvec = cols >> 2;
      int i = lane;
      for (; i + (kBatch - 1) * 32 < nvec; i += kBatch * 32) {
        float4 v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) v[u] = x4[i + u * 32];
#pragma unroll
        for (int u = 0; u < kBatch; ++u)
          y4[i + u * 32] = make_float4(expf(v[u].x - m) * inv, expf(v[u].y - m) * inv,
                                       expf(v[u].z - m) * inv, expf(v[u].w - m) * inv);
      }
      for (; i < nvec; i += 32) {
        const float4 v = x4[i];
        y4[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                            expf(v.w - m) * inv);
      }
    } else {
      for (int c = lane; c < cols; c += 32) y[c] = expf(x[c] - m) * inv;
    }
  }
}

void launch_softmax(const float* in, float* out, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0)
    sms = 132;
  const int blocks_needed = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const int grid = blocks_needed < 4 * sms ? blocks_needed : 4 * sms;
  const dim3 block(kWarpsPerBlock * 32);
  const bool vec = (cols % 4 == 0) &&
      ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  if (vec) {
    online_softmax_kernel<true><<<grid, block>>>(in, out, rows, cols);
  } else {
    online_softmax_kernel<false><<<grid, block>>>(in, out, rows, cols);
  }
}
