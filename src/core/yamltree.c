/* YAML files read with libyaml into a tree (see yamltree.h). */
#include "yamltree.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "log.h"
#include "strbuf.h"
#include "util.h"

/* Limits against hostile input: nesting depth and the number of nodes after alias expansion. */
#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 1000000

typedef struct convert_state {
    yaml_document_t *doc;
    const char *name;
    long nodes;
} convert_state;

void yc_yaml_free(yc_yaml_node *node)
{
    if (!node)
        return;
    for (int i = 0; i < node->n; i++) {
        yc_yaml_free(node->items[i]);
        if (node->keys)
            free(node->keys[i]);
    }
    free(node->items);
    free(node->keys);
    free(node->value);
    free(node);
}

static int convert(convert_state *st, yaml_node_t *src, int depth, yc_yaml_node **out);

static int convert_scalar(yaml_node_t *src, yc_yaml_node *dst)
{
    dst->kind = YC_YAML_SCALAR;
    size_t len = src->data.scalar.length;
    dst->value = yc_malloc(len + 1, "yaml scalar");
    if (!dst->value)
        return YC_ENOMEM;
    memcpy(dst->value, src->data.scalar.value, len);
    dst->value[len] = '\0';
    if (strlen(dst->value) != len)
        return yc_error_status(YC_EFORMAT, "line %d: scalar contains a NUL character",
                               (int)src->start_mark.line + 1);
    yaml_scalar_style_t style = src->data.scalar.style;
    dst->quoted = style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                  style == YAML_DOUBLE_QUOTED_SCALAR_STYLE || style == YAML_LITERAL_SCALAR_STYLE ||
                  style == YAML_FOLDED_SCALAR_STYLE;
    return YC_OK;
}

static int convert_sequence(convert_state *st, yaml_node_t *src, int depth, yc_yaml_node *dst)
{
    dst->kind = YC_YAML_SEQ;
    long count = src->data.sequence.items.top - src->data.sequence.items.start;
    dst->items = yc_calloc((size_t)count, sizeof *dst->items, "yaml sequence");
    if (!dst->items)
        return YC_ENOMEM;
    for (long i = 0; i < count; i++) {
        yaml_node_t *item = yaml_document_get_node(st->doc, src->data.sequence.items.start[i]);
        int status = convert(st, item, depth + 1, &dst->items[i]);
        dst->n++;
        if (status)
            return status;
    }
    return YC_OK;
}

static int convert_mapping(convert_state *st, yaml_node_t *src, int depth, yc_yaml_node *dst)
{
    dst->kind = YC_YAML_MAP;
    long count = src->data.mapping.pairs.top - src->data.mapping.pairs.start;
    dst->items = yc_calloc((size_t)count, sizeof *dst->items, "yaml mapping");
    dst->keys = yc_calloc((size_t)count, sizeof *dst->keys, "yaml mapping");
    if (!dst->items || !dst->keys)
        return YC_ENOMEM;
    for (long i = 0; i < count; i++) {
        yaml_node_pair_t *pair = &src->data.mapping.pairs.start[i];
        yaml_node_t *key = yaml_document_get_node(st->doc, pair->key);
        yaml_node_t *value = yaml_document_get_node(st->doc, pair->value);
        if (!key || key->type != YAML_SCALAR_NODE)
            return yc_error_status(YC_EFORMAT, "line %d: mapping keys must be plain values",
                                   key ? (int)key->start_mark.line + 1 : 0);
        size_t len = key->data.scalar.length;
        char *k = yc_malloc(len + 1, "yaml key");
        if (!k)
            return YC_ENOMEM;
        memcpy(k, key->data.scalar.value, len);
        k[len] = '\0';
        for (int j = 0; j < dst->n; j++) {
            if (strcmp(dst->keys[j], k) == 0) {
                int line = (int)key->start_mark.line + 1;
                free(k);
                return yc_error_status(YC_EFORMAT, "line %d: duplicate key '%s'", line,
                                       dst->keys[j]);
            }
        }
        dst->keys[i] = k;
        int status = convert(st, value, depth + 1, &dst->items[i]);
        dst->n++;
        if (status)
            return status;
    }
    return YC_OK;
}

