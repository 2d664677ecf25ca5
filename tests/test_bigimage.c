/* Large images and the image cache (issue 26):
 *
 *   - a decompression bomb (a PNG whose header says 60000 x 60000, a few hundred bytes long) and a
 *     huge valid image (a 12000 x 12000 JPEG, 432 MB decoded) in a dataset with ordinary images:
 *     `yolocl train`, `val` and `detect` each finish with the right exit status, a warning naming
 *     the bomb and what to use instead (--tile, --slice), and a peak resident memory (the child's
 *     ru_maxrss from wait4) far below the huge image's decoded size;
 *   - detect on a directory holding only the bomb exits non-zero;
 *   - the huge JPEG detected without --slice is read shrunk (libjpeg's 1/8 scale) and the peak
 *     stays far below its decoded size, and an image just above 4096 x 4096 gets its annotated
 *     copy drawn strip by strip at full size;
 *   - a truncated image, small or large, read three times is decoded as far as possible each time
 *     and reported once;
 *   - --cache ram and --cache disk give the same training and validation batches as no cache,
 *     bit for bit, over two epochs (the second served from the cache), a disk cache warm from an
 *     earlier run too, and an image changed after it was cached is read again.
 *
 * Every image is generated here (libvips writes the black JPEG at a few hundred kB; the bomb is
 * written byte by byte).  The command-line cases need the built yolocl ($YOLOCL, as make check
 * sets it) and the tiny model in tests/data; without them they are skipped (exit 77). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vips/vips.h>

#include "dataset.h"
#include "demo.h"
#include "hyp.h"
#include "image.h"
#include "image_read.h"
#include "imgcache.h"
#include "loader.h"
#include "log.h"
#include "util.h"
#include "harness.h"
#include "yctest.h"

/* The huge image: 12000 x 12000 RGB, 432 MB decoded. */
#define HUGE_SIDE 12000
#define HUGE_DECODED ((size_t)3 * HUGE_SIDE * HUGE_SIDE)
/* The bomb's header: 60000 x 60000 RGB, 10.8 GB decoded. */
#define BOMB_SIDE 60000
/* The image just above the whole-decode limit (4096 x 4096): 4200 x 4100 (17.2 M pixels). */
#define MID_W 4200
#define MID_H 4100
/* Peak resident memory allowed to any command here: a quarter of the huge image's decoded size.
 * The process itself (libvips, the tiny model, OpenMP, the loader's buffers at --img 64) takes
 * about 60-80 MB; decoding the huge image whole would take 432 MB more. */
#define PEAK_LIMIT (HUGE_DECODED / 4)

/* Whether peaks are asserted: not in a sanitizer build (YOLOCL_SANITIZED, set by make check
 * there), where AddressSanitizer's redzones and its quarantine of freed memory (256 MB by
 * default) make the resident size say nothing about what the program itself holds; the normal
 * build asserts them. */
static bool peaks_checked(void)
{
    return getenv("YOLOCL_SANITIZED") == NULL;
}
#define PEAK_OK(r) (!peaks_checked() || (r).peak < PEAK_LIMIT)

/* <scratch directory>/demo/demo3.yaml: the demo dataset (16 train, 4 val images, its classes
 * folded into the tiny model's 3) with huge.jpg and bomb.png added to both splits */
static char yaml[512];

/* ---- generated files ------------------------------------------------------------------------ */

/* The generators run in a child process before the tests (and in one test): a failure prints
 * what failed and exits 1, which fails the test or stops the program. */
#define REQUIRE(cond, ...)                                                                    \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "test_bigimage: ");                                               \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

static uint32_t crc_table[256];

