/* Training hyperparameters (see hyp.h). */
#include "hyp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "yamltree.h"

void yc_hyp_defaults(yc_hyp *h)
{
#define YC_HYP_DEFAULT(name, def) h->name = def;
    YC_HYP_KEYS(YC_HYP_DEFAULT)
#undef YC_HYP_DEFAULT
    h->anchors = 0;
}

static double *field(yc_hyp *h, const char *key)
{
#define YC_HYP_MATCH(name, def)                                                                    \
    if (strcmp(key, #name) == 0)                                                                   \
        return &h->name;
    YC_HYP_KEYS(YC_HYP_MATCH)
#undef YC_HYP_MATCH
    if (strcmp(key, "anchors") == 0)
        return &h->anchors;
    return NULL;
}

/* Sets the keys of the mapping `root` (read from `name`) over the defaults. */
static int apply_keys(yc_hyp *h, const yc_yaml_node *root, const char *name)
{
    yc_hyp_defaults(h);
    if (root->kind != YC_YAML_MAP)
        return yc_error_status(YC_EFORMAT, "%s: hyperparameters must be a mapping of key: value",
                               name);
    int status = YC_OK;
    for (int i = 0; i < root->n && !status; i++) {
        double *f = field(h, root->keys[i]);
        if (!f) {
            status = yc_error_status(YC_EFORMAT, "%s:%d: unknown hyperparameter '%s'", name,
                                     root->items[i]->line, root->keys[i]);
        } else if (yc_yaml_double(root->items[i], f) || !isfinite(*f) || *f < 0) {
            status = yc_error_status(YC_EFORMAT, "%s:%d: hyperparameter '%s' must be a "
                                     "non-negative number", name, root->items[i]->line,
                                     root->keys[i]);
        }
    }
    return status;
}

int yc_hyp_load(yc_hyp *h, const char *name_or_path)
{
    char path[1024];
    yc_hyp_defaults(h);
    if (yc_file_exists(name_or_path)) {
        snprintf(path, sizeof path, "%s", name_or_path);
    } else {
        char rel[512];
        size_t n = strlen(name_or_path);
        bool ext = n > 5 && strcmp(name_or_path + n - 5, ".yaml") == 0;
        snprintf(rel, sizeof rel, "hyps/%s%s", name_or_path, ext ? "" : ".yaml");
        int status = strchr(name_or_path, '/') ? YC_EIO : yc_data_path(rel, path, sizeof path);
        if (status)
            return yc_error_status(YC_EIO, "hyperparameter file %s not found (give a path, or a "
                                   "bundled name: hyp.scratch-low, hyp.scratch-med, "
                                   "hyp.scratch-high)", name_or_path);
    }
    yc_yaml_node *root = NULL;
    int status = yc_yaml_load_file(path, &root);
    if (status)
        return status;
    status = apply_keys(h, root, path);
    yc_yaml_free(root);
    return status;
}

int yc_hyp_parse(yc_hyp *h, const char *text, const char *name)
{
    yc_yaml_node *root = NULL;
    int status = yc_yaml_load_string(text, strlen(text), name, &root);
    if (status)
        return status;
    status = apply_keys(h, root, name);
    yc_yaml_free(root);
    return status;
}
