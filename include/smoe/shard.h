/* smoe shard: the pure algebra of sharding. A device mesh (named axes with
 * sizes), PartitionSpecs (one entry per tensor dim, each an ordered list of
 * mesh axes), logical-axis rules and their resolution exactly as Flax does
 * it, and the layout maps between a global tensor and one device's block.
 * No I/O, no MPI; strings are borrowed (the caller keeps them alive, usually
 * in an arena). */
#ifndef SMOE_SHARD_H
#define SMOE_SHARD_H

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SMOE_MAX_AXES 16  /* mesh axes */
#define SMOE_MAX_ENTRY 16 /* axes in one spec entry or rule value */
#define SMOE_MAX_RANK 8   /* tensor rank */

/* An ordered list of mesh-axis names, major to minor. In a PartitionSpec
 * n == 0 means None (replicated dim), n == 1 prints as "axis", n >= 2 as a
 * tuple: this is JAX's canonical form. */
typedef struct smoe_axes {
    int n;
    const char *ax[SMOE_MAX_ENTRY];
} smoe_axes;

/* PartitionSpec: one entry per dim. */
typedef struct smoe_pspec {
    int rank;
    smoe_axes dim[SMOE_MAX_RANK];
} smoe_pspec;

/* Device mesh: axis names in mesh_axes order; sizes >= 1. Device ranks are
 * row-major over the axes (last axis fastest), as MPI_Cart_create numbers
 * them. */
typedef struct smoe_mesh {
    int n;
    const char *name[SMOE_MAX_AXES];
    int64_t size[SMOE_MAX_AXES];
    /* the part of size[i] across slices (MaxText's dcn_*: size = ici * dcn);
     * 0 or 1: none */
    int64_t dcn[SMOE_MAX_AXES];
} smoe_mesh;

/* Index of axis `name`, or -1. */
int smoe_mesh_find(const smoe_mesh *m, const char *name);
/* The group of the device at coords over the ordered tuple `axes`: the
 * devices that differ only there. color: the coordinates of the other axes
 * (mesh order, mixed radix); member: this device's place in the group (the
 * tuple's radix, last axis fastest); size: the group's. SMOE_EINVAL for an
 * axis not in m. */
SMOE_MUST_CHECK
smoe_status smoe_mesh_group(const smoe_mesh *m, const int64_t coords[], const smoe_axes *axes,
                            int64_t *color, int64_t *member, int64_t *size, smoe_err *err);
/* Size of axis `name`; an axis absent from the mesh counts as size 1
 * (MaxText's remove_size_one_mesh_axis treats it so). */
int64_t smoe_mesh_axis_size(const smoe_mesh *m, const char *name);
int64_t smoe_mesh_devices(const smoe_mesh *m);
/* Coordinates of device `rank` (row-major). */
void smoe_mesh_coords(const smoe_mesh *m, int64_t rank, int64_t coords[]);
int64_t smoe_mesh_rank_of(const smoe_mesh *m, const int64_t coords[]);
/* The number of slices: the product of the dcn parts (>= 1). */
int64_t smoe_mesh_slices(const smoe_mesh *m);
/* 1 when MaxText's multi-slice device order equals the row-major one with
 * slice s the ranks [s * D / S, (s + 1) * D / S): jax's
 * create_hybrid_device_mesh gives the device of slice s (row-major over the
 * dcn parts) and local index l (row-major over the ici parts) the
 * coordinate dcn_i(s) * ici_i + ici_i(l) along axis i. So it is where no
 * axis with an ici part > 1 comes before one with a dcn part > 1. */
int smoe_mesh_slices_contiguous(const smoe_mesh *m);

/* Axis parts (src/shard/levels.c): a mesh axis whole ("fsdp"), its part
 * across slices ("fsdp@dcn": coordinate / ici, size dcn) or within a slice
 * ("fsdp@ici": coordinate % ici, size ici). */