static int convert(convert_state *st, yaml_node_t *src, int depth, yc_yaml_node **out)
{
    *out = NULL;
    if (!src)
        return yc_error_status(YC_EFORMAT, "dangling YAML node");
    if (depth > YAML_MAX_DEPTH)
        return yc_error_status(YC_EFORMAT, "line %d: nesting deeper than %d levels",
                               (int)src->start_mark.line + 1, YAML_MAX_DEPTH);
    if (++st->nodes > YAML_MAX_NODES)
        return yc_error_status(YC_EFORMAT, "more than %d values (after expanding aliases)",
                               YAML_MAX_NODES);
    yc_yaml_node *dst = yc_calloc(1, sizeof *dst, "yaml node");
    if (!dst)
        return YC_ENOMEM;
    *out = dst;
    dst->line = (int)src->start_mark.line + 1;
    switch (src->type) {
    case YAML_SCALAR_NODE:
        return convert_scalar(src, dst);
    case YAML_SEQUENCE_NODE:
        return convert_sequence(st, src, depth, dst);
    case YAML_MAPPING_NODE:
        return convert_mapping(st, src, depth, dst);
    default:
        return yc_error_status(YC_EFORMAT, "line %d: unsupported YAML node", dst->line);
    }
}

int yc_yaml_load_string(const char *text, size_t len, const char *name, yc_yaml_node **root)
{
    *root = NULL;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return yc_error_status(YC_ENOMEM, "%s: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int status = yc_error_status(YC_EFORMAT, "%s:%d:%d: %s%s%s", name,
                                     (int)parser.problem_mark.line + 1,
                                     (int)parser.problem_mark.column + 1,
                                     parser.problem ? parser.problem : "invalid YAML",
                                     parser.context ? " " : "",
                                     parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return status;
    }
    yaml_node_t *top = yaml_document_get_root_node(&doc);
    int status = YC_OK;
    if (!top) {
        /* an empty document is an empty mapping */
        *root = yc_calloc(1, sizeof **root, "yaml node");
        if (!*root)
            status = YC_ENOMEM;
        else
            (*root)->kind = YC_YAML_MAP;
    } else {
        convert_state st = {&doc, name, 0};
        status = convert(&st, top, 0, root);
        if (status) {
            yc_error_context(status, "%s", name);
            yc_yaml_free(*root);
            *root = NULL;
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return status;
}

int yc_yaml_load_file(const char *path, yc_yaml_node **root)
{
    char *text = NULL;
    size_t len = 0;
    *root = NULL;
    int status = yc_read_file(path, &text, &len);
    if (status)
        return status;
    status = yc_yaml_load_string(text, len, path, root);
    free(text);
    return status;
}

const yc_yaml_node *yc_yaml_get(const yc_yaml_node *map, const char *key)
{
    if (!map || map->kind != YC_YAML_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0)
            return map->items[i];
    return NULL;
}

bool yc_yaml_is_null(const yc_yaml_node *node)
{
    if (!node)
        return true;
    if (node->kind != YC_YAML_SCALAR || node->quoted)
        return false;
    const char *v = node->value;
    return !v[0] || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

int yc_yaml_int(const yc_yaml_node *node, long *out)
{
    if (!node || node->kind != YC_YAML_SCALAR || node->quoted || !node->value[0])
        return YC_EFORMAT;
    char *end = NULL;
    errno = 0;
    long v = strtol(node->value, &end, 10);
    if (errno || *end)
        return YC_EFORMAT;
    *out = v;
    return YC_OK;
}

int yc_yaml_double(const yc_yaml_node *node, double *out)
{
    if (!node || node->kind != YC_YAML_SCALAR || node->quoted || !node->value[0])
        return YC_EFORMAT;
    const char *v = node->value;
    if (strcmp(v, ".inf") == 0 || strcmp(v, ".Inf") == 0 || strcmp(v, "+.inf") == 0) {
        *out = INFINITY;
        return YC_OK;
    }
    if (strcmp(v, "-.inf") == 0 || strcmp(v, "-.Inf") == 0) {
        *out = -INFINITY;
        return YC_OK;
    }
    if (strcmp(v, ".nan") == 0 || strcmp(v, ".NaN") == 0) {
        *out = NAN;
        return YC_OK;
    }
    /* strtod would also accept "inf", "nan" and hex floats, which YAML does not */
    for (const char *c = v; *c; c++)
        if (!strchr("0123456789+-.eE_", *c))
            return YC_EFORMAT;
    char buf[128];
    size_t n = 0;
    for (const char *c = v; *c && n + 1 < sizeof buf; c++)
        if (*c != '_')
            buf[n++] = *c;
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    double d = strtod(buf, &end);
    if (errno == ERANGE && fabs(d) > 1)
        return YC_EFORMAT;
    if (end == buf || *end)
        return YC_EFORMAT;
    *out = d;
    return YC_OK;
}

int yc_yaml_bool(const yc_yaml_node *node, bool *out)
{
    if (!node || node->kind != YC_YAML_SCALAR || node->quoted)
        return YC_EFORMAT;
    static const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const char *no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (strcmp(node->value, yes[i]) == 0) {
            *out = true;
            return YC_OK;
        }
        if (strcmp(node->value, no[i]) == 0) {
            *out = false;
            return YC_OK;
        }
    }
    return YC_EFORMAT;
}

/* ---- dumping: block style for mappings and sequences of rows, flow style inside rows (YOLOv5's
 *      model yaml layout), scalars plain when they read back the same, else quoted ---------- */

/* A scalar: plain when YAML reads it back the same (in flow context too), else quoted. */
static void put_scalar(yc_strbuf *b, const yc_yaml_node *n)
{
    const char *v = n->value;
    long l;
    double d;
    bool number = !n->quoted && (yc_yaml_int(n, &l) == YC_OK || yc_yaml_double(n, &d) == YC_OK);
    bool plain = !n->quoted && v[0] && (number || !strchr("-?:,[]{}#&*!|>'\"%@` ", v[0]));
    bool control = false;
    for (const char *c = v; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7F)
            control = true;
        if (strchr(",[]{}#", *c) || (*c == ':' && (c[1] == ' ' || !c[1])))
            plain = false;
    }
    if (v[0] && v[strlen(v) - 1] == ' ')
        plain = false;
    if (!n->quoted && !v[0]) {
        yc_strbuf_puts(b, "null");
        return;
    }
    if (plain && !control) {
        yc_strbuf_puts(b, v);
        return;
    }
    if (!control) {
        yc_strbuf_puts(b, "'");
        for (const char *c = v; *c; c++)
            yc_strbuf_put(b, *c == '\'' ? "''" : c, 1 + (*c == '\''));
        yc_strbuf_puts(b, "'");
        return;
    }
    yc_strbuf_puts(b, "\"");
    for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            yc_strbuf_put(b, esc, 2);
        } else if (*c < 0x20 || *c == 0x7F) {
            snprintf(esc, sizeof esc, "\\x%02x", *c);
            yc_strbuf_puts(b, esc);
        } else {
            yc_strbuf_put(b, (const char *)c, 1);
        }
    }
    yc_strbuf_puts(b, "\"");
}

