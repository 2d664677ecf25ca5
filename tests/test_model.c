/* Model configs, parameter registry, strides and anchors, GFLOPs, the training graph and its
 * memory plan, against the numbers of docs/YOLOV5.md section 1 (copied here, so this test
 * needs no shared files). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "safetensors.h"
#include "yamltree.h"
#include "harness.h"

static const char *test_data(void)
{
    const char *d = getenv("YOLOCL_TEST_DATA");
    return d ? d : "tests/data";
}

static yc_model *load_model(const char *name, int nc)
{
    char path[1024];
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    ck_assert_msg(yc_model_cfg_find(name, path, sizeof path) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_cfg_load(&cfg, path, nc) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(&m, cfg) == YC_OK, "%s", yc_last_error());
    return m;
}

/* ---- yaml tree ------------------------------------------------------------------------------ */

START_TEST(yaml_scalars_and_errors)
{
    const char *text = "a: 1\nb: [1, 2.5, 'x', True, ~]\nc:\n  d: no\n";
    yc_yaml_node *root = NULL;
    ck_assert_int_eq(yc_yaml_load_string(text, strlen(text), "t", &root), YC_OK);
    long v;
    double d;
    bool b;
    ck_assert_int_eq(yc_yaml_int(yc_yaml_get(root, "a"), &v), YC_OK);
    ck_assert_int_eq(v, 1);
    const yc_yaml_node *seq = yc_yaml_get(root, "b");
    ck_assert_int_eq(seq->n, 5);
    ck_assert_int_eq(yc_yaml_double(seq->items[1], &d), YC_OK);
    ck_assert(d == 2.5);
    ck_assert(seq->items[2]->quoted);
    ck_assert_int_ne(yc_yaml_int(seq->items[2], &v), YC_OK);
    ck_assert_int_eq(yc_yaml_bool(seq->items[3], &b), YC_OK);
    ck_assert(b);
    ck_assert(yc_yaml_is_null(seq->items[4]));
    ck_assert_int_eq(yc_yaml_bool(yc_yaml_get(yc_yaml_get(root, "c"), "d"), &b), YC_OK);
    ck_assert(!b);
    char *dump = yc_yaml_dump(root);
    ck_assert_ptr_nonnull(dump);
    yc_yaml_node *again = NULL;
    ck_assert_int_eq(yc_yaml_load_string(dump, strlen(dump), "dump", &again), YC_OK);
    ck_assert_int_eq(yc_yaml_get(again, "b")->n, 5);
    free(dump);
    yc_yaml_free(again);
    yc_yaml_free(root);

    const char *bad[] = {"a: [1, 2", "a: 1\na: 2\n", "x: &a [*a]\n", "- a\nb: c\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        root = NULL;
        int st = yc_yaml_load_string(bad[i], strlen(bad[i]), "bad", &root);
        if (st == YC_OK) {
            /* a self-referencing alias is legal YAML for libyaml only up to our depth cap */
            yc_yaml_free(root);
            ck_assert_int_eq((int)i, 2);
        } else {
            ck_assert_ptr_null(root);
            ck_assert(strlen(yc_last_error()) > 0);
        }
    }
}
END_TEST

