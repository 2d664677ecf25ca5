/* What video_read.c and video_write.c share (FFmpeg builds only). */
#ifndef YC_VIDEO_INTERNAL_H
#define YC_VIDEO_INTERNAL_H

/* Installs the FFmpeg log callback (once per process) and forgets this thread's last FFmpeg
 * error line. */
void yc_video_log_init(void);

/* Records "<what>: <FFmpeg's text for averr> (FFmpeg: <its last error line>)" as the error and
 * returns status. */
int yc_video_av_error(int status, int averr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
