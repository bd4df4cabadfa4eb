// What rows_linear.cpp and rows_linear_int4.cpp share: the CPU check and the int4 op's kernel,
// which rows_linear.cpp registers with the float/int8 one.
#pragma once

#include <ATen/ATen.h>

namespace torch_node {

// AVX2 and FMA, checked once at run time (the kernels' code is compiled for them).
bool has_avx2_fma();

// torch_node::rows_linear_int4 (rows_linear_int4.cpp).
at::Tensor rows_linear_int4(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& scales,
                            const at::Tensor& zeros, int64_t group, int64_t block);

}  // namespace torch_node
