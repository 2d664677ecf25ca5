/* The body of numpy 1.24's default argsort (introsort: median-of-3 quicksort, heapsort past the
 * depth limit, insertion sort below 16), instantiated by npsort.c for float and double with
 * NP_T, NP_LESS, NP_HEAPSORT and NP_ARGSORT defined.  Not a public header. */

/* numpy's ordering: NaN after everything. */
static inline bool NP_LESS(NP_T a, NP_T b)
{
    return a < b || (b != b && a == a);
}

/* numpy aheapsort_ (1-based heap over t[0..n-1]). */
static void NP_HEAPSORT(const NP_T *v, ptrdiff_t *t, ptrdiff_t n)
{
#define A(k) t[(k) - 1]
    ptrdiff_t i, j, l, tmp;
    for (l = n >> 1; l > 0; --l) {
        tmp = A(l);
        for (i = l, j = l << 1; j <= n;) {
            if (j < n && NP_LESS(v[A(j)], v[A(j + 1)]))
                j += 1;
            if (NP_LESS(v[tmp], v[A(j)])) {
                A(i) = A(j);
                i = j;
                j += j;
            } else {
                break;
            }
        }
        A(i) = tmp;
    }
    for (; n > 1;) {
        tmp = A(n);
        A(n) = A(1);
        n -= 1;
        for (i = 1, j = 2; j <= n;) {
            if (j < n && NP_LESS(v[A(j)], v[A(j + 1)]))
                j++;
            if (NP_LESS(v[tmp], v[A(j)])) {
                A(i) = A(j);
                i = j;
                j += j;
            } else {
                break;
            }
        }
        A(i) = tmp;
    }
#undef A
}

/* np.argsort(v) (numpy 1.24 aquicksort_, the default kind): ascending order into idx[0..n-1]. */
void NP_ARGSORT(const NP_T *v, ptrdiff_t *idx, ptrdiff_t num)
{
    for (ptrdiff_t k = 0; k < num; k++)
        idx[k] = k;
    if (num < 2)
        return;
    ptrdiff_t *pl = idx, *pr = idx + num - 1;
    ptrdiff_t *stack[NP_QS_STACK], **sptr = stack;
    int depth[NP_QS_STACK], *psdepth = depth;
    int cdepth = 0;
    for (size_t u = (size_t)num; u >>= 1;)
        cdepth++;
    cdepth *= 2;
    for (;;) {
        if (cdepth < 0) {
            NP_HEAPSORT(v, pl, pr - pl + 1);
            goto stack_pop;
        }
        while ((pr - pl) > NP_SMALL_QUICKSORT) {
            ptrdiff_t *pm = pl + ((pr - pl) >> 1);
            if (NP_LESS(v[*pm], v[*pl]))
                swap_idx(pm, pl);
            if (NP_LESS(v[*pr], v[*pm]))
                swap_idx(pr, pm);
            if (NP_LESS(v[*pm], v[*pl]))
                swap_idx(pm, pl);
            const NP_T vp = v[*pm];
            ptrdiff_t *pi = pl, *pj = pr - 1;
            swap_idx(pm, pj);
            for (;;) {
                do
                    ++pi;
                while (NP_LESS(v[*pi], vp));
                do
                    --pj;
                while (NP_LESS(vp, v[*pj]));
                if (pi >= pj)
                    break;
                swap_idx(pi, pj);
            }
            swap_idx(pi, pr - 1);
            /* push the larger partition */
            if (pi - pl < pr - pi) {
                *sptr++ = pi + 1;
                *sptr++ = pr;
                pr = pi - 1;
            } else {
                *sptr++ = pl;
                *sptr++ = pi - 1;
                pl = pi + 1;
            }
            *psdepth++ = --cdepth;
        }
        /* insertion sort */
        for (ptrdiff_t *pi = pl + 1; pi <= pr; ++pi) {
            const ptrdiff_t vi = *pi;
            const NP_T vp = v[vi];
            ptrdiff_t *pj = pi;
            while (pj > pl && NP_LESS(vp, v[pj[-1]])) {
                *pj = pj[-1];
                pj--;
            }
            *pj = vi;
        }
    stack_pop:
        if (sptr == stack)
            break;
        pr = *(--sptr);
        pl = *(--sptr);
        cdepth = *(--psdepth);
    }
}

