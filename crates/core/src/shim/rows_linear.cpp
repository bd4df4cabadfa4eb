// torch_node::rows_linear: y = x w^T (times per-channel scales) for the few rows of a batched
// decode step, registered as a custom op that python/decode_gemv.py's programs call.
//
// ATen hands a product of a few rows by a weight matrix to MKL's GEMM (its generic code on CPUs
// it does not take for Intel's) or, for int8 weights, to `_weight_int8pack_mm`, which take 3-4x
// one row's time at 8 rows although the step reads each weight once either way. Here each weight
// is read once for all the rows: a block of output channels is loaded (and widened to float32:
// bf16 by a shift, int8 by a conversion) once per 8 columns, then multiplied into every row's
// accumulators, so at 8 rows the weight stream stays near the memory's speed. AVX2 + FMA (chosen
// at run time; every x86-64 CPU this project meets has them); without them, or past `kMaxRows`
// rows of float weights (prefills: ATen's GEMM is the faster there), the op calls ATen's linear.
// The channels spread over ATen's OpenMP threads (compiled with -fopenmp: crates/core/build.rs).
// python/decode_gemv.py registers the same op in Python (ATen's linear) for the export.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/library.h>

#include <atomic>
#include <optional>

#include "protect.h"
#include "rows_linear.h"

namespace {

constexpr int64_t kMaxRows = 16;  // measured: still 1.4-1.8x ATen at 16 rows
// How far ahead a block prefetches the weight: the hardware's prefetchers lose the short rows of
// the next blocks (an int8 row of 576 is 9 cache lines). Measured 2026-11-28 on an AMD EPYC
// (Zen 3), quiet, 2 threads, SmolLM2's 30 layers x 7 weights and head, no prefetch / 2 blocks /
// 8 blocks ahead: int8 one row 35.3 / 21.5 / 22.1 ms, 8 rows 66.2 / 39.0 / 39.7; float32 one row
// 44.2 / 42.9 / 39.0, 8 rows 66.6 / 53.6 / 52.5. (A prefetch past the weight's end faults
// nothing.)
constexpr int64_t kPrefetchBlocks = 8;

// Weight loaders: 8 consecutive weights as float32.
struct F32 {
  using T = float;
  TN_AVX2 static inline __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static inline float scalar(float v) { return v; }
};
struct BF16 {
  using T = at::BFloat16;
  // 8 consecutive bf16 values as float32 (bf16 is float32's upper half: a shift).
  TN_AVX2 static inline __m256 load(const at::BFloat16* p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static inline float scalar(at::BFloat16 v) { return static_cast<float>(v); }
};
struct I8 {
  using T = int8_t;
  TN_AVX2 static inline __m256 load(const int8_t* p) {
    __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight));
  }
  static inline float scalar(int8_t v) { return static_cast<float>(v); }
};

TN_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// y[r][n0 + j] = sum_k x[r][k] w[n0 + j][k] for R rows (x: float32, row stride K; y: row stride
// ys) and J output channels: R*J accumulators, J weight vectors and one row vector in the 16
// registers.
template <class W, int R, int J>
TN_AVX2 void block(const float* x, const typename W::T* w, int64_t K, float* y, int64_t ys,
                   int64_t n0) {
  __m256 acc[R][J];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < J; j++) acc[r][j] = _mm256_setzero_ps();
  const typename W::T* wr[J];
  for (int j = 0; j < J; j++) wr[j] = w + (n0 + j) * K;
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wv[J];
    // Once per cache line: the same line of the weight rows kPrefetchBlocks blocks ahead.
    if (((k * sizeof(typename W::T)) & 63) == 0)
      for (int j = 0; j < J; j++)
        _mm_prefetch(reinterpret_cast<const char*>(wr[j] + k + kPrefetchBlocks * J * K),
                     _MM_HINT_T0);
    for (int j = 0; j < J; j++) wv[j] = W::load(wr[j] + k);
    for (int r = 0; r < R; r++) {
      __m256 xv = _mm256_loadu_ps(x + r * K + k);
      for (int j = 0; j < J; j++) acc[r][j] = _mm256_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < J; j++) {
      float s = hsum(acc[r][j]);
      for (int64_t t = k; t < K; t++) s += x[r * K + t] * W::scalar(wr[j][t]);
      y[r * ys + n0 + j] = s;
    }
}

