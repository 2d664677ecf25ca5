/* fault_kill: runs a command and kills it with SIGKILL at a chosen kind of moment, for
 * bench/fault_test.sh.
 *
 *   fault_kill [OPTION]... -- COMMAND [ARG]...
 *
 *   --log FILE         the command's standard output and error go to FILE (truncated first)
 *   --after TEXT       start the clock when TEXT appears in the log
 *   --after-file PATH  start the clock when PATH exists
 *   --dir DIR          where the command writes its temporary files (names containing ".tmp.",
 *                      as yolocl's atomic writes make them): reported after the kill
 *   --at MIN:MAX       kill at a uniformly drawn time MIN..MAX milliseconds after the clock starts
 *   --in-write         instead, kill while a temporary file exists in DIR ...
 *   --nth N            ... at the N-th temporary file that appears (default 1) ...
 *   --delay-us MAX     ... after a uniformly drawn delay of 0..MAX microseconds (default 2000)
 *   --seed N           seed of the draws (default: time and pid)
 *
 * Prints one line on standard output:
 *   killed PID at T ms [during the write of NAME (B bytes written)]
 *   exited with status S at T ms          (the command finished before the kill)
 * Exit status: 0 killed, 10 the command finished (or died) by itself first, 1 error.
 *
 * The directory is polled every 100 microseconds; yolocl's checkpoint writes last 20-500 ms
 * (the fsync), so a kill after a short delay lands inside the write.  Whether it did is checked
 * after the kill: the temporary file still exists when the rename had not happened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_NS 100000L

typedef struct options {
    const char *log, *after, *after_file, *dir;
    long at_min, at_max;
    long nth, delay_us;
    uint64_t seed;
    bool have_at, in_write, have_seed;
} options;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* xorshift64*: the draws only need to be spread, and reproducible from --seed */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static long draw(uint64_t *s, long lo, long hi)
{
    return hi <= lo ? lo : lo + (long)(next_rand(s) % (uint64_t)(hi - lo + 1));
}

static int usage(const char *msg)
{
    fprintf(stderr, "fault_kill: %s\nUsage: fault_kill [--log FILE] [--after TEXT | --after-file "
                    "PATH] [--dir DIR]\n    (--at MIN:MAX | --in-write [--nth N] [--delay-us MAX]) "
                    "[--seed N] -- COMMAND [ARG]...\n", msg);
    return 1;
}

static bool parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        return false;
    *out = v;
    return true;
}

/* Whether the log file holds `text` (read whole: the logs of these runs are small). */
static bool log_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char buf[1 << 16];
    size_t keep = 0, tl = strlen(text);
    bool found = false;
    for (;;) {
        size_t got = fread(buf + keep, 1, sizeof buf - 1 - keep, f);
        if (got == 0)
            break;
        size_t n = keep + got;
        buf[n] = '\0';
        if (memmem(buf, n, text, tl)) {
            found = true;
            break;
        }
        keep = tl < n ? tl - 1 : 0;
        memmove(buf, buf + n - keep, keep);
    }
    fclose(f);
    return found;
}

/* The first temporary file in dir (name into out), or false. */
static bool find_tmp(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".tmp.")) {
            snprintf(out, len, "%s/%s", dir, e->d_name);
            found = true;
        }
    }
    closedir(d);
    return found;
}

/* Polls the child: true (with *status) when it has ended. */
static bool ended(pid_t pid, int *status)
{
    pid_t r = waitpid(pid, status, WNOHANG);
    return r == pid;
}

