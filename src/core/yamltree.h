/* YAML files (model configs, hyperparameters, datasets, opt.yaml) read with libyaml into a small
 * tree.  Scalars keep their text; callers convert with the typed getters, which follow PyYAML's
 * YAML 1.1 rules where YOLOv5's files rely on them (True/False, yes/no, ~ and null).
 * Aliases are expanded; depth and total size are capped, so hostile files cannot exhaust memory. */
#ifndef YC_YAMLTREE_H
#define YC_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum yc_yaml_kind {
    YC_YAML_SCALAR,
    YC_YAML_SEQ,
    YC_YAML_MAP,
} yc_yaml_kind;

typedef struct yc_yaml_node {
    /* scalar, sequence or mapping */
    yc_yaml_kind kind;
    /* scalar text (NUL-terminated; "" for an empty scalar); NULL for collections */
    char *value;
    /* the scalar was quoted ('x' or "x"), so it is a string whatever it looks like */
    bool quoted;
    /* number of items (sequence) or key/value pairs (mapping) */
    int n;
    /* sequence items, or mapping values (items[i] belongs to keys[i]) */
    struct yc_yaml_node **items;
    /* mapping keys (scalar text); NULL for sequences */
    char **keys;
    /* 1-based line of the node in its file, for messages */
    int line;
} yc_yaml_node;

/* Parses a file; on error the message names the file, line and column. */
int yc_yaml_load_file(const char *path, yc_yaml_node **root);
/* Parses text; `name` is used in messages. */
int yc_yaml_load_string(const char *text, size_t len, const char *name, yc_yaml_node **root);
void yc_yaml_free(yc_yaml_node *node);

/* Value of `key` in a mapping, or NULL (also when `map` is NULL or not a mapping). */
const yc_yaml_node *yc_yaml_get(const yc_yaml_node *map, const char *key);

/* An unquoted empty, "~", "null", "Null" or "NULL" scalar (or a NULL node). */
bool yc_yaml_is_null(const yc_yaml_node *node);

/* Typed scalar conversions; YC_EFORMAT (no message) when the node is not of that type, so callers
 * can name the key in their own message. */
int yc_yaml_int(const yc_yaml_node *node, long *out);
int yc_yaml_double(const yc_yaml_node *node, double *out);
int yc_yaml_bool(const yc_yaml_node *node, bool *out);

/* Writes `node` as YAML text (heap; NULL when out of memory), keys in order: block style for
 * mappings and for sequences of rows, flow style inside rows (as YOLOv5's model yamls are
 * written), scalars plain when they read back the same, else quoted.  Checkpoints and exported
 * weights embed model configs written this way. */
char *yc_yaml_dump(const yc_yaml_node *node);

#endif
