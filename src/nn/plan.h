/* The memory planner: places blocks with known lifetimes in one arena, by offset, so that no two
 * blocks alive at the same time share a byte.  Best-fit over a free list with merging of
 * neighbours, in schedule order (ggml-alloc's approach).  Pure computation: no device memory. */
#ifndef YC_PLAN_H
#define YC_PLAN_H

#include <stddef.h>

typedef struct yc_plan_block {
    /* bytes needed */
    size_t size;
    /* first and last schedule position at which the block is alive (first <= last) */
    int first, last;
    /* for reports ("model.3.conv.out") */
    const char *name;
    /* output: the chunk holding the block and its byte offset in that chunk */
    int chunk;
    size_t offset;
} yc_plan_block;

#define YC_PLAN_MAX_CHUNKS 64

typedef struct yc_plan {
    /* the blocks (owned) */
    int nblocks;
    yc_plan_block *blocks;
    /* input: the largest chunk (the device's largest allocation); 0 = one chunk of any size */
    size_t max_chunk;
    /* output: chunks and their sizes; arena_bytes is their sum (the planned peak) */
    int nchunks;
    size_t chunk_bytes[YC_PLAN_MAX_CHUNKS];
    size_t arena_bytes;
    /* output: the largest sum of sizes of blocks alive at one position: no placement can do
     * better, so arena_bytes / lower_bound_bytes measures fragmentation */
    size_t lower_bound_bytes;
    /* output: the position where that sum is reached */
    int peak_position;
    /* alignment of every offset (bytes, a power of two) */
    size_t alignment;
} yc_plan;

/* Places plan->blocks[0..nblocks-1]; sizes are rounded up to the alignment.  With max_chunk, a
 * block goes to the best-fitting free range of any chunk, else the end of the last chunk when it
 * still fits there, else a new chunk; a block larger than max_chunk is an error naming it. */
int yc_plan_place(yc_plan *plan);

/* Checks that no two blocks whose lifetimes overlap share a byte of a chunk and that all lie
 * inside their chunk; YC_ERR with a message naming both blocks otherwise. */
int yc_plan_verify(const yc_plan *plan);

#endif
