/* Checkpoints: save the sharded training state, resume it on any mesh.
 *
 * DIR/step_NNNNNNNN/ holds one shard file per rank (shard_RRRRR.bin: a
 * 64-byte header, then this rank's parameter, AdamW mu and AdamW nu slabs,
 * each weight's layers in plan order) and manifest.json (the mesh, every
 * weight's per-layer shape, state spec and shard offset, each file's size
 * and SHA-256). DIR/LATEST names the newest complete checkpoint.
 *
 * Crash safety: a checkpoint is written as step_N.tmp/ (every file
 * fsync'ed), and only when every rank has written its shard does rank 0
 * write the manifest, rename the directory to step_N and then replace
 * LATEST by rename; a job killed at any point leaves the previous
 * checkpoint complete and LATEST naming it.
 *
 * Resume: every rank verifies the SHA-256 of each file it reads. On the
 * saving mesh a rank reads its own shard; on another mesh each weight's
 * layer is rebuilt from the old shards that overlap the new rank's block
 * (a per-layer buffer; old replicas are read once). */
#define _GNU_SOURCE
#include "ckpt_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char k_magic[8] = { 'S', 'M', 'O', 'E', 'C', 'K', 'P', '1' };

typedef struct ckpt_header {
    char magic[8];
    uint32_t version, rank;
    int64_t step, slab_floats;
    char layout[32]; /* version 2: the first 32 hex digits of the layout digest */
} ckpt_header;
_Static_assert(sizeof(ckpt_header) == CK_HEADER, "shard header size");