static uint32_t png_crc(const uint8_t *p, size_t n)
{
    if (!crc_table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Appends a PNG chunk (length, type, data, CRC of type and data) to f. */
static void png_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n)
{
    uint8_t *buf = malloc(8 + (size_t)n + 4);
    REQUIRE(buf != NULL, "out of memory");
    put32(buf, n);
    memcpy(buf + 4, type, 4);
    if (n)
        memcpy(buf + 8, data, n);
    put32(buf + 8 + n, png_crc(buf + 4, 4 + (size_t)n));
    REQUIRE(fwrite(buf, 1, 12 + (size_t)n, f) == 12 + (size_t)n, "writing a PNG chunk: %s",
            strerror(errno));
    free(buf);
}

/* A decompression bomb: a valid PNG signature and header for a side x side 8-bit RGB image, then
 * an IDAT holding the start of a zlib stream (a stored block of 1000 zero bytes: the filter byte
 * and the first black pixels) and IEND.  The file is under 1.1 kB; a decoder that trusts the
 * header allocates side^2 x 3 bytes. */
static void write_bomb(const char *path, uint32_t side)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL, "cannot create %s: %s", path, strerror(errno));
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    REQUIRE(fwrite(sig, 1, 8, f) == 8, "writing %s: %s", path, strerror(errno));
    uint8_t ihdr[13];
    put32(ihdr, side);
    put32(ihdr + 4, side);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 2;  /* RGB */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* not interlaced */
    png_chunk(f, "IHDR", ihdr, 13);
    /* zlib header (deflate, 32 KiB window, no dictionary, check bits), then a stored block that
     * is not the last: BFINAL 0, BTYPE 00, LEN, NLEN, LEN bytes */
    enum { LEN = 1000 };
    uint8_t idat[2 + 5 + LEN];
    idat[0] = 0x78;
    idat[1] = 0x01;
    idat[2] = 0x00;
    idat[3] = LEN & 0xFF;
    idat[4] = LEN >> 8;
    idat[5] = (uint8_t)~(LEN & 0xFF);
    idat[6] = (uint8_t)~(LEN >> 8);
    memset(idat + 7, 0, LEN);
    png_chunk(f, "IDAT", idat, sizeof idat);
    png_chunk(f, "IEND", NULL, 0);
    REQUIRE(fclose(f) == 0, "writing %s: %s", path, strerror(errno));
}

/* A w x h black RGB JPEG written by libvips without ever holding it (vips_black is computed as
 * jpegsave asks for rows); a few hundred kB for 12000 x 12000. */
static void write_black_jpeg(const char *path, int w, int h)
{
    REQUIRE(yc_vips_init() == YC_OK, "%s", yc_last_error());
    VipsImage *b = NULL;
    REQUIRE(vips_black(&b, w, h, "bands", 3, NULL) == 0, "vips_black: %s", vips_error_buffer());
    VipsImage *u = NULL;
    REQUIRE(vips_cast_uchar(b, &u, NULL) == 0, "cast: %s", vips_error_buffer());
    REQUIRE(vips_jpegsave(u, path, "Q", 75, NULL) == 0, "jpegsave %s: %s", path,
            vips_error_buffer());
    g_object_unref(u);
    g_object_unref(b);
}

static void write_text(const char *path, const char *text)
{
    REQUIRE(yc_write_file_atomic(path, text, strlen(text)) == YC_OK, "%s", yc_last_error());
}

/* Adds `name`.{ext} (written by `make`) and a one-box label to split `split` of the demo. */
static void add_big(const char *split, const char *file, const char *image)
{
    char dst[800], lbl[800], stem[128];
    snprintf(dst, sizeof dst, "%s/demo/images/%s/%s", yc_harness_tmpdir(), split, file);
    REQUIRE(link(image, dst) == 0 || errno == EEXIST, "link %s: %s", dst, strerror(errno));
    snprintf(stem, sizeof stem, "%.*s", (int)(strrchr(file, '.') - file), file);
    snprintf(lbl, sizeof lbl, "%s/demo/labels/%s/%s.txt", yc_harness_tmpdir(), split, stem);
    write_text(lbl, "0 0.5 0.5 0.25 0.25\n");
}

/* The fixture of the whole program, made once in a child process (libvips' threads and buffers
 * must not be in the parent, whose resident pages a forked child's ru_maxrss would count):
 * huge.jpg, mid.jpg, bomb.png and the demo dataset with the two added, in the scratch
 * directory. */
