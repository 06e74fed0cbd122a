/* The one allocation path of the library (every allocation goes through
 * smoe_malloc & co.), and the abort hook behind SMOE_ASSERT. Tests use
 * smoe_alloc_fail_after() to make the N-th allocation fail and check that
 * every path cleans up (as Lua and SQLite do). The counter is
 * process-global and not thread-safe: it is set at start-up, before any
 * worker thread exists. */
#define _DEFAULT_SOURCE
#include "smoe/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static long g_fail_after; /* 0 = never fail */

void smoe_alloc_fail_after(long n) { g_fail_after = n; }

static int should_fail(void)
{
    if (g_fail_after <= 0)
        return 0;
    if (g_fail_after == 1)
        return 1; /* stays at 1: every later allocation fails too */
    g_fail_after--;
    return 0;
}

void *smoe_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    if (n == 0)
        n = 1;
    return malloc(n);
}

void *smoe_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t n = count * size;
    unsigned char *p = smoe_malloc(n);
    if (p)
        for (size_t i = 0; i < n; i++)
            p[i] = 0;
    return p;
}

void *smoe_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    if (n == 0)
        n = 1;
    return realloc(p, n);
}

char *smoe_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = smoe_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void smoe_free(void *p)
{
    free(p);
}

static void default_abort(const char *msg)
{
    fprintf(stderr, "smoe: fatal: %s\n", msg);
    fflush(stderr);
    abort();
}

static smoe_abort_fn g_abort = default_abort;

smoe_abort_fn smoe_set_abort_hook(smoe_abort_fn fn)
{
    smoe_abort_fn old = g_abort;
    g_abort = fn ? fn : default_abort;
    return old;
}

void smoe_assert_fail(const char *expr, const char *file, int line)
{
    char msg[512];
    snprintf(msg, sizeof msg, "assertion failed: %s (%s:%d)", expr, file, line);
    g_abort(msg);
    abort(); /* the hook must not return; make sure */
}

/* Slabs of 2 MiB and more are mapped, zeroed by the kernel, with
 * transparent huge pages asked for (a hint: the kernel may refuse): one
 * page fault per 2 MiB touched instead of one per 4 KiB. Smaller ones
 * come from calloc. */
#define SLAB_MAP_MIN ((size_t)2 << 20)

void *smoe_slab_alloc(size_t bytes)
{
    if (bytes < SLAB_MAP_MIN)
        return smoe_calloc(1, bytes);
    if (should_fail())
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

void smoe_slab_free(void *p, size_t bytes)
{
    if (!p)
        return;
    if (bytes < SLAB_MAP_MIN)
        smoe_free(p);
    else
        munmap(p, bytes);
}
