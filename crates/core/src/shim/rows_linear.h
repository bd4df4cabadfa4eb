// What rows_linear.cpp and rows_linear_int4.cpp share: the CPU check and the target attribute of
// their AVX2 code, and the int4 ops' kernels, which rows_linear.cpp registers with the
// float/int8 one.
#pragma once

#include <ATen/ATen.h>
#include <immintrin.h>

// Code compiled for AVX2 + FMA in a file compiled for baseline x86-64 (called only after
// has_avx2_fma()).
#define TN_AVX2 __attribute__((target("avx2,fma")))

namespace torch_node {

// AVX2 and FMA, checked once at run time (the kernels' code is compiled for them).
bool has_avx2_fma();

// The kernels torch-node's ops run, counted per call (torch.cpu.kernelCalls(): which path a
// program took on this CPU, read by the tests instead of a timing).
enum Kernel { kRowsLinearAvx2, kRowsLinearAten, kInt4Avx2, kInt4Aten, kKernels };
void count(Kernel kernel, int64_t rows);

// torch_node::rows_linear_int4_runs and rows_linear_int4 (rows_linear_int4.cpp).
at::Tensor rows_linear_int4_runs(const at::Tensor& x, const at::Tensor& packed,
                                 const at::Tensor& runs, int64_t group, int64_t block);
at::Tensor rows_linear_int4(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& scales,
                            const at::Tensor& zeros, int64_t group, int64_t block);

// The scales and zeros [K/group, N] as rows_linear_int4_runs's `runs` [N/32, K/group, 64] float32.
at::Tensor int4_runs(const at::Tensor& scales, const at::Tensor& zeros, int64_t block);

}  // namespace torch_node
