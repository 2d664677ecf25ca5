/* Fuzz target: PyTorch .pt files as a whole (src/core/zip.c: end records, ZIP64, central directory,
 * local headers, CRC-32; then src/core/pickle.c and src/core/ptfile.c on what the archive holds), through
 * the low-level zip API (yc_zip_open, every entry read whole with yc_zip_read_all and in part
 * with yc_zip_read) and as weights (yc_weights_read, which `yolocl train --weights x.pt` uses).
 * The input is the file.  (fuzz_pickle.c wraps its input in a valid archive instead, so that the
 * pickle reader is reached without the CRC in the way.) */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_weights_common.h"
#include "log.h"
#include "zip.h"

static void low_level(const char *path)
{
    yc_zip *z = NULL;
    fuzz_begin();
    int st = yc_zip_open(&z, path);
    fuzz_check(st, "yc_zip_open");
    if (st)
        return;
    for (int i = 0; i < yc_zip_count(z); i++) {
        const yc_zip_entry *e = yc_zip_get(z, i);
        if (!e || !e->name || yc_zip_find(z, e->name) != e)
            fuzz_fail("zip entry unreadable or not found by its name");
        char *all = NULL;
        size_t n = 0;
        fuzz_begin();
        st = yc_zip_read_all(z, e, 1 << 20, &all, &n);
        fuzz_check(st, "yc_zip_read_all");
        if (!st && (n != e->size || all[n] != '\0'))
            fuzz_fail("yc_zip_read_all: size or terminator wrong");
        free(all);
        char part[16];
        size_t len = e->size < sizeof part ? (size_t)e->size : sizeof part;
        fuzz_begin();
        fuzz_check(yc_zip_read(z, e, e->size - len, part, len), "yc_zip_read");
    }
    yc_zip_close(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    const char *path = fuzz_write("w.pt", data, size);
    if (!path)
        abort();
    low_level(path);
    fuzz_weights_file(path);
    return 0;
}
