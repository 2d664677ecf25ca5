/* The options of yolocl train as saved with a run: the table of yc_train_opts fields (opt.yaml's
 * keys, YOLOv5's opt names) that checkpoints and opt.yaml are written from, and from which
 * --resume restores those it marks.  The command line (src/cli/cmd_train.c) refers to these rows
 * by key for a saved option's type and place. */
#ifndef YC_TRAIN_OPTS_H
#define YC_TRAIN_OPTS_H

#include "field.h"
#include "train.h"

/* What is saved: the options, the memory fit's micro-batch (images per training step) and the
 * number of MPI ranks that trained the run (YOLOv5's opt.world_size; 1 in one process). */
typedef struct yc_train_saved {
    yc_train_opts o;
    int micro_batch;
    int world_size;
} yc_train_saved;

/* The saved fields of yc_train_saved, in opt.yaml's order; ends with a YC_FIELD_END row. */
extern const yc_field yc_train_fields[];

/* The run's options as a JSON object, for checkpoints and opt.yaml, with the memory fit's
 * micro-batch (the batch when it fits whole).  A heap string, NULL when out of memory. */
char *yc_train_opts_json(const yc_train_opts *o, int micro_batch);
/* The same for a run trained by `world_size` ranks (dist.h). */
char *yc_train_run_json(const yc_train_opts *o, int micro_batch, int world_size);
/* The number of ranks a run's saved options (that JSON) say trained it: 1 when absent (a
 * checkpoint of a single-process run, or of a yolocl before MPI).  YC_EFORMAT when it is not a
 * positive integer. */
int yc_train_saved_world(const char *json, int *world_size);

#endif