/* ---- configs --------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t params;
    double gflops640, gflops1280;
} models[] = {
    {"yolov5n", 1872157, 4.6, 0},         {"yolov5s", 7235389, 16.6, 0},
    {"yolov5m", 21190557, 49.2, 0},       {"yolov5l", 46563709, 109.6, 0},
    {"yolov5x", 86749405, 206.3, 0},      {"yolov5n6", 3246940, 4.7, 18.6},
    {"yolov5s6", 12626620, 17.0, 68.0},   {"yolov5m6", 35731932, 50.3, 201.1},
    {"yolov5l6", 76770172, 111.8, 447.4}, {"yolov5x6", 140794780, 210.5, 841.8},
};

START_TEST(param_counts_and_gflops)
{
    yc_model *m = load_model(models[_i].name, 0);
    ck_assert_msg(yc_model_count_params(m) == models[_i].params, "%s: %zu parameters, want %zu",
                  models[_i].name, yc_model_count_params(m), models[_i].params);
    char got[32], want[32];
    snprintf(got, sizeof got, "%.1f", yc_model_gflops(m, 640));
    snprintf(want, sizeof want, "%.1f", models[_i].gflops640);
    ck_assert_msg(strcmp(got, want) == 0, "%s: %s GFLOPs at 640, want %s", models[_i].name, got,
                  want);
    if (models[_i].gflops1280 > 0) {
        snprintf(got, sizeof got, "%.1f", yc_model_gflops(m, 1280));
        snprintf(want, sizeof want, "%.1f", models[_i].gflops1280);
        ck_assert_msg(strcmp(got, want) == 0, "%s: %s GFLOPs at 1280, want %s", models[_i].name,
                      got, want);
    }
    bool p6 = strchr(models[_i].name + 6, '6') != NULL;
    ck_assert_int_eq(m->nl, p6 ? 4 : 3);
    for (int l = 0; l < m->nl; l++)
        ck_assert(m->stride[l] == (float)(8 << l));
    yc_model_free(m);
}
END_TEST

START_TEST(yolov5s_layer_table)
{
    yc_model *m = load_model("yolov5s.yaml", 0);
    const yc_model_cfg *c = m->cfg;
    ck_assert_int_eq(c->nlayers, 25);
    ck_assert_int_eq(yc_model_count_modules(m), 214);
    ck_assert_str_eq(m->cfg->name, "YOLOv5s");
    static const size_t layer_params[25] = {
        3520,   18560,  18816,  73984,   115712, 295424, 625152, 1180672, 1182720,
        656896, 131584, 0,      0,       361984, 33024,  0,      0,       90880,
        147712, 0,      296448, 590336,  0,      1182720, 229245};
    for (int i = 0; i < 25; i++)
        ck_assert_msg(yc_model_layer_params(m, i) == layer_params[i], "layer %d: %zu", i,
                      yc_model_layer_params(m, i));
    ck_assert_str_eq(c->layers[0].args_text, "[3, 32, 6, 2, 2]");
    ck_assert_str_eq(c->layers[4].args_text, "[128, 128, 2]");
    ck_assert_int_eq(c->layers[4].n, 2);
    ck_assert_str_eq(c->layers[9].args_text, "[512, 512, 5]");
    ck_assert_str_eq(c->layers[11].args_text, "[None, 2, 'nearest']");
    ck_assert_str_eq(c->layers[12].args_text, "[1]");
    ck_assert_int_eq(c->layers[12].c2, 512);
    ck_assert_str_eq(c->layers[13].args_text, "[512, 256, 1, False]");
    ck_assert_str_eq(c->layers[24].args_text,
                     "[80, [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, "
                     "198, 373, 326]], [128, 256, 512]]");
    ck_assert_int_eq(c->layers[16].from[1], 4);
    ck_assert_int_eq(c->layers[16].from_raw[0], -1);
    /* anchors in grid units (docs/YOLOV5.md 1.7) */
    static const float grid[18] = {1.25f,  1.625f,  2.0f,   3.75f,   4.125f, 2.875f,
                                   1.875f, 3.8125f, 3.875f, 2.8125f, 3.6875f, 7.4375f,
                                   3.625f, 2.8125f, 4.875f, 6.1875f, 11.65625f, 10.1875f};
    for (int i = 0; i < 18; i++)
        ck_assert(fabsf(m->anchors[i] - grid[i]) < 1e-6f);
    /* groups: 60 decayed weights, 57 BN weights, 60 biases (train.py's log for yolov5s) */
    int groups[3] = {0, 0, 0};
    for (int i = 0; i < m->nparams; i++)
        groups[m->params[i].group]++;
    ck_assert_int_eq(groups[YC_PG_BIAS], 60);
    ck_assert_int_eq(groups[YC_PG_WEIGHT], 60);
    ck_assert_int_eq(groups[YC_PG_BN_WEIGHT], 57);
    ck_assert_str_eq(m->params[0].name, "model.0.conv.weight");
    /* each optimizer group is one contiguous range of the arena, in group order */
    size_t end = 0;
    for (int grp = 0; grp < YC_PG_COUNT; grp++) {
        ck_assert_uint_eq(m->group_offset[grp], end);
        size_t n = 0;
        for (int i = 0; i < m->nparams; i++) {
            const yc_param *p = &m->params[i];
            if (p->group != (yc_param_group)grp)
                continue;
            ck_assert(p->offset >= m->group_offset[grp]);
            ck_assert(p->offset + p->numel <= m->group_offset[grp] + m->group_elems[grp]);
            n += p->numel;
        }
        ck_assert_uint_eq(n, m->group_elems[grp]);
        end += n;
    }
    ck_assert_uint_eq(end, m->param_elems);
    ck_assert_str_eq(m->anchors_name, "model.24.anchors");
    yc_model_free(m);
}
END_TEST

/* The registry's names and shapes are exactly the tiny reference state dict's, in its order. */
START_TEST(names_match_reference_state_dict)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny/yolov5n-tiny.yaml", test_data());
    yc_model_cfg *cfg = NULL;
    yc_model *m = NULL;
    ck_assert_msg(yc_model_cfg_load(&cfg, path, 0) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_model_new(&m, cfg) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq((int)yc_model_count_params(m), 115416);
    snprintf(path, sizeof path, "%s/tiny/weights.safetensors", test_data());
    yc_st_file *f = NULL;
    ck_assert_msg(yc_st_open(&f, path) == YC_OK, "%s", yc_last_error());
    /* the file holds the state dict in PyTorch's order, anchors included */
    int fi = 0;
    for (int i = 0; i < m->ndict; i++, fi++) {
        const yc_st_tensor *t = yc_st_get(f, fi);
        if (strcmp(t->name, m->anchors_name) == 0)
            t = yc_st_get(f, ++fi);
        const char *name = m->dict[i].is_state ? m->state[m->dict[i].idx].name
                                               : m->params[m->dict[i].idx].name;
        ck_assert_msg(strcmp(t->name, name) == 0, "entry %d: file has %s, model has %s", i,
                      t->name, name);
        if (!m->dict[i].is_state) {
            const yc_param *p = &m->params[m->dict[i].idx];
            ck_assert_int_eq(t->ndim, p->ndim);
            for (int d = 0; d < p->ndim; d++)
                ck_assert_int_eq(t->shape[d], p->shape[d]);
        }
    }
    ck_assert_int_eq(fi, yc_st_count(f));
    yc_st_close(f);
    yc_model_free(m);
}
END_TEST

