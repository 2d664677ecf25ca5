/* The stop request of a training run: the first SIGINT or SIGTERM asks for a resumable checkpoint
 * and a clean exit after the current batch, a second one exits at once (status 128 + signal).
 *
 * Under Open MPI's mpirun a signal to mpirun reaches the ranks as SIGCONT, then SIGTERM
 * odls_base_sigkill_timeout seconds later (default 1), then SIGKILL as long after that; from the
 * SIGCONT on mpirun no longer reads the ranks' standard output, a pseudo-terminal, so a rank that
 * writes there blocks until it is killed and never saves its checkpoint.  With several ranks the
 * handler therefore makes standard output non-blocking: what cannot be written is dropped, and a
 * write blocked when the signal came returns (the handler is installed without SA_RESTART).  One
 * process leaves its output alone (it may be the user's terminal, shared with the shell).  A
 * signal landing on another thread is passed on to the thread that installed the handler, so
 * that its blocked write is the one interrupted. */
#ifndef YC_STOP_H
#define YC_STOP_H

#include <signal.h>
#include <stdbool.h>

/* The dispositions of SIGINT and SIGTERM before yc_stop_install, for yc_stop_restore. */
typedef struct yc_stop_signals {
    struct sigaction old_int;  /* SIGINT's */
    struct sigaction old_term; /* SIGTERM's */
} yc_stop_signals;

/* Installs the handler of SIGINT and SIGTERM for the calling thread (the one that trains), clears
 * the request and keeps the previous handlers in *saved.  several_ranks: this process is one of several MPI ranks (standard output is made
 * non-blocking on a stop request, see above). */
void yc_stop_install(yc_stop_signals *saved, bool several_ranks);

/* Puts back the handlers yc_stop_install found. */
void yc_stop_restore(const yc_stop_signals *saved);

/* Whether a stop was requested, by a signal or by yc_stop_request. */
bool yc_stop_requested(void);

/* Requests the stop without a signal (a rank learning that another rank was signalled). */
void yc_stop_request(void);

#endif
