/* Does this OpenCL device's compiler take NVIDIA PTX inline assembly, and do tensor-core matrix
 * instructions reached that way compute the right numbers?  The answer decides whether yolocl's
 * OpenCL convolutions can use tensor cores on NVIDIA GPUs (plain OpenCL C reaches only the FP32
 * units).  Three kernels, each built on its own so that one refused does not hide the others:
 *
 *   laneid  asm("mov.u32 %0, %%laneid;"): inline assembly accepted at all; each work-item's lane;
 *   mma16   mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32: one warp multiplies a 16x8 FP16
 *           matrix by an 8x8 one into FP32 (the fragment layouts of the PTX ISA manual);
 *   mmatf32 mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: the same with TF32 inputs.
 *
 * The products are compared with a double-precision product of the same (rounded) inputs.  On a
 * device that is not NVIDIA's the kernels fail to build, which the program reports and exits 0 for.
 *
 *   make bench/cl_ptx_probe && bench/cl_ptx_probe [device index over all platforms]
 * Exit status: 0 when every kernel that built gave the right result, 1 otherwise. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"

static const char *source =
    "__kernel void laneid(__global uint *out)\n"
    "{\n"
    "    uint lane;\n"
    "    asm volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
    "    out[get_global_id(0)] = lane;\n"
    "}\n"
    /* A 16x8 row-major and B 8x8 (B[k][n] stored at k*8+n) as FP16 bits; D 16x8 FP32 row-major.
     * Thread t of the warp: group g = t/4, i = t%4.  A: a0,a1 = A[g][2i..2i+1], a2,a3 =
     * A[g+8][2i..2i+1]; B: b0,b1 = B[2i..2i+1][g]; D: d0,d1 = D[g][2i..2i+1], d2,d3 = D[g+8][..]. */
    "__kernel void mma16(__global const ushort *A, __global const ushort *B, __global float *D)\n"
    "{\n"
    "    uint t = get_local_id(0), g = t / 4, i = t % 4;\n"
    "    uint a01 = A[g * 8 + 2 * i] | ((uint)A[g * 8 + 2 * i + 1] << 16);\n"
    "    uint a23 = A[(g + 8) * 8 + 2 * i] | ((uint)A[(g + 8) * 8 + 2 * i + 1] << 16);\n"
    "    uint b01 = B[(2 * i) * 8 + g] | ((uint)B[(2 * i + 1) * 8 + g] << 16);\n"
    "    float d0, d1, d2, d3, z = 0.0f;\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 \"\n"
    "                 \"{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\"\n"
    "                 : \"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)\n"
    "                 : \"r\"(a01), \"r\"(a23), \"r\"(b01), \"f\"(z));\n"
    "    D[g * 8 + 2 * i] = d0; D[g * 8 + 2 * i + 1] = d1;\n"
    "    D[(g + 8) * 8 + 2 * i] = d2; D[(g + 8) * 8 + 2 * i + 1] = d3;\n"
    "}\n"
    /* TF32 m16n8k8: A a0 = A[g][i], a1 = A[g+8][i], a2 = A[g][i+4], a3 = A[g+8][i+4];
     * B b0 = B[i][g], b1 = B[i+4][g]; D as above.  Inputs are float bit patterns. */
    "__kernel void mmatf32(__global const uint *A, __global const uint *B, __global float *D)\n"
    "{\n"
    "    uint t = get_local_id(0), g = t / 4, i = t % 4;\n"
    "    uint a0 = A[g * 8 + i], a1 = A[(g + 8) * 8 + i], a2 = A[g * 8 + i + 4], a3 = A[(g + 8) * 8 + i + 4];\n"
    "    uint b0 = B[i * 8 + g], b1 = B[(i + 4) * 8 + g];\n"
    "    float d0, d1, d2, d3, z = 0.0f;\n"
    "    asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 \"\n"
    "                 \"{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\"\n"
    "                 : \"=f\"(d0), \"=f\"(d1), \"=f\"(d2), \"=f\"(d3)\n"
    "                 : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1), \"f\"(z));\n"
    "    D[g * 8 + 2 * i] = d0; D[g * 8 + 2 * i + 1] = d1;\n"
    "    D[(g + 8) * 8 + 2 * i] = d2; D[(g + 8) * 8 + 2 * i + 1] = d3;\n"
    "}\n";

#define CHECK(call, what)                                                                              \
    do {                                                                                               \
        cl_int e_ = (call);                                                                            \
        if (e_ != CL_SUCCESS) {                                                                        \
            fprintf(stderr, "cl_ptx_probe: %s failed (OpenCL error %d)\n", what, (int)e_);             \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

/* Builds kernel `name` alone (a program per kernel: NVIDIA reports a failed asm for the whole
 * program).  Returns NULL and prints the build log when the device's compiler refuses it. */
static cl_kernel build(cl_context ctx, cl_device_id dev, const char *name)
{
    cl_int err;
    char src[8192];
    const char *start = strstr(source, name) - strlen("__kernel void ");
    const char *end = strstr(start + 1, "__kernel void ");
    size_t len = end ? (size_t)(end - start) : strlen(start);
    if (len >= sizeof src)
        return NULL;
    memcpy(src, start, len);
    src[len] = '\0';
    const char *p = src;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &p, NULL, &err);
    if (err != CL_SUCCESS)
        return NULL;
    if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        printf("%-8s refused by the compiler; build log:\n%s\n", name, log);
        clReleaseProgram(prog);
        return NULL;
    }
    cl_kernel k = clCreateKernel(prog, name, &err);
    clReleaseProgram(prog);
    return err == CL_SUCCESS ? k : NULL;
}

