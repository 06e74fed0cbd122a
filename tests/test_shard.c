/* Sharding algebra: canonical spec text, size-1 drops, mesh coordinates and
 * the -1 fill, and the layout property: for every device cut its local
 * block of a global tensor; the blocks rebuild the tensor, and devices
 * that share a block (replication) hold identical data. */
#include "check.h"
#include "smoe/shard.h"

#include <stdlib.h>
#include <string.h>

static void test_format(void)
{
    smoe_mesh m = { 3, { "fsdp", "tensor", "expert" }, { 4, 1, 2 }, { 0 } };
    smoe_pspec s = { 3, { { 2, { "fsdp", "expert" } }, { 0, { NULL } }, { 1, { "tensor" } } } };
    char b[256];
    CHECK_STR(smoe_pspec_format(&s, 1, b, sizeof b), "P(('fsdp', 'expert'), None, 'tensor')");
    CHECK_STR(smoe_pspec_format(&s, 0, b, sizeof b), "(fsdp,expert) - tensor");
    smoe_pspec d;
    smoe_pspec_drop_size1(&s, &m, &d);
    CHECK_STR(smoe_pspec_format(&d, 1, b, sizeof b), "P(('fsdp', 'expert'), None, None)");
    smoe_pspec one = { 1, { { 0, { NULL } } } };
    CHECK_STR(smoe_pspec_format(&one, 1, b, sizeof b), "P(None,)");
    /* an axis absent from the mesh counts as size 1 */
    smoe_pspec abs = { 1, { { 2, { "fsdp", "nowhere" } } } };
    smoe_pspec_drop_size1(&abs, &m, &d);
    CHECK_STR(smoe_pspec_format(&d, 1, b, sizeof b), "P('fsdp',)");
    CHECK_INT(smoe_axes_size(&s.dim[0], &m), 8);
}

static void test_mesh(void)
{
    smoe_mesh m = { 3, { "a", "b", "c" }, { 2, 3, 4 }, { 0 } };
    int64_t c[3];
    for (int64_t r = 0; r < 24; r++) {
        smoe_mesh_coords(&m, r, c);
        CHECK_INT(smoe_mesh_rank_of(&m, c), r);
    }
    smoe_mesh_coords(&m, 23, c);
    CHECK(c[0] == 1 && c[1] == 2 && c[2] == 3);
    const char *lab[3] = { "x", "y", "z" };
    int64_t v[3] = { 2, -1, 4 };
    int bad;
    CHECK(smoe_mesh_fill(v, 3, 24, lab, "devices", &bad, NULL) == SMOE_OK && v[1] == 3);
    int64_t w[3] = { -1, -1, 4 };
    CHECK(smoe_mesh_fill(w, 3, 24, lab, "devices", &bad, NULL) == SMOE_EINVAL && bad == 1);
    int64_t x[3] = { 5, -1, 1 };
    CHECK(smoe_mesh_fill(x, 3, 24, lab, "devices", &bad, NULL) == SMOE_EINVAL && bad == -1);
    int64_t y[3] = { 2, 2, 2 };
    CHECK(smoe_mesh_fill(y, 3, 24, lab, "devices", &bad, NULL) == SMOE_EINVAL && bad == -1);
    int64_t z[3] = { 0, 1, 1 };
    CHECK(smoe_mesh_fill(z, 3, 1, lab, "devices", &bad, NULL) == SMOE_EINVAL && bad == 0);
}

/* MaxText's multi-slice device order by hand, as jax's
 * create_hybrid_device_mesh builds it: one row-major mesh of the ici parts
 * per slice, the slices laid out row-major over the dcn parts, so the
 * device of slice s and local index l sits at dcn_i(s) * ici_i + ici_i(l)
 * along axis i. 1 when that device's row-major rank is s * L + l for every
 * device (L devices per slice). */
static int hybrid_is_rowmajor(const smoe_mesh *m)
{
    smoe_mesh ici = *m, dcn = *m;
    for (int i = 0; i < m->n; i++) {
        dcn.size[i] = m->dcn[i] > 1 ? m->dcn[i] : 1;
        ici.size[i] = m->size[i] / dcn.size[i];
    }
    int64_t S = smoe_mesh_devices(&dcn), L = smoe_mesh_devices(&ici);
    for (int64_t sl = 0; sl < S; sl++)
        for (int64_t l = 0; l < L; l++) {
            int64_t cs[SMOE_MAX_AXES], cl[SMOE_MAX_AXES], c[SMOE_MAX_AXES];
            smoe_mesh_coords(&dcn, sl, cs);
            smoe_mesh_coords(&ici, l, cl);
            for (int i = 0; i < m->n; i++)
                c[i] = cs[i] * ici.size[i] + cl[i];
            if (smoe_mesh_rank_of(m, c) != sl * L + l)
                return 0;
        }
    return 1;
}

