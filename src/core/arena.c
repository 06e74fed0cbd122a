/* Arena: a list of chunks; allocations are bump-pointer, 16-byte aligned
 * and zeroed, and all are freed together. Plans and configs live in one. */
#include "smoe/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} chunk;

struct smoe_arena {
    chunk *head;
    size_t chunk_bytes;
};

smoe_arena *smoe_arena_new(size_t chunk_bytes)
{
    smoe_arena *a = smoe_malloc(sizeof *a);
    if (!a)
        return NULL;
    a->head = NULL;
    a->chunk_bytes = chunk_bytes ? chunk_bytes : 64 * 1024;
    return a;
}

void smoe_arena_free(smoe_arena *a)
{
    if (!a)
        return;
    chunk *c = a->head;
    while (c) {
        chunk *n = c->next;
        smoe_free(c);
        c = n;
    }
    smoe_free(a);
}

void *smoe_arena_alloc(smoe_arena *a, size_t n)
{
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n)
        return NULL;
    chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > a->chunk_bytes ? need : a->chunk_bytes;
        chunk *nc = smoe_malloc(sizeof *nc + cap);
        if (!nc)
            return NULL;
        nc->cap = cap;
        nc->used = 0;
        nc->next = a->head;
        a->head = nc;
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, need);
    return p;
}

char *smoe_arena_strndup(smoe_arena *a, const char *s, size_t n)
{
    char *p = smoe_arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *smoe_arena_strdup(smoe_arena *a, const char *s)
{
    return smoe_arena_strndup(a, s, strlen(s));
}

char *smoe_arena_printf(smoe_arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : smoe_arena_alloc(a, (size_t)n + 1);
    if (p)
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}
