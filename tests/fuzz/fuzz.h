/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c).  Each target defines LLVMFuzzerTestOneInput,
 * which libFuzzer calls (tests/fuzz/run.sh builds the targets with clang -fsanitize=fuzzer) and
 * which tests/fuzz/replay.c calls for every file of the target's seeds/ and regress/ directories
 * (make check).  A target feeds the input to one of yolocl's parsers and checks that it returns
 * a status; a crash, a leak, undefined behaviour, a hang or a failure without a message is a
 * finding. */
#ifndef YC_FUZZ_H
#define YC_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Quiets yolocl's console output (once per process). */
void fuzz_init(void);

/* A private directory for the target's files, created on first use and removed at exit; NULL
 * (with a message on stderr) when it cannot be made. */
const char *fuzz_dir(void);

/* Writes `size` bytes to fuzz_dir()/name (replacing it) and returns the path (a static buffer per
 * name slot: at most 8 distinct names per process), or NULL with a message on stderr. */
const char *fuzz_write(const char *name, const void *data, size_t size);

/* fuzz_begin clears the thread's message before a parser call; fuzz_check then checks that a
 * failure left one (yc_last_error: "parsers fail with a clear message") and aborts when not,
 * naming the call. */
void fuzz_begin(void);
void fuzz_check(int status, const char *what);

/* Aborts, naming what broke: for properties a target checks itself. */
void fuzz_fail(const char *what) __attribute__((noreturn));

#endif
