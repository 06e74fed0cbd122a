/* Runtime set-up: MPI initialisation with errors returned, the abort hook,
 * the Cartesian mesh communicator, communicators over axis tuples, small
 * world collectives, statistics and the span hook. */
#define _GNU_SOURCE
#include "rt_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* With a progress thread every MPI call of the application thread is made
 * under the queue lock too, so MPI is never entered by two threads at once:
 * Open MPI 4.1's nonblocking-collective progress is not safe to run
 * concurrently (seen here as ranks drifting apart and hanging). */
void rt_mpi_lock(smoe_rt *rt)
{
    if (rt->have_thread)
        pthread_mutex_lock(&rt->lock);
}

void rt_mpi_unlock(smoe_rt *rt)
{
    if (rt->have_thread)
        pthread_mutex_unlock(&rt->lock);
}

static smoe_rt *g_rt; /* for the abort hook */

/* The one line of an aborting rank, then the whole job's end. */
static void say_and_abort(const smoe_rt *rt, int code, const char *msg)
{
    rt_watchdog_fini(); /* the launcher's SIGTERM that follows is no news */
    rt_exit_deadline();
    fprintf(stderr, "smoe: rank %d: %s\n", rt ? rt->rank : -1, msg);
    fflush(stderr);
    rt_stderr_drain();
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void abort_hook(const char *msg)
{
    say_and_abort(g_rt, SMOE_EXIT_ASSERT, msg);
    abort();
}

_Noreturn void smoe_rt_abort(smoe_rt *rt, smoe_exit code, const char *msg)
{
    say_and_abort(rt, code ? (int)code : SMOE_EXIT_FAIL, msg);
    exit(code ? (int)code : SMOE_EXIT_FAIL); /* not reached */
}

void rt_check(smoe_rt *rt, int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char es[MPI_MAX_ERROR_STRING], msg[MPI_MAX_ERROR_STRING + 256];
    int len = 0;
    MPI_Error_string(rc, es, &len);
    snprintf(msg, sizeof msg, "MPI error in %s during %s: %s", what, rt_phase(rt), es);
    smoe_rt_abort(rt, SMOE_EXIT_MPI, msg);
}

/* The hosts the ranks of `world` span: the nodes MPI_COMM_TYPE_SHARED
 * tells apart, counted by their lowest rank, which also names each rank's
 * host in rt->host_of (by world rank). Collective. */
static int count_hosts(smoe_rt *rt, MPI_Comm world)
{
    MPI_Comm node;
    int nrank = 0, lead = 0, hosts = 1, mine = rt->rank;
    /* a failure stops every rank (rt_check), none is left in the sum */
    rt_check(rt, MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
             "MPI_Comm_split_type");
    MPI_Comm_rank(node, &nrank);
    rt->local_rank = nrank;
    lead = nrank == 0;
    rt_check(rt, MPI_Bcast(&mine, 1, MPI_INT, 0, node), "MPI_Bcast");
    rt_check(rt, MPI_Allreduce(&lead, &hosts, 1, MPI_INT, MPI_SUM, world), "MPI_Allreduce");
    if (rt->host_of)
        rt_check(rt, MPI_Allgather(&mine, 1, MPI_INT, rt->host_of, 1, MPI_INT, world),
                 "MPI_Allgather");
    MPI_Comm_free(&node);
    return hosts;
}

smoe_status smoe_rt_init(int *argc, char ***argv, smoe_rt **out, smoe_err *err)
{
    smoe_rt *rt = smoe_calloc(1, sizeof *rt);
    if (!rt)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    int inited = 0, provided = 0, ask = MPI_THREAD_MULTIPLE;
    /* test hook: ask for less (a library that provides less, as a test
     * can meet it) */
    smoe_test_thread tl = smoe_get_test_hooks().mpi_thread;
    if (tl == SMOE_TEST_THREAD_SINGLE)
        ask = MPI_THREAD_SINGLE;
    else if (tl == SMOE_TEST_THREAD_FUNNELED)
        ask = MPI_THREAD_FUNNELED;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(argc, argv, ask, &provided) != MPI_SUCCESS) {
            smoe_free(rt);
            return smoe_err_set(err, SMOE_ECOMM, "MPI_Init_thread failed");
        }
        rt->initialized_mpi = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rt->world = MPI_COMM_WORLD;
    MPI_Comm_rank(rt->world, &rt->rank);
    MPI_Comm_size(rt->world, &rt->size);
    pthread_mutex_init(&rt->lock, NULL);
    rt->host_of = smoe_calloc((size_t)rt->size, sizeof *rt->host_of);
    rt->hosts = count_hosts(rt, rt->world); /* without host_of: no byte counts by host */
    int len = 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = 0;
    snprintf(rt->library, sizeof rt->library, "%.127s", lib);
    g_rt = rt;
    smoe_set_abort_hook(abort_hook);
    rt_watchdog_init(rt);
    *out = rt;
    return SMOE_OK;
}

