/* Internal declarations of the model module: the model struct, the saved
 * activations of each layer (carved from the one activation slab), the
 * transient scratch shared by all layers, and the block functions (MLA
 * attention, SwiGLU MLP, MoE) that layer.c composes. Nothing here is API.
 *
 * Notation in the shape comments: T = batch * seq local tokens, D = emb,
 * H = heads, dq = qk_nope + qk_rope, E = experts, E_l = experts / ep,
 * K = topk, Mm = moe_mlp, Sw = shared * moe_mlp, N = routed rows this rank
 * received for its local experts in the current layer (routing-dependent,
 * at most route_max), G = ep * T tokens of the expert group (ring of
 * experts).
 */
#ifndef SMOE_MODEL_IMPL_H
#define SMOE_MODEL_IMPL_H

#include "smoe/backend.h"
#include "smoe/kernels.h"
#include "smoe/model.h"

/* Saved activations of one MLA block. */
typedef struct attn_act {
    float *xin;     /* (T, D) layer input (pre-norm input) */
    float *rstd1;   /* (T) 1/rms of xin */
    float *h;       /* (T, D) rmsnorm(xin) * pre_norm */
    float *qa;      /* (T, q_lora) h @ wq_a; NULL when q_lora == 0 */
    float *rstd_q;  /* (T) 1/rms of qa; NULL when q_lora == 0 */
    float *qan;     /* (T, q_lora) rmsnorm(qa) * q_norm; NULL when q_lora == 0 */
    float *q;       /* (T, H, dq) queries, rope part rotated */
    float *ckv;     /* (T, kv_lora) h @ wkv_a[:, :kv_lora] */
    float *rstd_kv; /* (T) 1/rms of ckv */
    float *ckvn;    /* (T, kv_lora) rmsnorm(ckv) * kv_norm */
    float *k;       /* (T, H, dq) keys [k_nope(head) | rotated k_pe] */
    float *v;       /* (T, H, v_head) values */
    float *p;       /* (batch, H, seq, seq) attention probabilities */
    float *o;       /* (T, H, v_head) attention output */
} attn_act;

/* Saved activations of a SwiGLU MLP y = (silu(x@wi0) * (x@wi1)) @ wo; the
 * product g = silu(a) * b is recomputed in the backward. */
typedef struct mlp_act {
    float *a; /* (rows, width) x @ wi_0 */
    float *b; /* (rows, width) x @ wi_1 */
} mlp_act;

/* Saved state of one MoE block. The owner-side rows (inputs and hidden
 * activations of the local experts) depend on the routing and live in a
 * store grown on demand (amortised, bounded by route_max rows). */
/* The MoE layers route on the host: the arrays marked (host) below are host
 * memory, the others the table's; on a synchronous table (the CPU's) the
 * two are one memory and each "_d" copy or host mirror is the array itself
 * (model.c carves them so; mirror_in / mirror_out then do nothing). */
typedef struct moe_act {
    float *scores;     /* (T, E) router scores: softmax, sigmoid or identity of h2 @ gate */
    float *hscores;    /* (T, E) the scores read back (host) */
    float *lbp;        /* (T, E) softmax of the gate values (load-balance loss only) */
    int32_t *topk;     /* (T, K) chosen experts, best first (host) */
    float *wts;        /* (T, K) combine weights (renorm, routed_scale applied) (host) */
    int64_t *pos;      /* (T, K) row of the pair in the send order; -1 dropped (host) */
    float *wts_d;      /* (T, K) wts in the table's memory */
    int64_t *pos_d;    /* (T, K) pos in the table's memory */
    float *yret;       /* (T*K, D) expert outputs returned, send order (not ring) */
    int64_t *send_cnt; /* (ep, E_l) rows sent per (peer, local expert) (host) */
    int64_t *recv_cnt; /* (ep, E_l) rows received per (peer, local expert) (host) */
    int64_t n_send;    /* rows sent (pairs not dropped) */
    int64_t n_recv;    /* N: rows received for the local experts */
    mlp_act sh;        /* shared experts: a, b (T, Sw); unused when shared == 0 */
    /* ring of experts: the pairs (token, k) of the group's G tokens */
    int64_t *rpos;     /* (G, K) row of the pair among the local rows; -1: not a local
                          expert's, or dropped */
    float *rwts;       /* (G, K) the pair's combine weight */
    /* Owner-side store, expert-major (local expert, then peer, then token): */
    float *store;      /* owned allocation behind xr, ar, br (and yr) */
    int64_t store_cap; /* rows the store holds */
    float *xr;         /* (N, D) routed input rows */
    mlp_act r;         /* a, b (N, Mm) routed hidden activations */
    float *yr;         /* (N, D) ring: the local experts' outputs; NULL otherwise */
} moe_act;