static int load_text(const char *text)
{
    char path[] = "/tmp/yolocl-cfg-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    yc_model_cfg *cfg = NULL;
    int st = yc_model_cfg_load(&cfg, path, 0);
    unlink(path);
    if (st == YC_OK) {
        yc_model *m = NULL;
        st = yc_model_new(&m, cfg);
        yc_model_free(m);
    }
    return st;
}

#define HEADER "nc: 2\ndepth_multiple: 1.0\nwidth_multiple: 1.0\nanchors:\n  - [10,13, 16,30]\n"

START_TEST(malformed_configs_name_the_row)
{
    static const struct {
        const char *text;
        const char *expect;
    } cases[] = {
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]],\n   [-1, 1, Focus2, [32]]]\n"
                "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n",
         "layer 1: module 'Focus2' is not supported"},
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]],\n   [5, 1, Conv, [32]]]\n"
                "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n",
         "layer 1: 'from' entry 5 does not name an earlier layer"},
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]],\n   [-1, 1, Conv]]\n"
                "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n",
         "layer 1: a row must be [from, number, module, args]"},
        {HEADER "backbone:\n  [[-1, 1, Conv, [sixteen, 3, 2]]]\n"
                "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n",
         "layer 0: output channels must be an integer, got 'sixteen'"},
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]]]\n"
                "head:\n  [[[-1, 0], 1, Detect, [nc, anchors]]]\n",
         "Detect has 2 inputs but anchors has 1 levels"},
        {"nc: 2\ndepth_multiple: 1.0\nanchors: 3\nbackbone: []\nhead: []\n",
         "the key 'width_multiple' is missing"},
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]]]\nhead:\n  [[-1, 1, Conv, [8, 1]]]\n",
         "the last layer must be Detect"},
        /* sizes are checked when the model is made, not later when a graph is built */
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]],\n   [-1, 1, Conv, [16, 3, 2]],\n"
                "   [[-1, 0], 1, Concat, [1]]]\n"
                "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n",
         "layer 2 (Concat) joins a 64x64 and a 128x128 output at a 256x256 input"},
        {HEADER "backbone:\n  [[-1, 1, Conv, [16, 15, 8, 0]],\n   [-1, 1, Conv, [16, 15, 8, 0]],\n"
                "   [-1, 1, Conv, [16, 15, 8, 0]]]\n"
                "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n",
         "layer 2 (models.common.Conv) leaves nothing of a 256x256 input"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int st = load_text(cases[i].text);
        ck_assert_msg(st != YC_OK, "case %zu accepted", i);
        ck_assert_msg(strstr(yc_last_error(), cases[i].expect), "case %zu: '%s' lacks '%s'", i,
                      yc_last_error(), cases[i].expect);
    }
    /* a minimal valid config with one level */
    ck_assert_msg(load_text(HEADER "backbone:\n  [[-1, 1, Conv, [16, 3, 2]],\n"
                                   "   [-1, 1, Conv, [16, 3, 2]],\n   [-1, 1, Conv, [16, 3, 2]]]\n"
                                   "head:\n  [[[-1], 1, Detect, [nc, anchors]]]\n") == YC_OK,
                  "%s", yc_last_error());
}
END_TEST

/* A model yaml dumped from its tree reads back to the same model (checkpoints embed configs). */
START_TEST(dumped_config_round_trips)
{
    char path[1024];
    ck_assert_int_eq(yc_model_cfg_find("yolov5s", path, sizeof path), YC_OK);
    yc_yaml_node *root = NULL;
    ck_assert_int_eq(yc_yaml_load_file(path, &root), YC_OK);
    char *text = yc_yaml_dump(root);
    ck_assert_ptr_nonnull(text);
    yc_model_cfg *cfg = NULL;
    ck_assert_msg(yc_model_cfg_parse(&cfg, text, strlen(text), "dumped.yaml", 0) == YC_OK, "%s\n%s",
                  yc_last_error(), text);
    yc_model *m = NULL;
    ck_assert_int_eq(yc_model_new(&m, cfg), YC_OK);
    ck_assert_uint_eq(yc_model_count_params(m), 7235389);
    yc_model_free(m);
    free(text);
    yc_yaml_free(root);
}
END_TEST

START_TEST(bundled_names_resolve)
{
    char path[1024];
    ck_assert_int_eq(yc_model_cfg_find("yolov5s", path, sizeof path), YC_OK);
    ck_assert(strstr(path, "models/yolov5s.yaml"));
    ck_assert_int_eq(yc_model_cfg_find("yolov5s6.yaml", path, sizeof path), YC_OK);
    ck_assert_int_ne(yc_model_cfg_find("yolov9z", path, sizeof path), YC_OK);
    ck_assert(strstr(yc_last_error(), "yolov9z"));
}
END_TEST