smoe_status smoe_rt_set_mesh(smoe_rt *rt, const smoe_mesh *mesh,
                             const smoe_rt_opts *opts, smoe_err *err)
{
    int64_t devices = smoe_mesh_devices(mesh);
    if (devices != rt->size)
        return smoe_err_set(err, SMOE_EINVAL,
                            "the mesh has %lld devices but %d MPI ranks are running",
                            (long long)devices, rt->size);
    rt->mesh = *mesh;
    for (int i = 0; i < mesh->n; i++) {
        snprintf(rt->axis_names[i], sizeof rt->axis_names[i], "%s", mesh->name[i]);
        rt->mesh.name[i] = rt->axis_names[i];
    }
    int dims[SMOE_MAX_AXES], periods[SMOE_MAX_AXES] = { 0 };
    for (int i = 0; i < mesh->n; i++)
        dims[i] = (int)mesh->size[i];
    rt_check(rt, MPI_Cart_create(rt->world, mesh->n, dims, periods, 0, &rt->cart),
             "MPI_Cart_create");
    MPI_Comm_set_errhandler(rt->cart, MPI_ERRORS_RETURN);
    int c[SMOE_MAX_AXES], r;
    MPI_Comm_rank(rt->cart, &r);
    MPI_Cart_coords(rt->cart, r, mesh->n, c);
    for (int i = 0; i < mesh->n; i++)
        rt->coords[i] = c[i];
    if (r != rt->rank)
        return smoe_err_set(err, SMOE_EINTERNAL, "Cartesian rank differs from world rank");
    rt->shared_queue = opts && opts->shared_queue;
    /* the progress thread starts with the first queued op, after the
     * set-up (communicators, datatypes) is done; every MPI call is made
     * under the queue lock then, so the library must allow calls from
     * several threads one at a time */
    int want = opts ? opts->progress_thread : 0, level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    const char *lv = level == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED";
    int asked = want && want != SMOE_RT_PROGRESS_AUTO; /* on, as asked */
    if (asked && level < MPI_THREAD_SERIALIZED)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--progress-thread'",
                           "the MPI library (%s) provides thread level %s; a progress thread "
                           "needs MPI_THREAD_SERIALIZED", rt->library, lv);
    rt->thread_on = asked;
    if (want == SMOE_RT_PROGRESS_AUTO && rt->hosts < 2) {
        snprintf(rt->thread_why, sizeof rt->thread_why, "off (one host)");
    } else if (want == SMOE_RT_PROGRESS_AUTO && level < MPI_THREAD_SERIALIZED) {
        snprintf(rt->thread_why, sizeof rt->thread_why, "off (%d hosts, but the library "
                 "provides only %s)", rt->hosts, lv);
    } else if (want == SMOE_RT_PROGRESS_AUTO) {
        snprintf(rt->thread_why, sizeof rt->thread_why, "on (%d hosts)", rt->hosts);
        rt->thread_on = 1;
    } else {
        snprintf(rt->thread_why, sizeof rt->thread_why, "%s (as asked)", asked ? "on" : "off");
    }
    rt->want_thread = rt->thread_on;
    rt->prio_err = -1;
    return SMOE_OK;
}

/* Which members of c share this rank's host (c->same_host; NULL without
 * the runtime's host table). Collective over c. */
