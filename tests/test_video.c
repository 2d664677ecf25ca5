/* Video in detect (issue 31, video.h and detect.h):
 *
 *   - the writer and the reader: a clip written here through FFmpeg's encoder reads back with its
 *     size, frame rate and frame count, every frame in order (each frame's grey level tells which
 *     it is) with its colours in place (red stays red); odd sizes come back as written; the
 *     reader's vid_stride skips; a live read of a file returns frames in order;
 *   - detect on the clip (yc_detect_files): the annotated clip.mp4 has the source's frame count,
 *     frame rate and size, and labels/clip_<frame>.txt hold what the detector finds in each
 *     frame (numbered from 1), the same as detecting on the decoded frames one by one; with
 *     --vid-stride 3 every third frame (4 of 12, labels numbered 1 to 4);
 *   - an http:// stream served here from the clip is live: frames in order, labels numbered from
 *     0, the annotated video at 30 frames per second; a stream that does not open fails the run;
 *   - a directory with an image, a truncated MP4 (no index: does not open), an AVI cut short and
 *     a good clip: the truncated file is reported and skipped, the cut one reported, the run goes
 *     on to the image and the good clip;
 *   - yolocl detect --vid-stride 3 --save-txt prints detect.py's "video 1/1 (k/4) path: " lines
 *     and writes the 4-frame clip; its peak memory on a 240-frame clip is not that of 60 (frames
 *     are streamed, never held).
 *
 * Skipped (77) in a build without FFmpeg (yolocl --version says "Video: no"). */
#include <check.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "detect.h"
#include "draw.h"
#include "image.h"
#include "log.h"
#include "util.h"
#include "val.h"
#include "video.h"
#include "harness.h"
#include "yctest.h"

/* The test clip: 12 frames of 128 x 96 at 12 frames per second (not 25 or 30, the defaults a
 * reader or writer could fall back to). */
#define CLIP_N 12
#define CLIP_W 128
#define CLIP_H 96
#define CLIP_FPS 12.0

/* Frame i of a clip: a grey background whose level tells the frame (16 + 18 i), a red bar that
 * moves right, a blue disc. */
static void clip_frame(yc_image *im, int w, int h, int i)
{
    ck_assert_int_eq(yc_image_reserve(im, h, w), YC_OK);
    yc_image_fill(im, (uint8_t)(16 + 18 * (i % 12)));
    yc_canvas cv = yc_canvas_wrap(im->data, w, h);
    int x0 = w / 4 + 2 * i;
    yc_draw_fill_rect(&cv, x0, h / 3, x0 + w / 4, h / 3 + h / 4, (yc_rgb){220, 20, 20});
    yc_draw_disc(&cv, 0.7 * w, 0.6 * h, h / 6.0, (yc_rgb){20, 20, 220});
}

/* The frame number a decoded frame shows: its top-left corner's grey level. */
static int frame_index(const yc_image *im)
{
    double sum = 0;
    for (int y = 0; y < 6; y++)
        for (int x = 0; x < 6; x++)
            sum += im->data[((size_t)y * im->w + x) * 3 + 1];
    return (int)lround((sum / 36 - 16) / 18);
}

/* Writes an n-frame clip at fps to path; returns the encoder's name. */
static const char *write_clip(const char *path, int n, int w, int h, double fps)
{
    yc_video_writer *vw;
    const char *codec;
    ck_assert_msg(yc_video_writer_open(&vw, path, w, h, fps, &codec) == YC_OK, "%s",
                  yc_last_error());
    yc_image im = YC_IMAGE_INIT;
    for (int i = 0; i < n; i++) {
        clip_frame(&im, w, h, i);
        ck_assert_msg(yc_video_write(vw, &im) == YC_OK, "%s", yc_last_error());
    }
    ck_assert_int_eq(yc_video_frames_written(vw), n);
    ck_assert_msg(yc_video_writer_close(vw) == YC_OK, "%s", yc_last_error());
    yc_image_free(&im);
    return codec;
}

/* The number of frames, size and rate of a video file. */
static long long count_frames(const char *path, yc_video_info *info)
{
    yc_video_reader *r;
    ck_assert_msg(yc_video_open(&r, path, false, info) == YC_OK, "%s", yc_last_error());
    yc_image im = YC_IMAGE_INIT;
    bool got = true;
    long long n = 0;
    while (got) {
        ck_assert_msg(yc_video_read(r, 0, &im, &got) == YC_OK, "%s", yc_last_error());
        if (got) {
            ck_assert_int_eq(im.w, info->w);
            ck_assert_int_eq(im.h, info->h);
            n++;
        }
    }
    ck_assert_int_eq(yc_video_frames_read(r), n);
    yc_video_close(r);
    yc_image_free(&im);
    return n;
}

