/* Fuzz target: model yaml files (src/core/yamltree.c on libyaml, src/nn/modelcfg.c, then src/nn/model.c,
 * which declares the parameters and sizes the layers at 256x256, and src/nn/graph.c for the GFLOPs).
 *
 * The input is the yaml text.  Two things are checked:
 *   - the yaml tree round trip: yc_yaml_dump of any tree yc_yaml_load_string accepts must load
 *     again to the same tree (same shape, keys, text, and the same value for every typed getter:
 *     int, double, bool, null).  A checkpoint stores a .pt file's model yaml this way
 *     (src/nn/weights.c), so a dump that reads back differently would change the model;
 *   - yc_model_cfg_parse resolves the config (or fails with a message), and a resolved config
 *     builds a model (yc_model_new) or fails with a message; parameter counts and GFLOPs are
 *     computed for a built model. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "graph.h"
#include "log.h"
#include "model.h"
#include "modelcfg.h"
#include "yamltree.h"

static bool same_scalar(const yc_yaml_node *a, const yc_yaml_node *b)
{
    if (yc_yaml_is_null(a) != yc_yaml_is_null(b))
        return false;
    if (yc_yaml_is_null(a))
        return true;
    if (strcmp(a->value, b->value) != 0)
        return false;
    long la = 0, lb = 0;
    double da = 0, db = 0;
    bool ba = false, bb = false;
    int ia = yc_yaml_int(a, &la), ib = yc_yaml_int(b, &lb);
    int fa = yc_yaml_double(a, &da), fb = yc_yaml_double(b, &db);
    int oa = yc_yaml_bool(a, &ba), ob = yc_yaml_bool(b, &bb);
    yc_error_clear();
    return ia == ib && la == lb && fa == fb && (da == db || (isnan(da) && isnan(db))) &&
           oa == ob && ba == bb;
}

static bool same_tree(const yc_yaml_node *a, const yc_yaml_node *b)
{
    if (a->kind != b->kind) {
        fprintf(stderr, "node of line %d: kind %d became %d\n", a->line, a->kind, b->kind);
        return false;
    }
    if (a->kind == YC_YAML_SCALAR) {
        if (same_scalar(a, b))
            return true;
        fprintf(stderr, "scalar of line %d: '%s'%s became '%s'%s\n", a->line, a->value,
                a->quoted ? " (quoted)" : "", b->value, b->quoted ? " (quoted)" : "");
        return false;
    }
    if (a->n != b->n) {
        fprintf(stderr, "collection of line %d: %d items became %d\n", a->line, a->n, b->n);
        return false;
    }
    for (int i = 0; i < a->n; i++) {
        if (a->kind == YC_YAML_MAP && strcmp(a->keys[i], b->keys[i]) != 0) {
            fprintf(stderr, "key of line %d: '%s' became '%s'\n", a->items[i]->line, a->keys[i],
                    b->keys[i]);
            return false;
        }
        if (!same_tree(a->items[i], b->items[i]))
            return false;
    }
    return true;
}

static void round_trip(const uint8_t *data, size_t size)
{
    yc_yaml_node *root = NULL;
    fuzz_begin();
    int st = yc_yaml_load_string((const char *)data, size, "fuzz.yaml", &root);
    fuzz_check(st, "yc_yaml_load_string");
    if (st)
        return;
    char *dump = yc_yaml_dump(root);
    if (!dump)
        fuzz_fail("yc_yaml_dump returned NULL");
    yc_yaml_node *again = NULL;
    st = yc_yaml_load_string(dump, strlen(dump), "dump", &again);
    if (st) {
        fprintf(stderr, "dump:\n%s\nerror: %s\n", dump, yc_last_error());
        fuzz_fail("the dump of a yaml tree does not load");
    }
    if (!same_tree(root, again)) {
        fprintf(stderr, "dump:\n%s\n", dump);
        fuzz_fail("the dump of a yaml tree loads to a different tree");
    }
    free(dump);
    yc_yaml_free(again);
    yc_yaml_free(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    round_trip(data, size);
    yc_model_cfg *cfg = NULL;
    fuzz_begin();
    int st = yc_model_cfg_parse(&cfg, (const char *)data, size, "fuzz.yaml", 0);
    fuzz_check(st, "yc_model_cfg_parse");
    if (st)
        return 0;
    if (cfg->nlayers < 2 || cfg->nlayers > YC_MAX_LAYERS || cfg->nc < 1)
        fuzz_fail("model config resolved with impossible layer or class counts");
    yc_model *m = NULL;
    fuzz_begin();
    st = yc_model_new(&m, cfg);
    fuzz_check(st, "yc_model_new");
    if (st)
        return 0;
    (void)yc_model_count_params(m);
    (void)yc_model_count_modules(m);
    double g = yc_model_gflops(m, 640);
    if (!(g >= 0) && g != -1)
        fuzz_fail("negative or NaN GFLOPs");
    yc_error_clear();
    yc_model_free(m);
    return 0;
}
