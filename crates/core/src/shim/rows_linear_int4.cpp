// torch_node::rows_linear_int4: y = x w^T for int4 weights in groups along K, the few rows of a
// decode step (python/quantize_lm.py's int4 layers call it up to 32 rows where the CPU has no
// AVX-512: ATen's `_weight_int4pack_mm_for_cpu` is vectorized for AVX-512 only, and elsewhere
// takes 15x this kernel's time at one row).
//
// The weight stays in the layout `_convert_weight_to_int4pack_for_cpu` wrote (so one package
// holds one copy whichever kernel reads it): `packed` [N, K/2] uint8 in blocks of `block` (32 or
// 64) output channels, byte (nb, k, j) holding channel nb*block + j's value at k in its low
// nibble and channel nb*block + j + block/2's in its high one (python/quantize_lm.py int4_block
// reads which block a CPU's packing used). w[n, k] = (q - 8) * scales[k / group, n] +
// zeros[k / group, n], the scales and zeros [K/group, N] float32 or bfloat16.
//
// For 32 channels at a time (16 bytes per k: 16 low nibbles, 16 high) each k's nibbles are
// widened to float32 and dequantized once (one FMA with the group's scale and offset), then
// multiplied into the accumulators of 2 rows; the next 2 rows read the same 32 channels again
// from the cache. AVX2 + FMA (chosen at run time; without them: ATen's linear over the
// dequantized weight). The 32-channel runs spread over ATen's OpenMP threads.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include "protect.h"
#include "rows_linear.h"

namespace {

TN_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
TN_AVX2 inline __m256 load8(const at::BFloat16* p) { return torch_node::load_bf16x8(p); }

// The 32 channels lo0 + [0, 16) and hi0 + [0, 16) whose nibbles are the 16 bytes at p + k *
// stride, for R rows of x (row stride K): y[r][channel] (row stride N) = their products.
template <int R, class S>
TN_AVX2 void run32(const float* x, int64_t K, const uint8_t* p, int64_t stride, const S* scales,
                   const S* zeros, int64_t N, int64_t group, float* y, int64_t lo0, int64_t hi0) {
  const int64_t ch[4] = {lo0, lo0 + 8, hi0, hi0 + 8};
  __m256 acc[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) acc[r][j] = _mm256_setzero_ps();
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m256 eight = _mm256_set1_ps(8.0f);
  for (int64_t g0 = 0; g0 < K; g0 += group) {
    // The group's scale and offset: w = q * scale + (zero - 8 * scale).
    __m256 scale[4], offset[4];
    const S* sg = scales + (g0 / group) * N;
    const S* zg = zeros + (g0 / group) * N;
    for (int j = 0; j < 4; j++) {
      scale[j] = load8(sg + ch[j]);
      offset[j] = _mm256_fnmadd_ps(eight, scale[j], load8(zg + ch[j]));
    }
    for (int64_t k = g0; k < g0 + group; k++) {
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k * stride));
      __m128i lo = _mm_and_si128(b, mask);
      __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
      __m256 w[4] = {
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)),
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))),
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)),
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))),
      };
      for (int j = 0; j < 4; j++) w[j] = _mm256_fmadd_ps(w[j], scale[j], offset[j]);
      for (int r = 0; r < R; r++) {
        __m256 xv = _mm256_set1_ps(x[r * K + k]);
        for (int j = 0; j < 4; j++) acc[r][j] = _mm256_fmadd_ps(w[j], xv, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) _mm256_storeu_ps(y + r * N + ch[j], acc[r][j]);
}

template <class S>
void rows(const float* x, int64_t M, const uint8_t* packed, const S* scales, const S* zeros,
          int64_t K, int64_t N, int64_t group, int64_t block, float* y) {
  const int64_t runs = block / 32;  // 32-channel runs per block
  at::parallel_for(0, N / 32, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      int64_t nb = t / runs, c = t % runs;
      const uint8_t* p = packed + nb * block * K / 2 + c * 16;
      int64_t lo0 = nb * block + c * 16, hi0 = lo0 + block / 2;
      int64_t r = 0;
      for (; r + 2 <= M; r += 2)
        run32<2>(x + r * K, K, p, block / 2, scales, zeros, N, group, y + r * N, lo0, hi0);
      if (r < M) run32<1>(x + r * K, K, p, block / 2, scales, zeros, N, group, y + r * N, lo0, hi0);
    }
  });
}

