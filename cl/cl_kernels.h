/* The kernel sources of cl/kernels/, embedded in the binary at build time: cl_kernels.c is
 * generated from the .cl files by cl/embed.awk (see Makefile.am). */
#ifndef YC_CL_KERNELS_H
#define YC_CL_KERNELS_H

#include <stddef.h>

/* One source file. */
typedef struct yc_cl_source {
    /* file name without directory ("batchnorm.cl") */
    const char *name;
    /* its text and length in bytes */
    const char *text;
    size_t len;
} yc_cl_source;

/* Every file of cl/kernels/, in the order Makefile.am lists them. */
extern const yc_cl_source yc_cl_sources[];
extern const int yc_cl_nsources;

#endif
