/* The stop request of a training run (stop.h). */
#include "stop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t nonblocking_output;
/* the thread that installed the handler: the one that trains and writes the output */
static pthread_t training_thread;

static void on_signal(int sig)
{
    /* a signal to the process may land on any thread (OpenMP's, the loaders', MPI's); it is
     * passed to the training thread, whose write to a terminal nobody reads only a signal of its
     * own interrupts */
    if (!pthread_equal(pthread_self(), training_thread)) {
        pthread_kill(training_thread, sig);
        return;
    }
    if (stop_requested)
        _exit(128 + sig);
    stop_requested = 1;
    if (nonblocking_output) {
        /* fcntl is async-signal-safe; errno is the interrupted code's */
        int saved_errno = errno;
        int flags = fcntl(STDOUT_FILENO, F_GETFL);
        if (flags != -1)
            fcntl(STDOUT_FILENO, F_SETFL, flags | O_NONBLOCK);
        errno = saved_errno;
    }
}

void yc_stop_install(yc_stop_signals *saved, bool several_ranks)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    nonblocking_output = several_ranks;
    training_thread = pthread_self();
    sigaction(SIGINT, &sa, &saved->old_int);
    sigaction(SIGTERM, &sa, &saved->old_term);
}

void yc_stop_restore(const yc_stop_signals *saved)
{
    sigaction(SIGINT, &saved->old_int, NULL);
    sigaction(SIGTERM, &saved->old_term, NULL);
}

bool yc_stop_requested(void)
{
    return stop_requested != 0;
}

void yc_stop_request(void)
{
    stop_requested = 1;
}