static void make_files(void)
{
    char p[600];
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    opt.n_train = 16;
    opt.n_val = 4;
    opt.min_side = 64;
    opt.max_side = 96;
    snprintf(p, sizeof p, "%s/demo", yc_harness_tmpdir());
    REQUIRE(yc_demo_write(p, &opt) == YC_OK, "%s", yc_last_error());
    snprintf(p, sizeof p, "%s/huge.jpg", yc_harness_tmpdir());
    write_black_jpeg(p, HUGE_SIDE, HUGE_SIDE);
    snprintf(p, sizeof p, "%s/mid.jpg", yc_harness_tmpdir());
    write_black_jpeg(p, MID_W, MID_H);
    snprintf(p, sizeof p, "%s/bomb.png", yc_harness_tmpdir());
    write_bomb(p, BOMB_SIDE);
    /* the tiny model has 3 classes, the demo 4: its class 3 becomes 2 and demo3.yaml says 3 */
    for (int split = 0; split < 2; split++)
        for (int i = 0; i < (split ? opt.n_val : opt.n_train); i++) {
            char lp[700], *text = NULL;
            snprintf(lp, sizeof lp, "%s/demo/labels/%s/shapes_%05d.txt", yc_harness_tmpdir(),
                     split ? "val" : "train", i);
            size_t n;
            REQUIRE(yc_read_file(lp, &text, &n) == YC_OK, "%s", yc_last_error());
            for (size_t k = 0; k < n; k++)
                if (text[k] == '3' && (k == 0 || text[k - 1] == '\n'))
                    text[k] = '2';
            write_text(lp, text);
            free(text);
        }
    snprintf(p, sizeof p, "%s/demo/demo3.yaml", yc_harness_tmpdir());
    write_text(p, "path: .\ntrain: images/train\nval: images/val\nnames: [a, b, c]\n");
    const char *splits[2] = {"train", "val"};
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/huge.jpg", yc_harness_tmpdir());
        add_big(splits[s], "huge.jpg", p);
        snprintf(p, sizeof p, "%s/bomb.png", yc_harness_tmpdir());
        add_big(splits[s], "bomb.png", p);
    }
}

/* ---- running yolocl --------------------------------------------------------------------------- */

typedef struct run_result {
    int status;      /* exit status, or 128 + signal */
    size_t peak;     /* the child's peak resident memory, bytes */
    char *out, *err; /* what it printed */
} run_result;

/* Runs $YOLOCL with the NULL-terminated arguments, its output in files, and collects its exit
 * status and peak resident memory (wait4: the child's own rusage, not the largest child's). */
