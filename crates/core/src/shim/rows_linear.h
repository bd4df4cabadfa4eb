// What rows_linear.cpp and rows_linear_int4.cpp share: the CPU check, the target attribute and
// bf16 widening of their AVX2 code, and the int4 op's kernel, which rows_linear.cpp registers
// with the float/int8 one.
#pragma once

#include <ATen/ATen.h>
#include <immintrin.h>

// Code compiled for AVX2 + FMA in a file compiled for baseline x86-64 (called only after
// has_avx2_fma()).
#define TN_AVX2 __attribute__((target("avx2,fma")))

namespace torch_node {

// 8 consecutive bf16 values as float32 (bf16 is float32's upper half: a shift).
TN_AVX2 inline __m256 load_bf16x8(const at::BFloat16* p) {
  __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// AVX2 and FMA, checked once at run time (the kernels' code is compiled for them).
bool has_avx2_fma();

// torch_node::rows_linear_int4 (rows_linear_int4.cpp).
at::Tensor rows_linear_int4(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& scales,
                            const at::Tensor& zeros, int64_t group, int64_t block);

}  // namespace torch_node
