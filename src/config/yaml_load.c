/* YAML -> smoe_node tree, through libyaml's event parser. The only file of
 * smoe that includes <yaml.h>. Locations are 1-based line:col of the node's
 * first character. Anchors and aliases are supported (an alias shares the
 * anchored node); tags are ignored; duplicate mapping keys are errors.
 * Hostile documents are bounded: an alias may not refer to a node that
 * contains it (no cycles), and counting every alias as the nodes it stands
 * for, a document has at most MAX_NODES nodes and MAX_DEPTH levels, so any
 * walk over the tree is bounded too ("billion laughs"). */
#include "config_impl.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#define MAX_DEPTH 64
#define MAX_ANCHORS 256
#define MAX_NODES 100000 /* after alias expansion */

typedef struct builder {
    smoe_arena *a;
    const char *file;
    /* growable child lists for open collections */
    struct frame {
        smoe_node *node;
        smoe_node **items;
        const char **keys;
        smoe_loc *key_locs;
        int n, cap;
        int *slot;    /* MAP: hash index of keys[] (entry + 1, 0 = free) */
        const char *pending_key; /* MAP: key read, value awaited */
        smoe_loc pending_loc;
        int anchor;   /* index in anchors[] of this node's anchor, or -1 */
        long size;    /* nodes in this subtree so far, aliases expanded */
        int height;   /* levels below this node so far, aliases expanded */
    } st[MAX_DEPTH];
    int depth;
    struct {
        const char *name;
        smoe_node *node;
        long size;    /* expanded subtree size; 0 while the node is open */
        int height;
    } anchors[MAX_ANCHORS];
    int n_anchors;
    long nodes;       /* in the document so far, aliases expanded */
    smoe_node *root;
} builder;

static smoe_loc mark_loc(const builder *b, yaml_mark_t m)
{
    smoe_loc l = { b->file, (int)m.line + 1, (int)m.column + 1 };
    return l;
}

/* MAP frames: index of `key` in keys[], or -1 (hash index, 2 * cap slots). */
static int key_index(const struct frame *f, const char *key)
{
    if (!f->slot)
        return -1;
    unsigned mask = (unsigned)f->cap * 2 - 1;
    for (unsigned i = cfg_hash(key) & mask;; i = (i + 1) & mask) {
        if (f->slot[i] == 0)
            return -1;
        if (strcmp(f->keys[f->slot[i] - 1], key) == 0)
            return f->slot[i] - 1;
    }
}

static void key_put(struct frame *f, int index)
{
    unsigned mask = (unsigned)f->cap * 2 - 1;
    unsigned i = cfg_hash(f->keys[index]) & mask;
    while (f->slot[i])
        i = (i + 1) & mask;
    f->slot[i] = index + 1;
}

static smoe_status grow(builder *b, struct frame *f, smoe_err *err)
{
    if (f->n < f->cap)
        return SMOE_OK;
    int cap = f->cap ? f->cap * 2 : 8;
    smoe_node **items = smoe_arena_alloc(b->a, sizeof *items * (size_t)cap);
    const char **keys = smoe_arena_alloc(b->a, sizeof *keys * (size_t)cap);
    smoe_loc *locs = smoe_arena_alloc(b->a, sizeof *locs * (size_t)cap);
    if (!items || !keys || !locs)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory reading %s", b->file);
    if (f->n) {
        memcpy(items, f->items, sizeof *items * (size_t)f->n);
        memcpy(keys, f->keys, sizeof *keys * (size_t)f->n);
        memcpy(locs, f->key_locs, sizeof *locs * (size_t)f->n);
    }
    f->items = items;
    f->keys = keys;
    f->key_locs = locs;
    f->cap = cap;
    if (f->node->kind == SMOE_NODE_MAP) {
        f->slot = smoe_arena_alloc(b->a, sizeof *f->slot * (size_t)cap * 2);
        if (!f->slot)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory reading %s", b->file);
        for (int i = 0; i < f->n; i++)
            key_put(f, i);
    }
    return SMOE_OK;
}

/* Attach a finished node of `size` nodes and `height` levels (aliases
 * expanded) to the open collection (or make it the root). */
