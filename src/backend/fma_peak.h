/* The FP32 peak of this CPU, measured: a tight loop of independent FMA chains in the widest
 * vector ISA present (AVX-512, AVX2 with FMA, else scalar fmaf), run on every thread of an OpenMP
 * team.  Achieved GFLOP/s figures (bench/bench_gemm.c, bench/bench_conv.c, yolocl bench) are
 * fractions of it.  One call takes about 60 ms: an untimed run, then the best of 5 timed runs of
 * about 10 ms each; on a shared machine take the best of several calls. */
#ifndef YC_FMA_PEAK_H
#define YC_FMA_PEAK_H

/* GFLOP/s (an FMA counts 2) of the loop on `threads` OpenMP threads (at least 1).  *isa, when
 * isa is not NULL, gets the loop's instruction set: "avx512", "avx2" or "scalar". */
double yc_fma_peak_gflops(int threads, const char **isa);

#endif