// Rows [0, M) for output channels [n0, n1): J channels at a time, and for those the rows 4 at a
// time (the J weight rows stay in L1 from one group of rows to the next).
template <class W, int J>
void channels(const float* x, int64_t M, const typename W::T* w, int64_t K, float* y, int64_t N,
              int64_t n0) {
  int64_t r = 0;
  for (; r + 4 <= M; r += 4) block<W, 4, J>(x + r * K, w, K, y + r * N, N, n0);
  switch (M - r) {
    case 3: block<W, 3, J>(x + r * K, w, K, y + r * N, N, n0); break;
    case 2: block<W, 2, J>(x + r * K, w, K, y + r * N, N, n0); break;
    case 1: block<W, 1, J>(x + r * K, w, K, y + r * N, N, n0); break;
    default: break;
  }
}

// All M rows: the output channels spread over the threads in contiguous runs, 3 at a time.
template <class W>
void rows(const float* x, int64_t M, const typename W::T* w, int64_t K, float* y, int64_t N) {
  constexpr int64_t J = 3;
  at::parallel_for(0, (N + J - 1) / J, 8, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
      int64_t n0 = b * J;
      if (n0 + J <= N) {
        channels<W, J>(x, M, w, K, y, N, n0);
      } else {
        for (int64_t n = n0; n < N; n++) channels<W, 1>(x, M, w, K, y, N, n);
      }
    }
  });
}

// The op. x [M, K] float32 or bfloat16; w [N, K] in x's dtype, or int8 with `scales` [N] (any
// float dtype). Returns [M, N] in x's dtype, accumulated in float32.
at::Tensor rows_linear(const at::Tensor& x, const at::Tensor& w,
                       const std::optional<at::Tensor>& scales) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
              "torch_node::rows_linear: x [M, K] and w [N, K] expected, got ", x.sizes(), " and ",
              w.sizes());
  TORCH_CHECK(x.device().is_cpu() && w.device().is_cpu(), "torch_node::rows_linear: CPU only");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16,
              "torch_node::rows_linear: x must be float32 or bfloat16, got ", x.scalar_type());
  bool int8 = w.scalar_type() == at::kChar;
  TORCH_CHECK(int8 || w.scalar_type() == x.scalar_type(),
              "torch_node::rows_linear: w must be int8 or x's dtype, got ", w.scalar_type());
  TORCH_CHECK(int8 == scales.has_value(),
              "torch_node::rows_linear: scales go with (and only with) an int8 w");
  if (int8)
    TORCH_CHECK(scales->dim() == 1 && scales->size(0) == w.size(0),
                "torch_node::rows_linear: scales [N] expected, got ", scales->sizes());
  int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  bool by_kernel = M > 0 && torch_node::has_avx2_fma() && (M <= kMaxRows || int8);
  torch_node::count(by_kernel ? torch_node::kRowsLinearAvx2 : torch_node::kRowsLinearAten, M);
  if (M == 0 || !torch_node::has_avx2_fma()) {
    if (int8) {
      at::Tensor dequantized = w.to(at::kFloat) * scales->to(at::kFloat).unsqueeze(1);
      return at::linear(x, dequantized.to(x.scalar_type()));
    }
    return at::linear(x, w);
  }
  // (ATen's _weight_int8pack_mm is not the fallback: it reads past K's end when K is not a
  // multiple of its tile, and at 16 rows and more this kernel is the faster still.)
  if (M > kMaxRows && !int8) return at::linear(x, w);
  at::Tensor xf = x.to(at::kFloat).contiguous();
  at::Tensor wc = w.contiguous();
  at::Tensor yf = at::empty({M, N}, xf.options());
  const float* xp = xf.const_data_ptr<float>();
  float* y = yf.mutable_data_ptr<float>();
  switch (wc.scalar_type()) {
    case at::kFloat: rows<F32>(xp, M, wc.const_data_ptr<float>(), K, y, N); break;
    case at::kBFloat16: rows<BF16>(xp, M, wc.const_data_ptr<at::BFloat16>(), K, y, N); break;
    default: rows<I8>(xp, M, wc.const_data_ptr<int8_t>(), K, y, N); break;
  }
  if (int8) yf.mul_(scales->to(at::kFloat));
  return yf.to(x.scalar_type());
}