/* nc override (Model(cfg, nc=...)): only the Detect outputs change. */
START_TEST(nc_override)
{
    yc_model *m = load_model("yolov5s", 3);
    ck_assert_int_eq(m->nc, 3);
    ck_assert_int_eq((int)yc_model_layer_params(m, 24), (128 + 256 + 512) * 24 + 3 * 24);
    yc_model_free(m);
}
END_TEST

/* ---- the training graph and its memory plan ------------------------------------------------- */

static const struct {
    const char *name;
    /* two shapes: batch and image size */
    int batch[2], size[2];
} graphs[] = {
    {"yolov5n", {1, 3}, {64, 96}},    {"yolov5s", {2, 1}, {128, 160}},
    {"yolov5m", {1, 2}, {64, 96}},    {"yolov5l", {2, 1}, {64, 128}},
    {"yolov5x", {1, 2}, {64, 64}},    {"yolov5n6", {2, 1}, {128, 256}},
    {"yolov5s6", {1, 2}, {192, 128}}, {"yolov5m6", {1, 1}, {64, 128}},
    {"yolov5l6", {1, 2}, {128, 64}},  {"yolov5x6", {1, 1}, {64, 128}},
};

/* For every model at two shapes: the training graph stored in FP32, stored in FP16 with
 * recomputation, and the inference graph.  A fake backend that can store FP16 answers the
 * storage question (the CPU backend's workspace queries are not needed for placement). */
START_TEST(training_plan_never_overlaps_live_tensors)
{
    yc_model *m = load_model(graphs[_i].name, 0);
    yc_backend be = {0};
    be.info.alignment = 64;
    be.info.fp16_storage = true;
    m->be = &be;
    const yc_graph_options modes[] = {
        {.mode = YC_GRAPH_TRAIN},
        {.mode = YC_GRAPH_TRAIN, .half = true, .recompute = true},
        {.mode = YC_GRAPH_EVAL},
    };
    for (int k = 0; k < 2; k++)
        for (int mode = 0; mode < 3; mode++) {
            yc_graph *g = NULL;
            int st = yc_graph_new_opts(&g, m, graphs[_i].batch[k], graphs[_i].size[k],
                                       graphs[_i].size[k], &modes[mode]);
            ck_assert_msg(st == YC_OK, "%s", yc_last_error());
            const yc_plan *p = yc_graph_plan(g);
            ck_assert_msg(yc_plan_verify(p) == YC_OK, "%s %d %d: %s", graphs[_i].name, k, mode,
                          yc_last_error());
            ck_assert(p->arena_bytes >= p->lower_bound_bytes);
            ck_assert(p->arena_bytes > 0);
            yc_graph_free(g);
        }
    m->be = NULL;
    yc_model_free(m);
}
END_TEST

START_TEST(image_size_must_fit_the_strides)
{
    yc_model *m = load_model("yolov5n", 0);
    yc_graph *g = NULL;
    ck_assert_int_ne(yc_graph_new(&g, m, 1, 100, 100, YC_GRAPH_TRAIN), YC_OK);
    ck_assert_msg(strstr(yc_last_error(), "multiple of the largest stride"), "%s",
                  yc_last_error());
    ck_assert_ptr_null(g);
    yc_model_free(m);
}
END_TEST

START_TEST(planner_best_fit_cases)
{
    yc_plan_block b[5] = {
        {.size = 100, .first = 0, .last = 1, .name = "a"},
        {.size = 100, .first = 1, .last = 2, .name = "b"},
        {.size = 64, .first = 2, .last = 3, .name = "c"}, /* reuses a's bytes */
        {.size = 200, .first = 3, .last = 4, .name = "d"},
        {.size = 10, .first = 0, .last = 4, .name = "e"},
    };
    yc_plan p = {.nblocks = 5, .blocks = b, .alignment = 64};
    ck_assert_int_eq(yc_plan_place(&p), YC_OK);
    ck_assert_int_eq(yc_plan_verify(&p), YC_OK);
    ck_assert_uint_eq(b[2].offset, b[0].offset);
    /* sizes round up to 64: a 128, b 128, c 64, d 256, e 64; position 3 holds c + d + e */
    ck_assert_uint_eq(p.lower_bound_bytes, 64 + 256 + 64);
    ck_assert_int_eq(p.peak_position, 3);
    ck_assert(p.arena_bytes <= 128 + 128 + 256 + 64);
    /* a deliberately broken placement is caught */
    b[1].offset = b[0].offset;
    ck_assert_int_ne(yc_plan_verify(&p), YC_OK);

    /* best fit: at position 2 the free ranges are a's 128 bytes and c's 256 (kept apart by b);
     * d takes the smaller */
    yc_plan_block f[4] = {
        {.size = 128, .first = 0, .last = 1, .name = "a"},
        {.size = 64, .first = 0, .last = 3, .name = "b"},
        {.size = 256, .first = 0, .last = 1, .name = "c"},
        {.size = 64, .first = 2, .last = 3, .name = "d"},
    };
    yc_plan fit = {.nblocks = 4, .blocks = f, .alignment = 64};
    ck_assert_int_eq(yc_plan_place(&fit), YC_OK);
    ck_assert_int_eq(yc_plan_verify(&fit), YC_OK);
    ck_assert_uint_eq(f[3].offset, f[0].offset);
    ck_assert_uint_eq(fit.arena_bytes, 128 + 64 + 256);

    /* chunks no larger than the device's largest allocation */
    yc_plan_block c[5] = {
        {.size = 100, .first = 0, .last = 3, .name = "a"},
        {.size = 100, .first = 1, .last = 3, .name = "b"},
        {.size = 200, .first = 2, .last = 3, .name = "c"},
        {.size = 64, .first = 3, .last = 4, .name = "d"},
        {.size = 250, .first = 4, .last = 4, .name = "e"},
    };
    yc_plan q = {.nblocks = 5, .blocks = c, .alignment = 64, .max_chunk = 256};
    ck_assert_msg(yc_plan_place(&q) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_plan_verify(&q), YC_OK);
    ck_assert_int_ge(q.nchunks, 2);
    for (int i = 0; i < q.nchunks; i++)
        ck_assert_uint_le(q.chunk_bytes[i], 256);
    c[4].size = 300; /* larger than any chunk may be */
    ck_assert_int_ne(yc_plan_place(&q), YC_OK);
    ck_assert(strstr(yc_last_error(), "largest allocation"));
}
END_TEST

