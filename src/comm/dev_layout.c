/* A block of a global buffer moved on a device's stream as 2-D copies, one
 * per plane of smoe_layout_planes (comm.h: smoe_comm_dev_layout): what
 * every engine on a device copies when it places shards. */
#include "smoe/comm.h"

#include "smoe/dev.h"

typedef struct plane_job {
    const smoe_dev *d;
    smoe_dev_stream *s;
    unsigned char *g, *l;
    const unsigned char *src;
    int dir;
    smoe_status st;
    smoe_err *err;
} plane_job;

static void copy_plane(void *ud, const smoe_layout_plane *p)
{
    plane_job *j = ud;
    if (j->st)
        return;
    if (j->dir == 0)
        j->st = smoe_dev_copy2d(j->d, j->l + p->loff, p->lpitch, j->g + p->goff, p->gpitch,
                                p->width, p->height, j->s, j->err);
    else if (j->dir == 1)
        j->st = smoe_dev_copy2d(j->d, j->g + p->goff, p->gpitch, j->l + p->loff, p->lpitch,
                                p->width, p->height, j->s, j->err);
    else
        j->st = smoe_dev_copy2d(j->d, j->g + p->goff, p->gpitch, j->src + p->goff, p->gpitch,
                                p->width, p->height, j->s, j->err);
}

smoe_status smoe_comm_dev_layout(const struct smoe_dev *d, struct smoe_dev_stream *s, int rank,
                                 const int64_t shape[], const int64_t local[],
                                 const int64_t offset[], size_t elem, void *global,
                                 void *localbuf, const void *src, int dir, smoe_err *err)
{
    plane_job j = { d, s, global, localbuf, src, dir, SMOE_OK, err };
    smoe_layout_planes(rank, shape, local, offset, elem, copy_plane, &j);
    return j.st;
}
