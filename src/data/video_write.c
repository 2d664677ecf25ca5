/* Writing annotated videos through FFmpeg (see video.h). */
#include "config.h"
#include "video.h"

#include "log.h"

#ifndef YC_HAVE_VIDEO

int yc_video_writer_open(yc_video_writer **out, const char *path, int w, int h, double fps,
                         const char **codec)
{
    (void)w;
    (void)h;
    (void)fps;
    *out = NULL;
    if (codec)
        *codec = NULL;
    return yc_error_status(YC_EUNSUPPORTED,
                           "%s: this yolocl is built without video: install FFmpeg's libraries "
                           "(Debian: libavformat-dev libavcodec-dev libswscale-dev libavutil-dev), "
                           "then run ./configure and make again",
                           path);
}

int yc_video_write(yc_video_writer *vw, const yc_image *img)
{
    (void)vw;
    (void)img;
    return yc_error_status(YC_EUNSUPPORTED, "this yolocl is built without video");
}

long long yc_video_frames_written(const yc_video_writer *vw)
{
    (void)vw;
    return 0;
}

int yc_video_writer_close(yc_video_writer *vw)
{
    (void)vw;
    return YC_OK;
}

#else /* YC_HAVE_VIDEO */

#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "util.h"
#include "video_internal.h"

struct yc_video_writer {
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *enc;
    AVStream *st;
    AVFrame *frame;
    AVPacket *pkt;
    struct SwsContext *sws;
    /* the frames' size, and the encoded size (w, h rounded up to even for 4:2:0 only codecs) */
    int w, h, ew, eh;
    /* ew x eh RGB staging when the frame is padded, else NULL */
    uint8_t *padded;
    long long written;
    bool header_written, file_open;
};

/* Whether the encoder takes pixel format f. */
static bool takes_format(const AVCodec *c, enum AVPixelFormat f)
{
    if (!c->pix_fmts)
        return f == AV_PIX_FMT_YUV420P;
    for (const enum AVPixelFormat *p = c->pix_fmts; *p != AV_PIX_FMT_NONE; p++)
        if (*p == f)
            return true;
    return false;
}

/* Opens encoder c for the writer (w, h, fps set); a negative AVERROR when c does not open. */
static int try_encoder(yc_video_writer *vw, const AVCodec *c, AVRational rate)
{
    bool odd = (vw->w | vw->h) & 1;
    enum AVPixelFormat pf = AV_PIX_FMT_YUV420P;
    if (odd && takes_format(c, AV_PIX_FMT_YUV444P))
        pf = AV_PIX_FMT_YUV444P;
    else if (!takes_format(c, AV_PIX_FMT_YUV420P))
        return AVERROR(EINVAL);
    vw->ew = pf == AV_PIX_FMT_YUV420P ? (vw->w + 1) & ~1 : vw->w;
    vw->eh = pf == AV_PIX_FMT_YUV420P ? (vw->h + 1) & ~1 : vw->h;
    AVCodecContext *e = avcodec_alloc_context3(c);
    if (!e)
        return AVERROR(ENOMEM);
    e->width = vw->ew;
    e->height = vw->eh;
    e->pix_fmt = pf;
    e->time_base = av_inv_q(rate);
    e->framerate = rate;
    /* one thread: the detector has the cores (libx264's own default, 1.5 threads per core, holds
     * frames in each thread and competes with it) */
    e->thread_count = 1;
    if (c->id == AV_CODEC_ID_MPEG4) {
        /* a fixed quantiser 3 (good quality) instead of the 200 kb/s default */
        e->flags |= AV_CODEC_FLAG_QSCALE;
        e->global_quality = FF_QP2LAMBDA * 3;
    }
    /* x264's veryfast preset: detect writing 150 frames of 1280x720 took 10 s instead of 19.5 s
     * with the default (medium) on 2 cores, and its lookahead holds 10 frames instead of 40 */
    if (!strcmp(c->name, "libx264") && av_opt_set(e->priv_data, "preset", "veryfast", 0) < 0) {
        avcodec_free_context(&e);
        return AVERROR(EINVAL);
    }
    if (vw->fmt->oformat->flags & AVFMT_GLOBALHEADER)
        e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int rc = avcodec_open2(e, c, NULL);
    if (rc < 0) {
        avcodec_free_context(&e);
        return rc;
    }
    vw->enc = e;
    return 0;
}