static smoe_status group_hosts(smoe_rt *rt, rt_comm *c, smoe_err *err)
{
    if (!rt->host_of)
        return SMOE_OK;
    int *world = smoe_calloc((size_t)c->size, sizeof *world);
    c->same_host = smoe_calloc((size_t)c->size, sizeof *c->same_host);
    if (!world || !c->same_host) {
        smoe_free(world);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    rt_mpi_lock(rt);
    int rc = MPI_Allgather(&rt->rank, 1, MPI_INT, world, 1, MPI_INT, c->comm);
    rt_mpi_unlock(rt);
    rt_check(rt, rc, "MPI_Allgather");
    for (int k = 0; k < c->size; k++)
        c->same_host[k] = rt->host_of[world[k]] == rt->host_of[rt->rank];
    smoe_free(world);
    return SMOE_OK;
}

const char *smoe_rt_slices_note(smoe_rt *rt)
{
    int64_t S = smoe_mesh_slices(&rt->mesh), L = rt->size / (S > 0 ? S : 1);
    int one_per_host = rt->host_of && S == rt->hosts;
    for (int r = 0; r < rt->size && one_per_host; r++) /* a slice's ranks share its host */
        one_per_host = rt->host_of[r] == rt->host_of[r - r % L];
    if (one_per_host && S > 1)
        snprintf(rt->slices_note, sizeof rt->slices_note, "%lld slices, one per host",
                 (long long)S);
    else
        snprintf(rt->slices_note, sizeof rt->slices_note, "%lld slice%s on %d host%s",
                 (long long)S, S == 1 ? "" : "s", rt->hosts, rt->hosts == 1 ? "" : "s");
    return rt->slices_note;
}

smoe_status rt_comm_get(smoe_rt *rt, const smoe_axes *axes, int q, rt_comm **out,
                        smoe_err *err)
{
    q = rt_queue_of(rt, q);
    for (int i = 0; i < rt->ncomms; i++) {
        rt_comm *c = &rt->comms[i];
        if (c->queue == q && smoe_axes_equal(&c->axes, axes)) {
            *out = c;
            return SMOE_OK;
        }
    }
    if (rt->ncomms == RT_MAX_COMMS)
        return smoe_err_set(err, SMOE_EINTERNAL, "too many communicators");
    /* color: the coordinates of the other axes (of an axis with one part in
     * the tuple, the other part's); key: the tuple's radix */
    int64_t color = 0, key = 0;
    for (int a = 0; a < rt->mesh.n; a++) {
        int dcn = smoe_axes_has_part(&rt->mesh, axes, a, SMOE_PART_DCN);
        int ici = smoe_axes_has_part(&rt->mesh, axes, a, SMOE_PART_ICI);
        smoe_axis_part rest = dcn ? SMOE_PART_ICI : SMOE_PART_DCN;
        if (!dcn && !ici)
            color = color * rt->mesh.size[a] + rt->coords[a];
        else if (!dcn || !ici)
            color = color * smoe_mesh_part_size(&rt->mesh, a, rest) +
                    smoe_mesh_part_coord(&rt->mesh, a, rest, rt->coords[a]);
    }
    for (int k = 0; k < axes->n; k++) {
        smoe_axis_part p;
        int a = smoe_mesh_part_find(&rt->mesh, axes->ax[k], &p);
        if (a < 0)
            return smoe_err_set(err, SMOE_EINVAL, "axis '%s' is not in the mesh",
                                axes->ax[k]);
        key = key * smoe_mesh_part_size(&rt->mesh, a, p) +
              smoe_mesh_part_coord(&rt->mesh, a, p, rt->coords[a]);
    }
    rt_comm *c = &rt->comms[rt->ncomms];
    memset(c, 0, sizeof *c);
    c->axes.n = axes->n;
    for (int k = 0; k < axes->n; k++) {
        snprintf(c->names[k], sizeof c->names[k], "%s", axes->ax[k]);
        c->axes.ax[k] = c->names[k];
    }
    c->queue = q;
    /* collective over the world: every rank creates comms in the same order */
    rt_mpi_lock(rt);
    int rc = MPI_Comm_split(rt->cart, (int)color, (int)key, &c->comm);
    rt_mpi_unlock(rt);
    rt_check(rt, rc, "MPI_Comm_split");
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(c->comm, &c->size);
    MPI_Comm_rank(c->comm, &c->rank);
    if (c->rank != key)
        return smoe_err_set(err, SMOE_EINTERNAL, "communicator rank order is wrong");
    smoe_status hs = group_hosts(rt, c, err);
    if (hs) {
        MPI_Comm_free(&c->comm);
        return hs;
    }
    rt->ncomms++;
    *out = c;
    return SMOE_OK;
}

void smoe_rt_finalize(smoe_rt *rt)
{
    if (!rt)
        return;
    rt_watchdog_fini();
    if (rt->have_thread) {
        rt->stop_thread = 1;
        pthread_join(rt->progress_thread, NULL);
    }
    rt_wgather_free_all(rt);
    if (rt->have_bf16_sum)
        MPI_Op_free(&rt->bf16_sum);
    smoe_free(rt->ep.sc);
    for (int i = 0; i < rt->ncomms; i++) {
        MPI_Comm_free(&rt->comms[i].comm);
        smoe_free(rt->comms[i].same_host);
    }
    smoe_free(rt->host_of);
    if (rt->cart != MPI_COMM_NULL && rt->cart)
        MPI_Comm_free(&rt->cart);
    while (rt->freelist) {
        rt_op *n = rt->freelist->next;
        smoe_free(rt->freelist);
        rt->freelist = n;
    }
    smoe_set_abort_hook(NULL);
    g_rt = NULL;
    if (rt->initialized_mpi)
        MPI_Finalize();
    pthread_mutex_destroy(&rt->lock);
    smoe_free(rt);
}

int smoe_rt_rank(const smoe_rt *rt) { return rt->rank; }
int smoe_rt_size(const smoe_rt *rt) { return rt->size; }
int smoe_rt_local_rank(const smoe_rt *rt) { return rt->local_rank; }
const smoe_mesh *smoe_rt_mesh(const smoe_rt *rt) { return &rt->mesh; }
const int64_t *smoe_rt_coords(const smoe_rt *rt) { return rt->coords; }
const char *smoe_rt_library(const smoe_rt *rt) { return rt->library; }

const char *smoe_rt_progress_note(const smoe_rt *rt) { return rt->thread_why; }

const char *smoe_rt_progress_priority(smoe_rt *rt)
{
    int64_t e[1] = { rt->have_thread ? rt->prio_err : -2 };
    smoe_rt_allreduce_max_i64(rt, e, 1); /* a rank that could not: said */
    if (e[0] == -2)
        return NULL;
    if (e[0] == 0)
        snprintf(rt->prio_note, sizeof rt->prio_note, "nice %d", RT_PROGRESS_NICE);
    else if (e[0] < 0)
        snprintf(rt->prio_note, sizeof rt->prio_note, "not raised (the thread had not run)");
    else
        snprintf(rt->prio_note, sizeof rt->prio_note, "not raised (%s)", strerror((int)e[0]));
    return rt->prio_note;
}
smoe_rt_stats *smoe_rt_stats_get(smoe_rt *rt) { return &rt->stats; }

void smoe_rt_set_span_hook(smoe_rt *rt, smoe_rt_span_fn fn, void *ud)
{
    rt->span = fn;
    rt->span_ud = ud;
}

void rt_span(smoe_rt *rt, int lane, const char *name, double t0, double t1)
{
    if (rt->span)
        rt->span(rt->span_ud, lane, name, t0, t1);
}


/* The small collectives are nonblocking under the hood, waited for with
 * the watchdog, so a dead peer or a cut link ends the job with a message
 * instead of a hang. */
static void wait_coll(smoe_rt *rt, int rc, MPI_Request *req, const char *what)
{
    rt_check(rt, rc, what);
    rt_wait_request(rt, req, what);
}

static void allreduce(smoe_rt *rt, void *v, int n, MPI_Datatype t, MPI_Op op)
{
    MPI_Request req;
    rt_mpi_lock(rt);
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, t, op, rt->world, &req);
    rt_mpi_unlock(rt);
    wait_coll(rt, rc, &req, "an all-reduce over all ranks");
}

