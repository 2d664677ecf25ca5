/* Per-device tiles of the implicit-GEMM convolutions (yolocl tune).
 *
 * yc_cl_tune times every tile of yc_cl_tiles on each convolution pass it is given (a model's
 * training graph at one size and batch) and keeps the fastest per pass, shape and storage in a
 * text file next to the program cache, named by the hash of the device, its driver and igemm.cl's
 * source, so that a new driver or a changed kernel starts afresh.  Each backend reads the file
 * when it opens (yc_cl_tune_load) and says so.  A convolution the file does not list takes the
 * choice for the same pass, filter and storage at the nearest number of input pixels (cl_conv.c),
 * else tile 0.  A new tuning run keeps the file's other entries and replaces those it measured.
 *
 * The file: a first line "yolocl convolution tiles 1", then one line per choice:
 *   pass N C H W K R S stride_h stride_w pad_h pad_w half_in half_out  TM TN TK  milliseconds
 * with pass 0 forward, 1 backward-data, 2 backward-filter. */
#include "cl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define TUNE_MAGIC "yolocl convolution tiles 1"

char *yc_cl_tune_path_of(yc_cl_ctx *c)
{
    char src[33], h[33], key[2048];
    if (yc_cl_source_hash("igemm.cl", src)) {
        yc_error_clear();
        return NULL;
    }
    const yc_cl_device_desc *d = &c->desc;
    snprintf(key, sizeof key, "device %s\nversion %s\ndriver %s\nplatform %s %s\nsource %s\n",
             d->info.name, d->device_version, d->driver_version, d->info.platform, d->info.version,
             src);
    yc_cl_hash_text(key, h);
    char *dir = yc_cl_cache_dir();
    if (!dir)
        return NULL;
    char name[64];
    snprintf(name, sizeof name, "tiles-%s.txt", h);
    char *path = yc_path_join(dir, name);
    free(dir);
    return path;
}

/* The tile index of (tm, tn, tk), or -1. */
static int tile_index(int tm, int tn, int tk)
{
    for (int t = 0; t < YC_CL_NTILES; t++)
        if (yc_cl_tiles[t].tm == tm && yc_cl_tiles[t].tn == tn && yc_cl_tiles[t].tk == tk)
            return t;
    return -1;
}

/* Appends t to (*tab, *n, *cap). */
static int append(yc_cl_tuned **tab, int *n, int *cap, yc_cl_tuned t)
{
    if (*n == *cap) {
        int grow = *cap ? 2 * *cap : 64;
        yc_cl_tuned *grown = yc_realloc(*tab, (size_t)grow * sizeof *grown, "tuned tiles");
        if (!grown)
            return YC_ENOMEM;
        *tab = grown;
        *cap = grow;
    }
    (*tab)[(*n)++] = t;
    return YC_OK;
}

/* Parses a tiles file into (*out, *n); lines that do not parse, or name a tile this build does
 * not have, are skipped.  The milliseconds are optional (-1 when absent). */
static int parse(const char *text, yc_cl_tuned **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (strncmp(text, TUNE_MAGIC "\n", strlen(TUNE_MAGIC) + 1) != 0)
        return YC_EFORMAT;
    int cap = 0;
    for (const char *line = strchr(text, '\n'); line && *++line;) {
        yc_cl_tuned t = {.ms = -1.0};
        yc_cl_conv_key *k = &t.key;
        int tm, tn, tk;
        int got = sscanf(line, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %lf", &k->pass,
                         &k->n, &k->c, &k->h, &k->w, &k->k, &k->r, &k->s, &k->sh, &k->sw, &k->ph,
                         &k->pw, &k->half_in, &k->half_out, &tm, &tn, &tk, &t.ms);
        if (got >= 17 && (t.tile = tile_index(tm, tn, tk)) >= 0 && append(out, n, &cap, t)) {
            free(*out);
            *out = NULL;
            *n = 0;
            return YC_ENOMEM;
        }
        line = strchr(line, '\n');
    }
    return YC_OK;
}