/* Copies `from` to `to` cut short: the headers (up to the AVI's "movi" list, if any) and
 * `fraction` of what follows. */
static void copy_prefix(const char *from, const char *to, double fraction)
{
    size_t len;
    char *data = yc_harness_read(from, &len);
    ck_assert_ptr_nonnull(data);
    const char *movi = memmem(data, len, "movi", 4);
    size_t head = movi ? (size_t)(movi - data) + 4 : 0;
    yc_harness_write(to, data, head + (size_t)((len - head) * fraction));
    free(data);
}

/* ---- the writer and the reader --------------------------------------------------------------- */

START_TEST(test_roundtrip)
{
    const char *path = yc_harness_tmp("rt/clip.mp4");
    yc_harness_make_parent(path);
    const char *codec = write_clip(path, CLIP_N, CLIP_W, CLIP_H, CLIP_FPS);
    printf("test_video: the encoder is %s\n", codec);
    yc_video_reader *r;
    yc_video_info info;
    ck_assert_msg(yc_video_open(&r, path, false, &info) == YC_OK, "%s", yc_last_error());
    ck_assert_int_eq(info.w, CLIP_W);
    ck_assert_int_eq(info.h, CLIP_H);
    ck_assert_msg(fabs(info.fps - CLIP_FPS) < 1e-6, "fps %g", info.fps);
    ck_assert_int_eq(info.frames, CLIP_N);
    ck_assert(info.frames_exact);
    yc_image im = YC_IMAGE_INIT;
    bool got;
    for (int i = 0; i < CLIP_N; i++) {
        ck_assert_msg(yc_video_read(r, 0, &im, &got) == YC_OK, "%s", yc_last_error());
        ck_assert(got);
        ck_assert_int_eq(frame_index(&im), i);
        /* the middle of the red bar: red, not blue (RGB order kept through YUV) */
        const uint8_t *p = im.data + ((size_t)(CLIP_H / 3 + CLIP_H / 8) * CLIP_W +
                                      (size_t)(CLIP_W / 4 + 2 * i + CLIP_W / 8)) * 3;
        ck_assert_msg(p[0] > 170 && p[2] < 70, "frame %d: the bar is %d,%d,%d", i, p[0], p[1],
                      p[2]);
    }
    ck_assert_int_eq(yc_video_read(r, 0, &im, &got), YC_OK);
    ck_assert(!got);
    yc_video_close(r);

    /* vid_stride 3: frames 3, 6, 9, 12 (grab three, retrieve the last) */
    ck_assert_int_eq(yc_video_open(&r, path, false, NULL), YC_OK);
    for (int k = 1; k <= CLIP_N / 3; k++) {
        ck_assert_int_eq(yc_video_read(r, 2, &im, &got), YC_OK);
        ck_assert(got);
        ck_assert_int_eq(frame_index(&im), 3 * k - 1);
    }
    ck_assert_int_eq(yc_video_read(r, 2, &im, &got), YC_OK);
    ck_assert(!got);
    yc_video_close(r);

    /* a live read of the file (the thread's newest frame each time): increasing frame numbers,
     * the last one among them unless the reader fell behind, and a clean end */
    ck_assert_int_eq(yc_video_open(&r, path, true, NULL), YC_OK);
    int last = -1, n = 0;
    for (;;) {
        ck_assert_msg(yc_video_read(r, 0, &im, &got) == YC_OK, "%s", yc_last_error());
        if (!got)
            break;
        int i = frame_index(&im);
        ck_assert_int_gt(i, last);
        last = i;
        n++;
    }
    ck_assert_int_ge(n, 1);
    ck_assert_int_le(last, CLIP_N - 1);
    yc_video_close(r);
    yc_image_free(&im);

    /* odd sizes come back as written; an MKV's frame count is its duration x fps */
    const char *odd = yc_harness_tmp("rt/odd.mkv");
    write_clip(odd, 5, 67, 45, 7.5);
    ck_assert_int_eq(count_frames(odd, &info), 5);
    ck_assert_int_eq(info.w, 67);
    ck_assert_int_eq(info.h, 45);
    ck_assert_msg(fabs(info.fps - 7.5) < 1e-6, "fps %g", info.fps);
    ck_assert_int_eq(info.frames, 5);
    ck_assert(!info.frames_exact);

    /* a container that takes neither H.264 nor MPEG-4 (WebM): its own default codec */
    const char *webm = yc_harness_tmp("rt/clip.webm");
    codec = write_clip(webm, 3, 64, 48, 10);
    ck_assert_msg(strcmp(codec, "libx264") && strcmp(codec, "mpeg4"), "%s", codec);
    ck_assert_int_eq(count_frames(webm, &info), 3);
    ck_assert_int_eq(info.w, 64);
}
END_TEST