/* A whole training plan split into chunks of a small fake largest allocation, and the plan is
 * the same every time it is made. */
START_TEST(chunked_training_plan_is_deterministic)
{
    yc_model *m = load_model("yolov5n", 0);
    yc_backend be = {0};
    be.info.max_alloc = 3 << 20;
    be.info.alignment = 64;
    m->be = &be;
    yc_graph *g1 = NULL, *g2 = NULL;
    yc_graph_options opt = {.mode = YC_GRAPH_TRAIN};
    ck_assert_msg(yc_graph_new_opts(&g1, m, 2, 128, 128, &opt) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_graph_new_opts(&g2, m, 2, 128, 128, &opt), YC_OK);
    const yc_plan *p1 = yc_graph_plan(g1), *p2 = yc_graph_plan(g2);
    ck_assert_int_eq(yc_plan_verify(p1), YC_OK);
    ck_assert_int_gt(p1->nchunks, 1);
    for (int i = 0; i < p1->nchunks; i++)
        ck_assert_uint_le(p1->chunk_bytes[i], (size_t)3 << 20);
    ck_assert_int_eq(p1->nblocks, p2->nblocks);
    ck_assert_int_eq(p1->nchunks, p2->nchunks);
    for (int i = 0; i < p1->nblocks; i++) {
        ck_assert_int_eq(p1->blocks[i].chunk, p2->blocks[i].chunk);
        ck_assert_uint_eq(p1->blocks[i].offset, p2->blocks[i].offset);
    }
    yc_graph_free(g1);
    yc_graph_free(g2);
    m->be = NULL;
    yc_model_free(m);
}
END_TEST

/* ---- the fused model (yc_model_fuse) ---------------------------------------------------------- */

/* n pseudo-random values in [lo, hi) from *s. */
static void fill_uniform(float *v, size_t n, float lo, float hi, uint32_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        v[i] = lo + (hi - lo) * (float)(*s >> 8) / 16777216.0f;
    }
}

/* The heads of m's evaluation graph for batch 2 of 96x128 pseudo-random pixels, into heads[l]
 * (malloc'ed). */
