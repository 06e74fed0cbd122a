/* MaxText's pipeline post-fixups of the assembled config (step 6 of the
 * assembly, after custom_mesh_and_rule): with pipeline parallelism > 1 the
 * first activation_embed_and_logits_batch rule gains the stage axis, and
 * stage moves in front of data in mesh_axes and data_sharding. */
#define _POSIX_C_SOURCE 200809L
#include "config_impl.h"

#include <string.h>

/* A copy of a sequence-of-strings node with `axis` moved to index `at`. */
static smoe_node *seq_move(smoe_arena *a, const smoe_node *seq, const char *axis,
                           int at)
{
    smoe_node *n = smoe_arena_alloc(a, sizeof *n);
    if (!n)
        return NULL;
    *n = *seq;
    n->items = smoe_arena_alloc(a, sizeof *n->items * (size_t)(seq->n + 1));
    if (!n->items)
        return NULL;
    smoe_node *moved = NULL;
    int k = 0;
    for (int i = 0; i < seq->n; i++) {
        const smoe_node *it = seq->items[i];
        if (it->kind == SMOE_NODE_SCALAR && strcmp(it->str, axis) == 0)
            moved = seq->items[i];
        else
            n->items[k++] = seq->items[i];
    }
    if (!moved)
        return n;
    if (at > k)
        at = k;
    memmove(n->items + at + 1, n->items + at, sizeof *n->items * (size_t)(k - at));
    n->items[at] = moved;
    n->n = k + 1;
    return n;
}

static int seq_index(const smoe_node *seq, const char *s)
{
    for (int i = 0; seq && seq->kind == SMOE_NODE_SEQ && i < seq->n; i++)
        if (seq->items[i]->kind == SMOE_NODE_SCALAR && strcmp(seq->items[i]->str, s) == 0)
            return i;
    return -1;
}

smoe_status cfg_pipeline_fixups(smoe_config *c, smoe_arena *a, smoe_err *err)
{
    int64_t ici = 1, dcn = 1;
    const smoe_node *n = cfg_map_get(&c->values, "ici_pipeline_parallelism");
    if (n && smoe_node_type(n) == SMOE_T_INT)
        smoe_parse_i64(n->str, &ici);
    n = cfg_map_get(&c->values, "dcn_pipeline_parallelism");
    if (n && smoe_node_type(n) == SMOE_T_INT)
        smoe_parse_i64(n->str, &dcn);
    if (ici <= 1 && dcn <= 1)
        return SMOE_OK;
    static const char *const batch[] = { "stage", "data", "fsdp", "fsdp_transpose", "expert" };
    for (int i = 0; i < c->rules.n; i++)
        if (strcmp(c->rules.r[i].name, "activation_embed_and_logits_batch") == 0) {
            smoe_rule *r = smoe_arena_alloc(a, sizeof *r * (size_t)c->rules.n);
            if (!r)
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            memcpy(r, c->rules.r, sizeof *r * (size_t)c->rules.n);
            r[i].value.n = 5;
            for (int k = 0; k < 5; k++)
                r[i].value.ax[k] = batch[k];
            c->rules.r = r;
            break;
        }
    const smoe_node *axes = cfg_map_get(&c->values, "mesh_axes");
    int di = seq_index(axes, "data");
    if (di >= 0 && seq_index(axes, "stage") >= 0) {
        smoe_node *m = seq_move(a, axes, "stage", di);
        if (!m || cfg_map_set(a, &c->values, "mesh_axes", m))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    const smoe_node *ds = cfg_map_get(&c->values, "data_sharding");
    if (ds && ds->kind == SMOE_NODE_SEQ) {
        smoe_node *nd = smoe_arena_alloc(a, sizeof *nd);
        if (!nd)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        *nd = *ds;
        nd->items = smoe_arena_alloc(a, sizeof *nd->items * (size_t)(ds->n + 1));
        if (!nd->items)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        for (int i = 0; i < ds->n; i++) {
            const smoe_node *it = ds->items[i];
            nd->items[i] = seq_index(it, "stage") >= 0 ? seq_move(a, it, "stage", 0)
                                                       : ds->items[i];
            if (!nd->items[i])
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        }
        if (cfg_map_set(a, &c->values, "data_sharding", nd))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    const smoe_node *q = cfg_map_get(&c->values, "quantization");
    if (q && q->kind == SMOE_NODE_SCALAR && strcmp(q->str, "fp8") == 0) {
        smoe_rule *r = smoe_arena_alloc(a, sizeof *r * (size_t)(c->rules.n + 1));
        if (!r)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        memcpy(r, c->rules.r, sizeof *r * (size_t)c->rules.n);
        r[c->rules.n].name = "aqt_amax_history";
        r[c->rules.n].value.n = 1;
        r[c->rules.n].value.ax[0] = "stage";
        c->rules.r = r;
        c->rules.n++;
    }
    return SMOE_OK;
}

