/* The checkpoint-manifest fuzz target (see targets.h): arbitrary bytes as
 * manifest.json -> ck_manifest_parse; a manifest it accepts must describe a
 * consistent checkpoint (one shard per device, shard sizes from the slab,
 * weights tiling the slab) and survive writing and parsing again. The
 * parser is the ckpt module's (src/ckpt/manifest.c). */
#include "targets.h"

#include "../src/ckpt/ckpt_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz invariant broken: %s\n", what);
        abort();
    }
}

int smoe_fuzz_manifest(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        size = 1 << 20;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);
    text[size] = 0;
    ck_manifest m;
    smoe_err err;
    if (ck_manifest_parse("manifest.json", text, &m, &err) != SMOE_OK) {
        check(err.msg[0] != 0, "an error has a message");
        ck_manifest_free(&m);
        free(text);
        return 0;
    }
    int64_t devices = 1, off = 0;
    for (int a = 0; a < m.mesh.n; a++) {
        check(m.mesh.size[a] >= 1 && m.mesh.name[a] != NULL, "mesh axis");
        devices *= m.mesh.size[a];
    }
    check(m.ns == devices, "one shard per device");
    check(m.step >= 1 && m.slab_floats >= 1, "step and slab");
    for (int i = 0; i < m.nw; i++) {
        check(m.w[i].shard_offset == off, "weights tile the slab");
        check(m.w[i].lrank >= 0 && m.w[i].lrank <= SMOE_MAX_RANK, "weight rank");
        off += m.w[i].layers * m.w[i].shard_numel;
    }
    check(off == m.slab_floats, "weights fill the slab");
    for (int q = 0; q < m.ns; q++) {
        check(m.shards[q].bytes == CK_HEADER + 12 * m.slab_floats, "shard size");
        check(strchr(m.shards[q].file, '/') == NULL, "shard file inside the checkpoint");
    }
    for (int i = 0; i < m.ncfg; i++)
        check(m.cfg_keys[i] && m.cfg_vals[i], "config entry");
    /* write it and read it back: the same checkpoint */
    char *again = ck_manifest_text(&m);
    if (again) {
        ck_manifest m2;
        smoe_status s = ck_manifest_parse("again.json", again, &m2, &err);
        check(s == SMOE_OK || m.version == 1, "a written manifest parses");
        if (s == SMOE_OK) {
            check(m2.step == m.step && m2.seed == m.seed && m2.nw == m.nw && m2.ns == m.ns &&
                      m2.slab_floats == m.slab_floats && m2.ncfg == m.ncfg &&
                      strcmp(m2.run_id, m.run_id) == 0,
                  "the round trip keeps the manifest");
        }
        ck_manifest_free(&m2);
        smoe_free(again);
    }
    ck_manifest_free(&m);
    free(text);
    return 0;
}
