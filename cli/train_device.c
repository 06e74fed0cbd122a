/* smoe train --device: the kernel table a run steps on (train.h
 * opts.kops): the CPU's (the default), the host emulation of a device
 * (emul.h; CI's stand-in, bit for bit the CPU), or a CUDA device (cuda.h);
 * --matmul-dtype bf16 selects each one's bf16 mode.
 * One rank trains over the single-rank communicator; a launch of several
 * on CUDA over NCCL (ncomm.h) on top of the MPI runtime's, each rank on
 * the GPU of its place on its host. */
#include "cli.h"

#include <string.h>

#include "smoe/cuda.h"
#include "smoe/emul.h"
#include "smoe/ncomm.h"
#include "smoe/runtime.h"
#include "smoe/train.h"

int cli_device_parse(const char *arg)
{
    if (strcmp(arg, "cpu") == 0)
        return CLI_DEVICE_CPU;
    if (strcmp(arg, "emul") == 0)
        return CLI_DEVICE_EMUL;
    if (strcmp(arg, "cuda") == 0)
        return CLI_DEVICE_CUDA;
    cli_usage_error("argument '--device'", "'%s': expected cpu, emul or cuda", arg);
}

const char *cli_device_name(int kind)
{
    return kind == CLI_DEVICE_EMUL ? "emul" : kind == CLI_DEVICE_CUDA ? "cuda" : "cpu";
}

/* The device (CUDA: GPU `ordinal`), its stream and kernel queue; o gets
 * the table (bf16: the matmul inputs rounded to bf16, SMOE_KOPS_BF16_GEMM). */
static void device_open(cli_device *d, int kind, int bf16, int ordinal, struct smoe_train_opts *o)
{
    smoe_err err;
    memset(d, 0, sizeof *d);
    d->kind = kind;
    const unsigned flags = bf16 ? SMOE_KOPS_BF16_GEMM : 0;
    if (kind == CLI_DEVICE_CPU) {
        o->kops = bf16 ? smoe_kops_cpu_bf16() : NULL;
        return;
    }
    smoe_status s = kind == CLI_DEVICE_EMUL
                        ? smoe_dev_host_open(SMOE_DEV_HOST_THREADS, 0, &d->dev, &err)
                        : smoe_dev_cuda_open(ordinal, &d->dev, &err);
    if (!s)
        s = smoe_dev_stream_new(&d->dev, 0, &d->s, &err);
    if (!s && kind == CLI_DEVICE_EMUL)
        s = smoe_eq_new(&d->dev, d->s, flags, &d->eq, &err);
    else if (!s)
        s = smoe_kq_cuda_new(&d->dev, d->s, 0, flags, &d->kq, &err);
    if (s) {
        char what[80];
        snprintf(what, sizeof what, "argument '--device %s'", cli_device_name(kind));
        cli_usage_error(what, "%s", err.msg);
    }
    o->kops = kind == CLI_DEVICE_EMUL ? smoe_kops_emul() : smoe_kops_cuda();
    o->kstream = kind == CLI_DEVICE_EMUL ? (void *)d->eq : (void *)d->kq;
}

static void *nccl_handle(smoe_dev_stream *s) { return smoe_cuda_stream_handle(s); }

/* A launch of several ranks on CUDA: the NCCL communicator over host (the
 * MPI runtime's), collective, into *out. */
static void device_nccl(cli_device *d, const smoe_comm *host, smoe_comm *out)
{
    smoe_err err;
    smoe_status s = smoe_dev_stream_new(&d->dev, 1, &d->xs, &err);
    if (!s)
        s = smoe_dev_stream_new(&d->dev, 1, &d->res, &err);
    if (!s)
        s = smoe_dev_stream_new(&d->dev, 0, &d->red, &err);
    if (!s)
        s = smoe_kq_cuda_new(&d->dev, d->xs, 0, 0, &d->xkq, &err);
    smoe_comm_device cd = { &d->dev, d->s, d->xs, smoe_kops_cuda(), d->xkq, d->kq, 0,
                            d->res, d->red };
    if (!s)
        s = smoe_comm_nccl_new(host, &cd, nccl_handle, &d->nc, &err);
    if ((s = smoe_comm_agree_err(host, s, &err)))
        cli_die(&err);
    *out = d->nc;
}

void cli_device_begin(cli_device *d, int kind, int bf16, struct smoe_rt *rt,
                      const smoe_mesh *mesh, struct smoe_train_opts *o, smoe_comm *comm)
{
    smoe_err err;
    const smoe_comm host = smoe_rt_comm(rt);
    int ranks = smoe_rt_size(rt), nccl = kind == CLI_DEVICE_CUDA && ranks > 1;
    if (kind == CLI_DEVICE_EMUL && ranks != 1)
        cli_usage_error("argument '--device emul'", "runs one rank (this launch has %d)", ranks);
    int gpus = smoe_dev_cuda_count();
    device_open(d, kind, bf16, nccl && gpus > 0 ? smoe_rt_local_rank(rt) % gpus : 0, o);
    *comm = host;
    if (nccl) {
        device_nccl(d, &host, comm);
    } else if (kind != CLI_DEVICE_CPU) { /* nothing waits on one rank */
        if (smoe_comm_local_new(mesh, 0, comm, &err))
            cli_die(&err);
        d->local = 1;
    }
}

void cli_device_end(cli_device *d, smoe_comm *comm)
{
    smoe_err err;
    if (d->local)
        smoe_comm_local_free(comm);
    if (d->kind == CLI_DEVICE_CPU)
        return;
    smoe_comm_nccl_free(&d->nc);
    smoe_status s = d->eq ? smoe_eq_status(d->eq, &err) : smoe_kq_status(d->kq, &err);
    smoe_eq_free(d->eq);
    smoe_kq_free(d->kq);
    smoe_kq_free(d->xkq);
    smoe_dev_stream_free(&d->dev, d->xs);
    smoe_dev_stream_free(&d->dev, d->res);
    smoe_dev_stream_free(&d->dev, d->red);
    smoe_dev_stream_free(&d->dev, d->s);
    smoe_dev_close(&d->dev);
    if (s)
        cli_die(&err);
}