/* The first encoder that opens: H.264 (libx264, libopenh264), MPEG-4 part 2, the container's
 * default; each only where the container takes it. */
static int open_encoder(yc_video_writer *vw, AVRational rate, const char **codec)
{
    const AVOutputFormat *of = vw->fmt->oformat;
    const AVCodec *cand[4] = {avcodec_find_encoder_by_name("libx264"),
                              avcodec_find_encoder_by_name("libopenh264"),
                              avcodec_find_encoder(AV_CODEC_ID_MPEG4),
                              avcodec_find_encoder(of->video_codec)};
    int last = AVERROR_ENCODER_NOT_FOUND;
    for (int i = 0; i < 4; i++) {
        const AVCodec *c = cand[i];
        /* 0: the container cannot hold it; negative: the container does not say (then the
         * header's writing will) */
        if (!c || avformat_query_codec(of, c->id, FF_COMPLIANCE_NORMAL) == 0)
            continue;
        if ((last = try_encoder(vw, c, rate)) == 0) {
            if (codec)
                *codec = c->name;
            return YC_OK;
        }
        if (last == AVERROR(ENOMEM))
            break;
    }
    return yc_video_av_error(last == AVERROR(ENOMEM) ? YC_ENOMEM : YC_EUNSUPPORTED, last,
                             "%s: no video encoder of this FFmpeg opens for %dx%d frames in %s "
                             "(tried libx264, libopenh264, mpeg4 and the container's default)",
                             vw->path, vw->w, vw->h, of->name);
}

int yc_video_writer_open(yc_video_writer **out, const char *path, int w, int h, double fps,
                         const char **codec)
{
    *out = NULL;
    if (codec)
        *codec = NULL;
    if (w < 1 || h < 1)
        return yc_error_status(YC_EUSAGE, "%s: cannot write %dx%d frames", path, w, h);
    yc_video_log_init();
    yc_video_writer *vw = yc_calloc(1, sizeof *vw, "video writer");
    if (!vw)
        return YC_ENOMEM;
    vw->w = w;
    vw->h = h;
    int st = YC_OK, rc;
    /* OpenCV's VideoWriter: a rational close to fps (29.97 -> 30000/1001) */
    AVRational rate = av_d2q(fps > 0 ? fps : 30.0, 100000);
    if (!(vw->path = yc_strdup(path, "video writer")))
        st = YC_ENOMEM;
    else if ((rc = avformat_alloc_output_context2(&vw->fmt, NULL, NULL, path)) < 0 || !vw->fmt)
        st = yc_video_av_error(rc == AVERROR(ENOMEM) ? YC_ENOMEM : YC_EUNSUPPORTED, rc,
                               "%s: no container format for this file name", path);
    else
        st = open_encoder(vw, rate, codec);
    if (!st && !(vw->st = avformat_new_stream(vw->fmt, NULL)))
        st = yc_error_status(YC_ENOMEM, "out of memory: the video stream of %s", path);
    if (!st) {
        vw->st->time_base = vw->enc->time_base;
        vw->st->avg_frame_rate = rate;
        if ((rc = avcodec_parameters_from_context(vw->st->codecpar, vw->enc)) < 0)
            st = yc_video_av_error(YC_ENOMEM, rc, "%s: the stream's parameters", path);
    }
    if (!st && !(vw->fmt->oformat->flags & AVFMT_NOFILE)) {
        if ((rc = avio_open(&vw->fmt->pb, path, AVIO_FLAG_WRITE)) < 0)
            st = yc_video_av_error(YC_EIO, rc, "cannot create %s", path);
        else
            vw->file_open = true;
    }
    if (!st) {
        if ((rc = avformat_write_header(vw->fmt, NULL)) < 0)
            st = yc_video_av_error(YC_EIO, rc, "%s: writing the header", path);
        else
            vw->header_written = true;
    }
    if (!st && (!(vw->frame = av_frame_alloc()) || !(vw->pkt = av_packet_alloc())))
        st = yc_error_status(YC_ENOMEM, "out of memory: encoding %s", path);
    if (!st) {
        vw->frame->format = vw->enc->pix_fmt;
        vw->frame->width = vw->ew;
        vw->frame->height = vw->eh;
        if ((rc = av_frame_get_buffer(vw->frame, 0)) < 0)
            st = yc_video_av_error(YC_ENOMEM, rc, "%s: a %dx%d frame", path, vw->ew, vw->eh);
    }
    if (!st && (vw->ew != w || vw->eh != h) &&
        !(vw->padded = yc_malloc((size_t)vw->ew * (size_t)vw->eh * 3, "video frame")))
        st = YC_ENOMEM;
    if (!st && !(vw->sws = sws_getContext(vw->ew, vw->eh, AV_PIX_FMT_RGB24, vw->ew, vw->eh,
                                          vw->enc->pix_fmt, SWS_BICUBIC | SWS_ACCURATE_RND, NULL,
                                          NULL, NULL)))
        st = yc_error_status(YC_EUNSUPPORTED, "%s: cannot convert RGB to %s", path,
                             av_get_pix_fmt_name(vw->enc->pix_fmt));
    if (st) {
        yc_video_writer_close(vw);
        return st;
    }
    *out = vw;
    return YC_OK;
}