static void eval_heads(yc_model *m, float **heads)
{
    yc_graph *g = NULL;
    ck_assert_msg(yc_graph_new(&g, m, 2, 96, 128, YC_GRAPH_EVAL) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(yc_graph_alloc(g), YC_OK);
    const yc_tensor *in = yc_graph_input(g);
    float *x = malloc(yc_tensor_elems(in) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    uint32_t s = 7;
    fill_uniform(x, yc_tensor_elems(in), 0, 1, &s);
    ck_assert_int_eq(yc_tensor_set_f32(m->be, in, x), YC_OK);
    ck_assert_msg(yc_graph_forward(g) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(m->be->iface->synchronize(m->be), YC_OK);
    for (int l = 0; l < m->nl; l++) {
        const yc_tensor *t = yc_graph_head(g, l);
        heads[l] = malloc(yc_tensor_elems(t) * sizeof **heads);
        ck_assert_ptr_nonnull(heads[l]);
        ck_assert_int_eq(yc_tensor_get_f32(m->be, t, heads[l]), YC_OK);
    }
    free(x);
    yc_graph_free(g);
}

/* Random BatchNorm weights, biases and statistics for m (allocated), so that folding them into
 * the convolutions changes every weight. */
static void randomize_bn(yc_model *a, uint32_t *seed)
{
    yc_backend *be = a->be;
    uint32_t s = *seed;
    for (int i = 0; i < a->nparams; i++) {
        yc_param *p = &a->params[i];
        size_t n = strlen(p->name);
        bool gamma = n > 10 && !strcmp(p->name + n - 10, ".bn.weight");
        bool beta = n > 8 && !strcmp(p->name + n - 8, ".bn.bias");
        if (!gamma && !beta)
            continue;
        float v[2048];
        ck_assert_uint_le(p->numel, 2048);
        fill_uniform(v, p->numel, gamma ? 0.5f : -0.5f, gamma ? 1.5f : 0.5f, &s);
        ck_assert_int_eq(yc_tensor_set_f32(be, &p->t, v), YC_OK);
    }
    for (int i = 0; i < a->nstate; i++) {
        yc_state *st = &a->state[i];
        if (st->kind == YC_STATE_NUM_BATCHES)
            continue;
        float v[2048];
        ck_assert_int_le(st->numel, 2048);
        bool var = st->kind == YC_STATE_RUNNING_VAR;
        fill_uniform(v, (size_t)st->numel, var ? 0.2f : -0.5f, var ? 2.0f : 0.5f, &s);
        ck_assert_int_eq(yc_tensor_set_f32(be, &st->t, v), YC_OK);
    }
    *seed = s;
}

/* Whether two models' heads (eval_heads) are bit for bit the same. */
static bool same_heads(const yc_model *m, float **a, float **b)
{
    size_t per = (size_t)2 * (size_t)(m->na * m->no);
    for (int l = 0; l < m->nl; l++) {
        size_t n = per * (size_t)(96 / (int)m->stride[l]) * (size_t)(128 / (int)m->stride[l]);
        if (memcmp(a[l], b[l], n * sizeof **a))
            return false;
    }
    return true;
}

static void free_heads(const yc_model *m, float **h)
{
    for (int l = 0; l < m->nl; l++)
        free(h[l]);
}

/* YOLOv5n with random BatchNorm weights and statistics: its fused copy (each BatchNorm folded into
 * its convolution, as val and detect run it) gives the unfused model's heads up to rounding, with
 * the SiLU in the convolution's epilogue (_i 0: the CPU backend, through its GEMM, implicit and
 * Winograd convolutions) and as an op after it (_i 1: a backend without the epilogue, as OpenCL);
 * a fused model builds no training graph.  Its frozen weights, kept transformed by the CPU
 * backend after the first run, give the same heads again, and a weight written afterwards is
 * seen: the heads then equal those of a copy that never ran. */
START_TEST(fused_model_matches_unfused)
{
    yc_backend *be = NULL;
    yc_harness_cpu(&be, 2);
    if (_i == 1)
        be->info.conv_silu = false;
    yc_model *a = load_model("yolov5n", 0), *b = NULL;
    ck_assert_int_eq(yc_model_alloc_weights(a, be), YC_OK);
    ck_assert_int_eq(yc_model_init_weights(a, 3), YC_OK);
    uint32_t s = 11;
    randomize_bn(a, &s);
    ck_assert_int_eq(yc_model_clone(a, &b), YC_OK);
    ck_assert_int_eq(yc_model_alloc_weights(b, be), YC_OK);
    ck_assert_int_eq(yc_model_copy_weights(b, a), YC_OK);
    ck_assert_msg(yc_model_fuse(b) == YC_OK, "%s", yc_last_error());
    ck_assert(b->fused && !a->fused);

    float *ha[YC_CFG_MAX_LEVELS] = {NULL}, *hb[YC_CFG_MAX_LEVELS] = {NULL};
    float *hb2[YC_CFG_MAX_LEVELS] = {NULL}, *hc[YC_CFG_MAX_LEVELS] = {NULL};
    float *hd[YC_CFG_MAX_LEVELS] = {NULL};
    eval_heads(a, ha);
    eval_heads(b, hb);
    eval_heads(b, hb2);
    ck_assert_msg(same_heads(b, hb, hb2), "a second run of the fused model differs");
    /* a weight written after the runs: every Conv's weights scaled by 1.5 */
    for (int i = 0; i < b->nparams; i++) {
        yc_param *p = &b->params[i];
        if (p->ndim != 4)
            continue;
        float *v = malloc(p->numel * sizeof *v);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(yc_tensor_get_f32(be, &p->t, v), YC_OK);
        for (size_t j = 0; j < p->numel; j++)
            v[j] *= 1.5f;
        ck_assert_int_eq(yc_tensor_set_f32(be, &p->t, v), YC_OK);
        free(v);
    }
    eval_heads(b, hc);
    yc_model *c = NULL;
    ck_assert_int_eq(yc_model_clone(b, &c), YC_OK);
    ck_assert_int_eq(yc_model_alloc_weights(c, be), YC_OK);
    ck_assert_int_eq(yc_model_copy_weights(c, b), YC_OK);
    ck_assert(c->fused);
    eval_heads(c, hd);
    ck_assert_msg(!same_heads(b, hb, hc), "the written weights were not seen");
    ck_assert_msg(same_heads(b, hc, hd), "the written weights give other heads than a fresh copy");
    free_heads(b, hb2);
    free_heads(b, hc);
    free_heads(b, hd);
    yc_model_free(c);
    double worst = 0;
    size_t per = (size_t)2 * (size_t)(a->na * a->no);
    for (int l = 0; l < a->nl; l++) {
        size_t n = per * (size_t)(96 / (int)a->stride[l]) * (size_t)(128 / (int)a->stride[l]);
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)ha[l][i] - hb[l][i]) / (1 + fabs((double)ha[l][i]));
            ck_assert_msg(d == d, "head %d value %zu is NaN", l, i);
            worst = d > worst ? d : worst;
        }
        free(ha[l]);
        free(hb[l]);
    }
    ck_assert_msg(worst < 1e-4, "fused heads differ from the unfused by %g (relative)", worst);
    /* the comparison is not vacuous: a fused model's conv weights changed */
    float w0[2], w1[2];
    yc_tensor t0 = a->params[0].t, t1 = b->params[0].t;
    t0.c = t1.c = 1, t0.h = t1.h = 1, t0.w = t1.w = 2, t0.n = t1.n = 1, t0.nstride = t1.nstride = 2;
    ck_assert_int_eq(yc_tensor_get_f32(be, &t0, w0), YC_OK);
    ck_assert_int_eq(yc_tensor_get_f32(be, &t1, w1), YC_OK);
    ck_assert(w0[0] != w1[0] || w0[1] != w1[1]);

    yc_graph *g = NULL;
    ck_assert_int_ne(yc_graph_new(&g, b, 1, 64, 64, YC_GRAPH_TRAIN), YC_OK);
    ck_assert(strstr(yc_last_error(), "fused"));
    yc_model_free(a);
    yc_model_free(b);
    yc_backend_free(be);
}
END_TEST