typedef enum smoe_axis_part { SMOE_PART_WHOLE, SMOE_PART_DCN, SMOE_PART_ICI } smoe_axis_part;
#define SMOE_PART_NAME 52
/* The mesh index of a part's axis (-1: none) and *part. */
int smoe_mesh_part_find(const smoe_mesh *m, const char *name, smoe_axis_part *part);
int64_t smoe_mesh_part_size(const smoe_mesh *m, int axis, smoe_axis_part p);
/* The part's coordinate, given the axis's. */
int64_t smoe_mesh_part_coord(const smoe_mesh *m, int axis, smoe_axis_part p, int64_t coord);
/* Steps of the axis one step of the part moves (dcn: ici; else 1). */
int64_t smoe_mesh_part_scale(const smoe_mesh *m, int axis, smoe_axis_part p);
/* 1 when set names axis `axis` whole or its part p. */
int smoe_axes_has_part(const smoe_mesh *m, const smoe_axes *set, int axis, smoe_axis_part p);
/* The members of a group over parts (each once): the product of sizes. */
int64_t smoe_axes_part_members(const smoe_mesh *m, const smoe_axes *parts);
/* The two levels of a group over axes S: across, the dcn parts of S's axes
 * (size > 1) in S's order; within, their ici parts. An axis with one part
 * only is named whole. Used in place: the axes point into the names. */
typedef struct smoe_levels {
    smoe_axes across, within;
    char across_names[SMOE_MAX_ENTRY][SMOE_PART_NAME];
    char within_names[SMOE_MAX_ENTRY][SMOE_PART_NAME];
} smoe_levels;
/* Fills *lv; returns 1 when S's group runs in two levels (members both
 * across slices and within one: then the across level sends 1 / within
 * of the bytes one level would send across slices), else 0 (always with
 * one slice: every dcn part is 1, so the level across is empty). */
int smoe_axes_levels(const smoe_mesh *m, const smoe_axes *S, smoe_levels *lv);
/* The member (mixed radix over S, last fastest) whose index is x in the
 * level across (radix over the dcn parts of S's axes) and w in the level
 * within (radix over their ici parts). */
int64_t smoe_levels_member(const smoe_mesh *m, const smoe_axes *S, int64_t x, int64_t w);

/* The mesh over the parts of m's axes (size > 1): an axis with both parts
 * > 1 becomes "a@dcn" (dcn = its size) then "a@ici"; another stays "a".
 * Where the slices are contiguous (smoe_mesh_slices_contiguous) its
 * row-major device order is m's, so a group over parts (smoe_levels'
 * names) has the same members as on m. Used in place. */
typedef struct smoe_part_mesh {
    smoe_mesh mesh;
    char names[SMOE_MAX_AXES][SMOE_PART_NAME];
} smoe_part_mesh;
void smoe_mesh_parts(const smoe_mesh *m, smoe_part_mesh *pm);

/* Fill one -1 entry of vals[0..n) so that the product equals target, as
 * MaxText's fill_unspecified_mesh_axes does. labels[i] names entry i in
 * messages (e.g. "ici_fsdp_parallelism"); what names the target ("devices
 * per slice"). Errors (SMOE_EINVAL): two -1, a value < 1 other than -1, a
 * non-integer fill, product != target. *bad (may be NULL) is set to the
 * offending index, or -1 when the product as a whole is wrong. */
SMOE_MUST_CHECK
smoe_status smoe_mesh_fill(int64_t vals[], int n, int64_t target,
                           const char *const labels[], const char *what,
                           int *bad, smoe_err *err);

/* ---- spec entries ---- */
int smoe_axes_has(const smoe_axes *e, const char *axis);
int smoe_axes_equal(const smoe_axes *a, const smoe_axes *b);
/* Product of the mesh sizes of the entry's axes (absent axes count 1). */
int64_t smoe_axes_size(const smoe_axes *e, const smoe_mesh *m);
/* The entry without axes of size 1 (or absent from the mesh). */
smoe_axes smoe_axes_live(const smoe_axes *e, const smoe_mesh *m);
/* remove_size_one_mesh_axis: the use-site form of a state spec. */
void smoe_pspec_drop_size1(const smoe_pspec *in, const smoe_mesh *m,
                           smoe_pspec *out);
