/* Fields of a C struct described by a table (JSON key, type, offset, range), written to a JSON
 * object and read back from one by that table alone.  yolocl train saves its options this way
 * (src/train/train_opts.c: checkpoints and opt.yaml, restored by --resume), and the command-line
 * tables of src/cli/options.h refer to the same rows for a field's type and place. */
#ifndef YC_FIELD_H
#define YC_FIELD_H

#include <stdbool.h>
#include <stddef.h>

typedef enum yc_field_type {
    YC_FIELD_END = 0, /* ends a table */
    YC_FIELD_BOOL,    /* bool */
    YC_FIELD_INT,     /* int, an integer in [lo, hi] */
    YC_FIELD_FLOAT,   /* float, a number in [lo, hi] */
    YC_FIELD_DOUBLE,  /* double, a number in [lo, hi] */
    YC_FIELD_SIZE,    /* size_t, a number in [lo, hi] */
    YC_FIELD_STR,     /* const char *; a restored string is a heap copy the caller keeps */
    YC_FIELD_ENUM,    /* int (an enum) written as the name enum_name gives, read by enum_parse */
    YC_FIELD_INTS,    /* int[max_count] with its count in the int at count_offset: a list */
} yc_field_type;

/* flags */
enum {
    YC_FIELD_RESTORE = 1 << 0,  /* read back (train: --resume restores it); else only written */
    YC_FIELD_OPTIONAL = 1 << 1, /* a number that may be absent (then def); else it must be there */
};

typedef struct yc_field {
    const char *key;
    yc_field_type type;
    size_t offset;
    unsigned flags;
    /* numbers and list entries read back: the range accepted (the command line's, with the
     * "unset" value where the field can hold one) */
    double lo, hi;
    /* YC_FIELD_OPTIONAL: the value of an absent number */
    double def;
    /* YC_FIELD_STR: the value of an absent or null string (may be NULL) */
    const char *str_def;
    /* YC_FIELD_ENUM: the name of a value (NULL: written as null) and the value of a name (0 or
     * a status with the message) */
    const char *(*enum_name)(int v);
    int (*enum_parse)(const char *name, int *v);
    /* YC_FIELD_INTS: where the count is, and the most entries */
    size_t count_offset;
    int max_count;
} yc_field;

/* The row of `fields` with this key, or NULL. */
const yc_field *yc_field_find(const yc_field *fields, const char *key);

/* The fields of obj as one JSON object, in table order: numbers with %.17g, bools, strings
 * (null for NULL), enums by name, lists as arrays.  A heap string, NULL when out of memory. */
char *yc_fields_to_json(const yc_field *fields, const void *obj);

/* Reads the YC_FIELD_RESTORE fields of obj from a JSON object's text.  A number must be present
 * (unless YC_FIELD_OPTIONAL) and in its range; a bool absent or of another type is false; a
 * string absent or null is str_def; an enum absent or null is left as it is; a list absent is
 * empty.  Restored strings are heap copies stored in obj and also in strings[] (in table order,
 * one slot per YC_FIELD_STR field that is restored, NULL where none was read), for the caller
 * to free.  Messages start with `what` ("checkpoint options: 'epochs' is ...").  On an error
 * YC_EFORMAT (or YC_ENOMEM), obj may be partly set and every string is freed. */
int yc_fields_from_json(const yc_field *fields, void *obj, const char *text, const char *what,
                        char **strings, int nstrings);

#endif