void smoe_rt_allreduce_sum_f64(smoe_rt *rt, double *v, int n)
{
    allreduce(rt, v, n, MPI_DOUBLE, MPI_SUM);
}

void smoe_rt_allreduce_max_f64(smoe_rt *rt, double *v, int n)
{
    allreduce(rt, v, n, MPI_DOUBLE, MPI_MAX);
}

void smoe_rt_allreduce_max_i64(smoe_rt *rt, int64_t *v, int n)
{
    allreduce(rt, v, n, MPI_INT64_T, MPI_MAX);
}

void smoe_rt_barrier(smoe_rt *rt)
{
    MPI_Request req;
    rt_mpi_lock(rt);
    int rc = MPI_Ibarrier(rt->world, &req);
    rt_mpi_unlock(rt);
    wait_coll(rt, rc, &req, "a barrier");
}

void smoe_rt_gather_bytes(smoe_rt *rt, const void *send, void *recv, int64_t n)
{
    SMOE_ASSERT(n >= 0 && n <= 0x7fffffff);
    MPI_Request req;
    rt_mpi_lock(rt);
    int rc = MPI_Igather(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, 0, rt->world, &req);
    rt_mpi_unlock(rt);
    wait_coll(rt, rc, &req, "a gather to rank 0");
}

smoe_status smoe_rt_gatherv_bytes(smoe_rt *rt, const void *send, int64_t n, char **out,
                                  int64_t *lens)
{
    int64_t *all = rt->rank == 0 ? lens : NULL;
    MPI_Request req;
    rt_mpi_lock(rt);
    int rc = MPI_Igather(&n, 1, MPI_INT64_T, all, 1, MPI_INT64_T, 0, rt->world, &req);
    rt_mpi_unlock(rt);
    wait_coll(rt, rc, &req, "a gather to rank 0");
    int *counts = NULL, *displs = NULL;
    char *buf = NULL;
    smoe_status s = SMOE_OK;
    if (rt->rank == 0) {
        int64_t total = 0;
        counts = smoe_calloc((size_t)rt->size * 2, sizeof(int));
        for (int r = 0; counts && r < rt->size; r++) {
            if (total + lens[r] > 0x7fffffff)
                s = SMOE_EINVAL;
            counts[r] = (int)lens[r];
            counts[rt->size + r] = (int)total;
            total += lens[r];
        }
        displs = counts ? counts + rt->size : NULL;
        buf = smoe_malloc((size_t)total + 1);
        if (!counts || !buf)
            s = SMOE_ENOMEM;
    }
    s = smoe_rt_agree(rt, s);
    if (!s) {
        rt_mpi_lock(rt);
        rc = MPI_Igatherv(send, (int)n, MPI_BYTE, buf, counts, displs, MPI_BYTE, 0, rt->world,
                          &req);
        rt_mpi_unlock(rt);
        wait_coll(rt, rc, &req, "a gather to rank 0");
    }
    smoe_free(counts);
    if (s || rt->rank != 0) {
        smoe_free(buf);
        buf = NULL;
    }
    if (out)
        *out = buf;
    return s;
}

void rt_bcast_from(smoe_rt *rt, void *buf, int64_t n, int root)
{
    SMOE_ASSERT(n >= 0 && n <= 0x7fffffff);
    MPI_Request req;
    rt_mpi_lock(rt);
    int rc = MPI_Ibcast(buf, (int)n, MPI_BYTE, root, rt->world, &req);
    rt_mpi_unlock(rt);
    wait_coll(rt, rc, &req, "a broadcast");
}

void smoe_rt_bcast_bytes(smoe_rt *rt, void *buf, int64_t n) { rt_bcast_from(rt, buf, n, 0); }

smoe_status smoe_rt_agree(smoe_rt *rt, smoe_status local)
{
    int v = (int)local;
    allreduce(rt, &v, 1, MPI_INT, MPI_MAX);
    return (smoe_status)v;
}