START_TEST(test_errors)
{
    yc_video_reader *r = NULL;
    const char *missing = yc_harness_tmp("err/none.mp4");
    ck_assert_int_eq(yc_video_open(&r, missing, false, NULL), YC_EIO);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), missing));
    /* not a video: a text file named .mp4 */
    const char *text = yc_harness_tmp("err/text.mp4");
    yc_harness_make_parent(text);
    yc_harness_write_text(text, "not a video\n");
    ck_assert_int_eq(yc_video_open(&r, text, false, NULL), YC_EFORMAT);
    ck_assert_ptr_nonnull(strstr(yc_last_error(), text));
    /* a writer refuses a frame of another size, and a file name without a container */
    yc_video_writer *vw;
    ck_assert_int_eq(yc_video_writer_open(&vw, yc_harness_tmp("err/x.mp4"), 32, 32, 10, NULL),
                     YC_OK);
    yc_image im = YC_IMAGE_INIT;
    clip_frame(&im, 48, 32, 0);
    ck_assert_int_eq(yc_video_write(vw, &im), YC_EUSAGE);
    ck_assert_int_eq(yc_video_writer_close(vw), YC_OK);
    yc_image_free(&im);
    ck_assert_int_eq(yc_video_writer_open(&vw, yc_harness_tmp("err/x.nosuchformat"), 32, 32, 10,
                                          NULL),
                     YC_EUNSUPPORTED);
    ck_assert_ptr_null(vw);
    /* what counts as a video path and as a live source (detect.py's is_url, isnumeric) */
    ck_assert(yc_is_video_path("a/b.MP4") && yc_is_video_path("x.webm") &&
              yc_is_video_path("x.ts") && !yc_is_video_path("x.jpg") &&
              !yc_is_video_path("mp4") && !yc_is_video_path("dir.mp4/x"));
    ck_assert(yc_is_live_source("0") && yc_is_live_source("12") &&
              yc_is_live_source("rtsp://host/stream") && yc_is_live_source("HTTP://host/cam") &&
              !yc_is_live_source("https://host/video.mp4") &&
              !yc_is_live_source("http://host/a.jpg") && !yc_is_live_source("0.mp4") &&
              !yc_is_live_source("") && !yc_is_live_source("file:///x"));
    ck_assert(yc_is_url("rtmp://h/x") && yc_is_url("https://h/v.mp4") && !yc_is_url("0") &&
              !yc_is_url("dir/http://x"));
    /* an image's URL is refused (libvips reads files), a video's is read by FFmpeg */
    yc_path_list l;
    ck_assert_int_eq(yc_detect_sources("https://example.com/bus.jpg", &l), YC_EUNSUPPORTED);
    ck_assert_int_eq(yc_detect_sources("https://example.com/clip.mp4", &l), YC_OK);
    ck_assert_uint_eq(l.n, 1);
    yc_path_list_free(&l);
}
END_TEST

/* ---- detect on videos ------------------------------------------------------------------------ */

typedef struct detect_env {
    yc_backend *be;
    yc_infer_model im;
    yc_detector *det;
} detect_env;

static void env_open(detect_env *e)
{
    yc_harness_tiny_infer(&e->be, &e->im);
    yc_detect_options o;
    yc_detect_options_default(&o);
    o.img_h = o.img_w = CLIP_W;
    /* the tiny model is not trained on these pictures: a low threshold gives detections */
    o.conf_thres = 0.001f;
    o.max_det = 20;
    ck_assert_int_eq(yc_detector_new(&e->det, &e->im, &o), YC_OK);
}

static void env_close(detect_env *e)
{
    yc_detector_free(e->det);
    yc_infer_model_free(&e->im);
    yc_backend_free(e->be);
}