/* float rounded to TF32 (10 mantissa bits, round to nearest even), as the tensor core reads it
 * after cvt.rna; truncation is also allowed by the ISA, so the tolerance below covers both. */
static float to_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

int main(int argc, char **argv)
{
    int want = argc > 1 ? atoi(argv[1]) : 0, seen = 0;
    cl_platform_id plats[8];
    cl_uint np = 0;
    CHECK(clGetPlatformIDs(8, plats, &np), "clGetPlatformIDs");
    cl_device_id dev = NULL;
    for (cl_uint p = 0; p < np && !dev; p++) {
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd && !dev; d++, seen++)
            if (seen == want)
                dev = devs[d];
    }
    if (!dev) {
        fprintf(stderr, "cl_ptx_probe: no OpenCL device %d (%d found)\n", want, seen);
        return 1;
    }
    char name[256] = "", ver[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof ver, ver, NULL);
    printf("device %d: %s, driver %s\n", want, name, ver);
    /* what the GPU kernels will be shaped by: local memory, work-group limits, extensions */
    cl_ulong lmem = 0;
    size_t wg = 0, dims[3] = {0, 0, 0};
    cl_uint cus = 0;
    char ext[8192] = "";
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof dims, dims, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL);
    printf("compute units %u, local memory %llu bytes, work-group %zu, work-item sizes %zu %zu %zu\n", cus,
           (unsigned long long)lmem, wg, dims[0], dims[1], dims[2]);
    printf("extensions: %s\n", ext);
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CHECK(err, "clCreateContext");
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    CHECK(err, "clCreateCommandQueue");

    int bad = 0, built = 0;
    cl_kernel k = build(ctx, dev, "laneid");
    if (k) {
        built++;
        uint32_t lanes[64];
        cl_mem m = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof lanes, NULL, &err);
        CHECK(err, "clCreateBuffer");
        size_t g = 64, l = 64;
        CHECK(clSetKernelArg(k, 0, sizeof m, &m), "clSetKernelArg");
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL), "laneid launch");
        CHECK(clEnqueueReadBuffer(q, m, CL_TRUE, 0, sizeof lanes, lanes, 0, NULL, NULL), "laneid read");
        int ok = 1;
        for (int i = 0; i < 64; i++)
            ok &= lanes[i] == (uint32_t)(i % 32);
        printf("laneid   %s (lanes of work-items 0..63 %s 0..31 twice)\n", ok ? "ok" : "WRONG",
               ok ? "are" : "are not");
        bad |= !ok;
        clReleaseMemObject(m);
        clReleaseKernel(k);
    }

    /* the same A (16x8) and B (8x8) for both products: small integers over 8, exact in FP16 */
    float A[128], B[64];
    uint16_t Ah[128], Bh[64];
    uint32_t Af[128], Bf[64];
    for (int i = 0; i < 128; i++) {
        A[i] = (float)((i * 7 + 3) % 17 - 8) / 8.0f;
        Ah[i] = yc_float_to_half(A[i]);
        memcpy(&Af[i], &A[i], 4);
    }
    for (int i = 0; i < 64; i++) {
        B[i] = (float)((i * 5 + 1) % 13 - 6) / 4.0f;
        Bh[i] = yc_float_to_half(B[i]);
        memcpy(&Bf[i], &B[i], 4);
    }
    for (int pass = 0; pass < 2; pass++) {
        const char *kn = pass ? "mmatf32" : "mma16";
        k = build(ctx, dev, kn);
        if (!k)
            continue;
        built++;
        size_t asz = pass ? sizeof Af : sizeof Ah, bsz = pass ? sizeof Bf : sizeof Bh;
        cl_mem ma = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, asz, pass ? (void *)Af : (void *)Ah, &err);
        CHECK(err, "clCreateBuffer A");
        cl_mem mb = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bsz, pass ? (void *)Bf : (void *)Bh, &err);
        CHECK(err, "clCreateBuffer B");
        cl_mem md = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, 128 * sizeof(float), NULL, &err);
        CHECK(err, "clCreateBuffer D");
        CHECK(clSetKernelArg(k, 0, sizeof ma, &ma), "clSetKernelArg");
        CHECK(clSetKernelArg(k, 1, sizeof mb, &mb), "clSetKernelArg");
        CHECK(clSetKernelArg(k, 2, sizeof md, &md), "clSetKernelArg");
        size_t g = 32, l = 32;
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL), "mma launch");
        float D[128];
        CHECK(clEnqueueReadBuffer(q, md, CL_TRUE, 0, sizeof D, D, 0, NULL, NULL), "mma read");
        double worst = 0;
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 8; c++) {
                double ref = 0;
                for (int kk = 0; kk < 8; kk++)
                    ref += (double)(pass ? to_tf32(A[r * 8 + kk]) : yc_half_to_float(Ah[r * 8 + kk])) *
                           (double)(pass ? to_tf32(B[kk * 8 + c]) : yc_half_to_float(Bh[kk * 8 + c]));
                double e = fabs(D[r * 8 + c] - ref);
                if (!(e <= worst))
                    worst = isnan(e) ? INFINITY : e;
            }
        int ok = worst <= 1e-5;
        printf("%-8s %s (16x8x8 product, largest difference from double precision %.3g)\n", kn,
               ok ? "ok" : "WRONG", worst);
        bad |= !ok;
        clReleaseMemObject(ma);
        clReleaseMemObject(mb);
        clReleaseMemObject(md);
        clReleaseKernel(k);
    }
    printf("%d of 3 kernels built; %s\n", built, bad ? "a result was wrong" : "every result that ran was right");
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return bad;
}