/* Saved activations of one decoder layer. */
typedef struct layer_act {
    attn_act at;
    float *xmid;  /* (T, D) x after the attention residual */
    float *rstd2; /* (T) 1/rms of xmid */
    float *h2;    /* (T, D) rmsnorm(xmid) * post_norm */
    mlp_act mlp;  /* dense layers: a, b (T, mlp) */
    moe_act moe;  /* MoE layers */
    int fwd_done; /* the forward ran since creation (the backward needs it) */
} layer_act;

/* Transient buffers shared by all layers (contents die with the call). */
typedef struct model_scratch {
    float *kv;    /* (T, H, nope+v) fwd: ckvn @ wkv_b; bwd: its gradient */
    float *kpe;   /* (T, rope) fwd: k_pe; bwd: its gradient */
    float *dh;    /* (T, D) grad of h */
    float *dq;    /* (T, H, dq) grad of q */
    float *dk;    /* (T, H, dq) grad of k */
    float *dv;    /* (T, H, v_head) grad of v */
    float *dckvn; /* (T, kv_lora) grad of ckvn */
    float *dckv;  /* (T, kv_lora) grad of ckv */
    float *dqan;  /* (T, q_lora) grad of qan; NULL when q_lora == 0 */
    float *dqa;   /* (T, q_lora) grad of qa; NULL when q_lora == 0 */
    float *dout;  /* (T, H, v_head) grad of o */
    float *att;   /* (seq) attention backward scratch */
    float *dh2;   /* (T, D) grad of h2 */
    float *g;     /* (T, wmax) SwiGLU product (recomputed in the backward) */
    float *dg;    /* (T, wmax) grad of g */
    float *da;    /* (T, wmax) grad of a */
    float *db;    /* (T, wmax) grad of b */
    float *dsc;   /* (T, E) grad of the router scores, then of the logits (host) */
    float *dwk;   /* (T, K) grad of the combine weights (host) */
    float *dsc_d; /* (T, E) dsc in the table's memory */
    float *dwk_d; /* (T, K) dwk in the table's memory */
    float *hbias; /* (E) the gate bias read back (host) */
    float *hdbias;/* (E) its gradient, read, accumulated and written back (host) */
    double *lbd;  /* (E) load-balance densities of a sequence (lb_weight > 0) (host) */
    float *lbr;   /* (E) grad of a token's load-balance probabilities (host) */
    float *send;  /* (T*K, D) fwd: dispatched rows; bwd: gradient rows (not ring) */
    float *dxk;   /* (T*K, D) bwd: input grads returned by the owners (not ring) */
    float *gsend; /* (G, D + 2K) ring: rows sent by the gathers and reductions */
    float *grecv; /* (G, D + 2K) ring: rows received */
    int64_t *eoff;  /* (E) = (ep, E_l) row offsets per (peer, local expert) (host) */
    int64_t *srows; /* (ep) rows sent to each peer (host) */
    int64_t *rrows; /* (ep) rows received from each peer (host) */
    float *hn;    /* (head_rows, D) head: rmsnorm(x) * final_norm */
    float *hrstd; /* (head_rows) head: 1/rms of x */
    float *lg;    /* (head_rows, vocab) head: logits, then their grads */
    float *dhn;   /* (head_rows, D) head: grad of hn */
} model_scratch;

/* Owner-side transient rows of the MoE block, grown on demand like the
 * stores (bounded by route_max rows). */