/* Runs yc_detect_files on one source into save_dir, labels and video saved. */
static void detect_source(detect_env *e, const char *source, const char *save_dir, int stride,
                          yc_detect_summary *sum)
{
    yc_path_list files;
    ck_assert_msg(yc_detect_sources(source, &files) == YC_OK, "%s", yc_last_error());
    yc_detect_save sv = {.save_dir = save_dir, .save_img = true, .save_txt = true,
                         .save_conf = true, .vid_stride = stride};
    ck_assert_msg(yc_detect_files(e->det, &files, NULL, e->im.m->nc, &sv, sum) == YC_OK, "%s",
                  yc_last_error());
    yc_path_list_free(&files);
}

/* The label file detect.py writes for detections (best first) of a w x h frame. */
static char *expected_labels(const float *dets, int nd, int w, int h)
{
    char *text = calloc((size_t)nd + 1, 128);
    ck_assert_ptr_nonnull(text);
    for (int i = nd - 1; i >= 0; i--) {
        const float *r = dets + (size_t)i * 6;
        char line[128];
        yc_format_txt_line(line, sizeof line, r, r[4], (int)r[5], w, h, true);
        strcat(text, line);
    }
    return text;
}

/* Checks save_dir against detecting on the clip's frames one by one, every stride-th. */
static void check_outputs(detect_env *e, const char *clip, const char *save_dir, int stride)
{
    yc_video_reader *r;
    ck_assert_int_eq(yc_video_open(&r, clip, false, NULL), YC_OK);
    yc_image im = YC_IMAGE_INIT;
    bool got;
    int frames = 0, with_dets = 0;
    while (yc_video_read(r, stride - 1, &im, &got) == YC_OK && got) {
        frames++;
        const float *dets;
        int nd;
        ck_assert_int_eq(yc_detector_run(e->det, &im, &dets, &nd, NULL, NULL, NULL), YC_OK);
        char path[1200];
        snprintf(path, sizeof path, "%s/labels/clip_%d.txt", save_dir, frames);
        if (nd == 0) {
            ck_assert_msg(!yc_file_exists(path), "%s for a frame without detections", path);
            continue;
        }
        with_dets++;
        char *want = expected_labels(dets, nd, im.w, im.h), *have = yc_harness_read(path, NULL);
        ck_assert_msg(have != NULL, "%s missing", path);
        ck_assert_str_eq(have, want);
        free(want);
        free(have);
    }
    yc_video_close(r);
    yc_image_free(&im);
    ck_assert_int_eq(frames, CLIP_N / stride);
    ck_assert_int_gt(with_dets, 0);
    char labels[1200];
    snprintf(labels, sizeof labels, "%s/labels", save_dir);
    ck_assert_int_eq(yc_harness_count_files(labels, ".txt"), with_dets);
    /* the annotated clip: every frame read, at the source's rate and size */
    char out[1200];
    snprintf(out, sizeof out, "%s/clip.mp4", save_dir);
    yc_video_info info;
    ck_assert_int_eq(count_frames(out, &info), CLIP_N / stride);
    ck_assert_int_eq(info.frames, CLIP_N / stride);
    ck_assert_int_eq(info.w, CLIP_W);
    ck_assert_int_eq(info.h, CLIP_H);
    ck_assert_msg(fabs(info.fps - CLIP_FPS) < 1e-6, "fps %g", info.fps);
}

START_TEST(test_detect_video)
{
    const char *clip = yc_harness_tmp("dv/clip.mp4");
    yc_harness_make_parent(clip);
    write_clip(clip, CLIP_N, CLIP_W, CLIP_H, CLIP_FPS);
    detect_env e;
    env_open(&e);
    yc_detect_summary sum;
    const char *out1 = yc_harness_tmp("dv/run1");
    detect_source(&e, clip, out1, 1, &sum);
    ck_assert_int_eq(sum.images, CLIP_N);
    ck_assert_int_eq(sum.skipped, 0);
    ck_assert_int_eq(sum.videos_cut, 0);
    check_outputs(&e, clip, out1, 1);
    const char *out3 = yc_harness_tmp("dv/run3");
    detect_source(&e, clip, out3, 3, &sum);
    ck_assert_int_eq(sum.images, CLIP_N / 3);
    check_outputs(&e, clip, out3, 3);
    env_close(&e);
}
END_TEST