/* Python-like text, e.g. "P(('fsdp', 'expert'), None)" when python != 0,
 * else the compact "(fsdp,expert) -". Returns buf. */
const char *smoe_pspec_format(const smoe_pspec *s, int python, char *buf,
                              size_t n);
const char *smoe_axes_format(const smoe_axes *e, char *buf, size_t n);

/* ---- logical-axis rules ---- */
/* One rule [logical_name, value]. value.n == 0 is [] ("replicated, stop
 * looking"); a bare string and a one-element list are the same after JAX
 * canonicalisation, so both are stored as n == 1. */
typedef struct smoe_rule {
    const char *name;
    smoe_axes value;
    smoe_loc loc; /* where the rule was written, for messages */
} smoe_rule;

typedef struct smoe_rules {
    int n;
    smoe_rule *r; /* borrowed array */
} smoe_rules;

/* Flax logical_to_mesh_axes: names[i] is a logical name or NULL (None).
 * The loop runs over the rules in order; a rule whose name occurs applies
 * to the first dim with that name if that dim is still unassigned and none
 * of the value's axes is already used by another dim (all-or-nothing).
 * Unassigned names become None. Size-1 axes are kept (state shardings).
 * Error (SMOE_EINVAL) when a logical name occurs twice; `where` (may be
 * NULL) names the tensor in the message. */
SMOE_MUST_CHECK
smoe_status smoe_shard_resolve(const smoe_rules *rules, int rank,
                               const char *const names[], smoe_pspec *out,
                               const char *where, smoe_err *err);

/* ---- layout: a device's block of a global tensor ---- */
/* Block index of the device with `coords` on one dim: mixed radix over the
 * entry's axes in entry order (the first axis is the most significant), as
 * a tiled all-gather over that tuple concatenates blocks. */
int64_t smoe_axes_block(const smoe_axes *e, const smoe_mesh *m,
                        const int64_t coords[]);

/* Local block of `shape` under `spec` for the device at `coords`:
 * local[d] = shape[d] / n_blocks(d), offset[d] = block(d) * local[d].
 * SMOE_EINVAL when a dim does not divide evenly (shard_map needs it). */
SMOE_MUST_CHECK
smoe_status smoe_layout_local(const smoe_pspec *spec, const int64_t shape[],
                              const smoe_mesh *m, const int64_t coords[],
                              int64_t local[], int64_t offset[],
                              smoe_err *err);

/* How one weight is gathered, as the runtime executes it: plain data made
 * by the plan (smoe_gather_exec_of in plan.h), so the runtime, which stands
 * on core and shard only, never re-derives a gather plan. Per dim of the
 * per-layer weight, prefetch and at_use are disjoint runs of live (in its
 * order); live axes in neither are kept (a routed weight's `expert`). */
typedef struct smoe_gather_exec {
    int rank;
    int64_t shape[SMOE_MAX_RANK];      /* per-layer global shape */
    smoe_axes live[SMOE_MAX_RANK];     /* source sharding, size-1 axes dropped */
    smoe_axes prefetch[SMOE_MAX_RANK]; /* gathered ahead of use: the plan's axes */
    smoe_axes at_use[SMOE_MAX_RANK];   /* gathered at use and waited at once: the
                                          plan's legacy residual, and live axes
                                          no FSDP axis leads */
    unsigned indivisible;              /* the plan's bit d: shape[d] does not
                                          divide into its shards */
    int wire;                          /* smoe_dtype (dtype.h) the gathers move;
                                          0 = fp32 (smoe_gather_exec_set_wire) */
    int64_t wire_block;                /* int8: elements per scale */
    int reduce_wire;                   /* smoe_dtype of the gradient reductions:
                                          0 = fp32, or bf16 */
} smoe_gather_exec;

