// torch_node::rows_linear_int4_runs: y = x w^T for int4 weights in groups along K, the few rows of
// a decode step (python/quantize_lm.py's int4 layers call it up to 32 rows where the CPU has no
// AVX-512: ATen's `_weight_int4pack_mm_for_cpu` is vectorized for AVX-512 only, and elsewhere
// takes 15x this kernel's time at one row).
//
// The weight stays in the layout `_convert_weight_to_int4pack_for_cpu` wrote (so one package
// holds one copy whichever kernel reads it): `packed` [N, K/2] uint8 in blocks of `block` (32 or
// 64) output channels, byte (nb, k, j) holding channel nb*block + j's value at k in its low
// nibble and channel nb*block + j + block/2's in its high one (python/quantize_lm.py int4_block
// reads which block a CPU's packing used). w[n, k] = q * scale + offset, offset = zero - 8 *
// scale, for the group k / group.
//
// The kernel reads 32 channels at a time, a "run": the 16 low nibbles and 16 high ones of 16
// bytes per k. `runs` [N/32, K/group, 64] float32 holds each run's 32 scales, then its 32
// offsets, for each group in turn, so that a run reads its weights and its scales as two
// sequential streams (python/quantize_lm.py int4_runs writes it; read from [K/group, N] rows
// instead, 4 lines N floats apart per group and run, SmolLM2's layers took 15.7-17.4 against
// 12.9-13.4 ms at one row, measured 2026-11-28 on an AMD EPYC, Zen 3, 2 threads, interleaved).
// Each k's nibbles are widened to float32 and dequantized once (one FMA), then multiplied into
// the accumulators of 1 or 2 rows; 3 rows and more take a dequantized chunk of the run from a
// buffer (run32_many). AVX2 + FMA (chosen at run time; without them: ATen's linear over the
// dequantized weight). The runs spread over ATen's OpenMP threads.
//
// torch_node::rows_linear_int4 (the op of exports before the runs) takes the scales and zeros as
// two [K/group, N] tensors and arranges them as runs on each call.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>

#include "protect.h"
#include "rows_linear.h"

namespace {

// Rows a run multiplies through one dequantized chunk at a time (below), and the chunk's k.
constexpr int64_t kManyRows = 32;
constexpr int64_t kChunk = 32;

// The run's 32 weights at one k, from its 16 bytes at b: widened to float32 and dequantized (w =
// q * scale + offset), the low nibbles' 16 channels in w[0..1], the high ones' in w[2..3].
TN_AVX2 inline void dequantize(const uint8_t* b, const __m256* scale, const __m256* offset,
                               __m256* w) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  __m128i lo = _mm_and_si128(v, mask);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
  w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
  for (int j = 0; j < 4; j++) w[j] = _mm256_fmadd_ps(w[j], scale[j], offset[j]);
}

// The group's 32 scales and 32 offsets at sg.
TN_AVX2 inline void load_group(const float* sg, __m256* scale, __m256* offset) {
  for (int j = 0; j < 4; j++) {
    scale[j] = _mm256_loadu_ps(sg + 8 * j);
    offset[j] = _mm256_loadu_ps(sg + 32 + 8 * j);
  }
}