START_TEST(test_detect_directory)
{
    const char *dir = yc_harness_tmp("dir/src");
    char p[1200];
    snprintf(p, sizeof p, "%s/d_clip.mp4", dir);
    yc_harness_make_parent(p);
    write_clip(p, CLIP_N, CLIP_W, CLIP_H, CLIP_FPS);
    /* an MP4 cut in half: its index (moov) is at the end, so it does not open */
    char cut[1200];
    snprintf(cut, sizeof cut, "%s/b_cut.mp4", dir);
    copy_prefix(p, cut, 0.5);
    /* an AVI cut short: it opens, and ends before the frame count of its header */
    char avi[1200], avi_cut[1200];
    snprintf(avi, sizeof avi, "%s/whole.avi", yc_harness_tmp("dir"));
    write_clip(avi, CLIP_N, CLIP_W, CLIP_H, CLIP_FPS);
    snprintf(avi_cut, sizeof avi_cut, "%s/c_short.avi", dir);
    copy_prefix(avi, avi_cut, 0.5);
    yc_image im = YC_IMAGE_INIT;
    clip_frame(&im, CLIP_W, CLIP_H, 3);
    snprintf(p, sizeof p, "%s/z_image.png", dir);
    yc_harness_write_image(p, &im);
    yc_image_free(&im);

    detect_env e;
    env_open(&e);
    yc_path_list files;
    ck_assert_int_eq(yc_detect_sources(dir, &files), YC_OK);
    /* LoadImages's order: the image first, then the videos by name */
    ck_assert_uint_eq(files.n, 4);
    ck_assert_str_eq(yc_path_basename(files.paths[0]), "z_image.png");
    ck_assert_str_eq(yc_path_basename(files.paths[1]), "b_cut.mp4");
    ck_assert_str_eq(yc_path_basename(files.paths[3]), "d_clip.mp4");
    yc_path_list_free(&files);
    const char *out = yc_harness_tmp("dir/run");
    yc_harness_capture cap;
    yc_harness_capture_start(&cap, 2);
    yc_detect_summary sum;
    detect_source(&e, dir, out, 1, &sum);
    char *err = yc_harness_capture_end(&cap);
    ck_assert_msg(strstr(err, "skipping") && strstr(err, "b_cut.mp4"), "stderr: %s", err);
    ck_assert_msg(strstr(err, "c_short.avi") && strstr(err, "cut short"), "stderr: %s", err);
    free(err);
    ck_assert_int_eq(sum.skipped, 1);
    ck_assert_int_eq(sum.videos_cut, 1);
    ck_assert_int_gt(sum.images, 1 + CLIP_N);
    ck_assert_int_lt(sum.images, 1 + 2 * CLIP_N);
    snprintf(p, sizeof p, "%s/z_image.png", out);
    ck_assert(yc_file_exists(p));
    snprintf(p, sizeof p, "%s/b_cut.mp4", out);
    ck_assert(!yc_file_exists(p));
    /* the cut AVI's annotated video holds the frames read before its end */
    yc_video_info info;
    snprintf(p, sizeof p, "%s/c_short.mp4", out);
    long long short_frames = count_frames(p, &info);
    ck_assert_int_eq(short_frames, sum.images - 1 - CLIP_N);
    snprintf(p, sizeof p, "%s/d_clip.mp4", out);
    ck_assert_int_eq(count_frames(p, &info), CLIP_N);
    env_close(&e);
}
END_TEST

/* ---- a live source --------------------------------------------------------------------------- */

/* Serves `path` once over HTTP on 127.0.0.1 from a child process; returns its port and pid. */
static int serve_once(const char *path, pid_t *pid)
{
    size_t len;
    char *body = yc_harness_read(path, &len);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(ls, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(ls, 1), 0);
    ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    fflush(NULL);
    *pid = fork();
    ck_assert_int_ge(*pid, 0);
    if (*pid == 0) {
        int c = accept(ls, NULL, NULL);
        char req[4096];
        size_t got = 0;
        while (c >= 0 && got < sizeof req - 1 && !memmem(req, got, "\r\n\r\n", 4)) {
            ssize_t n = read(c, req + got, sizeof req - 1 - got);
            if (n <= 0)
                _exit(1);
            got += (size_t)n;
        }
        char head[256];
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.0 200 OK\r\nContent-Type: video/mp2t\r\nContent-Length: %zu\r\n"
                          "Connection: close\r\n\r\n",
                          len);
        if (c < 0 || write(c, head, (size_t)hl) != hl)
            _exit(1);
        for (size_t off = 0; off < len;) {
            ssize_t n = write(c, body + off, len - off);
            if (n <= 0)
                _exit(1);
            off += (size_t)n;
        }
        close(c);
        _exit(0);
    }
    close(ls);
    free(body);
    return ntohs(a.sin_port);
}