/* A weight's gathers on one device, the geometry every implementation of
 * them shares (the MPI runtime, comm's in-process ranks): the gathered
 * buffer has the natural row-major layout of B (the global shape divided
 * by the axes the weight keeps); on dim d the shard is block number
 * radix(coords over A_d) of size blk_d, where A_d is every axis the weight
 * gathers on that dim (prefetched or at use, in live order). */
typedef struct smoe_gather_geom {
    int rank;
    int64_t B[SMOE_MAX_RANK];      /* gathered shape */
    int64_t blk[SMOE_MAX_RANK];    /* shard shape */
    int64_t off[SMOE_MAX_RANK];    /* shard offset inside B */
    int64_t shard_numel, gathered_numel;
    smoe_axes A[SMOE_MAX_RANK];    /* the gathered axes per dim */
    smoe_axes rs;                  /* every gather axis, dims in order: the
                                      gradient reduce-scatter's group */
    smoe_axes rep;                 /* mesh axes (size > 1) the weight is
                                      replicated on: the all-reduce's group */
    int pack;                      /* a dim after 0 gathers: the reduce-scatter's
                                      member blocks are not contiguous in B */
} smoe_gather_geom;

/* The geometry of x on the device at coords of m (m's axis names are
 * borrowed, as are x's). SMOE_EINVAL naming `name` for a dim the plan
 * marked indivisible. */
SMOE_MUST_CHECK
smoe_status smoe_gather_geom_of(const smoe_gather_exec *x, const smoe_mesh *m,
                                const int64_t coords[], const char *name, smoe_gather_geom *g,
                                smoe_err *err);
/* Elements of dim d one step of axis A_d[k] moves (blk_d times the sizes
 * of the axes after it). */
int64_t smoe_gather_geom_stride(const smoe_gather_geom *g, const smoe_mesh *m, int d, int k);
/* The index of the run S in A_d (its first axis), or -1 when S is not a
 * consecutive run of A_d in order (a stage must be one). */
int smoe_gather_geom_run(const smoe_gather_geom *g, int d, const smoe_axes *S);
/* Where member `member` of a level P (parts of A_d's axes, smoe_levels;
 * member: the mixed radix over P's part coordinates, last fastest) has its
 * blocks along dim d, in elements from member 0's: the sum of its part
 * coordinates times their strides (a dcn part steps ici of its axis). */
int64_t smoe_gather_geom_level_offset(const smoe_gather_geom *g, const smoe_mesh *m, int d,
                                      const smoe_axes *P, int64_t member);
/* The shard offset inside B of member `member` of the reduce-scatter group
 * (its mixed radix over rs, the last axis fastest). */
void smoe_gather_geom_member(const smoe_gather_geom *g, const smoe_mesh *m, int64_t member,
                             int64_t off[]);

/* A local block of a global row-major tensor as planes: `height` rows of
 * `width` bytes, at byte goff of the global buffer (rows gpitch apart) and
 * loff of the local one (rows lpitch apart, packed). The last two dims
 * make a plane (a 2-D copy on a device); the dims before them are walked
 * in row-major order. Rank 0 is one element. */
typedef struct smoe_layout_plane {
    size_t goff, loff, height, width, gpitch, lpitch;
} smoe_layout_plane;
typedef void (*smoe_layout_plane_fn)(void *ud, const smoe_layout_plane *p);
void smoe_layout_planes(int rank, const int64_t shape[], const int64_t local[],
                        const int64_t offset[], size_t elem, smoe_layout_plane_fn fn, void *ud);

/* Copy between a global row-major tensor and a local block of it.
 * dir = 0: global -> local; dir = 1: local -> global. elem is the element
 * size in bytes. */
void smoe_layout_copy(int rank, const int64_t shape[], const int64_t local[],
                      const int64_t offset[], size_t elem, void *global,
                      void *localbuf, int dir);
/* Copy the block (shape local, at offset) of one global row-major tensor
 * of `shape` into the same place of another (src and dst do not overlap
 * there). */
void smoe_layout_copy_block(int rank, const int64_t shape[], const int64_t local[],
                            const int64_t offset[], size_t elem, const void *src, void *dst);

#ifdef __cplusplus
}
#endif
#endif
