/* Reading video files, streams and webcams through FFmpeg (see video.h). */
#include "config.h"
#include "video.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "dataset.h"
#include "log.h"
#include "util.h"

static const char *const vid_formats[] = {"asf", "avi", "gif", "m4v", "mkv", "mov", "mp4",
                                          "mpeg", "mpg", "ts", "wmv", "webm"};

bool yc_is_video_path(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/'))
        return false;
    for (size_t i = 0; i < sizeof vid_formats / sizeof vid_formats[0]; i++)
        if (!strcasecmp(dot + 1, vid_formats[i]))
            return true;
    return false;
}

/* A webcam number: decimal digits only (Python's str.isnumeric() for ASCII). */
static bool is_webcam(const char *source)
{
    if (!*source)
        return false;
    for (const char *p = source; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    return true;
}

bool yc_is_url(const char *source)
{
    static const char *const schemes[] = {"rtsp://", "rtmp://", "http://", "https://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (!strncasecmp(source, schemes[i], strlen(schemes[i])))
            return true;
    return false;
}

bool yc_is_live_source(const char *source)
{
    /* detect.py: a URL of an image or video file is read as a file (it downloads it first) */
    return is_webcam(source) ||
           (yc_is_url(source) && !yc_is_video_path(source) && !yc_is_image_path(source));
}

#ifndef YC_HAVE_VIDEO

bool yc_video_built_in(void)
{
    return false;
}

bool yc_video_webcams_built_in(void)
{
    return false;
}

const char *yc_video_versions(char *buf, size_t len)
{
    if (len)
        buf[0] = 0;
    return buf;
}

int yc_video_open(yc_video_reader **out, const char *source, bool live, yc_video_info *info)
{
    (void)live;
    (void)info;
    *out = NULL;
    return yc_error_status(YC_EUNSUPPORTED,
                           "%s: this yolocl is built without video: install FFmpeg's libraries "
                           "(Debian: libavformat-dev libavcodec-dev libswscale-dev libavutil-dev), "
                           "then run ./configure and make again",
                           source);
}

int yc_video_read(yc_video_reader *r, int skip, yc_image *img, bool *got)
{
    (void)r;
    (void)skip;
    (void)img;
    *got = false;
    return yc_error_status(YC_EUNSUPPORTED, "this yolocl is built without video");
}

long long yc_video_frames_read(const yc_video_reader *r)
{
    (void)r;
    return 0;
}

void yc_video_close(yc_video_reader *r)
{
    (void)r;
}

#else /* YC_HAVE_VIDEO */

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#ifdef YC_HAVE_AVDEVICE
#include <libavdevice/avdevice.h>
#endif

#include "video_internal.h"

bool yc_video_built_in(void)
{
    return true;
}

bool yc_video_webcams_built_in(void)
{
#ifdef YC_HAVE_AVDEVICE
    return true;
#else
    return false;
#endif
}

const char *yc_video_versions(char *buf, size_t len)
{
    unsigned f = avformat_version(), c = avcodec_version(), s = swscale_version();
    snprintf(buf, len, "libavformat %u.%u.%u, libavcodec %u.%u.%u, libswscale %u.%u.%u",
             AV_VERSION_MAJOR(f), AV_VERSION_MINOR(f), AV_VERSION_MICRO(f), AV_VERSION_MAJOR(c),
             AV_VERSION_MINOR(c), AV_VERSION_MICRO(c), AV_VERSION_MAJOR(s), AV_VERSION_MINOR(s),
             AV_VERSION_MICRO(s));
    return buf;
}

/* ------------------------------------------------------------------------------------------------
 * FFmpeg's messages: kept, not printed.  The last error-level line FFmpeg logged on this thread
 * ("moov atom not found") is added to yolocl's own message of the failure; with -v (verbosity 2)
 * FFmpeg's warnings are printed too.
 * ---------------------------------------------------------------------------------------------- */

static _Thread_local char last_av_error[256];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_callback(void *avcl, int level, const char *fmt, va_list vl)
{
    if (level > AV_LOG_ERROR && !(yc_verbosity >= 2 && level <= AV_LOG_WARNING))
        return;
    char line[sizeof last_av_error];
    int prefix = 1;
    av_log_format_line(avcl, level, fmt, vl, line, sizeof line, &prefix);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = 0;
    if (level <= AV_LOG_ERROR)
        memcpy(last_av_error, line, n + 1);
    if (yc_verbosity >= 2)
        fprintf(stderr, "FFmpeg: %s\n", line);
}

static void log_init(void)
{
    av_log_set_callback(log_callback);
}

void yc_video_log_init(void)
{
    pthread_once(&log_once, log_init);
    last_av_error[0] = 0;
}

int yc_video_av_error(int status, int averr, const char *fmt, ...)
{
    char what[768], err[AV_ERROR_MAX_STRING_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    av_strerror(averr, err, sizeof err);
    if (last_av_error[0])
        return yc_error_status(status, "%s: %s (FFmpeg: %s)", what, err, last_av_error);
    return yc_error_status(status, "%s: %s", what, err);
}

/* ------------------------------------------------------------------------------------------------
 * The reader
 * ---------------------------------------------------------------------------------------------- */

/* Seconds a live source may block one read (or its opening) before it counts as lost. */
#define LIVE_TIMEOUT_S 30.0

struct yc_video_reader {
    char *source;
    bool live, network;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    struct SwsContext *sws;
    int stream;
    /* frames decoded, and returned by yc_video_read */
    long long decoded, returned;
    /* the decoder has been sent its end (flush) packet; it has returned its last frame */
    bool flushing, ended;
    /* set by yc_video_close: FFmpeg's blocking calls return (interrupt callback) */
    atomic_bool stop;
    /* a blocking call of a live source gives up after this time (yc_now seconds; 0: never) */
    _Atomic double deadline;

    /* live: the thread decoding the source, and the newest frame it kept */
    pthread_t thread;
    bool sync_ready, thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    yc_image work, latest;
    /* kept frames (numbered from 1) and the number of the one returned last */
    long long latest_seq, taken_seq;
    /* the thread keeps every keep_every-th frame (vid_stride) */
    int keep_every;
    /* the thread has finished: the source ended or failed (status, message) */
    bool done;
    int thread_status;
    char thread_error[1024];
};

/* FFmpeg's interrupt callback: nonzero ends the blocking call. */
static int interrupt_cb(void *opaque)
{
    yc_video_reader *r = opaque;
    if (atomic_load(&r->stop))
        return 1;
    double dl = atomic_load(&r->deadline);
    return dl > 0 && yc_now() > dl;
}

static void arm_deadline(yc_video_reader *r)
{
    if (r->live)
        atomic_store(&r->deadline, yc_now() + LIVE_TIMEOUT_S);
}

/* Converts r->frame into img (RGB). */
static int frame_to_rgb(yc_video_reader *r, yc_image *img)
{
    const AVFrame *f = r->frame;
    if (f->width < 1 || f->height < 1 || f->format < 0)
        return yc_error_status(YC_EFORMAT, "%s: frame %lld has no picture (%dx%d)", r->source,
                               r->decoded, f->width, f->height);
    r->sws = sws_getCachedContext(r->sws, f->width, f->height, (enum AVPixelFormat)f->format,
                                  f->width, f->height, AV_PIX_FMT_RGB24,
                                  SWS_BICUBIC | SWS_ACCURATE_RND, NULL, NULL, NULL);
    if (!r->sws)
        return yc_error_status(YC_EUNSUPPORTED, "%s: cannot convert %s frames of %dx%d to RGB",
                               r->source, av_get_pix_fmt_name((enum AVPixelFormat)f->format),
                               f->width, f->height);
    int st = yc_image_reserve(img, f->height, f->width);
    if (st)
        return yc_error_context(st, "%s: a %dx%d frame", r->source, f->width, f->height);
    uint8_t *dst[4] = {img->data, NULL, NULL, NULL};
    int dst_stride[4] = {3 * f->width, 0, 0, 0};
    sws_scale(r->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst,
              dst_stride);
    return YC_OK;
}

/* Decodes the next frame into r->frame; *got false at the end of the source.  Packets the decoder
 * refuses as invalid data are dropped, as OpenCV's reader drops them (the next key frame
 * recovers); errors of the source itself fail. */
static int decode_next(yc_video_reader *r, bool *got)
{
    *got = false;
    for (;;) {
        if (r->ended)
            return YC_OK;
        int rc = avcodec_receive_frame(r->dec, r->frame);
        if (rc == 0) {
            r->decoded++;
            *got = true;
            return YC_OK;
        }
        if (rc == AVERROR_EOF) {
            r->ended = true;
            return YC_OK;
        }
        if (rc != AVERROR(EAGAIN))
            return yc_video_av_error(YC_EFORMAT, rc, "%s: decoding frame %lld", r->source,
                                     r->decoded + 1);
        if (r->flushing) {
            r->ended = true;
            return YC_OK;
        }
        arm_deadline(r);
        rc = av_read_frame(r->fmt, r->pkt);
        atomic_store(&r->deadline, 0.0);
        /* the end: EOF, or a read that failed at the end of the input without an I/O error of
         * its own (demuxers that report a stream closed by its server as EIO) */
        const AVIOContext *pb = r->fmt->pb;
        if (rc == AVERROR_EOF ||
            (rc < 0 && pb && avio_feof((AVIOContext *)pb) && (!pb->error || pb->error == AVERROR_EOF))) {
            r->flushing = true;
            if ((rc = avcodec_send_packet(r->dec, NULL)) < 0 && rc != AVERROR_EOF)
                return yc_video_av_error(YC_EFORMAT, rc, "%s: ending the decoder", r->source);
            continue;
        }
        if (rc < 0) {
            if (atomic_load(&r->stop))
                return YC_OK;
            return yc_video_av_error(YC_EIO, rc, "%s: reading after frame %lld%s", r->source,
                                     r->decoded, r->live ? " (connection lost or no data for 30 s)"
                                                         : "");
        }
        if (r->pkt->stream_index == r->stream) {
            rc = avcodec_send_packet(r->dec, r->pkt);
            if (rc < 0 && rc != AVERROR_INVALIDDATA && rc != AVERROR(EAGAIN)) {
                av_packet_unref(r->pkt);
                return yc_video_av_error(YC_EFORMAT, rc, "%s: decoding after frame %lld",
                                         r->source, r->decoded);
            }
        }
        av_packet_unref(r->pkt);
    }
}

/* The live thread: decodes the source to its end, keeping the newest kept frame in r->latest. */
static void *live_thread(void *arg)
{
    yc_video_reader *r = arg;
    yc_video_log_init();
    int st = YC_OK;
    long long n = 0;
    while (!atomic_load(&r->stop)) {
        bool got;
        if ((st = decode_next(r, &got)) || !got)
            break;
        pthread_mutex_lock(&r->mu);
        int every = r->keep_every;
        pthread_mutex_unlock(&r->mu);
        if (++n % every)
            continue;
        if ((st = frame_to_rgb(r, &r->work)))
            break;
        pthread_mutex_lock(&r->mu);
        yc_image t = r->latest;
        r->latest = r->work;
        r->work = t;
        r->latest_seq++;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_lock(&r->mu);
    r->done = true;
    r->thread_status = st;
    if (st)
        snprintf(r->thread_error, sizeof r->thread_error, "%s", yc_last_error());
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* The input format and URL of a source: /dev/videoN through libavdevice's v4l2 for a number. */
static int input_of(const char *source, const AVInputFormat **ifmt, char *url, size_t len)
{
    *ifmt = NULL;
    if (!is_webcam(source)) {
        snprintf(url, len, "%s", source);
        return YC_OK;
    }
#ifdef YC_HAVE_AVDEVICE
    avdevice_register_all();
    if (!(*ifmt = av_find_input_format("v4l2")))
        return yc_error_status(YC_EUNSUPPORTED, "--source %s: this FFmpeg's libavdevice has no "
                               "v4l2 input (webcams)", source);
    snprintf(url, len, "/dev/video%s", source);
    return YC_OK;
#else
    (void)url;
    (void)len;
    return yc_error_status(YC_EUNSUPPORTED,
                           "--source %s (a webcam) needs FFmpeg's libavdevice: install it (Debian: "
                           "libavdevice-dev), then run ./configure and make again",
                           source);
#endif
}

/* Opens the container and the decoder of its best video stream. */
static int open_decoder(yc_video_reader *r, const char *source, yc_video_info *info)
{
    char url[4096];
    const AVInputFormat *ifmt;
    int st = input_of(source, &ifmt, url, sizeof url);
    if (st)
        return st;
    if (!(r->fmt = avformat_alloc_context()))
        return yc_error_status(YC_ENOMEM, "out of memory: opening %s", source);
    r->fmt->interrupt_callback = (AVIOInterruptCB){.callback = interrupt_cb, .opaque = r};
    AVDictionary *opts = NULL;
    if (r->network && av_dict_set(&opts, "rw_timeout", "30000000", 0) < 0)
        return yc_error_status(YC_ENOMEM, "out of memory: opening %s", source);
    arm_deadline(r);
    int rc = avformat_open_input(&r->fmt, url, ifmt, &opts);
    av_dict_free(&opts);
    if (rc < 0)
        return yc_video_av_error(rc == AVERROR(ENOENT) ? YC_EIO : YC_EFORMAT, rc,
                                 "cannot open %s", url);
    if ((rc = avformat_find_stream_info(r->fmt, NULL)) < 0)
        return yc_video_av_error(YC_EFORMAT, rc, "%s: cannot read its streams", source);
    atomic_store(&r->deadline, 0.0);
    const AVCodec *codec = NULL;
    rc = av_find_best_stream(r->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (rc == AVERROR_STREAM_NOT_FOUND)
        return yc_error_status(YC_EFORMAT, "%s has no video stream", source);
    if (rc < 0 || !codec)
        return yc_video_av_error(YC_EUNSUPPORTED, rc < 0 ? rc : AVERROR_DECODER_NOT_FOUND,
                                 "%s: no decoder for its video", source);
    r->stream = rc;
    AVStream *vs = r->fmt->streams[rc];
    if (!(r->dec = avcodec_alloc_context3(codec)))
        return yc_error_status(YC_ENOMEM, "out of memory: the %s decoder of %s", codec->name,
                               source);
    if ((rc = avcodec_parameters_to_context(r->dec, vs->codecpar)) < 0 ||
        (rc = avcodec_open2(r->dec, codec, NULL)) < 0)
        return yc_video_av_error(YC_EFORMAT, rc, "%s: cannot open the %s decoder", source,
                                 codec->name);
    if (!(r->pkt = av_packet_alloc()) || !(r->frame = av_frame_alloc()))
        return yc_error_status(YC_ENOMEM, "out of memory: decoding %s", source);
    if (info) {
        memset(info, 0, sizeof *info);
        info->w = vs->codecpar->width;
        info->h = vs->codecpar->height;
        info->codec = codec->name;
        /* OpenCV's CvCapture_FFMPEG::get_fps, get_duration_sec and get_total_frames */
        double fps = av_q2d(vs->avg_frame_rate);
        if (!(fps > 0))
            fps = av_q2d(av_guess_frame_rate(r->fmt, vs, NULL));
        info->fps = fps > 0 ? fps : 0;
        if (!r->live) {
            if (vs->nb_frames > 0) {
                info->frames = vs->nb_frames;
                info->frames_exact = true;
            } else {
                double sec = r->fmt->duration != AV_NOPTS_VALUE
                                 ? (double)r->fmt->duration / AV_TIME_BASE
                                 : 0;
                if (!(sec > 0) && vs->duration != AV_NOPTS_VALUE)
                    sec = (double)vs->duration * av_q2d(vs->time_base);
                info->frames = sec > 0 ? (long long)(sec * info->fps + 0.5) : 0;
            }
        }
    }
    return YC_OK;
}

int yc_video_open(yc_video_reader **out, const char *source, bool live, yc_video_info *info)
{
    *out = NULL;
    yc_video_log_init();
    yc_video_reader *r = yc_calloc(1, sizeof *r, "video reader");
    if (!r)
        return YC_ENOMEM;
    r->live = live;
    r->network = strstr(source, "://") != NULL;
    r->keep_every = 1;
    atomic_init(&r->stop, false);
    atomic_init(&r->deadline, 0.0);
    if (r->network)
        avformat_network_init();
    int st = (r->source = yc_strdup(source, "video reader")) ? YC_OK : YC_ENOMEM;
    if (!st)
        st = open_decoder(r, source, info);
    if (!st && live) {
        if (pthread_mutex_init(&r->mu, NULL)) {
            st = yc_error_status(YC_ERR, "%s: cannot create the reader's lock", source);
        } else if (pthread_cond_init(&r->cv, NULL)) {
            pthread_mutex_destroy(&r->mu);
            st = yc_error_status(YC_ERR, "%s: cannot create the reader's lock", source);
        } else {
            r->sync_ready = true;
            if (pthread_create(&r->thread, NULL, live_thread, r))
                st = yc_error_status(YC_ERR, "%s: cannot start the reader's thread", source);
            else
                r->thread_started = true;
        }
    }
    if (st) {
        yc_video_close(r);
        return st;
    }
    *out = r;
    return YC_OK;
}

/* The live read: waits for a frame newer than the one returned last. */
static int read_live(yc_video_reader *r, int skip, yc_image *img, bool *got)
{
    int st = YC_OK;
    pthread_mutex_lock(&r->mu);
    r->keep_every = skip + 1;
    while (r->latest_seq == r->taken_seq && !r->done)
        pthread_cond_wait(&r->cv, &r->mu);
    if (r->latest_seq > r->taken_seq) {
        st = yc_image_copy(img, &r->latest);
        r->taken_seq = r->latest_seq;
        *got = st == YC_OK;
    } else if (r->thread_status) {
        st = yc_error_status(r->thread_status, "%s", r->thread_error);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

int yc_video_read(yc_video_reader *r, int skip, yc_image *img, bool *got)
{
    *got = false;
    if (skip < 0)
        skip = 0;
    int st;
    if (r->live) {
        st = read_live(r, skip, img, got);
    } else {
        /* detect.py: vid_stride grabs, then the last grabbed frame is retrieved */
        bool have = false;
        for (int i = 0; i <= skip; i++)
            if ((st = decode_next(r, &have)) || !have)
                return st;
        st = frame_to_rgb(r, img);
        *got = st == YC_OK;
    }
    if (*got)
        r->returned++;
    return st;
}

long long yc_video_frames_read(const yc_video_reader *r)
{
    return r ? r->returned : 0;
}

void yc_video_close(yc_video_reader *r)
{
    if (!r)
        return;
    if (r->thread_started) {
        atomic_store(&r->stop, true);
        pthread_join(r->thread, NULL);
    }
    if (r->sync_ready) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
    }
    sws_freeContext(r->sws);
    av_frame_free(&r->frame);
    av_packet_free(&r->pkt);
    avcodec_free_context(&r->dec);
    avformat_close_input(&r->fmt);
    if (r->network)
        avformat_network_deinit();
    yc_image_free(&r->work);
    yc_image_free(&r->latest);
    free(r->source);
    free(r);
}

#endif /* YC_HAVE_VIDEO */
