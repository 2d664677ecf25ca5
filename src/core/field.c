/* Struct fields to and from JSON by a table (see field.h). */
#include "field.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "util.h"

#define AT(obj, off, type) ((type *)((char *)(obj) + (off)))
#define CAT(obj, off, type) ((const type *)((const char *)(obj) + (off)))

const yc_field *yc_field_find(const yc_field *fields, const char *key)
{
    for (const yc_field *f = fields; f->type != YC_FIELD_END; f++)
        if (!strcmp(f->key, key))
            return f;
    return NULL;
}

static void put_str(FILE *out, const char *v)
{
    if (!v) {
        fputs("null", out);
        return;
    }
    char *q = yc_json_quote(v, strlen(v));
    fputs(q ? q : "null", out);
    free(q);
}

char *yc_fields_to_json(const yc_field *fields, const void *obj)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return NULL;
    fputc('{', out);
    for (const yc_field *f = fields; f->type != YC_FIELD_END; f++) {
        fprintf(out, "%s\"%s\": ", f == fields ? "" : ", ", f->key);
        switch (f->type) {
        case YC_FIELD_BOOL:
            fputs(*CAT(obj, f->offset, bool) ? "true" : "false", out);
            break;
        case YC_FIELD_INT:
            fprintf(out, "%.17g", (double)*CAT(obj, f->offset, int));
            break;
        case YC_FIELD_FLOAT:
            fprintf(out, "%.17g", (double)*CAT(obj, f->offset, float));
            break;
        case YC_FIELD_DOUBLE:
            fprintf(out, "%.17g", *CAT(obj, f->offset, double));
            break;
        case YC_FIELD_SIZE:
            fprintf(out, "%.17g", (double)*CAT(obj, f->offset, size_t));
            break;
        case YC_FIELD_STR:
            put_str(out, *CAT(obj, f->offset, const char *));
            break;
        case YC_FIELD_ENUM:
            put_str(out, f->enum_name(*CAT(obj, f->offset, int)));
            break;
        case YC_FIELD_INTS: {
            int n = *CAT(obj, f->count_offset, int);
            const int *v = CAT(obj, f->offset, int);
            fputc('[', out);
            for (int i = 0; i < n; i++)
                fprintf(out, "%s%d", i ? ", " : "", v[i]);
            fputc(']', out);
            break;
        }
        case YC_FIELD_END:
            break;
        }
    }
    fputc('}', out);
    if (fclose(out) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A number of f in its range; absent: def when optional, else an error. */
static int get_num(const yc_json *root, const yc_field *f, const char *what, double *out)
{
    const yc_json *v = yc_json_get(root, f->key);
    if (!v && (f->flags & YC_FIELD_OPTIONAL)) {
        *out = f->def;
        return YC_OK;
    }
    if (!v || yc_json_typeof(v) != YC_JSON_NUMBER)
        return yc_error_status(YC_EFORMAT, "%s: '%s' missing or not a number", what, f->key);
    double x = yc_json_number(v);
    if (!(x >= f->lo && x <= f->hi))
        return yc_error_status(YC_EFORMAT, "%s: '%s' is %s, expected a number from %g to %g",
                               what, f->key, yc_json_number_text(v), f->lo, f->hi);
    if (f->type != YC_FIELD_FLOAT && f->type != YC_FIELD_DOUBLE && x != floor(x))
        return yc_error_status(YC_EFORMAT, "%s: '%s' is %g, expected an integer", what, f->key,
                               x);
    *out = x;
    return YC_OK;
}

/* A string: absent or null is NULL; another type an error. */
static int get_str(const yc_json *root, const yc_field *f, const char *what, char **out)
{
    *out = NULL;
    const yc_json *v = yc_json_get(root, f->key);
    if (!v || yc_json_typeof(v) == YC_JSON_NULL)
        return YC_OK;
    if (yc_json_typeof(v) != YC_JSON_STRING || strlen(yc_json_string(v)) != yc_json_string_len(v))
        return yc_error_status(YC_EFORMAT, "%s: '%s' is not a string", what, f->key);
    *out = yc_strdup(yc_json_string(v), "options");
    return *out ? YC_OK : YC_ENOMEM;
}

static int get_ints(const yc_json *root, const yc_field *f, const char *what, void *obj)
{
    const yc_json *a = yc_json_get(root, f->key);
    int *n = AT(obj, f->count_offset, int);
    int *v = AT(obj, f->offset, int);
    *n = 0;
    if (!a)
        return YC_OK;
    if (yc_json_typeof(a) != YC_JSON_ARRAY || yc_json_len(a) > (size_t)f->max_count)
        return yc_error_status(YC_EFORMAT, "%s: '%s' is not a list of at most %d entries", what,
                               f->key, f->max_count);
    for (size_t i = 0; i < yc_json_len(a); i++) {
        const yc_json *e = yc_json_at(a, i);
        double x = yc_json_number(e);
        if (yc_json_typeof(e) != YC_JSON_NUMBER || !(x >= f->lo && x <= f->hi) || x != floor(x))
            return yc_error_status(YC_EFORMAT, "%s: '%s' entry %zu is not an integer from %g to "
                                   "%g", what, f->key, i, f->lo, f->hi);
        v[(*n)++] = (int)x;
    }
    return YC_OK;
}

static int get_field(const yc_json *root, const yc_field *f, const char *what, void *obj,
                     char **str)
{
    double x = 0;
    int st = YC_OK;
    switch (f->type) {
    case YC_FIELD_BOOL: {
        const yc_json *v = yc_json_get(root, f->key);
        *AT(obj, f->offset, bool) = v && yc_json_typeof(v) == YC_JSON_BOOL && yc_json_bool(v);
        break;
    }
    case YC_FIELD_INT:
        if (!(st = get_num(root, f, what, &x)))
            *AT(obj, f->offset, int) = (int)x;
        break;
    case YC_FIELD_FLOAT:
        if (!(st = get_num(root, f, what, &x)))
            *AT(obj, f->offset, float) = (float)x;
        break;
    case YC_FIELD_DOUBLE:
        if (!(st = get_num(root, f, what, &x)))
            *AT(obj, f->offset, double) = x;
        break;
    case YC_FIELD_SIZE:
        if (!(st = get_num(root, f, what, &x)))
            *AT(obj, f->offset, size_t) = (size_t)x;
        break;
    case YC_FIELD_STR:
        if (!(st = get_str(root, f, what, str)))
            *AT(obj, f->offset, const char *) = *str ? *str : f->str_def;
        break;
    case YC_FIELD_ENUM: {
        char *name = NULL;
        int v;
        if (!(st = get_str(root, f, what, &name)) && name) {
            if ((st = f->enum_parse(name, &v)))
                st = yc_error_status(YC_EFORMAT, "%s: %s", what, yc_last_error());
            else
                *AT(obj, f->offset, int) = v;
        }
        free(name);
        break;
    }
    case YC_FIELD_INTS:
        st = get_ints(root, f, what, obj);
        break;
    case YC_FIELD_END:
        break;
    }
    return st;
}

int yc_fields_from_json(const yc_field *fields, void *obj, const char *text, const char *what,
                        char **strings, int nstrings)
{
    for (int i = 0; i < nstrings; i++)
        strings[i] = NULL;
    yc_json *root = NULL;
    int st = yc_json_parse(&root, text, strlen(text));
    if (st)
        return yc_error_context(st, "%s", what);
    if (yc_json_typeof(root) != YC_JSON_OBJECT) {
        yc_json_free(root);
        return yc_error_status(YC_EFORMAT, "%s: not a JSON object", what);
    }
    int ns = 0;
    for (const yc_field *f = fields; !st && f->type != YC_FIELD_END; f++) {
        if (!(f->flags & YC_FIELD_RESTORE))
            continue;
        char *s = NULL;
        st = get_field(root, f, what, obj, &s);
        if (f->type == YC_FIELD_STR) {
            if (ns < nstrings)
                strings[ns++] = s;
            else
                free(s); /* LCOV_EXCL_LINE: the caller gives a slot per restored string */
        }
    }
    yc_json_free(root);
    if (st) {
        /* no pointer into the strings freed here stays in obj */
        for (const yc_field *f = fields; f->type != YC_FIELD_END; f++)
            if (f->type == YC_FIELD_STR && (f->flags & YC_FIELD_RESTORE))
                *AT(obj, f->offset, const char *) = f->str_def;
        for (int i = 0; i < nstrings; i++) {
            free(strings[i]);
            strings[i] = NULL;
        }
    }
    return st;
}
