/* A config value as one line of YAML flow text: what checkpoint manifests
 * record key by key and what messages quote. */
#include "config_impl.h"

#include <string.h>

typedef struct tbuf {
    char *p;
    size_t n, cap;
    int bad;
} tbuf;

static void tput(tbuf *b, const char *s)
{
    size_t k = strlen(s);
    if (b->bad)
        return;
    if (b->n + k + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + k + 1)
            cap *= 2;
        char *q = smoe_realloc(b->p, cap);
        if (!q) {
            b->bad = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

static void tnode(tbuf *b, const smoe_node *n)
{
    if (n->kind == SMOE_NODE_SCALAR) {
        if (!n->plain)
            tput(b, "'");
        tput(b, n->str ? n->str : "");
        if (!n->plain)
            tput(b, "'");
        return;
    }
    tput(b, n->kind == SMOE_NODE_MAP ? "{" : "[");
    for (int i = 0; i < n->n; i++) {
        if (i)
            tput(b, ", ");
        if (n->kind == SMOE_NODE_MAP) {
            tput(b, n->keys[i]);
            tput(b, ": ");
        }
        tnode(b, n->items[i]);
    }
    tput(b, n->kind == SMOE_NODE_MAP ? "}" : "]");
}

char *smoe_node_text(const smoe_node *n)
{
    tbuf b = { NULL, 0, 0, 0 };
    tput(&b, "");
    if (n)
        tnode(&b, n);
    if (b.bad) {
        smoe_free(b.p);
        return NULL;
    }
    return b.p;
}
