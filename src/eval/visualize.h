/* detect --visualize: YOLOv5 v7.0 utils/plots.py feature_visualization for every layer of one
 * forward pass (detect.py calls it from _forward_once for each module but Detect).
 *
 * For layer i of type T (the last part of its YOLOv5 type name: Conv, C3, SPPF, Upsample,
 * Concat) whose output of image 0 is (c, h, w) with h > 1 and w > 1, into dir:
 *   stage{i}_{T}_features.png  the first min(32, c) channels in a grid of 8 columns, each
 *                              scaled to its own minimum and maximum and coloured with
 *                              viridis (matplotlib's imshow defaults), nearest-neighbour
 *                              enlarged so that a tile is at least 128 pixels on its long side,
 *                              4 white pixels between tiles;
 *   stage{i}_{T}_features.npy  the whole (c, h, w) output as float32, little-endian, C order,
 *                              in NumPy's .npy format 1.0 (written directly: numpy.load reads
 *                              it; no NumPy is needed to write it).
 * and prints "Saving <png>... (n/c)" as YOLOv5 does.  Differences: YOLOv5's figure is a
 * matplotlib page (dpi 300, axes off, tight layout); the tiles here are the channels' pixels. */
#ifndef YC_VISUALIZE_H
#define YC_VISUALIZE_H

#include <stddef.h>

#include "graph.h"
#include "model.h"

/* The feature maps of every layer but Detect of g (an evaluation graph made with keep_layers,
 * after yc_graph_forward) into the existing directory dir.  Status of the first failure (a read,
 * an allocation, a file), naming the file. */
int yc_visualize_features(yc_model *m, yc_graph *g, const char *dir);

/* detect.py's increment_path(save_dir / stem, mkdir=True): parent/stem, else parent/stem2, ...,
 * created, into out. */
int yc_visualize_dir(const char *parent, const char *stem, char *out, size_t len);

/* The .npy file of a float32 array of `ndim` dimensions `shape` (at most 4) at path. */
int yc_write_npy(const char *path, const float *data, const int *shape, int ndim);

#endif
