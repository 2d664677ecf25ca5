/* Video files, streams and webcams in and annotated videos out, through FFmpeg's libraries
 * (libavformat, libavcodec, libswscale, libavutil; libavdevice for webcams), as detect.py reads
 * them with OpenCV's VideoCapture and writes them with its VideoWriter.
 *
 * Reading (video_read.c): frames decoded one at a time into an RGB yc_image, never the whole video
 * (bounded memory).  A file is read in order, every frame; a live source (a stream URL or a
 * webcam) is read by a thread of its own that keeps only the newest frame, as YOLOv5's
 * LoadStreams does, so that a slow detector sees the present, not a growing backlog.
 *
 * Writing (video_write.c): RGB frames encoded at a constant frame rate; H.264 when FFmpeg has an
 * encoder for it, else MPEG-4 part 2 (what YOLOv5 writes: OpenCV's 'mp4v'), else the output
 * format's default video codec.
 *
 * In a build without FFmpeg (configure --without-ffmpeg, or the libraries absent) the opening
 * functions fail with YC_EUNSUPPORTED and a message naming the Debian packages to install. */
#ifndef YC_VIDEO_H
#define YC_VIDEO_H

#include <stdbool.h>
#include <stddef.h>

#include "image.h"

/* Whether this build reads and writes video, and whether it opens webcams (libavdevice). */
bool yc_video_built_in(void);
bool yc_video_webcams_built_in(void);

/* The versions of the FFmpeg libraries in use, "libavformat 59.27.100, libavcodec 59.37.100", into
 * buf (len bytes; "" without FFmpeg); returns buf. */
const char *yc_video_versions(char *buf, size_t len);

/* True when the path's suffix is a video format of YOLOv5's VID_FORMATS (case-insensitive): asf
 * avi gif m4v mkv mov mp4 mpeg mpg ts wmv webm. */
bool yc_is_video_path(const char *path);

/* True when `source` is an rtsp://, rtmp://, http:// or https:// URL. */
bool yc_is_url(const char *source);

/* True when `source` is live as detect.py decides: a webcam number ("0") or an rtsp://, rtmp://,
 * http:// or https:// URL that does not end in an image or video suffix. */
bool yc_is_live_source(const char *source);

/* What is known of a source when it is opened. */
typedef struct yc_video_info {
    /* frame size in pixels */
    int w, h;
    /* frames per second of the stream (its average frame rate, else FFmpeg's guess); 0: unknown */
    double fps;
    /* frame count as OpenCV's CAP_PROP_FRAME_COUNT: the container's count, else duration x fps
     * rounded; 0: unknown (live sources) */
    long long frames;
    /* frames is the count the container's header gives (else an estimate from the duration) */
    bool frames_exact;
    /* the decoder's name ("h264") */
    const char *codec;
} yc_video_info;

typedef struct yc_video_reader yc_video_reader;

/* Opens a video file, a stream URL or (a decimal number N) the webcam /dev/videoN.  live: read in
 * a thread of its own keeping the newest frame only (for streams and webcams), else every frame
 * in order.  *info (may be NULL) receives the size, rate and frame count.  Errors name the source
 * and what FFmpeg said; YC_EUNSUPPORTED when the build cannot read it (no FFmpeg, or a webcam
 * without libavdevice). */
int yc_video_open(yc_video_reader **out, const char *source, bool live, yc_video_info *info);

/* The next frame, RGB, into img (reallocated as needed).  skip: frames decoded and dropped first
 * (vid_stride - 1; for a live source, frames of the thread kept only every skip + 1).  A live
 * source waits for a frame newer than the last one returned.  *got is false at the end of the
 * source (a file read to its end, a stream that closed).  A frame that cannot be decoded, or a
 * file cut short, is an error (YC_EFORMAT, the message names the source and the frame). */
int yc_video_read(yc_video_reader *r, int skip, yc_image *img, bool *got);

/* Frames returned so far. */
long long yc_video_frames_read(const yc_video_reader *r);

/* Stops the reader's thread (live), closes the source and frees r (NULL is allowed). */
void yc_video_close(yc_video_reader *r);

typedef struct yc_video_writer yc_video_writer;

/* Creates the video file `path` for w x h RGB frames at `fps` frames per second (<= 0: 30), its
 * container from the suffix (.mp4: MP4).  The codec: H.264 when FFmpeg has an encoder for it
 * (libx264, ...), else MPEG-4 part 2, else the container's default; its name goes to *codec (may
 * be NULL; static).  Frames are encoded 4:2:0; an odd width or height is encoded 4:4:4 where the
 * codec has it, else the frame is padded by one row or column (its edge repeated). */
int yc_video_writer_open(yc_video_writer **out, const char *path, int w, int h, double fps,
                         const char **codec);

/* Encodes one frame (img must be the writer's w x h). */
int yc_video_write(yc_video_writer *vw, const yc_image *img);

/* Frames written so far. */
long long yc_video_frames_written(const yc_video_writer *vw);

/* Flushes the encoder, finishes the file (its index) and frees vw; the status of that.  NULL is
 * allowed.  A writer closed after an error still frees everything. */
int yc_video_writer_close(yc_video_writer *vw);

#endif
