/* numpy's default argsort, bit-for-bit in its order of equal keys (see npsort.h). */
#include "npsort.h"

#include <stdbool.h>

#define NP_SMALL_QUICKSORT 15
#define NP_QS_STACK 128

static inline void swap_idx(ptrdiff_t *a, ptrdiff_t *b)
{
    ptrdiff_t t = *a;
    *a = *b;
    *b = t;
}

#define NP_T float
#define NP_LESS np_less_f32
#define NP_HEAPSORT np_aheapsort_f32
#define NP_ARGSORT yc_np_argsort_f32
#include "npsort_impl.h"
#undef NP_T
#undef NP_LESS
#undef NP_HEAPSORT
#undef NP_ARGSORT

#define NP_T double
#define NP_LESS np_less_f64
#define NP_HEAPSORT np_aheapsort_f64
#define NP_ARGSORT yc_np_argsort_f64
#include "npsort_impl.h"
