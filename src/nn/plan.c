/* The memory planner (see plan.h). */
#include "plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* A free byte range of a chunk. */
typedef struct free_range {
    int chunk;
    size_t offset, size;
} free_range;

typedef struct free_list {
    free_range *r;
    int n, cap;
} free_list;

static int cmp_first(const void *a, const void *b, void *ctx)
{
    const yc_plan_block *blk = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    if (blk[ia].first != blk[ib].first)
        return blk[ia].first < blk[ib].first ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

static int cmp_last(const void *a, const void *b, void *ctx)
{
    const yc_plan_block *blk = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    if (blk[ia].last != blk[ib].last)
        return blk[ia].last < blk[ib].last ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

static int cmp_offset(const void *a, const void *b, void *ctx)
{
    const yc_plan_block *blk = ctx;
    int ia = *(const int *)a, ib = *(const int *)b;
    if (blk[ia].chunk != blk[ib].chunk)
        return blk[ia].chunk < blk[ib].chunk ? -1 : 1;
    if (blk[ia].offset != blk[ib].offset)
        return blk[ia].offset < blk[ib].offset ? -1 : 1;
    return ia < ib ? -1 : ia > ib;
}

/* Inserts [offset, offset+size) of a chunk keeping the list sorted by (chunk, offset), merging
 * with touching neighbours of the same chunk. */
static int free_insert(free_list *fl, int chunk, size_t offset, size_t size)
{
    int i = 0;
    while (i < fl->n && (fl->r[i].chunk < chunk ||
                         (fl->r[i].chunk == chunk && fl->r[i].offset < offset)))
        i++;
    bool merge_prev = i > 0 && fl->r[i - 1].chunk == chunk &&
                      fl->r[i - 1].offset + fl->r[i - 1].size == offset;
    bool merge_next = i < fl->n && fl->r[i].chunk == chunk && offset + size == fl->r[i].offset;
    if (merge_prev && merge_next) {
        fl->r[i - 1].size += size + fl->r[i].size;
        memmove(&fl->r[i], &fl->r[i + 1], (size_t)(fl->n - i - 1) * sizeof *fl->r);
        fl->n--;
        return YC_OK;
    }
    if (merge_prev) {
        fl->r[i - 1].size += size;
        return YC_OK;
    }
    if (merge_next) {
        fl->r[i].offset = offset;
        fl->r[i].size += size;
        return YC_OK;
    }
    if (fl->n == fl->cap) {
        int cap = fl->cap ? fl->cap * 2 : 64;
        free_range *nr = yc_realloc(fl->r, (size_t)cap * sizeof *nr, "memory plan");
        if (!nr)
            return YC_ENOMEM;
        fl->r = nr;
        fl->cap = cap;
    }
    memmove(&fl->r[i + 1], &fl->r[i], (size_t)(fl->n - i) * sizeof *fl->r);
    fl->r[i].chunk = chunk;
    fl->r[i].offset = offset;
    fl->r[i].size = size;
    fl->n++;
    return YC_OK;
}

/* Best fit: the smallest free range that holds `size` (lowest chunk and offset on ties); else
 * the last chunk grows (reusing a free range that ends at its top) when it stays within
 * max_chunk; else a new chunk. */
static int allocate(yc_plan *plan, free_list *fl, size_t size, yc_plan_block *b)
{
    int best = -1;
    for (int i = 0; i < fl->n; i++)
        if (fl->r[i].size >= size && (best < 0 || fl->r[i].size < fl->r[best].size))
            best = i;
    if (best >= 0) {
        b->chunk = fl->r[best].chunk;
        b->offset = fl->r[best].offset;
        fl->r[best].offset += size;
        fl->r[best].size -= size;
        if (fl->r[best].size == 0) {
            memmove(&fl->r[best], &fl->r[best + 1], (size_t)(fl->n - best - 1) * sizeof *fl->r);
            fl->n--;
        }
        return YC_OK;
    }
    size_t limit = plan->max_chunk ? plan->max_chunk : SIZE_MAX;
    if (size > limit)
        return yc_error_status(YC_ENOMEM, "%s needs %zu bytes, more than the device's largest "
                               "allocation (%zu bytes)", b->name ? b->name : "a tensor", size,
                               limit);
    int c = plan->nchunks - 1;
    size_t *top = c >= 0 ? &plan->chunk_bytes[c] : NULL;
    size_t start = top ? *top : 0;
    bool tail = fl->n > 0 && fl->r[fl->n - 1].chunk == c &&
                fl->r[fl->n - 1].offset + fl->r[fl->n - 1].size == start;
    if (tail)
        start = fl->r[fl->n - 1].offset;
    if (c >= 0 && start + size <= limit) {
        if (tail)
            fl->n--;
        b->chunk = c;
        b->offset = start;
        *top = start + size;
        return YC_OK;
    }
    if (plan->nchunks == YC_PLAN_MAX_CHUNKS)
        return yc_error_status(YC_ENOMEM, "the memory plan needs more than %d chunks of %zu bytes",
                               YC_PLAN_MAX_CHUNKS, limit);
    c = plan->nchunks++;
    plan->chunk_bytes[c] = size;
    b->chunk = c;
    b->offset = 0;
    return YC_OK;
}

int yc_plan_place(yc_plan *plan)
{
    int n = plan->nblocks;
    size_t align = plan->alignment ? plan->alignment : 64;
    plan->alignment = align;
    plan->arena_bytes = 0;
    plan->nchunks = 0;
    plan->lower_bound_bytes = 0;
    plan->peak_position = 0;
    if (n == 0)
        return YC_OK;
    int *by_first = yc_malloc((size_t)n * sizeof *by_first, "memory plan");
    int *by_last = yc_malloc((size_t)n * sizeof *by_last, "memory plan");
    if (!by_first || !by_last) {
        free(by_first);
        free(by_last);
        return YC_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        yc_plan_block *b = &plan->blocks[i];
        if (b->first > b->last || b->first < 0) {
            free(by_first);
            free(by_last);
            return yc_error_status(YC_ERR, "memory plan: block %s has lifetime [%d, %d]",
                                   b->name ? b->name : "?", b->first, b->last);
        }
        b->size = yc_align_up(b->size ? b->size : align, align);
        by_first[i] = by_last[i] = i;
    }
    qsort_r(by_first, (size_t)n, sizeof *by_first, cmp_first, plan->blocks);
    qsort_r(by_last, (size_t)n, sizeof *by_last, cmp_last, plan->blocks);

    free_list fl = {0};
    size_t live = 0;
    int status = YC_OK;
    int fi = 0, li = 0;
    while (fi < n || li < n) {
        int pos = fi < n ? plan->blocks[by_first[fi]].first : plan->blocks[by_last[li]].last;
        if (li < n && plan->blocks[by_last[li]].last < pos)
            pos = plan->blocks[by_last[li]].last;
        /* blocks born at pos are placed before those dying at pos are released: an op's inputs
         * and outputs are alive together */
        while (fi < n && plan->blocks[by_first[fi]].first == pos) {
            yc_plan_block *b = &plan->blocks[by_first[fi++]];
            if ((status = allocate(plan, &fl, b->size, b)))
                goto out;
            live += b->size;
        }
        if (live > plan->lower_bound_bytes) {
            plan->lower_bound_bytes = live;
            plan->peak_position = pos;
        }
        while (li < n && plan->blocks[by_last[li]].last == pos) {
            yc_plan_block *b = &plan->blocks[by_last[li++]];
            live -= b->size;
            if ((status = free_insert(&fl, b->chunk, b->offset, b->size)))
                goto out;
        }
    }
    for (int c = 0; c < plan->nchunks; c++)
        plan->arena_bytes += plan->chunk_bytes[c];
out:
    free(fl.r);
    free(by_first);
    free(by_last);
    return status;
}

int yc_plan_verify(const yc_plan *plan)
{
    int n = plan->nblocks;
    int *order = yc_malloc((size_t)(n ? n : 1) * sizeof *order, "memory plan check");
    if (!order)
        return YC_ENOMEM;
    for (int i = 0; i < n; i++) {
        const yc_plan_block *b = &plan->blocks[i];
        if (b->chunk < 0 || b->chunk >= plan->nchunks ||
            b->offset + b->size > plan->chunk_bytes[b->chunk] || b->offset % plan->alignment ||
            (plan->max_chunk && plan->chunk_bytes[b->chunk] > plan->max_chunk)) {
            free(order);
            return yc_error("memory plan: block %s [%zu, +%zu) lies outside its chunk %d or is "
                            "misaligned", b->name ? b->name : "?", b->offset, b->size, b->chunk);
        }
        order[i] = i;
    }
    /* sorted by offset, every block only needs checking against those starting before its end */
    qsort_r(order, (size_t)n, sizeof *order, cmp_offset, (void *)plan->blocks);
    for (int i = 0; i < n; i++) {
        const yc_plan_block *a = &plan->blocks[order[i]];
        for (int j = i + 1; j < n; j++) {
            const yc_plan_block *b = &plan->blocks[order[j]];
            if (b->chunk != a->chunk || b->offset >= a->offset + a->size)
                break;
            if (a->first <= b->last && b->first <= a->last) {
                free(order);
                return yc_error("memory plan: %s [%zu, +%zu) alive [%d, %d] overlaps %s [%zu, "
                                "+%zu) alive [%d, %d]", a->name ? a->name : "?", a->offset, a->size,
                                a->first, a->last, b->name ? b->name : "?", b->offset, b->size,
                                b->first, b->last);
            }
        }
    }
    free(order);
    return YC_OK;
}
