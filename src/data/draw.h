/* Drawing on RGB images in plain C, saved through libvips.
 *
 * A canvas is an RGB uint8 image in HWC order (3 bytes per pixel, rows packed).  Everything is
 * drawn with integer arithmetic and a built-in 5x7 bitmap font, so plots look the same on every
 * machine, need no fonts installed and are byte-identical from run to run (vips_text would need
 * fontconfig and Pango and renders differently with every font set).
 *
 * Coordinates are pixels, x to the right and y down.  Rectangles are given by their inclusive
 * corner pixels (x0, y0)-(x1, y1), as OpenCV does.  Everything is clipped to the canvas.
 *
 * The plots drawn with it are declared in plots.h, the results.csv reader in results_csv.h; this
 * header includes both for its callers that plot. */
#ifndef YC_DRAW_H
#define YC_DRAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An 8-bit RGB colour. */
typedef struct yc_rgb {
    /* red, green and blue, 0-255 */
    uint8_t r, g, b;
} yc_rgb;

/* An RGB uint8 HWC image to draw on. */
typedef struct yc_canvas {
    /* pixels: row y starts at px + 3 * w * y */
    uint8_t *px;
    /* width and height in pixels */
    int w, h;
    /* the canvas allocated px and frees it in yc_canvas_free() */
    bool owned;
} yc_canvas;

/* Allocates a w x h canvas filled with `fill`. */
int yc_canvas_init(yc_canvas *c, int w, int h, yc_rgb fill);
/* A canvas over caller-owned pixels (RGB HWC, 3 * w * h bytes); yc_canvas_free leaves them. */
yc_canvas yc_canvas_wrap(uint8_t *px, int w, int h);
/* Frees owned pixels and clears the struct (safe on a zeroed or already freed canvas). */
void yc_canvas_free(yc_canvas *c);
/* Encodes to JPEG (.jpg/.jpeg, quality 90) or PNG (.png), chosen by the extension, and writes
 * the file atomically (temporary file + rename). */
int yc_canvas_save(const yc_canvas *c, const char *path);

/* In-memory image encodings. */
typedef enum yc_image_format {
    /* baseline JPEG, 4:2:0 chroma */
    YC_IMAGE_JPEG,
    /* PNG, compression 6 */
    YC_IMAGE_PNG,
} yc_image_format;

/* Encodes RGB HWC pixels (3 * w * h bytes) with libvips (started through image.h's
 * yc_vips_init); `quality` (1-100) applies to JPEG.  On success *buf holds *len bytes, to be
 * released with yc_encoded_free.  The output depends only on the pixels and the parameters (no
 * timestamps), so equal pixels give equal bytes. */
int yc_encode_rgb(const uint8_t *px, int w, int h, yc_image_format format, int quality,
                  void **buf, size_t *len);
void yc_encoded_free(void *buf);

/* YOLOv5's class colour palette (utils/plots.py Colors, 20 colours, cycled for cls >= 20). */
yc_rgb yc_color_class(int cls);
/* "#RRGGBB" or "RRGGBB" to a colour; YC_EFORMAT on anything else. */
int yc_color_parse(const char *hex, yc_rgb *out);

/* Sets one pixel (ignored outside the canvas). */
void yc_draw_pixel(yc_canvas *c, int x, int y, yc_rgb color);
/* Fills the rectangle (x0, y0)-(x1, y1), corners inclusive, in any order. */
void yc_draw_fill_rect(yc_canvas *c, int x0, int y0, int x1, int y1, yc_rgb color);
/* The outline of the rectangle (x0, y0)-(x1, y1): the `thickness` outermost rows and columns of
 * that rectangle, so a box never grows past its corners; thickness < 1 counts as 1. */
void yc_draw_box(yc_canvas *c, int x0, int y0, int x1, int y1, int thickness, yc_rgb color);
/* A filled disc of radius r centred on (cx, cy). */
void yc_draw_disc(yc_canvas *c, double cx, double cy, double r, yc_rgb color);
/* A straight line of the given thickness (round caps). */
void yc_draw_line(yc_canvas *c, double x0, double y0, double x1, double y1, int thickness,
                  yc_rgb color);
/* A polyline through n points; dash > 0 draws dashes and gaps of `dash` pixels (matplotlib ':'
 * and '--' styles), 0 a solid line.  Points with a non-finite coordinate break the line. */
void yc_draw_polyline(yc_canvas *c, const double *x, const double *y, int n, int thickness,
                      int dash, yc_rgb color);

/* Width and height in pixels of `text` in the built-in font at an integer `scale` (>= 1): each
 * character is 5x7 font pixels plus one column of spacing, each font pixel scale x scale. */
int yc_text_width(const char *text, int scale);
int yc_text_height(int scale);
/* Draws `text` with its top-left corner at (x, y).  Characters outside printable ASCII are drawn
 * as '?'. */
void yc_draw_text(yc_canvas *c, int x, int y, const char *text, int scale, yc_rgb color);
/* Draws `text` rotated 90 degrees counter-clockwise (reading upwards); (x, y) is the bottom-left
 * corner of the rotated text, which then covers x .. x + yc_text_height - 1 and
 * y - yc_text_width + 1 .. y. */
void yc_draw_text_up(yc_canvas *c, int x, int y, const char *text, int scale, yc_rgb color);
/* YOLOv5's Annotator.box_label: the box outline, and when `label` is non-empty the label in white
 * on a filled box of the box colour, above the box or inside its top when there is no room. */
void yc_draw_label(yc_canvas *c, int x0, int y0, int x1, int y1, const char *label, int thickness,
                   int text_scale, yc_rgb color);
/* yc_draw_label on a canvas that holds only a part of the picture being annotated, the part whose
 * top-left pixel is (ox, oy) of the picture: the box corners are picture pixels, and whether the
 * label fits above the box is decided against the picture's top row, not the canvas's.  Drawing a
 * picture part by part with the parts' origins therefore gives the same pixels as drawing it
 * whole (yc_draw_label is the case ox = oy = 0). */
void yc_draw_label_at(yc_canvas *c, int ox, int oy, int x0, int y0, int x1, int y1,
                      const char *label, int thickness, int text_scale, yc_rgb color);
/* The smallest rectangle holding every pixel yc_draw_label(_at) may change for these arguments
 * (the box and its label), as inclusive picture corners x0, y0, x1, y1 in bounds[0..3]. */
void yc_label_bounds(int x0, int y0, int x1, int y1, const char *label, int text_scale,
                     int bounds[4]);

/* The plots of YOLOv5 and the results.csv reader, which have their own headers. */
#include "plots.h"
#include "results_csv.h"

#endif