/* ---- files ---- */
static int read_at(int fd, void *p, size_t n, off_t off)
{
    char *c = p;
    while (n) {
        ssize_t r = pread(fd, c, n, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* ---- the layout: what the bytes of a shard mean ---- */
/* SHA-256 of the mesh and every weight's shape, spec and shard placement:
 * written into each shard's header, so a manifest whose mesh or specs were
 * edited (consistently or not) no longer matches its shards. */
static smoe_status layout_digest(const smoe_mesh *mesh, int nw, const smoe_ckpt_weight *w,
                                 char hex[65], smoe_err *err)
{
    smoe_ckpt_sha *h = smoe_ckpt_sha_new();
    if (!h)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    char buf[512];
    for (int a = 0; a < mesh->n; a++) {
        snprintf(buf, sizeof buf, "%s=%lld;", mesh->name[a], (long long)mesh->size[a]);
        smoe_ckpt_sha_update(h, buf, strlen(buf));
    }
    for (int i = 0; i < nw; i++) {
        snprintf(buf, sizeof buf, "|%s:%d:%lld:%lld:%lld:", w[i].path, w[i].lrank,
                 (long long)w[i].layers, (long long)w[i].shard_numel,
                 (long long)w[i].shard_offset);
        smoe_ckpt_sha_update(h, buf, strlen(buf));
        smoe_ckpt_sha_update(h, w[i].lshape, sizeof(int64_t) * (size_t)w[i].lrank);
        smoe_ckpt_sha_update(h, smoe_pspec_format(&w[i].lspec, 0, buf, sizeof buf), strlen(buf));
    }
    smoe_ckpt_sha_final(h, hex);
    return SMOE_OK;
}

/* ---- save ---- */
/* This rank's shard: header and the three slabs, SHA-256 on the way. */
static smoe_status write_shard(const smoe_comm *cm, const smoe_ckpt_state *st, const char *path,
                               int64_t step, const char layout[65], char hex[65], smoe_err *err)
{
    smoe_out *o;
    smoe_status s = smoe_out_open(path, "the shard file", &o, err);
    if (s)
        return s;
    FILE *f = smoe_out_file(o);
    smoe_ckpt_sha *h = smoe_ckpt_sha_new();
    if (!h) {
        smoe_out_abort(o);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    ckpt_header hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, k_magic, sizeof k_magic);
    hd.version = CK_VERSION;
    hd.rank = (uint32_t)smoe_comm_rank(cm);
    hd.step = step;
    hd.slab_floats = st->slab_floats;
    memcpy(hd.layout, layout, sizeof hd.layout);
    const float *slabs[3] = { st->params, st->m, st->v };
    size_t bytes = sizeof(float) * (size_t)st->slab_floats;
    fwrite(&hd, sizeof hd, 1, f); /* a failed write is the commit's */
    smoe_ckpt_sha_update(h, &hd, sizeof hd);
    /* test hook: die half-way through a save, as a node failure would */
    const int64_t kill_at = smoe_get_test_hooks().kill_in_save;
    for (int c = 0; c < 3 && !ferror(f); c++) {
        if (c == 1 && kill_at > 0 && kill_at == step &&
            smoe_comm_rank(cm) == smoe_comm_size(cm) - 1) {
            fflush(f);
            raise(SIGKILL);
        }
        fwrite(slabs[c], 1, bytes, f);
        smoe_ckpt_sha_update(h, slabs[c], bytes);
    }
    smoe_ckpt_sha_final(h, hex);
    return smoe_out_commit(o, err);
}

typedef struct shard_rec {
    char sha[65];
    char pad[7];
    int64_t bytes;
} shard_rec;

/* The merged config, key by key, for the manifest (strings in `a`). */
static smoe_status config_map(const smoe_config *cfg, smoe_arena *a, ck_manifest *m,
                              smoe_err *err)
{
    int n = 0;
    const smoe_node *v;
    while (smoe_config_key_at(cfg, n, &v))
        n++;
    const char **k = smoe_arena_alloc(a, sizeof(char *) * (size_t)(n ? n : 1));
    const char **t = smoe_arena_alloc(a, sizeof(char *) * (size_t)(n ? n : 1));
    if (!k || !t)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory writing the manifest");
    for (int i = 0; i < n; i++) {
        k[i] = smoe_config_key_at(cfg, i, &v);
        char *txt = smoe_node_text(v);
        t[i] = txt ? smoe_arena_strdup(a, txt) : NULL;
        smoe_free(txt);
        if (!t[i])
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory writing the manifest");
    }
    m->ncfg = n;
    m->cfg_keys = k;
    m->cfg_vals = t;
    return SMOE_OK;
}

/* Rank 0, after every shard is on disk: manifest, rename, LATEST, pruning. */
static smoe_status publish(const smoe_comm *cm, const smoe_ckpt_state *st,
                           const smoe_ckpt_opts *co, const char *tmp, const char *name,
                           const shard_rec *recs, smoe_err *err)
{
    smoe_status s = SMOE_OK;
    int size = smoe_comm_size(cm);
    ck_manifest m;
    memset(&m, 0, sizeof m);
    m.step = co->step;
    m.seed = co->seed;
    memcpy(m.run_id, co->run_id, sizeof m.run_id);
    m.mesh = *smoe_comm_mesh(cm);
    m.fp = *co->fp;
    m.rules = co->rules;
    m.wire = co->wire;
    m.slab_floats = st->slab_floats;
    m.nw = st->n;
    m.ns = size;
    m.a = smoe_arena_new(1 << 16);
    m.w = smoe_calloc((size_t)st->n, sizeof *m.w);
    m.shards = smoe_calloc((size_t)size, sizeof *m.shards);
    char (*files)[32] = smoe_calloc((size_t)size, sizeof *files);
    char path[4400], dst[4400];
    char *text = NULL;
    if (!m.a || !m.w || !m.shards || !files) {
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory writing the manifest");
        goto done;
    }
    if (co->cfg && (s = config_map(co->cfg, m.a, &m, err)))
        goto done;
    memcpy(m.w, st->w, sizeof *m.w * (size_t)st->n);
    for (int r = 0; r < size; r++) {
        snprintf(files[r], sizeof files[r], "shard_%05d.bin", r);
        m.shards[r].file = files[r];
        m.shards[r].bytes = recs[r].bytes;
        memcpy(m.shards[r].sha256, recs[r].sha, 65);
    }
    text = ck_manifest_text(&m);
    if (!text) {
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory writing the manifest");
        goto done;
    }
    snprintf(path, sizeof path, "%s/manifest.json", tmp);
    if ((s = smoe_out_write_file(path, "the manifest", text, strlen(text), err)))
        goto done; /* written and its directory synced, as each shard */
    /* step_N.tmp -> step_N (an older step_N of this run, left when it
     * resumed from an earlier step, is moved aside first, removed after) */
    snprintf(dst, sizeof dst, "%s/%s", co->dir, name);
    snprintf(path, sizeof path, "%s/%s.stale", co->dir, name);
    struct stat sb;
    int had = stat(dst, &sb) == 0;
    if (had && rename(dst, path) != 0) {
        s = ck_io_err(err, dst, "cannot replace the older checkpoint");
        goto done;
    }
    if (rename(tmp, dst) != 0) {
        s = ck_io_err(err, dst, "cannot publish the checkpoint");
        goto done;
    }
    if (had)
        ck_remove_dir(path);
    /* LATEST replaced whole; the directory's sync also keeps the rename */
    snprintf(dst, sizeof dst, "%s/LATEST", co->dir);
    char line[64];
    snprintf(line, sizeof line, "%s\n", name);
    if ((s = smoe_out_write_file(dst, "the latest checkpoint's name", line, strlen(line),
                                 err)))
        goto done;
    ck_prune(co->dir, co->run_id, co->step, co->keep);
done:
    smoe_free(text);
    smoe_free(files);
    smoe_free(m.w);
    smoe_free(m.shards);
    smoe_arena_free(m.a);
    return s;
}

/* Every slab value finite on this rank (a diverged run is never saved). */
static int store_finite(const smoe_ckpt_state *st)
{
    const float *slabs[3] = { st->params, st->m, st->v };
    for (int c = 0; c < 3; c++)
        for (int64_t i = 0; i < st->slab_floats; i++)
            if (!isfinite(slabs[c][i]))
                return 0;
    return 1;
}

/* The end of a save of status s: agreed; a failed one leaves no step_N.tmp
 * (every rank is done with it once the status is agreed). */
static smoe_status saved(const smoe_comm *cm, const char *tmp, smoe_status s, smoe_err *err)
{
    s = smoe_comm_agree_err(cm, s, err);
    if (s && smoe_comm_rank(cm) == 0)
        ck_remove_dir(tmp);
    return s;
}

smoe_status smoe_ckpt_save(const smoe_comm *cm, smoe_ckpt *ck, const smoe_ckpt_state *st,
                           const smoe_ckpt_opts *co, smoe_err *err)
{
    (void)ck; /* holds the directory's lock */
    int root = smoe_comm_rank(cm) == 0, size = smoe_comm_size(cm);
    char name[32], tmp[4200], path[4400], layout[65];
    snprintf(name, sizeof name, "step_%08lld", (long long)co->step);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", co->dir, name);
    smoe_comm_set_phase(cm, "saving checkpoint %s/%s", co->dir, name);
    smoe_status s = store_finite(st)
                        ? SMOE_OK
                        : smoe_err_set(err, SMOE_ENONFINITE,
                                       "step %lld: the parameters or AdamW moments hold nan or "
                                       "inf; the checkpoint was not written (LATEST still names "
                                       "the previous one)", (long long)co->step);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return s;
    s = layout_digest(smoe_comm_mesh(cm), st->n, st->w, layout, err);
    if (!s && root) {
        ck_remove_dir(tmp); /* left by a save that died */
        if (mkdir(tmp, 0777) != 0)
            s = ck_io_err(err, tmp, "cannot create the checkpoint directory");
    }
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return s;
    shard_rec mine;
    memset(&mine, 0, sizeof mine);
    snprintf(path, sizeof path, "%s/shard_%05d.bin", tmp, smoe_comm_rank(cm));
    s = write_shard(cm, st, path, co->step, layout, mine.sha, err);
    mine.bytes = CK_HEADER + 3 * st->slab_floats * (int64_t)sizeof(float);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return saved(cm, tmp, s, err);
    shard_rec *recs = root ? smoe_calloc((size_t)size, sizeof *recs) : NULL;
    s = root && !recs ? smoe_err_set(err, SMOE_ENOMEM, "out of memory") : SMOE_OK;
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return saved(cm, tmp, s, err);
    smoe_comm_gather_bytes(cm, &mine, recs, (int64_t)sizeof mine);
    if (root)
        s = publish(cm, st, co, tmp, name, recs, err);
    smoe_free(recs);
    return saved(cm, tmp, s, err);
}

/* ---- resume ---- */
static const char *shape_str(const int64_t *v, int n, char *buf, size_t cap)
{
    size_t o = 0;
    buf[o++] = '[';
    for (int d = 0; d < n && o + 24 < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)v[d]);
    snprintf(buf + o, cap - o, "]");
    return buf;
}

/* The checkpoint must hold exactly this model's weights. */
static smoe_status check_model(const ck_manifest *m, const smoe_ckpt_state *st, const char *mpath,
                               smoe_err *err)
{
    if (m->nw != st->n)
        return smoe_err_in(err, SMOE_EINVAL, mpath,
                           "the checkpoint holds %d weights, this model has %d (a different "
                           "model or model config)", m->nw, st->n);
    for (int i = 0; i < st->n; i++) {
        const smoe_ckpt_weight *w = &st->w[i];
        const smoe_ckpt_weight *x = &m->w[i];
        if (strcmp(x->path, w->path) != 0 || x->layers != w->layers)
            return smoe_err_in(err, SMOE_EINVAL, mpath,
                               "weight %d is %s (%lld layers) in the checkpoint but %s "
                               "(%lld layers) in this model",
                               i, x->path, (long long)x->layers, w->path,
                               (long long)w->layers);
        int same = x->lrank == w->lrank;
        for (int d = 0; same && d < w->lrank; d++)
            same = x->lshape[d] == w->lshape[d];
        if (!same) {
            char a[128], b[128];
            return smoe_err_in(err, SMOE_EINVAL, mpath,
                               "weight %s has per-layer shape %s in the checkpoint but %s in "
                               "this model", x->path, shape_str(x->lshape, x->lrank, a, sizeof a),
                               shape_str(w->lshape, w->lrank, b, sizeof b));
        }
    }
    return SMOE_OK;
}

/* Verify a shard file: size, header, SHA-256 against the manifest. */
static smoe_status verify_shard(const ck_manifest *m, const char *layout, int q,
                                const char *path, int fd, smoe_err *err)
{
    const ck_mshard *sh = &m->shards[q];
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return ck_io_err(err, path, "cannot read the shard file");
    if ((int64_t)sb.st_size != sh->bytes)
        return smoe_err_in(err, SMOE_EIO, path,
                           "truncated or damaged shard: %lld bytes, the manifest says %lld",
                           (long long)sb.st_size, (long long)sh->bytes);
    ckpt_header hd;
    if (read_at(fd, &hd, sizeof hd, 0) != 0)
        return ck_io_err(err, path, "cannot read the shard file");
    if (memcmp(hd.magic, k_magic, sizeof k_magic) != 0 || hd.version != (uint32_t)m->version ||
        hd.rank != (uint32_t)q || hd.step != m->step || hd.slab_floats != m->slab_floats)
        return smoe_err_in(err, SMOE_EIO, path,
                           "the shard header does not match the manifest (not shard %d of "
                           "step %lld)", q, (long long)m->step);
    if (m->version >= 2 && memcmp(hd.layout, layout, sizeof hd.layout) != 0)
        return smoe_err_in(err, SMOE_EIO, path,
                           "the manifest's mesh, shapes or specs are not those this shard was "
                           "written with (layout digest %.16s... in the shard, %.16s... from "
                           "the manifest): was the manifest edited?",
                           hd.layout, layout);
    smoe_ckpt_sha *h = smoe_ckpt_sha_new();
    if (!h)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    static char buf[1 << 20];
    off_t off = 0;
    smoe_status s = SMOE_OK;
    while (off < sb.st_size) {
        size_t n = (size_t)(sb.st_size - off) < sizeof buf ? (size_t)(sb.st_size - off)
                                                            : sizeof buf;
        if (read_at(fd, buf, n, off) != 0) {
            s = ck_io_err(err, path, "cannot read the shard file");
            break;
        }
        smoe_ckpt_sha_update(h, buf, n);
        off += (off_t)n;
    }
    char hex[65];
    smoe_ckpt_sha_final(h, hex);
    if (!s && strcmp(hex, sh->sha256) != 0)
        s = smoe_err_in(err, SMOE_EIO, path,
                        "SHA-256 mismatch (the file is corrupted): %.16s..., the manifest "
                        "says %.16s...", hex, sh->sha256);
    return s;
}

typedef struct reader {
    const ck_manifest *m;
    char layout[65]; /* the layout digest the manifest describes */
    const char *dir;
    int *fd;         /* per old rank, -1 until opened and verified */
    int64_t *coords; /* per old rank, mesh coordinates */
    smoe_err *err;
    int first;       /* the old rank to look at first */
} reader;

static smoe_status open_shard(reader *r, int q)
{
    if (r->fd[q] >= 0)
        return SMOE_OK;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", r->dir, r->m->shards[q].file);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return ck_io_err(r->err, path, "cannot open the shard file");
    smoe_status s = verify_shard(r->m, r->layout, q, path, fd, r->err);
    if (s) {
        close(fd);
        return s;
    }
    r->fd[q] = fd;
    return SMOE_OK;
}

/* One weight's layer `l` of state class c into this rank's block `dst`. */
static smoe_status load_block(reader *r, const smoe_ckpt_weight *x, int c, int64_t l,
                              const smoe_ckpt_weight *w, const int64_t *nloc,
                              const int64_t *noff, float *full, float *dst, float *tmp)
{
    const ck_manifest *m = r->m;
    int64_t oloc[SMOE_MAX_RANK], ooff[SMOE_MAX_RANK], seen_off[64][SMOE_MAX_RANK];
    int nseen = 0;
    smoe_status s;
    /* from this rank's own index on: on the saving mesh its own shard is
     * the first that holds its block */
    for (int k = 0; k < m->ns; k++) {
        int q = (r->first + k) % m->ns;
        if ((s = smoe_layout_local(&x->lspec, x->lshape, &m->mesh, r->coords + q * SMOE_MAX_AXES,
                                   oloc, ooff, r->err)))
            return s;
        int64_t numel = 1;
        int hit = 1, dup = 0;
        for (int d = 0; d < x->lrank; d++) {
            numel *= oloc[d];
            hit &= ooff[d] < noff[d] + nloc[d] && noff[d] < ooff[d] + oloc[d];
        }
        if (numel != x->shard_numel)
            return smoe_err_in(r->err, SMOE_EINVAL, r->dir,
                               "manifest: %s: the spec gives %lld elements per shard, "
                               "'shard_numel' says %lld", x->path, (long long)numel,
                               (long long)x->shard_numel);
        for (int j = 0; j < nseen && !dup; j++)
            dup = memcmp(seen_off[j], ooff, sizeof(int64_t) * (size_t)x->lrank) == 0;
        if (!hit || dup)
            continue; /* not ours, or a replica of a block already read */
        if (nseen < 64)
            memcpy(seen_off[nseen++], ooff, sizeof(int64_t) * (size_t)x->lrank);
        if ((s = open_shard(r, q)))
            return s;
        off_t at = CK_HEADER +
                   (off_t)(c * m->slab_floats + x->shard_offset + l * x->shard_numel) *
                       (off_t)sizeof(float);
        if (read_at(r->fd[q], tmp, sizeof(float) * (size_t)numel, at) != 0)
            return ck_io_err(r->err, r->dir, "cannot read a shard file");
        smoe_layout_copy(x->lrank, x->lshape, oloc, ooff, sizeof(float), full, tmp, 1);
    }
    smoe_layout_copy(w->lrank, w->lshape, nloc, noff, sizeof(float), full, dst, 0);
    return SMOE_OK;
}

static smoe_status load_all(const smoe_comm *cm, const smoe_ckpt_state *st, reader *r)
{
    const ck_manifest *m = r->m;
    int64_t biggest = 1, bigshard = 1;
    for (int i = 0; i < m->nw; i++) {
        int64_t n = 1;
        for (int d = 0; d < m->w[i].lrank; d++)
            n *= m->w[i].lshape[d];
        biggest = n > biggest ? n : biggest;
        bigshard = m->w[i].shard_numel > bigshard ? m->w[i].shard_numel : bigshard;
    }
    /* one layer of one weight at a time: the full layer, an old block */
    float *full = smoe_malloc(sizeof(float) * (size_t)biggest);
    float *tmp = smoe_malloc(sizeof(float) * (size_t)bigshard);
    smoe_status s = full && tmp ? SMOE_OK : smoe_err_set(r->err, SMOE_ENOMEM, "out of memory");
    float *slabs[3] = { st->params, st->m, st->v };
    for (int i = 0; i < st->n && !s; i++) {
        const smoe_ckpt_weight *w = &st->w[i];
        int64_t nloc[SMOE_MAX_RANK], noff[SMOE_MAX_RANK];
        s = smoe_layout_local(&w->lspec, w->lshape, smoe_comm_mesh(cm), smoe_comm_coords(cm), nloc,
                              noff, r->err);
        for (int c = 0; c < 3 && !s; c++)
            for (int64_t l = 0; l < w->layers && !s; l++)
                s = load_block(r, &m->w[i], c, l, w, nloc, noff, full,
                               slabs[c] + w->shard_offset + l * w->shard_numel, tmp);
    }
    smoe_free(full);
    smoe_free(tmp);
    return s;
}

/* The checkpoint's run must be this one's in model, data and seed. */
static smoe_status check_run(const ck_manifest *m, const smoe_ckpt_state *st,
                             const smoe_ckpt_opts *co, const char *dir, const char *mpath,
                             smoe_err *err)
{
    smoe_status s = SMOE_OK;
    for (int j = 0; j < m->ncfg; j++) {
        if (strcmp(m->cfg_keys[j], "model_name") != 0)
            continue;
        const smoe_node *v = smoe_config_get(co->cfg, "model_name");
        char *now = smoe_node_text(v);
        int same = now && strcmp(now, m->cfg_vals[j]) == 0;
        if (!same)
            s = smoe_err_in(err, SMOE_EINVAL, mpath,
                            "the checkpoint %s is of model_name %s, this run's is %s: resume "
                            "with the same model (or use another directory)",
                            dir, m->cfg_vals[j], now ? now : "(not set)");
        smoe_free(now);
        if (s)
            return s;
    }
    if ((s = check_model(m, st, mpath, err)))
        return s;
    if (strcmp(m->fp.data, co->fp->data) != 0)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--data'",
                           "the checkpoint %s was trained on another data file (sha256 "
                           "%.16s..., this run's %.16s...): resume with the same --data",
                           dir, m->fp.data, co->fp->data);
    if (m->seed != co->seed)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--seed'",
                           "the checkpoint %s was trained with --seed %llu; resume with the "
                           "same seed (the data order depends on it)", dir,
                           (unsigned long long)m->seed);
    if (m->step >= co->total_steps)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--steps'",
                           "the checkpoint %s is already at step %lld; --steps is the total "
                           "number of steps", dir, (long long)m->step);
    return SMOE_OK;
}

