/* The data path of tiled training alone (issue 7): the training loader over the tiles of a
 * dataset's train split, with the default hyperparameters (mosaic on), no model.  Prints the tiles
 * per second, the peak RSS and what the threads' readers did.
 *
 *   bench/tile_loader_bench DATA.yaml TILE [BATCHES] [BATCH] [WORKERS] [IMGSZ]
 *
 * Defaults: 8 batches of 8 tiles, 2 loader threads, image size TILE.  Built with
 * `make bench/tile_loader_bench`; bench/tile_bench.sh runs it when it exists. */
#include <stdio.h>
#include <stdlib.h>

#include "dataset.h"
#include "hyp.h"
#include "loader.h"
#include "log.h"
#include "tileset.h"
#include "util.h"

static int arg_int(int argc, char **argv, int i, int def)
{
    return argc > i ? atoi(argv[i]) : def;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATA.yaml TILE [BATCHES] [BATCH] [WORKERS] [IMGSZ]\n",
                argv[0]);
        return 2;
    }
    int tile = atoi(argv[2]), batches = arg_int(argc, argv, 3, 8);
    int batch = arg_int(argc, argv, 4, 8), workers = arg_int(argc, argv, 5, 2);
    int imgsz = arg_int(argc, argv, 6, tile);
    yc_data_yaml y;
    yc_dataset ds;
    yc_tileset ts;
    yc_hyp hyp;
    yc_hyp_defaults(&hyp);
    yc_tile_options to;
    yc_tile_options_default(&to);
    to.tile = tile;
    yc_dataset_options dopt = {.nc = 1, .prefix = "train: ", .no_cache = true};
    int st = yc_data_yaml_load(argv[1], &y);
    if (!st)
        st = yc_dataset_load_split(&y, YC_SPLIT_TRAIN, &dopt, &ds);
    if (!st)
        st = yc_tileset_make(&ds, &to, &ts);
    if (st) {
        fprintf(stderr, "tile_loader_bench: %s\n", yc_last_error());
        return 1;
    }
    yc_tileset_report(&ts, "train: ");
    yc_loader_options lo = {.ds = &ds, .train = true, .hyp = &hyp, .imgsz = imgsz,
                            .batch = batch, .stride = 32, .workers = workers, .seed = 0,
                            .tiles = &ts, .tiles_per_epoch = batches * batch};
    yc_loader *l = NULL;
    if ((st = yc_loader_new(&l, &lo))) {
        fprintf(stderr, "tile_loader_bench: %s\n", yc_last_error());
        return 1;
    }
    double t0 = yc_now();
    int tiles = 0;
    st = yc_loader_start(l, 0, NULL, 0);
    for (const yc_batch *b = NULL; !st;) {
        if ((st = yc_loader_next(l, &b)) || !b)
            break;
        tiles += b->n;
    }
    double dt = yc_now() - t0;
    if (st) {
        fprintf(stderr, "tile_loader_bench: %s\n", yc_last_error());
        return 1;
    }
    yc_tile_reader_stats rs = yc_loader_tile_stats(l);
    printf("%d tiles of %d px in %.2f s with %d threads: %.2f tiles/s, peak RSS %.0f MiB "
           "(%zu windows read, %zu image opens, %zu restarts from the first row)\n",
           tiles, tile, dt, workers, dt > 0 ? tiles / dt : 0.0,
           (double)yc_peak_rss() / (1024.0 * 1024.0), rs.windows, rs.opens, rs.rewinds);
    yc_loader_free(l);
    yc_tileset_free(&ts);
    yc_dataset_free(&ds);
    yc_data_yaml_free(&y);
    return 0;
}