static run_result run_yolocl(const char *const *args)
{
    const char *bin = getenv("YOLOCL");
    char outp[400], errp[400];
    snprintf(outp, sizeof outp, "%s/out.txt", yc_harness_tmpdir());
    snprintf(errp, sizeof errp, "%s/err.txt", yc_harness_tmpdir());
    const char *argv[64];
    int n = 0;
    argv[n++] = "yolocl";
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(n, 62);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || in < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || dup2(in, 0) < 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int ws = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    ck_assert_int_eq(wait4(pid, &ws, 0, &ru), pid);
    run_result r;
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    r.peak = (size_t)ru.ru_maxrss * 1024;
    r.out = yc_harness_read(outp, NULL);
    r.err = yc_harness_read(errp, NULL);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static bool have_yolocl(void)
{
    const char *bin = getenv("YOLOCL");
    return bin && access(bin, X_OK) == 0;
}

/* What a command printed, for failure messages. */
#define SHOW(r) "status %d, peak %.1f MB\nstdout:\n%.3000s\nstderr:\n%.3000s", (r).status, \
    (r).peak / 1e6, (r).out, (r).err

/* ---- train, val and detect on the dataset ---------------------------------------------------- */

START_TEST(train_skips_the_bomb_and_reads_the_huge_image_reduced)
{
    char project[400];
    snprintf(project, sizeof project, "%s/runs", yc_harness_tmpdir());
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    const char *cfg = yc_harness_tiny_cfg();
    const char *args[] = {"train", "--data", yaml, "--weights", w, "--cfg", cfg, "--img", "64",
                          "--batch", "4", "--epochs", "1", "--device", "cpu", "--workers", "1",
                          "--project", project, "--name", "train", "--exist-ok", NULL};
    run_result r = run_yolocl(args);
    ck_assert_msg(r.status == 0, SHOW(r));
    /* the bomb: refused from its header, once, naming the file, the size and --tile */
    const char *b = strstr(r.err, "bomb.png");
    ck_assert_msg(b && strstr(r.err, "60000x60000") && strstr(r.err, "--tile") &&
                      strstr(r.err, "--max-pixels"),
                  SHOW(r));
    ck_assert_msg(strstr(r.err, "huge.jpg") == NULL, "the huge image was not read: " SHOW(r));
    ck_assert_msg(PEAK_OK(r), SHOW(r));
    run_free(&r);
}
END_TEST

START_TEST(val_leaves_the_bomb_out_and_reads_the_huge_image_reduced)
{
    char project[400];
    snprintf(project, sizeof project, "%s/runs", yc_harness_tmpdir());
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    const char *cfg = yc_harness_tiny_cfg();
    const char *args[] = {"val", "--data", yaml, "--weights", w, "--cfg", cfg, "--img", "64",
                          "--batch", "4", "--device", "cpu", "--workers", "1", "--project",
                          project, "--name", "val", "--exist-ok", NULL};
    run_result r = run_yolocl(args);
    ck_assert_msg(r.status == 0, SHOW(r));
    ck_assert_msg(strstr(r.err, "bomb.png") && strstr(r.err, "60000x60000") &&
                      strstr(r.err, "left out of the validation"),
                  SHOW(r));
    ck_assert_msg(strstr(r.err, "huge.jpg") == NULL, "the huge image was not read: " SHOW(r));
    /* 4 demo images and the huge one validated */
    ck_assert_msg(strstr(r.out, "all") && PEAK_OK(r), SHOW(r));
    run_free(&r);
}
END_TEST

START_TEST(detect_skips_the_bomb_and_reads_the_huge_image_shrunk)
{
    char project[400], source[600];
    snprintf(project, sizeof project, "%s/runs", yc_harness_tmpdir());
    snprintf(source, sizeof source, "%s/demo/images/val", yc_harness_tmpdir());
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    const char *cfg = yc_harness_tiny_cfg();
    const char *args[] = {"detect", "--weights", w, "--cfg", cfg, "--source", source, "--img",
                          "64", "--device", "cpu", "--nosave", "--save-txt", "--conf-thres",
                          "0.001", "--project", project, "--name", "det", "--exist-ok", NULL};
    run_result r = run_yolocl(args);
    ck_assert_msg(r.status == 0, SHOW(r));
    ck_assert_msg(strstr(r.err, "bomb.png") && strstr(r.err, "60000x60000") &&
                      strstr(r.err, "--slice"),
                  SHOW(r));
    /* the huge image was detected: its line, at the 64 x 64 input */
    ck_assert_msg(strstr(r.out, "huge.jpg: 64x64"), SHOW(r));
    ck_assert_msg(PEAK_OK(r), SHOW(r));
    run_free(&r);

    /* the huge image alone: read at 1/8 scale (1500 x 1500, 6.75 MB), so the peak stays far
     * below its 432 MB decoded size: under a quarter, with the process's own ~70 MB */
    char huge[600];
    snprintf(huge, sizeof huge, "%s/huge.jpg", yc_harness_tmpdir());
    const char *a2[] = {"detect", "--weights", w, "--cfg", cfg, "--source", huge, "--img", "64",
                        "--device", "cpu", "--nosave", "--project", project, "--name", "huge",
                        "--exist-ok", NULL};
    r = run_yolocl(a2);
    ck_assert_msg(r.status == 0 && strstr(r.out, "huge.jpg: 64x64"), SHOW(r));
    ck_assert_msg(PEAK_OK(r), SHOW(r));
    run_free(&r);
}
END_TEST

START_TEST(detect_fails_when_no_image_can_be_read)
{
    char project[400], dir[600], p[700];
    snprintf(project, sizeof project, "%s/runs", yc_harness_tmpdir());
    snprintf(dir, sizeof dir, "%s/bombonly", yc_harness_tmpdir());
    ck_assert_int_eq(mkdir(dir, 0755) == 0 || errno == EEXIST, 1);
    snprintf(p, sizeof p, "%s/bomb.png", dir);
    write_bomb(p, BOMB_SIDE);
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    const char *cfg = yc_harness_tiny_cfg();
    const char *args[] = {"detect", "--weights", w, "--cfg", cfg, "--source", dir, "--img", "64",
                          "--device", "cpu", "--project", project, "--name", "bomb",
                          "--exist-ok", NULL};
    run_result r = run_yolocl(args);
    ck_assert_msg(r.status == 1, SHOW(r));
    ck_assert_msg(strstr(r.err, "bomb.png") && strstr(r.err, "--slice") &&
                      strstr(r.err, "none of the 1 image"),
                  SHOW(r));
    ck_assert_msg(PEAK_OK(r), SHOW(r));
    run_free(&r);

    /* --max-pixels counts the pixels decoded: mid.jpg read at 1/8 scale decodes 525 x 513 */
    char mid[600];
    snprintf(mid, sizeof mid, "%s/mid.jpg", yc_harness_tmpdir());
    const char *a2[] = {"detect", "--weights", w, "--cfg", cfg, "--source", mid, "--img", "64",
                        "--device", "cpu", "--max-pixels", "100000", "--project", project,
                        "--name", "mid", "--exist-ok", NULL};
    r = run_yolocl(a2);
    ck_assert_msg(r.status == 1 && strstr(r.err, "mid.jpg") && strstr(r.err, "--max-pixels"),
                  SHOW(r));
    run_free(&r);
}
END_TEST

/* An image just above 4096 x 4096 is read reduced and its annotated copy written at its own size,
 * drawn strip by strip (never held whole). */
START_TEST(detect_annotates_a_reduced_image_at_full_size)
{
    char project[400], mid[600], saved[800];
    snprintf(project, sizeof project, "%s/runs", yc_harness_tmpdir());
    snprintf(mid, sizeof mid, "%s/mid.jpg", yc_harness_tmpdir());
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    const char *cfg = yc_harness_tiny_cfg();
    const char *args[] = {"detect", "--weights", w, "--cfg", cfg, "--source", mid, "--img", "64",
                          "--device", "cpu", "--project", project, "--name", "ann", "--exist-ok",
                          NULL};
    run_result r = run_yolocl(args);
    ck_assert_msg(r.status == 0, SHOW(r));
    ck_assert_msg(strstr(r.out, "mid.jpg: 64x64"), SHOW(r));
    /* far below the 51.7 MB a whole decode and its annotated copy would add */
    ck_assert_msg(PEAK_OK(r), SHOW(r));
    run_free(&r);
    snprintf(saved, sizeof saved, "%s/ann/mid.jpg", project);
    yc_image_header h;
    ck_assert_msg(yc_image_read_header(saved, &h) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(h.w, MID_W);
    ck_assert_int_eq(h.h, MID_H);
}
END_TEST

/* ---- the reader itself ------------------------------------------------------------------------ */

START_TEST(huge_jpeg_is_read_at_one_eighth_and_the_bomb_refused_from_its_header)
{
    char p[600];
    snprintf(p, sizeof p, "%s/huge.jpg", yc_harness_tmpdir());
    yc_image out = YC_IMAGE_INIT;
    yc_load_info li;
    yc_read_info ri;
    ck_assert_msg(yc_load_image_limited(p, 640, false, NULL, NULL, &out, &li, &ri) == YC_OK, "%s",
                  yc_last_error());
    ck_assert(ri.reduced);
    ck_assert_int_eq(ri.shrink, 8);
    ck_assert_uint_eq(ri.decoded_pixels, (size_t)1500 * 1500);
    ck_assert_int_eq(li.h0, HUGE_SIDE);
    ck_assert_int_eq(li.w0, HUGE_SIDE);
    ck_assert_int_eq(out.w, 640);
    ck_assert_int_eq(out.h, 640);
    for (size_t i = 0; i < (size_t)out.w * out.h * 3; i++)
        ck_assert_int_le(out.data[i], 2);
    /* the bomb: nothing decoded, the file and its size named */
    snprintf(p, sizeof p, "%s/bomb.png", yc_harness_tmpdir());
    ck_assert_int_eq(yc_load_image_limited(p, 640, false, NULL, NULL, &out, &li, &ri),
                     YC_EFORMAT);
    ck_assert(ri.too_large);
    ck_assert_uint_eq(ri.decoded_pixels, 0 + (size_t)BOMB_SIDE * BOMB_SIDE);
    ck_assert_msg(strstr(yc_last_error(), "bomb.png") &&
                      strstr(yc_last_error(), "60000x60000"),
                  "%s", yc_last_error());
    yc_image_free(&out);
}
END_TEST

/* Copies the first keep_num / keep_den of the bytes of src to dst. */
static void write_prefix(const char *src, const char *dst, size_t keep_num, size_t keep_den)
{
    char *data = NULL;
    size_t n = 0;
    ck_assert_msg(yc_read_file(src, &data, &n) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_write_file_atomic(dst, data, n * keep_num / keep_den) == YC_OK, "%s",
                  yc_last_error());
    free(data);
}

/* Occurrences of `needle` in the file at path. */
static int count_in(const char *path, const char *needle)
{
    char *text = yc_harness_read(path, NULL);
    int k = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        k++;
    free(text);
    return k;
}

/* A truncated image, read whole (a small one) or reduced (one above 4096 x 4096), three times as
 * three epochs would: decoded as far as possible each time, reported once per file. */
START_TEST(damaged_images_are_reported_once_per_file)
{
    char mid[600], small[600], cut_mid[600], cut_small[600], log[600];
    snprintf(mid, sizeof mid, "%s/mid.jpg", yc_harness_tmpdir());
    snprintf(small, sizeof small, "%s/demo/images/train/shapes_00000.jpg", yc_harness_tmpdir());
    snprintf(cut_mid, sizeof cut_mid, "%s/cut_mid.jpg", yc_harness_tmpdir());
    snprintf(cut_small, sizeof cut_small, "%s/cut_small.jpg", yc_harness_tmpdir());
    snprintf(log, sizeof log, "%s/damaged.log", yc_harness_tmpdir());
    write_prefix(mid, cut_mid, 1, 2);
    write_prefix(small, cut_small, 1, 2);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
    yc_image out = YC_IMAGE_INIT;
    yc_load_info li;
    yc_read_info ri;
    int st_mid[3], st_small[3];
    bool reduced = false;
    for (int epoch = 0; epoch < 3; epoch++) {
        st_mid[epoch] = yc_load_image_limited(cut_mid, 64, true, NULL, NULL, &out, &li, &ri);
        reduced |= ri.reduced;
        st_small[epoch] = yc_load_image_limited(cut_small, 64, true, NULL, NULL, &out, &li, &ri);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    for (int epoch = 0; epoch < 3; epoch++) {
        ck_assert_int_eq(st_mid[epoch], YC_OK);
        ck_assert_int_eq(st_small[epoch], YC_OK);
    }
    ck_assert(reduced);
    char *text = yc_harness_read(log, NULL);
    ck_assert_msg(count_in(log, "cut_mid.jpg") == 1 && count_in(log, "cut_small.jpg") == 1,
                  "warnings:\n%s", text);
    free(text);
    yc_image_free(&out);
}
END_TEST

/* ---- the image cache ---------------------------------------------------------------------------- */

/* Everything two epochs of a loader give: per batch its size, samples, targets and pixels. */
typedef struct epochs {
    uint8_t *bytes;
    size_t n;
} epochs;

static void append(epochs *e, const void *p, size_t n)
{
    e->bytes = realloc(e->bytes, e->n + n);
    ck_assert_ptr_nonnull(e->bytes);
    memcpy(e->bytes + e->n, p, n);
    e->n += n;
}

/* Two epochs of `ds` (training with mosaic and the default augmentation, or validation) with the
 * cache `kind`; stats of the cache after them. */
static epochs two_epochs(const yc_dataset *ds, bool train, yc_cache_kind kind,
                         yc_img_cache_stats *stats)
{
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_loader *l = NULL;
    yc_loader_options lo = {.ds = ds, .train = train, .hyp = &hyp, .imgsz = 64, .batch = 4,
                            .pad = train ? 0.0 : 0.5, .stride = 32, .workers = 2, .seed = 7,
                            .cache = kind};
    ck_assert_msg(yc_loader_new(&l, &lo) == YC_OK, "%s", yc_last_error());
    epochs e = {NULL, 0};
    for (int epoch = 0; epoch < 2; epoch++) {
        ck_assert_int_eq(yc_loader_start(l, epoch, NULL, 0), YC_OK);
        const yc_batch *b = NULL;
        while (yc_loader_next(l, &b) == YC_OK && b) {
            int head[4] = {b->index, b->n, b->h, b->w};
            append(&e, head, sizeof head);
            append(&e, b->sample, (size_t)b->n * sizeof *b->sample);
            append(&e, &b->nt, sizeof b->nt);
            append(&e, b->targets, (size_t)b->nt * 6 * sizeof *b->targets);
            append(&e, b->images, (size_t)b->n * 3 * b->h * b->w);
        }
    }
    *stats = yc_loader_cache_stats(l);
    yc_loader_free(l);
    return e;
}

static void load_split(yc_data_yaml *y, yc_split split, yc_dataset *ds)
{
    yc_dataset_options dopt = {.nc = y->nc, .quiet = true, .no_cache = true};
    ck_assert_msg(yc_dataset_load_split(y, split, &dopt, ds) == YC_OK, "%s", yc_last_error());
}

/* The demo's 16 training images (the bomb and the huge image are in another dataset: the cache
 * test is about the cache) in their own copy, so that one can be changed. */
START_TEST(cache_ram_and_disk_give_the_same_batches_as_no_cache)
{
    char dir[400], yml[500];
    snprintf(dir, sizeof dir, "%s/cachedemo", yc_harness_tmpdir());
    yc_demo_options opt;
    yc_demo_options_default(&opt);
    opt.n_train = 16;
    opt.n_val = 6;
    opt.min_side = 64;
    opt.max_side = 160;
    ck_assert_msg(yc_demo_write(dir, &opt) == YC_OK, "%s", yc_last_error());
    snprintf(yml, sizeof yml, "%s/%s", dir, YC_DEMO_YAML);
    yc_data_yaml y;
    ck_assert_msg(yc_data_yaml_load(yml, &y) == YC_OK, "%s", yc_last_error());
    yc_dataset ds, vds;
    load_split(&y, YC_SPLIT_TRAIN, &ds);
    load_split(&y, YC_SPLIT_VAL, &vds);

    for (int train = 1; train >= 0; train--) {
        const yc_dataset *d = train ? &ds : &vds;
        yc_img_cache_stats s0, sr, sd, sd2;
        epochs none = two_epochs(d, train, YC_CACHE_NONE, &s0);
        epochs ram = two_epochs(d, train, YC_CACHE_RAM, &sr);
        epochs disk = two_epochs(d, train, YC_CACHE_DISK, &sd);
        /* a second run finds the disk cache warm: every read is a hit */
        epochs disk2 = two_epochs(d, train, YC_CACHE_DISK, &sd2);
        ck_assert_uint_eq(s0.hits + s0.stores, 0);
        /* every image decoded once, kept, then served (two threads may both miss one image) */
        ck_assert_uint_ge(sr.stores, d->n);
        ck_assert_uint_gt(sr.hits, 0);
        ck_assert_uint_ge(sd.writes, d->n);
        ck_assert_uint_gt(sd.hits, 0);
        ck_assert_uint_eq(sd2.writes, 0);
        ck_assert_uint_ge(sd2.hits, d->n);
        ck_assert_uint_gt(none.n, 0);
        ck_assert_msg(ram.n == none.n && memcmp(ram.bytes, none.bytes, none.n) == 0,
                      "%s: --cache ram differs from no cache", train ? "train" : "val");
        ck_assert_msg(disk.n == none.n && memcmp(disk.bytes, none.bytes, none.n) == 0,
                      "%s: --cache disk differs from no cache", train ? "train" : "val");
        ck_assert_msg(disk2.n == none.n && memcmp(disk2.bytes, none.bytes, none.n) == 0,
                      "%s: a warm --cache disk differs from no cache", train ? "train" : "val");
        free(none.bytes);
        free(ram.bytes);
        free(disk.bytes);
        free(disk2.bytes);
    }

    /* an image changed after it was cached (same size, other pixels, a later modification time):
     * the disk cache reads it again, and gives what no cache gives */
    const char *victim = vds.samples[1].image;
    yc_image a = YC_IMAGE_INIT;
    ck_assert_int_eq(yc_image_decode(victim, &a, NULL, NULL), YC_OK);
    for (size_t i = 0; i < (size_t)a.w * a.h * 3; i++)
        a.data[i] = (uint8_t)(255 - a.data[i]);
    ck_assert_int_eq(yc_image_save(&a, victim, 0), YC_OK);
    struct timespec ts[2] = {{time(NULL) + 5, 0}, {time(NULL) + 5, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, victim, ts, 0), 0);
    yc_img_cache_stats s0, sd;
    epochs none = two_epochs(&vds, false, YC_CACHE_NONE, &s0);
    epochs disk = two_epochs(&vds, false, YC_CACHE_DISK, &sd);
    ck_assert_uint_eq(sd.writes, 1);
    ck_assert_msg(disk.n == none.n && memcmp(disk.bytes, none.bytes, none.n) == 0,
                  "a changed image was served stale from the disk cache");
    free(none.bytes);
    free(disk.bytes);
    yc_image_free(&a);
    yc_dataset_free(&ds);
    yc_dataset_free(&vds);
    yc_data_yaml_free(&y);
}
END_TEST

/* ---- main --------------------------------------------------------------------------------------- */

static Suite *suite(bool cli)
{
    Suite *s = suite_create("bigimage");
    TCase *tc = tcase_create("reader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, huge_jpeg_is_read_at_one_eighth_and_the_bomb_refused_from_its_header);
    tcase_add_test(tc, cache_ram_and_disk_give_the_same_batches_as_no_cache);
    tcase_add_test(tc, damaged_images_are_reported_once_per_file);
    suite_add_tcase(s, tc);
    if (cli) {
        tc = tcase_create("commands");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, train_skips_the_bomb_and_reads_the_huge_image_reduced);
        tcase_add_test(tc, val_leaves_the_bomb_out_and_reads_the_huge_image_reduced);
        tcase_add_test(tc, detect_skips_the_bomb_and_reads_the_huge_image_shrunk);
        tcase_add_test(tc, detect_fails_when_no_image_can_be_read);
        tcase_add_test(tc, detect_annotates_a_reduced_image_at_full_size);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    if (!yc_harness_tmpdir_make("bigimage"))
        return YC_TEST_HARD_ERROR;
    snprintf(yaml, sizeof yaml, "%s/demo/demo3.yaml", yc_harness_tmpdir());
    /* the files, made in a child so that libvips' memory is not this process's */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        make_files();
        _exit(0);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "test_bigimage: generating the images in %s failed\n",
                yc_harness_tmpdir());
        yc_harness_tmpdir_remove();
        return YC_TEST_HARD_ERROR;
    }
    bool cli = have_yolocl();
    if (!cli && yc_test_required(YC_TEST_NEEDS_OTHER)) {
        yc_harness_tmpdir_remove();
        return yc_test_skip(YC_TEST_NEEDS_OTHER, "YOLOCL does not name an executable yolocl");
    }
    if (!cli)
        printf("test_bigimage: YOLOCL does not name an executable yolocl: the train, val and "
               "detect cases are skipped\n");
    int st = yc_harness_run(suite(cli), false);
    yc_harness_tmpdir_remove();
    return st;
}