/* A classifier (yolov5n-cls, random BatchNorm statistics): fused, its logits equal the unfused
 * ones up to rounding; its Classify head's BatchNorm has PyTorch's eps (1e-5), the backbone's
 * YOLOv5's (1e-3), and folding the wrong one would move them. */
START_TEST(fused_classifier_matches_unfused)
{
    yc_backend *be = NULL;
    yc_harness_cpu(&be, 2);
    yc_model *a = load_model("yolov5n-cls", 0), *b = NULL;
    ck_assert_int_eq(yc_model_alloc_weights(a, be), YC_OK);
    ck_assert_int_eq(yc_model_init_weights(a, 5), YC_OK);
    uint32_t s = 13;
    randomize_bn(a, &s);
    ck_assert_int_eq(yc_model_clone(a, &b), YC_OK);
    ck_assert_int_eq(yc_model_alloc_weights(b, be), YC_OK);
    ck_assert_int_eq(yc_model_copy_weights(b, a), YC_OK);
    ck_assert_msg(yc_model_fuse(b) == YC_OK, "%s", yc_last_error());
    float *la = NULL, *lb = NULL;
    yc_model *ms[2] = {a, b};
    float **ls[2] = {&la, &lb};
    for (int k = 0; k < 2; k++) {
        yc_graph *g = NULL;
        ck_assert_msg(yc_graph_new(&g, ms[k], 2, 64, 64, YC_GRAPH_EVAL) == YC_OK, "%s",
                      yc_last_error());
        ck_assert_int_eq(yc_graph_alloc(g), YC_OK);
        const yc_tensor *in = yc_graph_input(g);
        float *x = malloc(yc_tensor_elems(in) * sizeof *x);
        ck_assert_ptr_nonnull(x);
        uint32_t xs = 7;
        fill_uniform(x, yc_tensor_elems(in), 0, 1, &xs);
        ck_assert_int_eq(yc_tensor_set_f32(be, in, x), YC_OK);
        ck_assert_msg(yc_graph_forward(g) == YC_OK, "%s", yc_last_error());
        const yc_tensor *t = yc_graph_head(g, 0);
        ck_assert_uint_eq(yc_tensor_elems(t), (size_t)2 * (size_t)a->cfg->nc);
        *ls[k] = malloc(yc_tensor_elems(t) * sizeof **ls[k]);
        ck_assert_ptr_nonnull(*ls[k]);
        ck_assert_int_eq(yc_tensor_get_f32(be, t, *ls[k]), YC_OK);
        free(x);
        yc_graph_free(g);
    }
    double worst = 0;
    for (int i = 0; i < 2 * a->cfg->nc; i++) {
        double d = fabs((double)la[i] - lb[i]) / (1 + fabs((double)la[i]));
        ck_assert_msg(d == d, "logit %d is NaN", i);
        worst = d > worst ? d : worst;
    }
    ck_assert_msg(worst < 1e-4, "fused logits differ from the unfused by %g (relative)", worst);
    free(la);
    free(lb);
    yc_model_free(a);
    yc_model_free(b);
    yc_backend_free(be);
}
END_TEST

/* ---- yc_graph_options.grads_ready -------------------------------------------------------- */

/* What the hook was told: the call number at which each parameter was reported (-1: never) and
 * how often it was, and the calls made. */
typedef struct ready_log {
    int *call, *times;
    int calls;
} ready_log;

