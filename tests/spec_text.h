/* Test helper: a PartitionSpec from compact text, "fsdp,expert|-|tensor"
 * (dims split by '|', axes by ',', "-" = None). The axis names live in a
 * static ring of 128 slots, enough for the specs one test holds at once,
 * one ring per thread (ranks running as threads each hold their own). */
#ifndef SMOE_TEST_SPEC_TEXT_H
#define SMOE_TEST_SPEC_TEXT_H

#include <stdio.h>
#include <string.h>

#include "smoe/shard.h"

static inline smoe_pspec spec_of(const char *text)
{
    static _Thread_local char store[128][32];
    static _Thread_local int used;
    smoe_pspec s;
    memset(&s, 0, sizeof s);
    const char *p = text;
    for (;;) {
        size_t dl = strcspn(p, "|");
        smoe_axes *e = &s.dim[s.rank++];
        if (!(dl == 1 && *p == '-')) {
            const char *q = p;
            while (q < p + dl) {
                size_t al = strcspn(q, ",|");
                if (al > (size_t)(p + dl - q))
                    al = (size_t)(p + dl - q);
                char *slot = store[used++ % 128];
                snprintf(slot, 32, "%.*s", (int)al, q);
                e->ax[e->n++] = slot;
                q += al;
                if (*q == ',')
                    q++;
            }
        }
        p += dl;
        if (*p != '|')
            break;
        p++;
    }
    return s;
}

#endif
