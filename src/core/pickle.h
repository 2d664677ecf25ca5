/* A Python pickle reader that never executes anything: the subset of the pickle virtual machine
 * (protocols 2 to 5, plus the protocol-1 string opcodes) that torch.save writes, turned into a
 * tree of plain values.
 *
 * GLOBAL and STACK_GLOBAL produce symbolic globals: nothing is imported or looked up.  REDUCE
 * (calling a global with arguments) is interpreted for the few callables a torch checkpoint uses
 * (collections.OrderedDict, builtins.set and frozenset, copyreg._reconstructor,
 * torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter[_with_state]); any other
 * call produces an opaque object value (class and arguments) that the caller may inspect or
 * refuse.  NEWOBJ creates an object; BUILD stores its state (that is how nn.Module instances
 * appear: an object whose state is the module's __dict__).  Persistent ids (BINPERSID) are kept as
 * values for the caller to resolve.  Calls (REDUCE, NEWOBJ) of globals that a checkpoint never
 * needs (os.*, subprocess.*, builtins.eval, ...) are refused with an error, since only a
 * malicious file asks for them; builtins.getattr is refused too except on a class of YOLOv5's
 * `models.` package with a plain attribute name (no "__"), which is how a segmentation
 * checkpoint stores Segment's `detect = Detect.forward` (an opaque object, nothing looked up).
 *
 * Every read is bounds-checked; malformed input is an error naming the byte offset and the
 * opcode, never a crash.  The number of values, the memo, the stack, the MARK nesting and string
 * sizes are capped (yc_pk_limits).  Values may share and even contain each other (the memo makes
 * cycles possible), so code walking a value tree must limit its depth (YC_PK_MAX_DEPTH). */
#ifndef YC_PICKLE_H
#define YC_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deepest nesting that yc_pk_describe and yolocl's walkers follow. */
#define YC_PK_MAX_DEPTH 100
/* Most dimensions of a rebuilt tensor. */
#define YC_PK_MAX_DIMS 8

typedef enum yc_pk_kind {
    YC_PK_NONE,
    YC_PK_BOOL,
    YC_PK_INT,    /* an integer that fits int64 */
    YC_PK_BIGINT, /* an integer that does not (its value is not kept) */
    YC_PK_FLOAT,
    YC_PK_STR,   /* text (valid UTF-8) */
    YC_PK_BYTES, /* bytes, bytearray, and protocol-1 strings */
    YC_PK_TUPLE,
    YC_PK_LIST,
    YC_PK_SET, /* set and frozenset */
    YC_PK_DICT, /* dict and collections.OrderedDict */
    YC_PK_GLOBAL, /* a named module attribute (class or function), never resolved */
    YC_PK_OBJECT, /* an instance (NEWOBJ) or the result of calling an unknown global */
    YC_PK_PERSID, /* a persistent id for the caller to resolve (torch: a storage) */
    YC_PK_TENSOR, /* a tensor view of a storage (torch._utils._rebuild_tensor_v2) */
} yc_pk_kind;

typedef struct yc_pk_value yc_pk_value;

/* A tensor as _rebuild_tensor_v2 describes it: a strided view of a storage. */
typedef struct yc_pk_tensor {
    /* the storage argument as pickled (a YC_PK_PERSID value for torch.save files) */
    const yc_pk_value *storage;
    /* element offset of the first element in the storage */
    int64_t offset;
    /* dimensions, sizes and strides in elements (sizes >= 0, strides >= 0) */
    int ndim;
    int64_t size[YC_PK_MAX_DIMS], stride[YC_PK_MAX_DIMS];
    /* requires_grad as pickled */
    bool requires_grad;
} yc_pk_tensor;

/* One value.  Values are owned by the yc_pickle that produced them; read them, never modify. */
struct yc_pk_value {
    /* what the value is; selects the member of `u` */
    yc_pk_kind kind;
    /* byte offset in the pickle of the opcode that created the value, for messages */
    size_t pos;
    union {
        /* YC_PK_BOOL */
        bool b;
        /* YC_PK_INT */
        int64_t i;
        /* YC_PK_FLOAT */
        double f;
        /* YC_PK_STR and YC_PK_BYTES: `len` bytes plus a terminating NUL (a string may contain
         * NUL bytes, so check strlen(data) == len before using it as a C string) */
        struct {
            char *data;
            size_t len;
        } str;
        /* YC_PK_TUPLE, YC_PK_LIST and YC_PK_SET: items in order */
        struct {
            yc_pk_value **items;
            size_t n, cap;
        } seq;
        /* YC_PK_DICT: keys[i] maps to values[i], in insertion order.  Keys are not compared when
         * they are set: a key set twice appears twice, and yc_pk_dict_get returns the later
         * value, as Python would */
        struct {
            yc_pk_value **keys, **values;
            size_t n, cap;
        } dict;
        /* YC_PK_GLOBAL: module (Python 2 names mapped to Python 3) and qualified name */
        struct {
            char *module, *name;
        } global;
        /* YC_PK_OBJECT: the class or callable (usually a YC_PK_GLOBAL), the arguments (a tuple, or
         * NULL), and the state given by BUILD (NULL when none; usually a dict) */
        struct {
            const yc_pk_value *cls, *args, *state;
        } obj;
        /* YC_PK_PERSID: the persistent id (torch: ('storage', cls, key, location, numel)) */
        const yc_pk_value *persid;
        /* YC_PK_TENSOR */
        yc_pk_tensor *tensor;
    } u;
};

/* Caps against hostile input (every field > 0). */
typedef struct yc_pk_limits {
    /* values created in total */
    size_t max_values;
    /* highest memo index + 1 */
    size_t max_memo;
    /* items on the stack at once */
    size_t max_stack;
    /* MARKs open at once */
    size_t max_marks;
    /* bytes in one string or bytes value */
    size_t max_string;
} yc_pk_limits;

/* The defaults: 8M values, 4M memo entries, 4M stack items, 1000 open MARKs, 256 MiB strings. */
void yc_pk_default_limits(yc_pk_limits *limits);

/* A loaded pickle: owns every value. */
typedef struct yc_pickle yc_pickle;

/* Runs the pickle in data[0..len) up to STOP.  `limits` may be NULL (defaults).  On success *root
 * is the unpickled value; on failure *out is NULL and the message reads
 * "pickle byte N (OPCODE): what is wrong" (YC_EFORMAT, YC_EUNSUPPORTED or YC_ENOMEM). */
int yc_pk_load(yc_pickle **out, const yc_pk_value **root, const void *data, size_t len,
               const yc_pk_limits *limits);
void yc_pk_free(yc_pickle *p);

/* Value for the string key `key` in a dict (NULL if absent, or if `dict` is not a dict). */
const yc_pk_value *yc_pk_dict_get(const yc_pk_value *dict, const char *key);
/* True when v is a YC_PK_STR equal to s (and free of NUL bytes). */
bool yc_pk_is_str(const yc_pk_value *v, const char *s);
/* True when v is the global module.name. */
bool yc_pk_is_global(const yc_pk_value *v, const char *module, const char *name);
/* True when v is None (or NULL). */
bool yc_pk_is_none(const yc_pk_value *v);
/* "dict", "object", ... */
const char *yc_pk_kind_name(yc_pk_kind kind);
/* A short description for messages: "object models.yolo.Model", "str 'abc'", "list of 3 items",
 * "tensor [16, 3, 6, 6]". */
void yc_pk_describe(const yc_pk_value *v, char *buf, size_t len);

#endif
