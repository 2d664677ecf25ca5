/* Run directories and results.csv (see rundir.h). */
#include "rundir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "util.h"

const char *const yc_results_columns[YC_RESULTS_NCOLS] = {
    "train/box_loss",   "train/obj_loss", "train/cls_loss", "metrics/precision",
    "metrics/recall",   "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "val/box_loss",
    "val/obj_loss",     "val/cls_loss",   "x/lr0",          "x/lr1",
    "x/lr2",
};

const char *const yc_seg_results_columns[YC_SEG_RESULTS_NCOLS] = {
    "train/box_loss",          "train/seg_loss",       "train/obj_loss",
    "train/cls_loss",          "metrics/precision(B)", "metrics/recall(B)",
    "metrics/mAP_0.5(B)",      "metrics/mAP_0.5:0.95(B)", "metrics/precision(M)",
    "metrics/recall(M)",       "metrics/mAP_0.5(M)",   "metrics/mAP_0.5:0.95(M)",
    "val/box_loss",            "val/seg_loss",         "val/obj_loss",
    "val/cls_loss",            "x/lr0",                "x/lr1",
    "x/lr2",
};

int yc_run_dir(const char *project, const char *name, bool exist_ok, const char *sub, char *out,
               size_t len)
{
    int st = yc_mkdirs(project);
    if (st)
        return st;
    int w = snprintf(out, len, "%s/%s", project, name);
    if (w < 0 || (size_t)w >= len)
        return yc_error_status(YC_EUSAGE, "run directory path too long: %s/%s", project, name);
    if (exist_ok) {
        st = yc_mkdirs(out);
    } else {
        /* mkdir is the test: two runs started together never share a directory */
        for (int n = 2; mkdir(out, 0777) != 0; n++) {
            if (errno != EEXIST)
                return yc_error_status(YC_EIO, "cannot create %s: %s", out, strerror(errno));
            if (n > 9999)
                return yc_error_status(YC_EIO, "no free run directory after %s/%s9999", project,
                                       name);
            snprintf(out, len, "%s/%s%d", project, name, n);
        }
    }
    if (!st && sub) {
        char s[4096];
        snprintf(s, sizeof s, "%s/%s", out, sub);
        st = yc_mkdirs(s);
    }
    return st;
}

/* One row of `ncols` columns (and the header before it in a new or empty file), fields `width`
 * wide. */
static int append_row(const char *path, int width, int ncols, const char *const *columns,
                      int epoch, const double *values)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return yc_error_status(YC_EIO, "cannot open %s: %s", path, strerror(errno));
    /* a new file, or one emptied by yc_results_truncate, starts with the header */
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int e = errno;
        fclose(f);
        return yc_error_status(YC_EIO, "cannot stat %s: %s", path, strerror(e));
    }
    if (sb.st_size == 0) {
        fprintf(f, "%*s", width, "epoch");
        for (int i = 0; i < ncols; i++)
            fprintf(f, ",%*s", width, columns[i]);
        fputc('\n', f);
    }
    fprintf(f, "%*.5g", width, (double)epoch);
    for (int i = 0; i < ncols; i++)
        fprintf(f, ",%*.5g", width, values[i]);
    fputc('\n', f);
    int st = fflush(f) || ferror(f) || fsync(fileno(f)) ? YC_EIO : YC_OK;
    if (fclose(f) != 0)
        st = YC_EIO;
    return st ? yc_error_status(st, "cannot write %s: %s", path, strerror(errno)) : YC_OK;
}

int yc_results_append(const char *path, int epoch, const double values[YC_RESULTS_NCOLS])
{
    return append_row(path, 20, YC_RESULTS_NCOLS, yc_results_columns, epoch, values);
}

int yc_seg_results_append(const char *path, int epoch,
                          const double values[YC_SEG_RESULTS_NCOLS])
{
    return append_row(path, 23, YC_SEG_RESULTS_NCOLS, yc_seg_results_columns, epoch, values);
}

int yc_results_truncate(const char *path, int epochs)
{
    char *text = NULL;
    size_t len = 0;
    if (!yc_file_exists(path))
        return YC_OK;
    int st = yc_read_file(path, &text, &len);
    if (st)
        return st;
    /* keep the header and rows whose first field (the epoch) is < epochs; a last line without
     * its newline is a write cut short (a full disk) and goes too, a torn header included */
    size_t keep = 0;
    char *line = text;
    bool header = true;
    while (line < text + len) {
        /* memchr, not strchr: a NUL byte (a block zeroed by a crash) must not stop the scan */
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        if (!nl)
            break;
        size_t n = (size_t)(nl - line) + 1;
        if (!header && strtol(line, NULL, 10) >= epochs)
            break;
        header = false;
        keep += n;
        line += n;
    }
    st = keep == len ? YC_OK : yc_write_file_atomic(path, text, keep);
    free(text);
    return st;
}

int yc_write_yaml_from_json(const char *path, const char *json)
{
    yc_json *root = NULL;
    int st = yc_json_parse(&root, json, strlen(json));
    if (st)
        return st;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        yc_json_free(root);
        return YC_ENOMEM;
    }
    for (size_t i = 0; i < yc_json_len(root); i++) {
        const char *key = yc_json_key_at(root, i, NULL);
        const yc_json *v = yc_json_at(root, i);
        fprintf(f, "%s: ", key);
        switch (yc_json_typeof(v)) {
        case YC_JSON_STRING: {
            const char *s = yc_json_string(v);
            fputc('\'', f);
            for (; *s; s++)
                fputs(*s == '\'' ? "''" : (char[2]){*s, 0}, f);
            fputc('\'', f);
            break;
        }
        case YC_JSON_NUMBER:
            fputs(yc_json_number_text(v), f);
            break;
        case YC_JSON_BOOL:
            fputs(yc_json_bool(v) ? "true" : "false", f);
            break;
        case YC_JSON_ARRAY:
            fputc('[', f);
            for (size_t j = 0; j < yc_json_len(v); j++)
                fprintf(f, "%s%s", j ? ", " : "", yc_json_number_text(yc_json_at(v, j)));
            fputc(']', f);
            break;
        default:
            fputs("null", f);
        }
        fputc('\n', f);
    }
    yc_json_free(root);
    if (fclose(f) != 0) {
        free(buf);
        return YC_ENOMEM;
    }
    st = yc_write_file_atomic(path, buf, len);
    free(buf);
    return st;
}