static smoe_status attach(builder *b, smoe_node *n, long size, int height,
                          smoe_err *err)
{
    if (b->depth == 0) {
        b->root = n;
        return SMOE_OK;
    }
    struct frame *f = &b->st[b->depth - 1];
    f->size += size;
    if (height + 1 > f->height)
        f->height = height + 1;
    if (f->node->kind == SMOE_NODE_MAP && !f->pending_key) {
        if (n->kind != SMOE_NODE_SCALAR)
            return smoe_err_at(err, SMOE_EINVAL, n->loc,
                               "a mapping key must be a plain value");
        int i = key_index(f, n->str);
        if (i >= 0)
            return smoe_err_at(err, SMOE_EINVAL, n->loc,
                               "duplicate key '%s' (first at line %d)",
                               n->str, f->items[i]->loc.line);
        f->pending_key = n->str;
        f->pending_loc = n->loc;
        return SMOE_OK;
    }
    smoe_status s = grow(b, f, err);
    if (s)
        return s;
    f->keys[f->n] = f->pending_key;
    f->key_locs[f->n] = f->pending_loc;
    f->items[f->n] = n;
    if (f->node->kind == SMOE_NODE_MAP)
        key_put(f, f->n);
    f->n++;
    f->pending_key = NULL;
    return SMOE_OK;
}

/* Record n's anchor, if any; *index is its slot or -1. A scalar's size is
 * known at once; a collection's when it ends (0 until then). */
static smoe_status remember(builder *b, yaml_char_t *anchor, smoe_node *n,
                            int *index, smoe_err *err)
{
    *index = -1;
    if (!anchor)
        return SMOE_OK;
    if (b->n_anchors == MAX_ANCHORS)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "too many anchors");
    b->anchors[b->n_anchors].name = smoe_arena_strdup(b->a, (const char *)anchor);
    if (!b->anchors[b->n_anchors].name)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    b->anchors[b->n_anchors].node = n;
    b->anchors[b->n_anchors].size = n->kind == SMOE_NODE_SCALAR ? 1 : 0;
    b->anchors[b->n_anchors].height = 0;
    *index = b->n_anchors++;
    return SMOE_OK;
}

/* Count `size` more nodes in the document. */
static smoe_status count_nodes(builder *b, long size, yaml_mark_t m, smoe_err *err)
{
    b->nodes += size;
    if (b->nodes > MAX_NODES)
        return smoe_err_at(err, SMOE_EINVAL, mark_loc(b, m),
                           "the document has more than %d nodes (aliases "
                           "counted as the nodes they stand for)", MAX_NODES);
    return SMOE_OK;
}

static smoe_node *new_node(builder *b, smoe_node_kind k, yaml_mark_t m)
{
    smoe_node *n = smoe_arena_alloc(b->a, sizeof *n);
    if (n) {
        n->kind = k;
        n->loc = mark_loc(b, m);
    }
    return n;
}

static smoe_status on_scalar(builder *b, yaml_event_t *ev, smoe_err *err)
{
    int anchor;
    smoe_status s = count_nodes(b, 1, ev->start_mark, err);
    if (s)
        return s;
    smoe_node *n = new_node(b, SMOE_NODE_SCALAR, ev->start_mark);
    if (!n)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    n->str = smoe_arena_strndup(b->a, (const char *)ev->data.scalar.value, ev->data.scalar.length);
    if (!n->str)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if ((s = remember(b, ev->data.scalar.anchor, n, &anchor, err)))
        return s;
    return attach(b, n, 1, 0, err);
}

/* A sequence or mapping opens: a new frame on the stack. */
static smoe_status on_start(builder *b, yaml_event_t *ev, smoe_err *err)
{
    const int seq = ev->type == YAML_SEQUENCE_START_EVENT;
    int anchor;
    if (b->depth == MAX_DEPTH)
        return smoe_err_at(err, SMOE_EINVAL, mark_loc(b, ev->start_mark),
                           "nesting deeper than %d levels", MAX_DEPTH);
    smoe_status s = count_nodes(b, 1, ev->start_mark, err);
    if (s)
        return s;
    smoe_node *n = new_node(b, seq ? SMOE_NODE_SEQ : SMOE_NODE_MAP, ev->start_mark);
    if (!n)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if ((s = remember(b, seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor, n,
                      &anchor, err)))
        return s;
    memset(&b->st[b->depth], 0, sizeof b->st[0]);
    b->st[b->depth].node = n;
    b->st[b->depth].anchor = anchor;
    b->st[b->depth++].size = 1;
    return SMOE_OK;
}

/* A sequence or mapping closes: its frame becomes the node's items. */
static smoe_status on_end(builder *b, smoe_err *err)
{
    struct frame *f = &b->st[--b->depth];
    f->node->n = f->n;
    f->node->items = f->items;
    f->node->keys = f->node->kind == SMOE_NODE_MAP ? f->keys : NULL;
    f->node->key_locs = f->node->kind == SMOE_NODE_MAP ? f->key_locs : NULL;
    if (f->anchor >= 0) {
        b->anchors[f->anchor].size = f->size;
        b->anchors[f->anchor].height = f->height;
    }
    return attach(b, f->node, f->size, f->height, err);
}

