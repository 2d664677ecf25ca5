/* What the safetensors, pt and pickle fuzz targets do with a weights file once it is written:
 * read it as `yolocl train --weights` / `val --weights` do (yc_weights_read), then take the
 * class count from the Detect head and resolve the embedded model config. */
#ifndef YC_FUZZ_WEIGHTS_COMMON_H
#define YC_FUZZ_WEIGHTS_COMMON_H

/* Reads `path` with yc_weights_read and uses what it returns; aborts on a broken promise. */
void fuzz_weights_file(const char *path);

#endif
