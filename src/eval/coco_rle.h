/* COCO run-length encoding of binary masks, as pycocotools' mask.encode writes it
 * (maskApi.c rleEncode and rleToString), for segment/val.py's --save-json: each detection's
 * mask at the original image size is encoded and saved as {"size": [h, w], "counts": "..."}.
 *
 * rleEncode reads the h x w mask in column-major (Fortran) order and counts alternating runs of
 * 0s and 1s, starting with 0s (a mask whose first pixel is set starts with a run of length 0).
 * rleToString writes each count, from the third on as the difference to the count two places
 * before, as a signed LEB128-like string: 5 bits a character, 0x20 marking more to come, the
 * sign taken from bit 0x10 of the last character, each character offset by 48 ('0'). */
#ifndef YC_COCO_RLE_H
#define YC_COCO_RLE_H

#include <stddef.h>
#include <stdint.h>

/* The runs of an h x w mask (row-major, nonzero inside) read in column-major order: counts
 * receives the run lengths (at most h * w + 1 of them; the caller gives that room), the count
 * is returned.  An empty mask (h * w == 0) has no runs. */
size_t yc_rle_encode(const uint8_t *mask, int h, int w, uint32_t *counts);

/* rleToString of n counts into buf (NUL-terminated; at most yc_rle_string_cap(n) bytes with the
 * NUL).  Returns the string's length. */
size_t yc_rle_to_string(const uint32_t *counts, size_t n, char *buf);

/* Room yc_rle_to_string needs for n counts: 7 characters a count (a difference of two 32-bit
 * counts fits 34 bits) and the NUL. */
static inline size_t yc_rle_string_cap(size_t n)
{
    return n * 7 + 1;
}

/* The JSON object segment/val.py saves for the mask, formatted as json.dump writes it:
 * {"size": [h, w], "counts": "..."} with the string escaped (its characters '0'..'o' include the
 * backslash).  A new heap string (free with free()); NULL with YC_ENOMEM recorded. */
char *yc_rle_json(const uint8_t *mask, int h, int w);

#endif