/* An alias: the latest anchor of its name, closed, counted as the nodes
 * it stands for. */
static smoe_status on_alias(builder *b, yaml_event_t *ev, smoe_err *err)
{
    for (int i = b->n_anchors - 1; i >= 0; i--) {
        if (strcmp(b->anchors[i].name, (const char *)ev->data.alias.anchor) != 0)
            continue;
        if (b->anchors[i].size == 0) /* still open: it contains the alias */
            return smoe_err_at(err, SMOE_EINVAL, mark_loc(b, ev->start_mark),
                               "alias '*%s' refers to a node that contains it",
                               ev->data.alias.anchor);
        if (b->depth + b->anchors[i].height > MAX_DEPTH)
            return smoe_err_at(err, SMOE_EINVAL, mark_loc(b, ev->start_mark),
                               "nesting deeper than %d levels (aliases expanded)", MAX_DEPTH);
        /* the alias's own event was not counted: count what it stands for */
        smoe_status s = count_nodes(b, b->anchors[i].size, ev->start_mark, err);
        if (s)
            return s;
        return attach(b, b->anchors[i].node, b->anchors[i].size, b->anchors[i].height, err);
    }
    return smoe_err_at(err, SMOE_EINVAL, mark_loc(b, ev->start_mark), "unknown alias '*%s'",
                       ev->data.alias.anchor);
}

static smoe_status on_event(builder *b, yaml_event_t *ev, smoe_err *err)
{
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev, err);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        return on_start(b, ev, err);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(b, err);
    case YAML_ALIAS_EVENT:
        return on_alias(b, ev, err);
    default:
        return SMOE_OK;
    }
}

static smoe_status parse(builder *b, yaml_parser_t *p, smoe_node **out,
                         smoe_err *err)
{
    int docs = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(p, &ev)) {
            smoe_loc l = { b->file, (int)p->problem_mark.line + 1,
                           (int)p->problem_mark.column + 1 };
            return smoe_err_at(err, SMOE_EINVAL, l, "malformed YAML: %s%s%s",
                               p->problem ? p->problem : "parse error",
                               p->context ? " " : "",
                               p->context ? p->context : "");
        }
        if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
            smoe_loc l = mark_loc(b, ev.start_mark);
            yaml_event_delete(&ev);
            return smoe_err_at(err, SMOE_EINVAL, l,
                               "more than one YAML document in one file");
        }
        smoe_status s = on_event(b, &ev, err);
        int done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (s)
            return s;
        if (done)
            break;
    }
    if (!b->root) { /* empty document */
        b->root = smoe_arena_alloc(b->a, sizeof *b->root);
        if (!b->root)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        b->root->kind = SMOE_NODE_SCALAR;
        b->root->str = "";
        b->root->plain = 1;
        b->root->loc.file = b->file;
        b->root->loc.line = 1;
        b->root->loc.col = 1;
    }
    *out = b->root;
    return SMOE_OK;
}

static smoe_status run(smoe_arena *a, const char *name, const char *text, size_t n,
                       smoe_node **out, smoe_err *err)
{
    yaml_parser_t p;
    builder *b = smoe_calloc(1, sizeof *b);
    if (!b)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    b->a = a;
    b->file = smoe_arena_strdup(a, name);
    if (!b->file || !yaml_parser_initialize(&p)) {
        smoe_free(b);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, n);
    smoe_status s = parse(b, &p, out, err);
    yaml_parser_delete(&p);
    smoe_free(b);
    return s;
}

smoe_status smoe_yaml_load_file(smoe_arena *a, const char *path,
                                smoe_node **out, smoe_err *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) /* pipes stay allowed */
        return smoe_err_in(err, SMOE_EINVAL, path, "is a directory, not a YAML file");
    char *text;
    size_t n;
    smoe_status s = smoe_read_file_max(path, SMOE_MAX_YAML_BYTES, &text, &n, err);
    if (s == SMOE_EIO && err) /* a file that cannot be read is a bad argument */
        err->code = SMOE_ENOTFOUND;
    if (s)
        return s == SMOE_EIO ? SMOE_ENOTFOUND : s;
    s = run(a, path, text, n, out, err); /* every byte: a NUL is an error */
    smoe_free(text);
    return s;
}

smoe_status smoe_yaml_load_string(smoe_arena *a, const char *text,
                                  const char *name, smoe_node **out,
                                  smoe_err *err)
{
    return run(a, name, text, strlen(text), out, err);
}