/* smoe_mesh_slices_contiguous against the hand-built order on every mesh
 * of 3 axes with ici and dcn parts in {1, 2, 3}. */
static void test_slices(void)
{
    int agree = 1, n = 0, contiguous = 0;
    for (int code = 0; code < 729; code++) {
        smoe_mesh m = { 3, { "a", "b", "c" }, { 1, 1, 1 }, { 1, 1, 1 } };
        int k = code;
        for (int i = 0; i < 3; i++, k /= 9) {
            int64_t ici = 1 + k % 3, dcn = 1 + (k / 3) % 3;
            m.size[i] = ici * dcn;
            m.dcn[i] = dcn;
        }
        int want = hybrid_is_rowmajor(&m), got = smoe_mesh_slices_contiguous(&m);
        if (want != got) {
            agree = 0;
            fprintf(stderr, "mesh %lldx%lldx%lld dcn %lldx%lldx%lld: contiguous %d, by hand %d\n",
                    (long long)m.size[0], (long long)m.size[1], (long long)m.size[2],
                    (long long)m.dcn[0], (long long)m.dcn[1], (long long)m.dcn[2], got, want);
        }
        contiguous += want;
        n++;
    }
    CHECKF(agree, "the rule and the hand-built order differ");
    CHECKF(contiguous > 0 && contiguous < n, "both kinds of mesh met (%d of %d contiguous)",
           contiguous, n);
    /* HSDP: data across slices, fsdp within (MaxText's axis order) */
    smoe_mesh h = { 2, { "data", "fsdp" }, { 2, 2 }, { 2, 1 } };
    CHECK(smoe_mesh_slices(&h) == 2 && smoe_mesh_slices_contiguous(&h));
    /* fsdp within slices before data across them: interleaved */
    smoe_mesh x = { 2, { "fsdp", "data" }, { 2, 2 }, { 1, 2 } };
    CHECK(!smoe_mesh_slices_contiguous(&x));
    /* no dcn part (zero-initialised): one slice */
    smoe_mesh o = { 2, { "data", "fsdp" }, { 2, 2 }, { 0 } }; /* no dcn part */
    CHECK(smoe_mesh_slices(&o) == 1 && smoe_mesh_slices_contiguous(&o));
}

/* Cut and rebuild for one spec on one mesh. */
static void roundtrip(const smoe_mesh *m, const smoe_pspec *s, const int64_t *shape)
{
    int64_t total = 1;
    for (int d = 0; d < s->rank; d++)
        total *= shape[d];
    float *g = malloc(sizeof *g * (size_t)total), *back = malloc(sizeof *back * (size_t)total);
    for (int64_t i = 0; i < total; i++) {
        g[i] = (float)i;
        back[i] = -1;
    }
    int ok = 1;
    int64_t nd = smoe_mesh_devices(m);
    for (int64_t r = 0; r < nd; r++) {
        int64_t c[SMOE_MAX_AXES], loc[SMOE_MAX_RANK], off[SMOE_MAX_RANK], n = 1;
        smoe_mesh_coords(m, r, c);
        if (smoe_layout_local(s, shape, m, c, loc, off, NULL) != SMOE_OK) {
            ok = 0;
            break;
        }
        for (int d = 0; d < s->rank; d++)
            n *= loc[d];
        float *l = malloc(sizeof *l * (size_t)n), *prev = malloc(sizeof *prev * (size_t)n);
        smoe_layout_copy(s->rank, shape, loc, off, sizeof(float), g, l, 0);
        /* a replica must hold what the first holder wrote back */
        smoe_layout_copy(s->rank, shape, loc, off, sizeof(float), back, prev, 0);
        for (int64_t i = 0; i < n; i++)
            if (prev[i] != -1 && prev[i] != l[i])
                ok = 0;
        smoe_layout_copy(s->rank, shape, loc, off, sizeof(float), back, l, 1);
        free(l);
        free(prev);
    }
    for (int64_t i = 0; i < total; i++)
        if (back[i] != g[i])
            ok = 0;
    char b[256];
    CHECKF(ok, "layout roundtrip of %s", smoe_pspec_format(s, 0, b, sizeof b));
    free(g);
    free(back);
}