typedef struct own_scratch {
    float *buf;  /* owned allocation behind the pointers below */
    int64_t cap; /* rows */
    float *ra;   /* (N, D) rows in peer order (received / to send back) */
    float *rb;   /* (N, D) fwd: expert outputs; bwd: output grads, expert-major */
    float *rc;   /* (N, D) bwd: input grads, expert-major */
    float *g;    /* (N, Mm) SwiGLU product */
    float *dg;   /* (N, Mm) */
    float *da;   /* (N, Mm) */
    float *db;   /* (N, Mm) */
} own_scratch;

/* Rows of the head processed at a time: as many as keep the logits within
 * HEAD_LOGITS floats (1 MiB), at least HEAD_ROWS_MIN, at most T. */
enum { HEAD_LOGITS = 1 << 18, HEAD_ROWS_MIN = 64 };

struct smoe_model {
    smoe_model_cfg cfg;
    const smoe_kops *ops; /* every kernel of a step runs through this table */
    void *stream;         /* ... on this stream (NULL: the CPU table's) */
    const smoe_kops *hops;/* the MoE routing's math on the host: ops when it is
                           * synchronous, else the CPU table */
    void *hslab;          /* the (host) arrays when ops is not synchronous */
    int64_t hslab_bytes;
    int64_t T;         /* batch * seq */
    int64_t n_layers;  /* n_dense + n_moe */
    int64_t el;        /* E_l = experts / ep (0 without MoE layers) */
    int64_t capacity;  /* per expert per sending rank; 0 = dropless */
    int ring;          /* ring of experts: cfg.ring with ep > 1 and MoE layers */
    int64_t wmax;      /* widest MLP: max(mlp, shared * moe_mlp) */
    int64_t route_max; /* bound on N, the rows received per MoE layer */
    int64_t head_rows; /* rows of the head at a time (HEAD_LOGITS) */
    int32_t *pos;      /* (T) position of each token in its sequence (table memory) */
    float *rope_cs;    /* (seq, qk_rope / 2) cos of every position's angles (table memory, */
    float *rope_sn;    /* (seq, qk_rope / 2) sin ...         one block behind rope_cs) */
    size_t tab_bytes;  /* rope_cs's block */
    double *scalars;   /* (2) the head's loss and z-sum of a chunk (table memory) */
    float rope_scale;  /* rope output multiplier */
    float attn_scale;  /* softmax scale of the attention scores */
    void *slab;        /* the activation slab (saved + scratch) */
    int64_t slab_bytes;
    layer_act *layers; /* (n_layers) */
    model_scratch s;
    own_scratch own;
    smoe_model_stats stats;
};

/* ---- model.c ---- */
/* Make sure the MoE store of `a` and the owner scratch hold n rows. */
SMOE_MUST_CHECK
smoe_status model_reserve_routed(smoe_model *m, moe_act *a, int64_t n,
                                 smoe_err *err);
static inline void model_progress(smoe_ep_comm *comm)
{
    if (comm && comm->progress)
        comm->progress(comm->ctx);
}

/* ---- mlp.c ---- */
/* y (n, d) = beta * y + swiglu(x @ wi0, x @ wi1) @ wo for x (n, d),
 * wi0/wi1 (d, w), wo (w, d). Saves a, b (n, w); g (n, w) is scratch. */
void mlp_fwd(const smoe_model *m, float *y, float beta, mlp_act a, float *g, const float *x,
             const float *wi0, const float *wi1, const float *wo, int64_t n, int64_t d,
             int64_t w, smoe_ep_comm *comm);
/* Backward of mlp_fwd for dy (n, d): dx (n, d) += ..., dwi0/dwi1/dwo +=
 * ... (dx may be NULL). Scratch g, dg, da, db (n, w). */
void mlp_bwd(const smoe_model *m, float *dx, float *dwi0, float *dwi1, float *dwo,
             const float *dy, mlp_act a, const float *x, const float *wi0, const float *wi1,
             const float *wo, int64_t n, int64_t d, int64_t w, float *g, float *dg, float *da,
             float *db, smoe_ep_comm *comm);