// The run of channels lo0 + [0, 16) and hi0 + [0, 16) whose nibbles are the 16 bytes at p + k *
// stride and whose scales and offsets are at `run` (64 floats per group), for R rows of x (row
// stride K): y[r][channel] (row stride N) = their products. Each k's weights are dequantized
// into registers for the R rows.
template <int R>
TN_AVX2 void run32(const float* x, int64_t K, const uint8_t* p, int64_t stride, const float* run,
                   int64_t N, int64_t group, float* y, int64_t lo0, int64_t hi0) {
  const int64_t ch[4] = {lo0, lo0 + 8, hi0, hi0 + 8};
  __m256 acc[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) acc[r][j] = _mm256_setzero_ps();
  for (int64_t g0 = 0; g0 < K; g0 += group) {
    __m256 scale[4], offset[4], w[4];
    load_group(run + (g0 / group) * 64, scale, offset);
    for (int64_t k = g0; k < g0 + group; k++) {
      dequantize(p + k * stride, scale, offset, w);
      for (int r = 0; r < R; r++) {
        __m256 xv = _mm256_set1_ps(x[r * K + k]);
        for (int j = 0; j < 4; j++) acc[r][j] = _mm256_fmadd_ps(w[j], xv, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) _mm256_storeu_ps(y + r * N + ch[j], acc[r][j]);
}

// R rows' accumulators acc [R][32] plus the n dequantized k of `chunk` [n][32] times x's values
// from k0 (row stride K).
template <int R>
TN_AVX2 void from_chunk(const float* chunk, int64_t n, const float* x, int64_t K, int64_t k0,
                        float* acc) {
  __m256 a[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) a[r][j] = _mm256_loadu_ps(acc + r * 32 + 8 * j);
  for (int64_t k = 0; k < n; k++) {
    for (int r = 0; r < R; r++) {
      __m256 xv = _mm256_set1_ps(x[r * K + k0 + k]);
      for (int j = 0; j < 4; j++)
        a[r][j] = _mm256_fmadd_ps(_mm256_load_ps(chunk + k * 32 + 8 * j), xv, a[r][j]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) _mm256_storeu_ps(acc + r * 32 + 8 * j, a[r][j]);
}

// As run32, for M rows (at most kManyRows): a chunk of kChunk k is dequantized once into a buffer
// that stays in L1, then multiplied into every row's accumulators, 3 rows at a time (run32
// dequantizes every k again for each pair of rows). The same products summed in the same order
// as run32's. Measured 2026-11-28 on an AMD EPYC (Zen 3), 2 threads, a test run beside it,
// SmolLM2's 30 layers x 7 weights and head, interleaved: 4 rows 68.3 -> 49.0 ms, 8 rows 142.6 ->
// 73.1 (2 rows: 32.8 by run32, 38.3 this way; 2 or 4 rows at a time from the chunk were slower).
TN_AVX2 void run32_many(const float* x, int64_t M, int64_t K, const uint8_t* p, int64_t stride,
                        const float* run, int64_t N, int64_t group, float* y, int64_t lo0,
                        int64_t hi0) {
  alignas(32) float chunk[kChunk * 32];
  float acc[kManyRows * 32] = {};
  for (int64_t g0 = 0; g0 < K; g0 += group) {
    __m256 scale[4], offset[4], w[4];
    load_group(run + (g0 / group) * 64, scale, offset);
    for (int64_t c0 = g0; c0 < g0 + group; c0 += kChunk) {
      int64_t n = std::min(kChunk, g0 + group - c0);
      for (int64_t k = 0; k < n; k++) {
        dequantize(p + (c0 + k) * stride, scale, offset, w);
        for (int j = 0; j < 4; j++) _mm256_store_ps(chunk + k * 32 + 8 * j, w[j]);
      }
      int64_t r = 0;
      for (; r + 3 <= M; r += 3) from_chunk<3>(chunk, n, x + r * K, K, c0, acc + r * 32);
      for (; r < M; r++) from_chunk<1>(chunk, n, x + r * K, K, c0, acc + r * 32);
    }
  }
  const int64_t ch[4] = {lo0, lo0 + 8, hi0, hi0 + 8};
  for (int64_t r = 0; r < M; r++)
    for (int j = 0; j < 4; j++)
      std::copy_n(acc + r * 32 + 8 * j, 8, y + r * N + ch[j]);
}

void rows(const float* x, int64_t M, const uint8_t* packed, const float* runs, int64_t K,
          int64_t N, int64_t group, int64_t block, float* y) {
  const int64_t per_block = block / 32;  // runs per block
  at::parallel_for(0, N / 32, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      int64_t nb = t / per_block, c = t % per_block;
      const uint8_t* p = packed + nb * block * K / 2 + c * 16;
      const float* run = runs + t * (K / group) * 64;
      int64_t lo0 = nb * block + c * 16, hi0 = lo0 + block / 2;
      if (M == 1) {
        run32<1>(x, K, p, block / 2, run, N, group, y, lo0, hi0);
      } else if (M == 2) {
        run32<2>(x, K, p, block / 2, run, N, group, y, lo0, hi0);
      } else {
        for (int64_t r = 0; r < M; r += kManyRows)
          run32_many(x + r * K, std::min(kManyRows, M - r), K, p, block / 2, run, N, group,
                     y + r * N, lo0, hi0);
      }
    }
  });
}

// The weight [N, K] as float32 from `runs`, for CPUs without AVX2.
at::Tensor dequantized(const at::Tensor& packed, const at::Tensor& runs, int64_t group,
                       int64_t block) {
  int64_t N = packed.size(0), K = packed.size(1) * 2, G = K / group, per_block = block / 32;
  at::Tensor v = packed.reshape({N / block, K, block / 2});
  at::Tensor q = at::cat({v.bitwise_and(15), v.bitwise_right_shift(4)}, 2)
                     .permute({0, 2, 1})
                     .reshape({N, K})
                     .to(at::kFloat);
  // runs [nb, c, g, (scale, offset), half, j] -> [n = nb*block + half*block/2 + c*16 + j, g].
  auto by_channel = [&](int64_t i) {
    return runs.reshape({N / block, per_block, G, 2, 2, 16})
        .select(3, i)
        .permute({0, 3, 1, 4, 2})
        .reshape({N, G})
        .repeat_interleave(group, 1);
  };
  return q * by_channel(0) + by_channel(1);
}

// The checks both ops share; returns K.
int64_t check(const char* op, const at::Tensor& x, const at::Tensor& packed, int64_t group,
              int64_t block) {
  TORCH_CHECK(x.device().is_cpu() && packed.device().is_cpu(), op, "CPU only");
  TORCH_CHECK(x.dim() == 2 && packed.dim() == 2 && packed.scalar_type() == at::kByte &&
                  packed.size(1) * 2 == x.size(1),
              op, "x [M, K] and packed [N, K/2] uint8 expected, got ", x.sizes(), " and ",
              packed.sizes(), " ", packed.scalar_type());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, op,
              "x must be float32 or bfloat16, got ", x.scalar_type());
  int64_t K = x.size(1), N = packed.size(0);
  TORCH_CHECK(block == 32 || block == 64, op, "block must be 32 or 64, got ", block);
  TORCH_CHECK(N % block == 0, op, "N (", N, ") must be a multiple of the block (", block, ")");
  TORCH_CHECK(group > 0 && K % group == 0, op, "group (", group, ") must divide K (", K, ")");
  return K;
}

at::Tensor multiply(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& runs,
                    int64_t group, int64_t block) {
  int64_t M = x.size(0), K = x.size(1), N = packed.size(0);
  bool by_kernel = M > 0 && torch_node::has_avx2_fma();
  torch_node::count(by_kernel ? torch_node::kInt4Avx2 : torch_node::kInt4Aten, M);
  if (!by_kernel)
    return at::linear(x.to(at::kFloat), dequantized(packed, runs, group, block))
        .to(x.scalar_type());
  at::Tensor xf = x.to(at::kFloat).contiguous();
  at::Tensor pc = packed.contiguous(), rc = runs.contiguous();
  at::Tensor yf = at::empty({M, N}, xf.options());
  rows(xf.const_data_ptr<float>(), M, pc.const_data_ptr<uint8_t>(), rc.const_data_ptr<float>(), K,
       N, group, block, yf.mutable_data_ptr<float>());
  return yf.to(x.scalar_type());
}

}  // namespace

at::Tensor torch_node::int4_runs(const at::Tensor& scales, const at::Tensor& zeros,
                                 int64_t block) {
  int64_t G = scales.size(0), N = scales.size(1);
  at::Tensor s = scales.to(at::kFloat), offsets = zeros.to(at::kFloat) - 8 * s;
  // [g, n = nb*block + half*block/2 + c*16 + j] -> [nb, c, g, half, j]
  auto by_run = [&](const at::Tensor& t) {
    return t.reshape({G, N / block, 2, block / 32, 16}).permute({1, 3, 0, 2, 4});
  };
  return at::cat({by_run(s), by_run(offsets)}, 3).reshape({N / 32, G, 64}).contiguous();
}

// x [M, K] float32 or bfloat16; returns [M, N] in x's dtype, accumulated in float32.
at::Tensor torch_node::rows_linear_int4_runs(const at::Tensor& x, const at::Tensor& packed,
                                             const at::Tensor& runs, int64_t group,
                                             int64_t block) {
  const char* op = "torch_node::rows_linear_int4_runs: ";
  TORCH_CHECK(runs.device().is_cpu(), op, "CPU only");
  int64_t K = check(op, x, packed, group, block), N = packed.size(0);
  TORCH_CHECK(runs.dim() == 3 && runs.size(0) == N / 32 && runs.size(1) == K / group &&
                  runs.size(2) == 64 && runs.scalar_type() == at::kFloat,
              op, "runs [N/32, K/group, 64] = [", N / 32, ", ", K / group,
              ", 64] float32 expected, got ", runs.sizes(), " ", runs.scalar_type());
  return multiply(x, packed, runs, group, block);
}

at::Tensor torch_node::rows_linear_int4(const at::Tensor& x, const at::Tensor& packed,
                                        const at::Tensor& scales, const at::Tensor& zeros,
                                        int64_t group, int64_t block) {
  const char* op = "torch_node::rows_linear_int4: ";
  TORCH_CHECK(scales.device().is_cpu() && zeros.device().is_cpu(), op, "CPU only");
  int64_t K = check(op, x, packed, group, block), N = packed.size(0);
  TORCH_CHECK(scales.dim() == 2 && scales.size(0) == K / group && scales.size(1) == N &&
                  zeros.sizes() == scales.sizes(),
              op, "scales and zeros [K/group, N] = [", K / group, ", ", N, "] expected, got ",
              scales.sizes(), " and ", zeros.sizes());
  TORCH_CHECK(scales.scalar_type() == zeros.scalar_type() &&
                  (scales.scalar_type() == at::kFloat || scales.scalar_type() == at::kBFloat16),
              op, "scales and zeros must both be float32 or bfloat16, got ", scales.scalar_type(),
              " and ", zeros.scalar_type());
  return multiply(x, packed, int4_runs(scales, zeros, block), group, block);
}

extern "C" {

// The ops' kernels called directly (crates/core's tests): a new tensor in *out, or a message in
// *err.
void tn_rows_linear_int4(const at::Tensor* x, const at::Tensor* packed, const at::Tensor* scales,
                         const at::Tensor* zeros, int64_t group, int64_t block, at::Tensor** out,
                         char** err) {
  TN_PROTECT(err, *out = new at::Tensor(
                      torch_node::rows_linear_int4(*x, *packed, *scales, *zeros, group, block));)
}

void tn_rows_linear_int4_runs(const at::Tensor* x, const at::Tensor* packed,
                              const at::Tensor* runs, int64_t group, int64_t block,
                              at::Tensor** out, char** err) {
  TN_PROTECT(err, *out = new at::Tensor(
                      torch_node::rows_linear_int4_runs(*x, *packed, *runs, group, block));)
}

void tn_int4_runs(const at::Tensor* scales, const at::Tensor* zeros, int64_t block,
                  at::Tensor** out, char** err) {
  TN_PROTECT(err, *out = new at::Tensor(torch_node::int4_runs(*scales, *zeros, block));)
}

}  // extern "C"