static int log_ready(void *ctx, const int *params, int n)
{
    ready_log *r = ctx;
    for (int i = 0; i < n; i++) {
        r->call[params[i]] = r->calls;
        r->times[params[i]]++;
    }
    r->calls++;
    return YC_OK;
}

/* A backward pass tells the hook every parameter once, before its first call for the unwritten
 * ones and after each op otherwise: after the last op that writes its gradient, which no later op
 * writes (what summing a bucket while backward runs relies on); and a second backward does the
 * same. */
START_TEST(grads_ready_reports_each_gradient_after_its_last_writer)
{
    yc_backend *be = NULL;
    yc_harness_cpu(&be, 2);
    yc_model *m = load_model("yolov5n", 3);
    ck_assert_int_eq(yc_model_alloc(m, be), YC_OK);
    ck_assert_int_eq(yc_model_init_weights(m, 9), YC_OK);
    ready_log r = {calloc((size_t)m->nparams, sizeof(int)), calloc((size_t)m->nparams, sizeof(int)),
                   0};
    ck_assert(r.call && r.times);
    yc_graph_options go = {.mode = YC_GRAPH_TRAIN, .grads_ready = log_ready, .grads_ready_ctx = &r};
    yc_graph *g = NULL;
    ck_assert_msg(yc_graph_new_opts(&g, m, 1, 64, 64, &go) == YC_OK, "%s", yc_last_error());
    ck_assert_msg(yc_graph_alloc(g) == YC_OK, "%s", yc_last_error());
    const yc_tensor *in = yc_graph_input(g);
    size_t n = yc_tensor_elems(in), most = n;
    for (int l = 0; l < m->nl; l++)
        if (yc_tensor_elems(yc_graph_head_grad(g, l)) > most)
            most = yc_tensor_elems(yc_graph_head_grad(g, l));
    float *buf = malloc(most * sizeof *buf);
    ck_assert(buf);
    for (size_t i = 0; i < most; i++)
        buf[i] = (float)(i % 7) * 0.01f;
    ck_assert_int_eq(yc_tensor_set_f32(be, in, buf), YC_OK);
    int nf = yc_graph_nforward(g), nops = yc_graph_nops(g);
    for (int pass = 0; pass < 2; pass++) {
        r.calls = 0;
        for (int p = 0; p < m->nparams; p++)
            r.call[p] = -1, r.times[p] = 0;
        ck_assert_msg(yc_graph_forward(g) == YC_OK, "%s", yc_last_error());
        ck_assert_int_eq(r.calls, 0); /* forward tells nothing */
        for (int l = 0; l < m->nl; l++)
            ck_assert_int_eq(yc_tensor_set_f32(be, yc_graph_head_grad(g, l), buf), YC_OK);
        ck_assert_msg(yc_graph_backward(g) == YC_OK, "%s", yc_last_error());
        ck_assert_int_eq(r.calls, nops - nf + 1);
        for (int p = 0; p < m->nparams; p++) {
            const yc_tensor *gt = &m->params[p].grad;
            ck_assert_msg(r.times[p] == 1, "%s told %d times", m->params[p].name, r.times[p]);
            /* call k >= 1 follows op nf + k - 1: that op writes the gradient, no later one does */
            int last = -1;
            for (int i = nf; i < nops; i++) {
                const yc_op *op = yc_graph_op(g, i);
                for (int d = 0; d < YC_OP_MAX_DST; d++)
                    if (op->dst[d] && op->dst[d]->buf == gt->buf && op->dst[d]->offset == gt->offset)
                        last = i;
            }
            ck_assert_msg(r.call[p] == (last < 0 ? 0 : last - nf + 1),
                          "%s told at call %d, its gradient last written by op %d (backward from %d)",
                          m->params[p].name, r.call[p], last, nf);
        }
    }
    free(buf);
    free(r.call);
    free(r.times);
    yc_graph_free(g);
    yc_model_free(m);
    yc_backend_free(be);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, yaml_scalars_and_errors);
    tcase_add_loop_test(tc, param_counts_and_gflops, 0, (int)(sizeof models / sizeof *models));
    tcase_add_test(tc, yolov5s_layer_table);
    tcase_add_test(tc, names_match_reference_state_dict);
    tcase_add_test(tc, malformed_configs_name_the_row);
    tcase_add_test(tc, bundled_names_resolve);
    tcase_add_test(tc, dumped_config_round_trips);
    tcase_add_test(tc, nc_override);
    suite_add_tcase(s, tc);
    tc = tcase_create("graph");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, training_plan_never_overlaps_live_tensors, 0,
                        (int)(sizeof graphs / sizeof *graphs));
    tcase_add_test(tc, image_size_must_fit_the_strides);
    tcase_add_test(tc, planner_best_fit_cases);
    tcase_add_test(tc, chunked_training_plan_is_deterministic);
    tcase_add_loop_test(tc, fused_model_matches_unfused, 0, 2);
    tcase_add_test(tc, fused_classifier_matches_unfused);
    tcase_add_test(tc, grads_ready_reports_each_gradient_after_its_last_writer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return yc_harness_run(suite(), false);
}
