// Measured FMA throughput of one core, for bench/compare.js's peak line: 12 independent FMA chains
// (enough to cover FMA latency × pipes) on the widest vectors the compiler targets
// (`cc -O2 -march=native`). Prints "fp32 <GFLOP/s>" and, with AVX512-BF16, "bf16 <GFLOP/s>"
// (VDPBF16PS: 2 bf16 multiply-adds per fp32 lane), counting an FMA as 2 FLOP.
// compare.js runs one copy per thread at once, so the sum is what the cores sustain together.
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 12
#define ITERATIONS 20000000L

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define SUM _mm512_reduce_add_ps
#elif defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
static float SUM(__m256 v) { float f[8]; _mm256_storeu_ps(f, v); float s = 0; for (int i = 0; i < 8; i++) s += f[i]; return s; }
#endif

int main(void) {
#ifdef LANES
  vec acc[CHAINS], b = SET1(1.0000001f), c = SET1(1e-7f);
  for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);
  double t0 = now();
  for (long k = 0; k < ITERATIONS; k++) {
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = FMA(acc[i], b, c);
  }
  double t = now() - t0;
  float s = 0;
  for (int i = 0; i < CHAINS; i++) s += SUM(acc[i]);
  printf("fp32 %.1f\n", ITERATIONS * CHAINS * LANES * 2 / t / 1e9 + 0 * s);
#endif
#if defined(__AVX512BF16__)
  __m512 dot[CHAINS];
  __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
  for (int i = 0; i < CHAINS; i++) dot[i] = _mm512_setzero_ps();
  t0 = now();
  for (long k = 0; k < ITERATIONS; k++) {
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) dot[i] = _mm512_dpbf16_ps(dot[i], x, y);
  }
  t = now() - t0;
  s = 0;
  for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(dot[i]);
  printf("bf16 %.1f\n", ITERATIONS * CHAINS * 32 * 2 / t / 1e9 + 0 * s);
#endif
  return 0;
}