// Defines the op and its CPU kernel once; the libraries live as long as the process.
void register_ops() {
  static torch::Library* def = [] {
    auto* lib =
        new torch::Library(torch::Library::DEF, "torch_node", std::nullopt, __FILE__, __LINE__);
    lib->def("rows_linear(Tensor x, Tensor w, Tensor? scales=None) -> Tensor");
    lib->def(
        "rows_linear_int4(Tensor x, Tensor packed, Tensor scales, Tensor zeros, int group, "
        "int block) -> Tensor");
    lib->def(
        "rows_linear_int4_runs(Tensor x, Tensor packed, Tensor runs, int group, int block) -> "
        "Tensor");
    auto* impl = new torch::Library(torch::Library::IMPL, "torch_node", c10::DispatchKey::CPU,
                                    __FILE__, __LINE__);
    impl->impl("rows_linear", TORCH_FN(rows_linear));
    impl->impl("rows_linear_int4", TORCH_FN(torch_node::rows_linear_int4));
    impl->impl("rows_linear_int4_runs", TORCH_FN(torch_node::rows_linear_int4_runs));
    return lib;
  }();
  (void)def;
}

}  // namespace

bool torch_node::has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

namespace {
// Calls, and calls of one row, per kernel (relaxed: counts, not synchronization).
std::atomic<uint64_t> calls[torch_node::kKernels], one_row[torch_node::kKernels];
}  // namespace

void torch_node::count(Kernel kernel, int64_t rows) {
  calls[kernel].fetch_add(1, std::memory_order_relaxed);
  if (rows == 1) one_row[kernel].fetch_add(1, std::memory_order_relaxed);
}

extern "C" {

// The counts so far: cb(ctx, op, kernel, calls, one-row calls) for each kernel.
void tn_kernel_calls(void (*cb)(void*, const char*, const char*, uint64_t, uint64_t), void* ctx) {
  static const char* names[torch_node::kKernels][2] = {
      {"torch_node::rows_linear", "avx2"},
      {"torch_node::rows_linear", "aten"},
      {"torch_node::rows_linear_int4_runs", "avx2"},
      {"torch_node::rows_linear_int4_runs", "aten"},
  };
  for (int k = 0; k < torch_node::kKernels; k++)
    cb(ctx, names[k][0], names[k][1], calls[k].load(std::memory_order_relaxed),
       one_row[k].load(std::memory_order_relaxed));
}

// Registers torch_node::rows_linear, rows_linear_int4 and rows_linear_int4_runs with the
// dispatcher (once; later calls do nothing). Called before any AOTInductor package loads: a program
// that calls the op finds it by name.
void tn_register_ops(char** err) { TN_PROTECT(err, register_ops();) }

// The op's kernel called directly (crates/core's tests compare it with ATen): a new tensor in
// *out, or a message in *err.
void tn_rows_linear(const at::Tensor* x, const at::Tensor* w, const at::Tensor* scales,
                    at::Tensor** out, char** err) {
  TN_PROTECT(err, std::optional<at::Tensor> s; if (scales) s = *scales;
             *out = new at::Tensor(rows_linear(*x, *w, s));)
}

}  // extern "C"
