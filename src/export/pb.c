/* The protocol buffers encoder of pb.h. */
#include "pb.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void yc_pb_free(yc_pb *b)
{
    free(b->d);
    *b = (yc_pb)YC_PB_INIT;
}

/* Room for `more` bytes after the used ones; false (and b->status set) when it cannot grow. */
static bool reserve(yc_pb *b, size_t more)
{
    if (b->status)
        return false;
    if (more <= b->cap - b->n)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < more) {
        if (cap > SIZE_MAX / 2) {
            b->status = yc_error_status(YC_ENOMEM, "an ONNX message over %zu bytes", b->n);
            return false;
        }
        cap *= 2;
    }
    uint8_t *d = yc_realloc(b->d, cap, "an ONNX message being encoded");
    if (!d) {
        b->status = YC_ENOMEM;
        return false;
    }
    b->d = d;
    b->cap = cap;
    return true;
}

/* A bare varint: 7 bits a byte, low bits first, the high bit set on every byte but the last. */
static void put_varint(yc_pb *b, uint64_t v)
{
    if (!reserve(b, 10))
        return;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        b->d[b->n++] = byte | (v ? 0x80 : 0);
    } while (v);
}

/* The key of a field: (field number << 3) | wire type. */
static void put_key(yc_pb *b, int field, int wire)
{
    put_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

void yc_pb_varint(yc_pb *b, int field, uint64_t v)
{
    put_key(b, field, 0);
    put_varint(b, v);
}

void yc_pb_int(yc_pb *b, int field, int64_t v)
{
    yc_pb_varint(b, field, (uint64_t)v);
}

void yc_pb_float(yc_pb *b, int field, float v)
{
    put_key(b, field, 5);
    uint32_t u;
    memcpy(&u, &v, 4);
    if (!reserve(b, 4))
        return;
    for (int i = 0; i < 4; i++)
        b->d[b->n++] = (uint8_t)(u >> (8 * i));
}

void yc_pb_bytes(yc_pb *b, int field, const void *data, size_t len)
{
    put_key(b, field, 2);
    put_varint(b, len);
    if (len && reserve(b, len)) {
        memcpy(b->d + b->n, data, len);
        b->n += len;
    }
}

void yc_pb_string(yc_pb *b, int field, const char *s)
{
    yc_pb_bytes(b, field, s, strlen(s));
}

void yc_pb_message(yc_pb *b, int field, yc_pb *sub)
{
    if (sub->status && !b->status)
        b->status = sub->status;
    yc_pb_bytes(b, field, sub->d, sub->n);
    yc_pb_free(sub);
}

void yc_pb_raw(yc_pb *b, const yc_pb *fields)
{
    if (fields->status && !b->status)
        b->status = fields->status;
    if (fields->n && reserve(b, fields->n)) {
        memcpy(b->d + b->n, fields->d, fields->n);
        b->n += fields->n;
    }
}