/* ---- attention_mla.c ---- */
/* x (T, D) += MLA(rmsnorm(x) * pre_norm); saves into a (a->xin = x in). */
void mla_fwd(smoe_model *m, attn_act *a, const float *const w[SMOE_W_NSLOTS],
             float *x, smoe_ep_comm *comm);
/* dx (T, D): grad of the block output in, grad of its input out. */
void mla_bwd(smoe_model *m, const attn_act *a,
             const float *const w[SMOE_W_NSLOTS],
             float *const dw[SMOE_W_NSLOTS], float *dx, smoe_ep_comm *comm);

/* ---- moe.c ---- */
/* x (T, D) += shared(h2) + routed(h2) for the layer's saved h2. */
SMOE_MUST_CHECK
smoe_status moe_fwd(smoe_model *m, layer_act *la,
                    const float *const w[SMOE_W_NSLOTS], float *x,
                    smoe_ep_comm *comm, smoe_err *err);
/* dy (T, D): grad of the block output; dh2 (T, D) += grad of h2. */
SMOE_MUST_CHECK
smoe_status moe_bwd(smoe_model *m, layer_act *la,
                    const float *const w[SMOE_W_NSLOTS],
                    float *const dw[SMOE_W_NSLOTS], const float *dy,
                    float *dh2, smoe_ep_comm *comm, smoe_err *err);
/* The local experts on their N rows (a->xr, expert-major, a->recv_cnt):
 * out (N, D) = expert(xr), saving the hidden activations. */
void moe_experts_fwd(smoe_model *m, moe_act *a, const float *const w[SMOE_W_NSLOTS],
                     float *out, smoe_ep_comm *comm);
/* Their backward for the row gradients dy (N, D): dxr (N, D) = input
 * gradients (overwritten), the experts' dW accumulated. */
void moe_experts_bwd(smoe_model *m, moe_act *a, const float *const w[SMOE_W_NSLOTS],
                     float *const dw[SMOE_W_NSLOTS], const float *dy, float *dxr,
                     smoe_ep_comm *comm);
/* Time one exchange of the expert group into the stats; a failure is
 * named with `what`. */
SMOE_MUST_CHECK
smoe_status moe_exchange(smoe_model *m, smoe_ep_comm *c, const float *send,
                         const int64_t *out, float *recv, const int64_t *in, int64_t row,
                         const char *what, smoe_err *err);

/* ---- moe_ring.c ---- */
/* Ring of experts, MoE layers with ep > 1 and m->ring: the routed part of
 * moe_fwd (x (T, D) += sum_k w_k * expert_k(h2), the router's choices in
 * la->moe) and of moe_bwd (dh2 += the routed experts' input gradient, the
 * combine weights' gradient into m->s.dwk). */
SMOE_MUST_CHECK
smoe_status moe_ring_fwd(smoe_model *m, layer_act *la, const float *const w[SMOE_W_NSLOTS],
                         float *x, smoe_ep_comm *comm, smoe_err *err);
SMOE_MUST_CHECK
smoe_status moe_ring_bwd(smoe_model *m, layer_act *la, const float *const w[SMOE_W_NSLOTS],
                         float *const dw[SMOE_W_NSLOTS], const float *dy, float *dh2,
                         smoe_ep_comm *comm, smoe_err *err);

/* host <- the table's memory, and back, for arrays with a host mirror
 * (moe_act); nothing when the two are one array (a synchronous table) */
static inline void mirror_in(const smoe_model *m, void *host, const void *dev, size_t bytes)
{
    if (host != dev)
        m->ops->read(m->stream, host, dev, bytes);
}

static inline void mirror_out(const smoe_model *m, void *dev, const void *host, size_t bytes)
{
    if (host != dev)
        m->ops->write(m->stream, dev, host, bytes);
}

/* The host view of n floats of the table's memory at dev (NULL: NULL):
 * dev itself on a synchronous table, else read into host. */
static inline float *host_view(const smoe_model *m, float *host, const float *dev, int64_t n)
{
    if (!dev || m->ops->synchronous)
        return (float *)dev;
    m->ops->read(m->stream, host, dev, (size_t)n * sizeof *host);
    return host;
}

#endif
