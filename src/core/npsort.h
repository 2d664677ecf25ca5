/* numpy 1.24's default np.argsort (introsort), ported so that keys that compare equal come out
 * in exactly numpy's order: YOLOv5's metrics and rectangular batches depend on it. */
#ifndef YC_NPSORT_H
#define YC_NPSORT_H

#include <stddef.h>

/* Indices of v[0..n-1] in ascending order (NaN last), as np.argsort(v) for float32 / float64. */
void yc_np_argsort_f32(const float *v, ptrdiff_t *idx, ptrdiff_t n);
void yc_np_argsort_f64(const double *v, ptrdiff_t *idx, ptrdiff_t n);

#endif
