/* A write-only protocol buffers encoder: enough of the wire format
 * (https://protobuf.dev/programming-guides/encoding/) to write ONNX files (onnx.c) without a
 * protobuf library.  A message is built in a growable byte buffer, field by field in the order
 * the caller writes them; a nested message is built in a buffer of its own and appended as a
 * length-delimited field (its size must be known before its bytes, so it cannot be streamed).
 *
 * Wire types used: 0 (varint: int32, int64, enums, bool; negative numbers as 10 bytes of two's
 * complement, as protobuf writes int64) and 2 (length-delimited: strings, bytes, nested
 * messages, packed repeated scalars), plus 5 (fixed32: float).
 *
 * Errors are sticky: the first failed allocation is remembered (yc_pb.status) and every later
 * call does nothing, so a builder writes its fields unconditionally and checks once. */
#ifndef YC_PB_H
#define YC_PB_H

#include <stddef.h>
#include <stdint.h>

typedef struct yc_pb {
    /* the encoded bytes (n used of cap) */
    uint8_t *d;
    size_t n, cap;
    /* YC_OK, or the status of the first failure (YC_ENOMEM) */
    int status;
} yc_pb;

/* An empty buffer (no allocation yet). */
#define YC_PB_INIT {NULL, 0, 0, 0}

void yc_pb_free(yc_pb *b);

/* Field `field` as a varint (wire type 0): uint64 as it is, int64 as its two's complement. */
void yc_pb_varint(yc_pb *b, int field, uint64_t v);
void yc_pb_int(yc_pb *b, int field, int64_t v);
/* Field `field` as a float (wire type 5, little-endian IEEE 754). */
void yc_pb_float(yc_pb *b, int field, float v);
/* Field `field` as length-delimited bytes (wire type 2): strings, bytes. */
void yc_pb_bytes(yc_pb *b, int field, const void *data, size_t len);
void yc_pb_string(yc_pb *b, int field, const char *s);
/* Field `field` as a nested message: the bytes of `sub`, whose status is carried over (a failed
 * sub-message fails b).  sub is freed and emptied. */
void yc_pb_message(yc_pb *b, int field, yc_pb *sub);
/* Appends fields already encoded in `fields` (the same message built in parts), status carried
 * over. */
void yc_pb_raw(yc_pb *b, const yc_pb *fields);

#endif