static void put_flow(yc_strbuf *b, const yc_yaml_node *n)
{
    if (n->kind == YC_YAML_SCALAR) {
        put_scalar(b, n);
        return;
    }
    bool map = n->kind == YC_YAML_MAP;
    yc_strbuf_puts(b, map ? "{" : "[");
    for (int i = 0; i < n->n; i++) {
        if (i)
            yc_strbuf_puts(b, ", ");
        if (map) {
            /* keys are strings: an empty one is written '' (plain, it would read back "null") */
            yc_yaml_node key = {.kind = YC_YAML_SCALAR, .value = n->keys[i],
                                .quoted = !n->keys[i][0]};
            put_scalar(b, &key);
            yc_strbuf_puts(b, ": ");
        }
        put_flow(b, n->items[i]);
    }
    yc_strbuf_puts(b, map ? "}" : "]");
}

static void put_block(yc_strbuf *b, const yc_yaml_node *n, int indent)
{
    for (int i = 0; i < n->n; i++) {
        const yc_yaml_node *v = n->items[i];
        for (int k = 0; k < indent; k++)
            yc_strbuf_puts(b, " ");
        if (n->kind == YC_YAML_MAP) {
            /* keys are strings: an empty one is written '' (plain, it would read back "null") */
            yc_yaml_node key = {.kind = YC_YAML_SCALAR, .value = n->keys[i],
                                .quoted = !n->keys[i][0]};
            put_scalar(b, &key);
            yc_strbuf_puts(b, ":");
        } else {
            yc_strbuf_puts(b, "-");
        }
        if (v->kind == YC_YAML_MAP && v->n > 0) {
            yc_strbuf_puts(b, "\n");
            put_block(b, v, indent + 2);
            continue;
        }
        bool rows = v->kind == YC_YAML_SEQ && n->kind == YC_YAML_MAP && v->n > 0;
        for (int k = 0; rows && k < v->n; k++)
            rows = v->items[k]->kind == YC_YAML_SEQ;
        if (rows) {
            yc_strbuf_puts(b, "\n");
            put_block(b, v, indent + 2);
            continue;
        }
        yc_strbuf_puts(b, " ");
        put_flow(b, v);
        yc_strbuf_puts(b, "\n");
    }
}

char *yc_yaml_dump(const yc_yaml_node *root)
{
    yc_strbuf b = {0};
    if (root->kind == YC_YAML_SCALAR) {
        put_scalar(&b, root);
        yc_strbuf_puts(&b, "\n");
    } else if (root->n == 0) {
        yc_strbuf_puts(&b, root->kind == YC_YAML_MAP ? "{}\n" : "[]\n");
    } else {
        put_block(&b, root, 0);
    }
    return yc_strbuf_finish(&b);
}
