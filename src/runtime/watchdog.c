/* Failure handling: waits that never hang (a timeout aborts the job with a
 * message naming the rank, what it waited for and the phase), the phase
 * text, and a SIGTERM handler that names the phase when the launcher tears
 * the job down because another rank died. */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The SIGTERM handler can only read plain memory: the line is kept
 * preformatted ("smoe: rank N: terminated during <phase>\n"), in two
 * buffers so that the handler never reads one being rewritten. */
static char g_term_line[2][320];
static size_t g_term_len[2];
static volatile sig_atomic_t g_term_cur = -1;
static char g_phase[256] = "set-up";

static void on_term(int sig)
{
    (void)sig;
    int c = g_term_cur;
    if (c >= 0) {
        ssize_t w = write(STDERR_FILENO, g_term_line[c], g_term_len[c]);
        (void)w;
    }
    _exit(SMOE_EXIT_TERM);
}

static void refresh_term_line(const smoe_rt *rt)
{
    int c = g_term_cur == 0 ? 1 : 0;
    int n = snprintf(g_term_line[c], sizeof g_term_line[c],
                     "smoe: rank %d: terminated during %s\n", rt->rank, g_phase);
    if (n < 0)
        return;
    g_term_len[c] = (size_t)n < sizeof g_term_line[c] ? (size_t)n : sizeof g_term_line[c] - 1;
    g_term_cur = c;
}

void rt_watchdog_init(smoe_rt *rt)
{
    rt->timeout = 20.0;
    refresh_term_line(rt);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

void rt_watchdog_fini(void)
{
    g_term_cur = -1;
    signal(SIGTERM, SIG_DFL);
}

void rt_exit_deadline(void)
{
    signal(SIGALRM, SIG_DFL);
    alarm(5);
}

/* A launcher reads the ranks' stderr from a pipe, and MPICH's hydra can
 * tear the job down on MPI_Abort before it has read the last line: the
 * abort waits until the pipe is empty, i.e. the launcher has the message
 * (at most 2 s; rt_exit_deadline's alarm bounds the whole abort). */
void rt_stderr_drain(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0 || !S_ISFIFO(st.st_mode))
        return;
    const struct timespec tick = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 400; i++) {
        int unread = 0;
        if (ioctl(STDERR_FILENO, FIONREAD, &unread) != 0 || unread <= 0)
            return;
        nanosleep(&tick, NULL);
    }
}

void smoe_rt_set_timeout(smoe_rt *rt, double seconds) { rt->timeout = seconds; }

double smoe_rt_swap_timeout(smoe_rt *rt, double seconds)
{
    double old = rt->timeout;
    rt->timeout = seconds;
    return old;
}

void smoe_rt_set_phase(smoe_rt *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_phase, sizeof g_phase, fmt, ap);
    va_end(ap);
    refresh_term_line(rt);
}

const char *rt_phase(const smoe_rt *rt)
{
    (void)rt;
    return g_phase;
}

smoe_rt_wait smoe_rt_wait_begin(const char *what) { return smoe_comm_wait_begin(what); }

void smoe_rt_wait_step(smoe_rt *rt, smoe_rt_wait *w)
{
    smoe_rt_progress(rt);
    if (++w->spins <= 256)
        return;
    struct timespec ts = { 0, 50 * 1000 };
    nanosleep(&ts, NULL);
    if ((w->spins & 63) == 0 && rt->timeout > 0 && smoe_now() - w->t0 > rt->timeout) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "no progress for %.0f s waiting for %s during %s: a rank may have died "
                 "or a link is down; aborting the job",
                 rt->timeout, w->what ? w->what : "a collective", g_phase);
        smoe_rt_abort(rt, SMOE_EXIT_TIMEOUT, msg);
    }
}

void rt_wait_request(smoe_rt *rt, MPI_Request *req, const char *what)
{
    smoe_rt_wait w = smoe_rt_wait_begin(what);
    for (;;) {
        int flag = 0;
        rt_mpi_lock(rt);
        int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        rt_mpi_unlock(rt);
        rt_check(rt, rc, what);
        if (flag)
            return;
        smoe_rt_wait_step(rt, &w);
    }
}