smoe_status smoe_ckpt_load(const smoe_comm *cm, const smoe_ckpt_state *st, smoe_ckpt_opts *co,
                           smoe_ckpt_resume *res, smoe_err *err)
{
    char name[32], dir[4200], mpath[4400];
    res->from[0] = 0;
    res->first_step = 0;
    smoe_status s = ck_find(co->dir, name, res->note, sizeof res->note, err);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return s;
    /* every rank must see the same checkpoint (a shared file system) */
    double none[1] = { name[0] == 0 };
    smoe_comm_allreduce_sum_f64(cm, none, 1);
    if (none[0] == smoe_comm_size(cm))
        return SMOE_OK;
    if (none[0] > 0)
        return smoe_err_in(err, SMOE_EIO, co->dir,
                           "%g of %d ranks see no checkpoint in it: is it on a file system "
                           "every rank shares?", none[0], smoe_comm_size(cm));
    snprintf(dir, sizeof dir, "%s/%s", co->dir, name);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    smoe_comm_set_phase(cm, "loading checkpoint %s", dir);
    ck_manifest m;
    memset(&m, 0, sizeof m);
    char *text = NULL;
    s = smoe_read_file_max(mpath, SMOE_MAX_MANIFEST_BYTES, &text, NULL, err);
    if (!s)
        s = ck_manifest_parse(mpath, text, &m, err);
    smoe_free(text);
    if (!s)
        s = check_run(&m, st, co, dir, mpath, err);
    reader r = { &m, "", dir, NULL, NULL, err, 0 };
    if (!s)
        s = layout_digest(&m.mesh, m.nw, m.w, r.layout, err);
    if (!s) {
        r.fd = smoe_malloc(sizeof(int) * (size_t)m.ns);
        r.coords = smoe_calloc((size_t)m.ns * SMOE_MAX_AXES, sizeof(int64_t));
        if (!r.fd || !r.coords)
            s = smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        r.first = smoe_comm_rank(cm) % (m.ns > 0 ? m.ns : 1);
        for (int q = 0; !s && q < m.ns; q++) {
            r.fd[q] = -1;
            smoe_mesh_coords(&m.mesh, q, r.coords + q * SMOE_MAX_AXES);
        }
    }
    if (!s)
        s = load_all(cm, st, &r);
    for (int q = 0; r.fd && q < m.ns; q++)
        if (r.fd[q] >= 0)
            close(r.fd[q]);
    smoe_free(r.fd);
    smoe_free(r.coords);
    if (!s && smoe_comm_rank(cm) == 0 && m.version >= 2)
        s = ck_changes(&m, co->cfg, co->wire, smoe_comm_mesh(cm), smoe_comm_size(cm), res,
                            err);
    if (!s) {
        res->first_step = m.step;
        snprintf(res->from, sizeof res->from, "%s", dir);
        if (m.run_id[0]) /* the run goes on under its id */
            memcpy(co->run_id, m.run_id, sizeof co->run_id);
    }
    ck_manifest_free(&m);
    return smoe_comm_agree_err(cm, s, err);
}