void yc_cl_tune_load(yc_cl_ctx *c)
{
    char *path = yc_cl_tune_path_of(c);
    if (!path || !yc_file_exists(path)) {
        free(path);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    if (yc_read_file(path, &text, &len) == YC_OK && parse(text, &c->tuned, &c->ntuned) == YC_OK &&
        c->ntuned > 0)
        yc_info("opencl: convolution tiles tuned for %s from %s (%d pass%s)\n", c->desc.info.name,
                path, c->ntuned, c->ntuned == 1 ? "" : "es");
    else
        yc_debug("opencl: %s is not a usable tiles file: ignored\n", path);
    yc_error_clear();
    free(text);
    free(path);
}

/* Replaces or adds a choice in the context's table. */
static int remember(yc_cl_ctx *c, yc_cl_tuned t)
{
    for (int i = 0; i < c->ntuned; i++)
        if (yc_cl_conv_key_equal(&c->tuned[i].key, &t.key)) {
            c->tuned[i] = t;
            return YC_OK;
        }
    yc_cl_tuned *grown = yc_realloc(c->tuned, (size_t)(c->ntuned + 1) * sizeof *grown, "tuned tiles");
    if (!grown)
        return YC_ENOMEM;
    c->tuned = grown;
    c->tuned[c->ntuned++] = t;
    return YC_OK;
}

/* The context's whole table as a tiles file (malloc'd text). */
static int format_table(const yc_cl_ctx *c, char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    if (!f)
        return yc_error_status(YC_ENOMEM, "tiles file");
    fprintf(f, "%s\n", TUNE_MAGIC);
    for (int i = 0; i < c->ntuned; i++) {
        const yc_cl_conv_key *k = &c->tuned[i].key;
        const yc_cl_tile *b = &yc_cl_tiles[c->tuned[i].tile];
        fprintf(f, "%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %.6f\n", k->pass, k->n,
                k->c, k->h, k->w, k->k, k->r, k->s, k->sh, k->sw, k->ph, k->pw, k->half_in,
                k->half_out, b->tm, b->tn, b->tk, c->tuned[i].ms);
    }
    if (fclose(f) != 0) {
        free(*text);
        *text = NULL;
        return yc_error_status(YC_ENOMEM, "tiles file");
    }
    return YC_OK;
}

char *yc_cl_tune_path(yc_backend *be)
{
    return yc_cl_tune_path_of(be->ctx);
}

int yc_cl_tune(yc_backend *be, const yc_op *const *ops, int nops, int iters, const char *path,
               int *tuned)
{
    yc_cl_ctx *c = be->ctx;
    *tuned = 0;
    size_t ws_bytes = 0;
    for (int i = 0; i < nops; i++) {
        size_t w = yc_cl_conv_workspace_max(c, ops[i]);
        ws_bytes = w > ws_bytes ? w : ws_bytes;
    }
    yc_buffer *ws = ws_bytes ? yc_buffer_alloc(be, ws_bytes) : NULL;
    if (ws_bytes && !ws)
        return yc_error_context(YC_ENOMEM, "the tuner's workspace (%zu bytes)", ws_bytes);
    int st = YC_OK;
    const int saved_force = c->force_tile;
    for (int i = 0; i < nops && !st; i++) {
        const yc_op *op = ops[i];
        yc_cl_conv_key key = yc_cl_conv_key_of(op);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) {
            yc_cl_conv_key other = yc_cl_conv_key_of(ops[j]);
            seen = yc_cl_conv_key_equal(&other, &key);
        }
        if (seen)
            continue;
        double best = -1.0, ms[YC_CL_NTILES];
        int best_tile = 0;
        for (int t = 0; t < YC_CL_NTILES && !st; t++) {
            c->force_tile = t;
            ms[t] = -1.0;
            size_t need = 0;
            yc_cl_conv_workspace(c, op, &need);
            yc_span span = {ws, 0, need};
            /* one untimed run (it builds the tile's program), then iters timed; a tile the
             * device cannot build or launch (too much local memory, too large a work-group) is
             * passed over */
            st = yc_backend_exec(be, op, span);
            if (st == YC_EUNSUPPORTED || st == YC_EDEVICE) {
                yc_debug("opencl: tile %d unavailable: %s\n", t, yc_last_error());
                yc_error_clear();
                st = YC_OK;
                continue;
            }
            if (st || (st = be->iface->synchronize(be)))
                break;
            double t0 = yc_now();
            for (int k = 0; k < iters && !st; k++)
                st = yc_backend_exec(be, op, span);
            if (!st)
                st = be->iface->synchronize(be);
            ms[t] = (yc_now() - t0) * 1e3 / iters;
            if (best < 0 || ms[t] < best) {
                best = ms[t];
                best_tile = t;
            }
        }
        if (st)
            break;
        if (best < 0) {
            st = yc_error_status(YC_EUNSUPPORTED, "opencl: no tile of the implicit GEMMs runs %s "
                                 "'%s' on %s", yc_op_kind_name(op->kind), op->name ? op->name : "",
                                 c->desc.info.name);
            break;
        }
        if ((st = remember(c, (yc_cl_tuned){.key = key, .tile = best_tile, .ms = best})))
            break;
        (*tuned)++;
        const yc_cl_tile *b = &yc_cl_tiles[best_tile];
        if (ms[0] >= 0)
            yc_info("  %-18s %-26s tile %3dx%-3d k%-2d %9.3f ms (default tile %9.3f ms)\n",
                    yc_op_kind_name(op->kind), op->name ? op->name : "", b->tm, b->tn, b->tk,
                    best, ms[0]);
        else
            yc_info("  %-18s %-26s tile %3dx%-3d k%-2d %9.3f ms (default tile unavailable)\n",
                    yc_op_kind_name(op->kind), op->name ? op->name : "", b->tm, b->tn, b->tk,
                    best);
    }
    c->force_tile = saved_force;
    yc_buffer_free(be, ws);
    if (st || !path)
        return st;
    /* the whole table: choices loaded from the file for other sizes stay in it */
    char *text = NULL;
    size_t len = 0;
    if ((st = format_table(c, &text, &len)))
        return st;
    char *dir = yc_path_dirname(path);
    if (!dir)
        st = YC_ENOMEM;
    else if (!(st = yc_mkdirs(dir)))
        st = yc_write_file_atomic(path, text, len);
    free(dir);
    free(text);
    return st;
}
