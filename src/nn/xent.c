/* Cross-entropy with label smoothing over a batch of logits (xent.h). */
#include "xent.h"

#include <math.h>
#include <stddef.h>

double yc_xent_loss(const float *logits, const int *labels, int n, int nc, double eps,
                    float *grad)
{
    double total = 0.0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * nc;
        if (labels[i] < 0 || labels[i] >= nc)
            return NAN;
        /* lse = max + log(sum exp(z - max)): no overflow for large logits */
        double mx = z[0];
        for (int c = 1; c < nc; c++)
            mx = z[c] > mx ? z[c] : mx;
        double se = 0.0;
        for (int c = 0; c < nc; c++)
            se += exp((double)z[c] - mx);
        double lse = mx + log(se);
        for (int c = 0; c < nc; c++) {
            double q = eps / nc + (c == labels[i] ? 1.0 - eps : 0.0);
            total += q * (lse - (double)z[c]);
            if (grad)
                grad[(size_t)i * nc + c] = (float)((exp((double)z[c] - lse) - q) / n);
        }
    }
    return total / n;
}

int yc_xent_topk_correct(const float *logits, const int *labels, int n, int nc, int k)
{
    int correct = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * nc;
        int y = labels[i];
        if (y < 0 || y >= nc)
            continue;
        /* the label's rank: classes scoring higher, or equal with a lower index */
        int rank = 0;
        for (int c = 0; c < nc; c++)
            rank += z[c] > z[y] || (z[c] == z[y] && c < y);
        correct += rank < k;
    }
    return correct;
}