/* An http:// URL without a video suffix is live (detect.py's LoadStreams): read by the reader's
 * thread, newest frame each time, labels numbered from 0, the annotated video at 30 fps. */
START_TEST(test_detect_stream)
{
    const char *clip = yc_harness_tmp("live/clip.ts");
    yc_harness_make_parent(clip);
    write_clip(clip, CLIP_N, CLIP_W, CLIP_H, CLIP_FPS);
    pid_t pid;
    int port = serve_once(clip, &pid);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/cam", port);
    ck_assert(yc_is_live_source(url));
    detect_env e;
    env_open(&e);
    yc_detect_summary sum;
    const char *out = yc_harness_tmp("live/run");
    detect_source(&e, url, out, 1, &sum);
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    ck_assert_int_ge(sum.images, 1);
    ck_assert_int_le(sum.images, CLIP_N);
    ck_assert_int_eq(sum.skipped, 0);
    char p[1200];
    snprintf(p, sizeof p, "%s/cam.mp4", out);
    yc_video_info info;
    ck_assert_int_eq(count_frames(p, &info), sum.images);
    ck_assert_msg(fabs(info.fps - 30) < 1e-6, "fps %g", info.fps);
    /* labels/cam_0.txt ... cam_<images - 1>.txt, one per frame with detections */
    int labels = 0;
    for (int k = 0; k <= CLIP_N; k++) {
        snprintf(p, sizeof p, "%s/labels/cam_%d.txt", out, k);
        if (yc_file_exists(p)) {
            ck_assert_int_lt(k, sum.images);
            labels++;
        }
    }
    ck_assert_int_ge(labels, 1);

    /* a stream that does not open fails the run (nothing is listening on port 1) */
    yc_path_list files;
    ck_assert_int_eq(yc_detect_sources("rtsp://127.0.0.1:1/none", &files), YC_OK);
    yc_detect_save sv = {.save_dir = yc_harness_tmp("live/none")};
    ck_assert_int_ne(yc_detect_files(e.det, &files, NULL, e.im.m->nc, &sv, &sum), YC_OK);
    ck_assert_msg(strstr(yc_last_error(), "cannot open rtsp://127.0.0.1:1/none"), "%s",
                  yc_last_error());
    yc_path_list_free(&files);
    env_close(&e);
}
END_TEST

/* ---- the command line ------------------------------------------------------------------------ */

typedef struct run_result {
    int status;
    size_t peak;
    char *out, *err;
} run_result;

/* Runs $YOLOCL with the NULL-terminated arguments; its output, exit status and peak resident
 * memory (wait4: the child's own). */