/* Sends `f` (NULL: the end) to the encoder and writes the packets it returns. */
static int encode(yc_video_writer *vw, const AVFrame *f)
{
    int rc = avcodec_send_frame(vw->enc, f);
    if (rc < 0)
        return yc_video_av_error(YC_EFORMAT, rc, "%s: encoding frame %lld", vw->path,
                                 vw->written + 1);
    for (;;) {
        rc = avcodec_receive_packet(vw->enc, vw->pkt);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF)
            return YC_OK;
        if (rc < 0)
            return yc_video_av_error(YC_EFORMAT, rc, "%s: encoding frame %lld", vw->path,
                                     vw->written + 1);
        av_packet_rescale_ts(vw->pkt, vw->enc->time_base, vw->st->time_base);
        vw->pkt->stream_index = vw->st->index;
        rc = av_interleaved_write_frame(vw->fmt, vw->pkt);
        av_packet_unref(vw->pkt);
        if (rc < 0)
            return yc_video_av_error(YC_EIO, rc, "cannot write %s", vw->path);
    }
}

int yc_video_write(yc_video_writer *vw, const yc_image *img)
{
    if (img->w != vw->w || img->h != vw->h)
        return yc_error_status(YC_EUSAGE, "%s: a %dx%d frame in a %dx%d video", vw->path, img->w,
                               img->h, vw->w, vw->h);
    const uint8_t *src = img->data;
    if (vw->padded) {
        /* the last column and row repeated up to the even size */
        size_t row = (size_t)vw->ew * 3;
        for (int y = 0; y < vw->eh; y++) {
            uint8_t *d = vw->padded + (size_t)y * row;
            memcpy(d, img->data + (size_t)(y < vw->h ? y : vw->h - 1) * (size_t)vw->w * 3,
                   (size_t)vw->w * 3);
            if (vw->ew > vw->w)
                memcpy(d + (size_t)vw->w * 3, d + (size_t)(vw->w - 1) * 3, 3);
        }
        src = vw->padded;
    }
    int rc = av_frame_make_writable(vw->frame);
    if (rc < 0)
        return yc_video_av_error(YC_ENOMEM, rc, "%s: frame %lld", vw->path, vw->written + 1);
    const uint8_t *in[4] = {src, NULL, NULL, NULL};
    int in_stride[4] = {3 * vw->ew, 0, 0, 0};
    sws_scale(vw->sws, in, in_stride, 0, vw->eh, vw->frame->data, vw->frame->linesize);
    vw->frame->pts = vw->written;
    int st = encode(vw, vw->frame);
    if (!st)
        vw->written++;
    return st;
}

long long yc_video_frames_written(const yc_video_writer *vw)
{
    return vw ? vw->written : 0;
}

int yc_video_writer_close(yc_video_writer *vw)
{
    if (!vw)
        return YC_OK;
    int st = YC_OK, rc;
    if (vw->header_written && vw->enc && vw->pkt) {
        st = encode(vw, NULL);
        if ((rc = av_write_trailer(vw->fmt)) < 0 && !st)
            st = yc_video_av_error(YC_EIO, rc, "%s: finishing the file", vw->path);
    }
    if (vw->file_open && (rc = avio_closep(&vw->fmt->pb)) < 0 && !st)
        st = yc_video_av_error(YC_EIO, rc, "cannot write %s", vw->path);
    sws_freeContext(vw->sws);
    av_frame_free(&vw->frame);
    av_packet_free(&vw->pkt);
    avcodec_free_context(&vw->enc);
    avformat_free_context(vw->fmt);
    free(vw->padded);
    free(vw->path);
    free(vw);
    return st;
}

#endif /* YC_HAVE_VIDEO */