static int report_exit(int status, double t)
{
    if (WIFEXITED(status))
        printf("exited with status %d at %.0f ms\n", WEXITSTATUS(status), t);
    else
        printf("died of signal %d at %.0f ms\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0, t);
    return 10;
}

int main(int argc, char **argv)
{
    options o = {.nth = 1, .delay_us = 2000};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--in-write") == 0) {
            o.in_write = true;
            continue;
        }
        if (!v)
            return usage("an option lacks its value");
        if (strcmp(a, "--log") == 0) {
            o.log = v;
        } else if (strcmp(a, "--after") == 0) {
            o.after = v;
        } else if (strcmp(a, "--after-file") == 0) {
            o.after_file = v;
        } else if (strcmp(a, "--dir") == 0) {
            o.dir = v;
        } else if (strcmp(a, "--at") == 0) {
            char *colon = strchr(v, ':');
            char lo[32];
            if (!colon || (size_t)(colon - v) >= sizeof lo)
                return usage("--at takes MIN:MAX milliseconds");
            memcpy(lo, v, (size_t)(colon - v));
            lo[colon - v] = '\0';
            if (!parse_long(lo, &o.at_min) || !parse_long(colon + 1, &o.at_max) ||
                o.at_max < o.at_min)
                return usage("--at takes MIN:MAX milliseconds");
            o.have_at = true;
        } else if (strcmp(a, "--nth") == 0) {
            if (!parse_long(v, &o.nth) || o.nth < 1)
                return usage("--nth takes a positive number");
        } else if (strcmp(a, "--delay-us") == 0) {
            if (!parse_long(v, &o.delay_us))
                return usage("--delay-us takes a number of microseconds");
        } else if (strcmp(a, "--seed") == 0) {
            long s;
            if (!parse_long(v, &s))
                return usage("--seed takes a number");
            o.seed = (uint64_t)s;
            o.have_seed = true;
        } else {
            return usage("unknown option");
        }
        i++;
    }
    if (i >= argc - 1)
        return usage("no command after --");
    if (o.have_at == o.in_write)
        return usage("give one of --at and --in-write");
    if (o.in_write && !o.dir)
        return usage("--in-write needs --dir");
    if (o.after && !o.log)
        return usage("--after needs --log");
    uint64_t rs = o.have_seed ? o.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    rs = rs * 0x9E3779B97F4A7C15ull + 1;
    for (int k = 0; k < 4; k++)
        next_rand(&rs);

    pid_t pid = fork();
    if (pid < 0) {
        perror("fault_kill: fork");
        return 1;
    }
    if (pid == 0) {
        if (o.log) {
            int fd = open(o.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                _exit(127);
            close(fd);
        }
        execvp(argv[i + 1], argv + i + 1);
        _exit(127);
    }
    double t0 = now_ms();
    int status;
    /* the clock */
    while ((o.after && !log_has(o.log, o.after)) ||
           (o.after_file && access(o.after_file, F_OK) != 0)) {
        if (ended(pid, &status))
            return report_exit(status, now_ms() - t0);
        nap(1000000L);
    }
    double start = now_ms();
    char tmp[4096] = "";
    if (o.have_at) {
        double at = start + (double)draw(&rs, o.at_min, o.at_max);
        while (now_ms() < at) {
            if (ended(pid, &status))
                return report_exit(status, now_ms() - t0);
            nap(POLL_NS);
        }
    } else {
        long seen = 0;
        bool present = false;
        char name[4096];
        for (;;) {
            if (ended(pid, &status))
                return report_exit(status, now_ms() - t0);
            bool now = find_tmp(o.dir, name, sizeof name);
            if (now && !present && ++seen == o.nth) {
                snprintf(tmp, sizeof tmp, "%s", name);
                break;
            }
            present = now;
            nap(POLL_NS);
        }
        long us = draw(&rs, 0, o.delay_us);
        if (us > 0)
            nap(us * 1000L);
    }
    double t = now_ms() - t0;
    if (kill(pid, SIGKILL) != 0) {
        if (ended(pid, &status))
            return report_exit(status, now_ms() - t0);
        perror("fault_kill: kill");
        return 1;
    }
    if (waitpid(pid, &status, 0) != pid) {
        perror("fault_kill: waitpid");
        return 1;
    }
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        return report_exit(status, t);
    printf("killed %ld at %.0f ms", (long)pid, t);
    /* the write the kill interrupted: the one waited for, or any other one under way */
    struct stat sb;
    if ((tmp[0] && stat(tmp, &sb) == 0) ||
        (o.dir && find_tmp(o.dir, tmp, sizeof tmp) && stat(tmp, &sb) == 0))
        printf(" during the write of %s (%lld bytes written)", tmp, (long long)sb.st_size);
    else if (tmp[0])
        printf(" after the write of %s had completed", tmp);
    putchar('\n');
    return 0;
}