static run_result run_yolocl(const char *const *args)
{
    const char *bin = getenv("YOLOCL");
    char outp[1200], errp[1200];
    snprintf(outp, sizeof outp, "%s/out.txt", yc_harness_tmpdir());
    snprintf(errp, sizeof errp, "%s/err.txt", yc_harness_tmpdir());
    const char *argv[64] = {"yolocl"};
    int n = 1;
    for (int i = 0; args[i]; i++) {
        ck_assert_int_lt(n, 62);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int ws = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    ck_assert_int_eq(wait4(pid, &ws, 0, &ru), pid);
    run_result r = {.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws),
                    .peak = (size_t)ru.ru_maxrss * 1024};
    r.out = yc_harness_read(outp, NULL);
    r.err = yc_harness_read(errp, NULL);
    ck_assert(r.out && r.err);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

START_TEST(test_cli)
{
    const char *clip = yc_harness_tmp("cli/clip.mp4");
    yc_harness_make_parent(clip);
    write_clip(clip, CLIP_N, CLIP_W, CLIP_H, CLIP_FPS);
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    char weights[1200], cfg[1200];
    snprintf(weights, sizeof weights, "%s", w);
    snprintf(cfg, sizeof cfg, "%s", yc_harness_test_data(YC_HARNESS_TINY_CFG));
    const char *project = yc_harness_tmp("cli/runs");
    const char *args[] = {"detect", "--weights", weights, "--cfg", cfg, "--device", "cpu",
                          "--source", clip, "--img", "128", "--conf-thres", "0.001",
                          "--vid-stride", "3", "--save-txt", "--project", project, "--name",
                          "s3", NULL};
    run_result r = run_yolocl(args);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    char *real = realpath(clip, NULL);
    ck_assert_ptr_nonnull(real);
    for (int k = 1; k <= 4; k++) {
        char line[1400];
        snprintf(line, sizeof line, "video 1/1 (%d/4) %s: 96x128 ", k, real);
        ck_assert_msg(strstr(r.out, line), "no \"%s\" in:\n%s", line, r.out);
    }
    ck_assert_msg(!strstr(r.out, "(5/4)"), "%s", r.out);
    free(real);
    run_free(&r);
    char out[1400];
    snprintf(out, sizeof out, "%s/s3/clip.mp4", project);
    yc_video_info info;
    ck_assert_int_eq(count_frames(out, &info), 4);

    /* --slice is for images */
    const char *sliced[] = {"detect", "--weights", weights, "--cfg", cfg, "--device", "cpu",
                            "--source", clip, "--slice", "64", "--project", project, NULL};
    r = run_yolocl(sliced);
    ck_assert_int_eq(r.status, 2);
    ck_assert_msg(strstr(r.err, "--slice detects in images only"), "%s", r.err);
    run_free(&r);
}
END_TEST

/* Peak memory of detect on a long clip against a short one: frames are streamed, so 180 more
 * frames (38 MB of decoded RGB at 192 x 144 x 3... 83 kB each: 15 MB) must not show. */
START_TEST(test_cli_memory)
{
    const char *w = yc_harness_test_data(YC_HARNESS_TINY_WEIGHTS);
    char weights[1200], cfg[1200];
    snprintf(weights, sizeof weights, "%s", w);
    snprintf(cfg, sizeof cfg, "%s", yc_harness_test_data(YC_HARNESS_TINY_CFG));
    size_t peak[2];
    const int frames[2] = {60, 240};
    for (int k = 0; k < 2; k++) {
        char clip[1200], name[32];
        snprintf(clip, sizeof clip, "%s/mem/long%d.mp4", yc_harness_tmpdir(), frames[k]);
        yc_harness_make_parent(clip);
        write_clip(clip, frames[k], 320, 240, 30);
        snprintf(name, sizeof name, "m%d", frames[k]);
        const char *args[] = {"detect", "--weights", weights, "--cfg", cfg, "--device", "cpu",
                              "--source", clip, "--img", "128", "--project",
                              yc_harness_tmp("mem/runs"), "--name", name, NULL};
        run_result r = run_yolocl(args);
        ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
        peak[k] = r.peak;
        printf("test_video: detect on %d frames of 320x240: peak resident memory %.1f MB\n",
               frames[k], peak[k] / 1e6);
        run_free(&r);
    }
    /* 180 frames of 320 x 240 RGB held would be 41 MB */
    if (getenv("YOLOCL_SANITIZED") == NULL)
        ck_assert_msg(peak[1] < peak[0] + 10000000, "peak %zu on 240 frames, %zu on 60", peak[1],
                      peak[0]);
}
END_TEST

static Suite *suite(bool cli)
{
    Suite *s = suite_create("video");
    TCase *tc = tcase_create("video");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_detect_video);
    tcase_add_test(tc, test_detect_directory);
    tcase_add_test(tc, test_detect_stream);
    if (cli) {
        tcase_add_test(tc, test_cli);
        tcase_add_test(tc, test_cli_memory);
    }
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!yc_video_built_in())
        return yc_test_skip(YC_TEST_NEEDS_OTHER,
                            "yolocl is built without FFmpeg (Debian: libavformat-dev "
                            "libavcodec-dev libswscale-dev libavutil-dev)");
    const char *bin = getenv("YOLOCL");
    bool cli = bin && access(bin, X_OK) == 0;
    if (!cli && yc_test_required(YC_TEST_NEEDS_OTHER))
        return yc_test_skip(YC_TEST_NEEDS_OTHER, "YOLOCL does not name an executable yolocl");
    if (!cli)
        printf("test_video: YOLOCL does not name an executable yolocl: the command-line cases "
               "are skipped\n");
    if (!yc_harness_tmpdir_make("video"))
        return YC_TEST_HARD_ERROR;
    int st = yc_harness_run(suite(cli), false);
    yc_harness_tmpdir_remove();
    return st;
}
