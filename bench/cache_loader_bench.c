/* The data path of whole-image training alone with and without the image cache (issue 26): the
 * training loader over a dataset's train split (default hyperparameters: mosaic on), no model,
 * for a few epochs.  Prints per epoch the wall time, the process's CPU time and the images per
 * second, then the cache's counts and the peak RSS, so that what --cache saves can be told apart
 * from the model's time (which dominates a training epoch on a CPU).
 *
 *   bench/cache_loader_bench DATA.yaml none|ram|disk [IMGSZ] [EPOCHS] [BATCH] [WORKERS]
 *
 * Defaults: 640, 3 epochs, batch 16, 2 loader threads.  Built with
 * `make bench/cache_loader_bench`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dataset.h"
#include "hyp.h"
#include "imgcache.h"
#include "loader.h"
#include "log.h"
#include "util.h"

static int arg_int(int argc, char **argv, int i, int def)
{
    return argc > i ? atoi(argv[i]) : def;
}

/* User plus system CPU seconds of the whole process so far (every loader thread). */
static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    yc_cache_kind kind = YC_CACHE_NONE;
    if (argc < 3 || (strcmp(argv[2], "none") != 0 && !yc_cache_kind_parse(argv[2], &kind))) {
        fprintf(stderr, "usage: %s DATA.yaml none|ram|disk [IMGSZ] [EPOCHS] [BATCH] [WORKERS]\n",
                argv[0]);
        return 2;
    }
    int imgsz = arg_int(argc, argv, 3, 640), epochs = arg_int(argc, argv, 4, 3);
    int batch = arg_int(argc, argv, 5, 16), workers = arg_int(argc, argv, 6, 2);
    yc_data_yaml y;
    yc_dataset ds;
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    int st = yc_data_yaml_load(argv[1], &y);
    yc_dataset_options dopt = {.nc = st ? 1 : y.nc, .prefix = "train: "};
    if (!st)
        st = yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &dopt, &ds);
    if (st) {
        fprintf(stderr, "cache_loader_bench: %s\n", yc_last_error());
        return 1;
    }
    yc_loader_options lo = {.ds = &ds, .train = true, .hyp = &hyp, .imgsz = imgsz,
                            .batch = batch, .stride = 32, .workers = workers, .seed = 0,
                            .cache = kind};
    yc_loader *l = NULL;
    if ((st = yc_loader_new(&l, &lo))) {
        fprintf(stderr, "cache_loader_bench: %s\n", yc_last_error());
        return 1;
    }
    printf("%zu images at %d, batch %d, %d loader threads, --cache %s%s%s\n", ds.n, imgsz, batch,
           workers, yc_cache_kind_name(kind), kind == YC_CACHE_DISK ? " in " : "",
           kind == YC_CACHE_DISK ? yc_loader_cache_dir(l) : "");
    for (int e = 0; e < epochs && !st; e++) {
        double t0 = yc_now(), c0 = cpu_seconds();
        int images = 0;
        st = yc_loader_start(l, e, NULL, 0);
        for (const yc_batch *b = NULL; !st;) {
            if ((st = yc_loader_next(l, &b)) || !b)
                break;
            images += b->n;
        }
        double dt = yc_now() - t0, dc = cpu_seconds() - c0;
        if (!st)
            printf("epoch %d: %d images in %.2f s (%.1f images/s), %.2f CPU s\n", e, images, dt,
                   dt > 0 ? images / dt : 0.0, dc);
    }
    if (st) {
        fprintf(stderr, "cache_loader_bench: %s\n", yc_last_error());
        return 1;
    }
    yc_img_cache_stats cs = yc_loader_cache_stats(l);
    printf("cache: %zu hits, %zu images kept, %zu files written; peak RSS %.0f MiB\n", cs.hits,
           cs.stores, cs.writes, (double)yc_peak_rss() / (1024.0 * 1024.0));
    yc_loader_free(l);
    yc_dataset_free(&ds);
    yc_data_yaml_free(&y);
    return 0;
}