// The weight [N, K] as float32, for CPUs without AVX2.
at::Tensor dequantized(const at::Tensor& packed, const at::Tensor& scales, const at::Tensor& zeros,
                       int64_t group, int64_t block) {
  int64_t N = packed.size(0), K = packed.size(1) * 2;
  at::Tensor v = packed.reshape({N / block, K, block / 2});
  at::Tensor q = at::cat({v.bitwise_and(15), v.bitwise_right_shift(4)}, 2)
                     .permute({0, 2, 1})
                     .reshape({N, K})
                     .to(at::kFloat);
  at::Tensor s = scales.to(at::kFloat).t().repeat_interleave(group, 1);
  at::Tensor z = zeros.to(at::kFloat).t().repeat_interleave(group, 1);
  return (q - 8) * s + z;
}

}  // namespace

// x [M, K] float32 or bfloat16; returns [M, N] in x's dtype, accumulated in float32.
at::Tensor torch_node::rows_linear_int4(const at::Tensor& x, const at::Tensor& packed,
                                        const at::Tensor& scales, const at::Tensor& zeros,
                                        int64_t group, int64_t block) {
  const char* op = "torch_node::rows_linear_int4: ";
  TORCH_CHECK(x.device().is_cpu() && packed.device().is_cpu() && scales.device().is_cpu() &&
                  zeros.device().is_cpu(),
              op, "CPU only");
  TORCH_CHECK(x.dim() == 2 && packed.dim() == 2 && packed.scalar_type() == at::kByte &&
                  packed.size(1) * 2 == x.size(1),
              op, "x [M, K] and packed [N, K/2] uint8 expected, got ", x.sizes(), " and ",
              packed.sizes(), " ", packed.scalar_type());
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, op,
              "x must be float32 or bfloat16, got ", x.scalar_type());
  int64_t M = x.size(0), K = x.size(1), N = packed.size(0);
  TORCH_CHECK(block == 32 || block == 64, op, "block must be 32 or 64, got ", block);
  TORCH_CHECK(N % block == 0, op, "N (", N, ") must be a multiple of the block (", block, ")");
  TORCH_CHECK(group > 0 && K % group == 0, op, "group (", group, ") must divide K (", K, ")");
  TORCH_CHECK(scales.dim() == 2 && scales.size(0) == K / group && scales.size(1) == N &&
                  zeros.sizes() == scales.sizes(),
              op, "scales and zeros [K/group, N] = [", K / group, ", ", N, "] expected, got ",
              scales.sizes(), " and ", zeros.sizes());
  TORCH_CHECK(scales.scalar_type() == zeros.scalar_type() &&
                  (scales.scalar_type() == at::kFloat || scales.scalar_type() == at::kBFloat16),
              op, "scales and zeros must both be float32 or bfloat16, got ", scales.scalar_type(),
              " and ", zeros.scalar_type());
  if (M == 0 || !torch_node::has_avx2_fma())
    return at::linear(x.to(at::kFloat), dequantized(packed, scales, zeros, group, block))
        .to(x.scalar_type());
  at::Tensor xf = x.to(at::kFloat).contiguous();
  at::Tensor pc = packed.contiguous(), sc = scales.contiguous(), zc = zeros.contiguous();
  at::Tensor yf = at::empty({M, N}, xf.options());
  const float* xp = xf.const_data_ptr<float>();
  const uint8_t* pp = pc.const_data_ptr<uint8_t>();
  float* y = yf.mutable_data_ptr<float>();
  if (sc.scalar_type() == at::kFloat)
    rows(xp, M, pp, sc.const_data_ptr<float>(), zc.const_data_ptr<float>(), K, N, group, block, y);
  else
    rows(xp, M, pp, sc.const_data_ptr<at::BFloat16>(), zc.const_data_ptr<at::BFloat16>(), K, N,
         group, block, y);
  return yf.to(x.scalar_type());
}

extern "C" {

// The op's kernel called directly (crates/core's tests): a new tensor in *out, or a message in
// *err.
void tn_rows_linear_int4(const at::Tensor* x, const at::Tensor* packed, const at::Tensor* scales,
                         const at::Tensor* zeros, int64_t group, int64_t block, at::Tensor** out,
                         char** err) {
  TN_PROTECT(err, *out = new at::Tensor(
                      torch_node::rows_linear_int4(*x, *packed, *scales, *zeros, group, block));)
}

}  // extern "C"