static void test_layout(void)
{
    smoe_mesh m = { 3, { "fsdp", "tensor", "expert" }, { 2, 3, 2 }, { 0 } };
    int64_t shape[3] = { 12, 6, 4 };
    smoe_pspec specs[] = {
        { 3, { { 2, { "fsdp", "expert" } }, { 1, { "tensor" } }, { 0, { NULL } } } },
        { 3, { { 2, { "expert", "fsdp" } }, { 0, { NULL } }, { 0, { NULL } } } },
        { 3, { { 0, { NULL } }, { 1, { "tensor" } }, { 2, { "expert", "fsdp" } } } },
        { 3, { { 1, { "tensor" } }, { 0, { NULL } }, { 1, { "expert" } } } },
        { 3, { { 0, { NULL } }, { 0, { NULL } }, { 0, { NULL } } } },
        { 3, { { 3, { "fsdp", "tensor", "expert" } }, { 0, { NULL } }, { 0, { NULL } } } },
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        roundtrip(&m, &specs[i], shape);
    /* block order: (fsdp, expert) -> fsdp * |expert| + expert */
    int64_t c[3] = { 1, 2, 1 };
    CHECK_INT(smoe_axes_block(&specs[0].dim[0], &m, c), 3);
    CHECK_INT(smoe_axes_block(&specs[1].dim[0], &m, c), 3);
    int64_t c2[3] = { 1, 0, 0 };
    CHECK_INT(smoe_axes_block(&specs[0].dim[0], &m, c2), 2);
    CHECK_INT(smoe_axes_block(&specs[1].dim[0], &m, c2), 1);
    int64_t bad[3] = { 10, 6, 4 }, loc[3], off[3];
    smoe_err e;
    CHECK(smoe_layout_local(&specs[0], bad, &m, c, loc, off, &e) == SMOE_EINVAL);
}

/* smoe_parse_bytes: the byte-count parser of every flag (train
 * --max-memory, sim --hbm-budget); values by hand from the unit table. */
static void test_bytes(void)
{
    static const struct { const char *s; int64_t v; } ok[] = {
        { "0", 0 }, { "4096", 4096 }, { "4096B", 4096 }, { "512M", 512LL << 20 },
        { "512m", 512LL << 20 }, { "16G", 16LL << 30 }, { "16GB", 16LL << 30 },
        { "16GiB", 16LL << 30 }, { "16gib", 16LL << 30 }, { "1.5GiB", 3LL << 29 },
        { "2K", 2048 }, { "2KB", 2048 }, { "1T", 1LL << 40 }, { "10_000", 10000 },
        { "0.5K", 512 },
    };
    static const char *const bad[] = { "", "G", "GB", "iB", "16iB", "-1", "1Q", "16 G",
                                       "nan", "1e30", "16GG", "0x10", "8E",
                                       /* the README's grammar: no exponent or
                                        * sign, a '.' between digits */
                                       "1e3", "1E3M", "2.5e1K", "+5", ".5", "5.", "1.2.3" };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t v = -1;
        CHECKF(smoe_parse_bytes(ok[i].s, &v) == 0 && v == ok[i].v, "'%s' -> %lld, want %lld",
               ok[i].s, (long long)v, (long long)ok[i].v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t v = 0;
        CHECKF(smoe_parse_bytes(bad[i], &v) != 0, "'%s' accepted as %lld", bad[i], (long long)v);
    }
    int64_t v;
    CHECK(smoe_parse_bytes(NULL, &v) != 0);
}

/* Axis parts and two levels, by hand: fsdp = 4 in 2 slices of 2 (dcn 2,
 * ici 2) and expert = 2 within each slice. */
static void test_levels(void)
{
    smoe_mesh m = { 2, { "fsdp", "expert" }, { 4, 2 }, { 2, 1 } };
    smoe_axis_part p;
    CHECK_INT(smoe_mesh_part_find(&m, "fsdp@ici", &p), 0);
    CHECK(p == SMOE_PART_ICI);
    CHECK_INT(smoe_mesh_part_find(&m, "expert", &p), 1);
    CHECK(p == SMOE_PART_WHOLE);
    CHECK_INT(smoe_mesh_part_find(&m, "fsdp@xyz", &p), -1);
    CHECK_INT(smoe_mesh_part_find(&m, "fs@dcn", &p), -1);
    /* fsdp coordinate 3 = slice 1 (3 / 2), local 1 (3 % 2); a dcn step is 2 */
    CHECK_INT(smoe_mesh_part_coord(&m, 0, SMOE_PART_DCN, 3), 1);
    CHECK_INT(smoe_mesh_part_coord(&m, 0, SMOE_PART_ICI, 3), 1);
    CHECK_INT(smoe_mesh_part_coord(&m, 0, SMOE_PART_ICI, 2), 0);
    CHECK_INT(smoe_mesh_part_scale(&m, 0, SMOE_PART_DCN), 2);
    CHECK_INT(smoe_mesh_part_size(&m, 1, SMOE_PART_DCN), 1);
    smoe_levels lv;
    smoe_axes fe = { 2, { "fsdp", "expert" } }, ex = { 1, { "expert" } };
    CHECK(smoe_axes_levels(&m, &fe, &lv));
    char b[128];
    smoe_axes_format(&lv.across, b, sizeof b);
    CHECK_STR(b, "fsdp@dcn");
    smoe_axes_format(&lv.within, b, sizeof b);
    CHECK_STR(b, "(fsdp@ici,expert)");
    CHECK_INT(smoe_axes_part_members(&m, &lv.within), 4);
    CHECK(!smoe_axes_levels(&m, &ex, &lv)); /* within a slice only */
    smoe_mesh h = { 2, { "data", "fsdp" }, { 2, 2 }, { 2, 1 } }; /* HSDP */
    smoe_axes da = { 1, { "data" } }, dafs = { 2, { "data", "fsdp" } };
    CHECK(!smoe_axes_levels(&h, &da, &lv)); /* across only */
    CHECK(smoe_axes_levels(&h, &dafs, &lv));
    smoe_axes_format(&lv.across, b, sizeof b);
    CHECK_STR(b, "data"); /* whole: its ici part is 1 */
    /* the two-level reduce-scatter's order: member (x across, w within) of
     * the group over (fsdp, expert): fsdp = x * 2 + w / 2, expert = w % 2 */
    CHECK_INT(smoe_levels_member(&m, &fe, 1, 3), 7);
    CHECK_INT(smoe_levels_member(&m, &fe, 0, 2), 2);
    CHECK_INT(smoe_levels_member(&m, &fe, 1, 0), 4);
    /* a weight [16, 3] sharded (fsdp, expert) on dim 0: blocks of 2, fsdp
     * steps 4 rows, expert 2; across, members 8 rows apart (a dcn step is
     * 2 fsdp steps); within, (fsdp@ici, expert) at 0, 2, 4, 6. Device
     * (fsdp 3, expert 1) holds rows 14..15 = its base within (1 x 4 +
     * 1 x 2) plus its place across (1 x 8). */
    {
        smoe_gather_exec x;
        memset(&x, 0, sizeof x);
        x.rank = 2;
        x.shape[0] = 16, x.shape[1] = 3;
        x.live[0] = fe;
        x.prefetch[0] = fe;
        int64_t c[2] = { 3, 1 };
        smoe_gather_geom g;
        smoe_err e;
        CHECK(smoe_gather_geom_of(&x, &m, c, "w", &g, &e) == SMOE_OK);
        CHECK(smoe_axes_levels(&m, &fe, &lv));
        CHECK_INT(smoe_gather_geom_level_offset(&g, &m, 0, &lv.across, 1), 8);
        int64_t want[4] = { 0, 2, 4, 6 };
        for (int w = 0; w < 4; w++)
            CHECK_INT(smoe_gather_geom_level_offset(&g, &m, 0, &lv.within, w), want[w]);
        CHECK_INT(g.off[0], 14);
    }
    /* the mesh of parts numbers the devices as m does */
    smoe_part_mesh pm;
    smoe_mesh_parts(&m, &pm);
    CHECK_INT(pm.mesh.n, 3);
    CHECK_STR(pm.mesh.name[0], "fsdp@dcn");
    CHECK_STR(pm.mesh.name[1], "fsdp@ici");
    CHECK_STR(pm.mesh.name[2], "expert");
    CHECK_INT(smoe_mesh_slices(&pm.mesh), 2);
    for (int64_t r = 0; r < 8; r++) {
        int64_t c[SMOE_MAX_AXES], pc[SMOE_MAX_AXES];
        smoe_mesh_coords(&m, r, c);
        smoe_mesh_coords(&pm.mesh, r, pc);
        CHECKF(pc[0] == c[0] / 2 && pc[1] == c[0] % 2 && pc[2] == c[1],
               "device %lld: part coordinates differ", (long long)r);
    }
}

int main(void)
{
    test_bytes();
    test_format();
    test_mesh();
    test_slices();
    test_levels();
    test_layout();
    return check_report();
}
