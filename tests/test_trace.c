/* Trace files (collect/trace_*.c): round trip per compression, the files as
 * other HDF5 programs see them (h5py through our plugin, h5dump), crash
 * safety under kill -9 with resume, merge, and bad input. */
#include "tests/harness.h"
#include "tests/h5_damage.h"
#include "collect/trace.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

static char dir[] = "/tmp/c2t_traceXXXXXX";

static char *tpath(const char *name) { return path_join(dir, name); }

/* ---- deterministic synthetic questions ---- */

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
static uint64_t h3(uint64_t a, uint64_t b, uint64_t c) { return mix(mix(mix(a) ^ b) ^ c); }
static float unit(uint64_t x) { return (float)((x >> 40) * (1.0 / 16777216.0)); }

/* Tree sizes cycle through these (1011 is the realistic one; 0 and 1 are
 * edge cases; 16387 spans several /nodes chunks by itself). */
static const int SIZES[] = {1011, 1, 37, 1011, 500, 0, 1011, 16387, 2, 1011, 250};
#define NSIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* big: allow trees over 1011 nodes; flat: mostly questions without trees,
 * all of one benchmark (their compressed /questions chunks often keep their
 * size as rows are added, which exercises rule 2 of collect/trace_writer.c). */
typedef struct { uint64_t seed; int big, flat; } Gen;

static int n_trees_of(const Gen *g, int q) {
    if (g->flat) return q % 4 == 0;
    return (int)(h3(g->seed, (uint64_t)q, 1) % 5);   /* 0..4 */
}
static int n_nodes_of(const Gen *g, int q, int t) {
    int s = SIZES[h3(g->seed, (uint64_t)q, 100 + (uint64_t)t) % NSIZES];
    if (!g->big && s > 1011) s = 1011;
    return s;
}

static void gen_tree(const Gen *g, int q, int t, TraceTree *tr, TraceNode *nodes) {
    int n = n_nodes_of(g, q, t);
    uint64_t k = h3(g->seed, (uint64_t)q, 1000 + (uint64_t)t);
    tr->question = -7;            /* the writer fills these two */
    tr->first_node = -7;
    tr->turn = (int16_t)(k % 3 - 1 + (q & 1));
    tr->cycle = (int32_t)(t + (int)(k >> 20) % 1000);
    tr->n_nodes = n;
    tr->accept_len = (int32_t)((k >> 8) % 11);
    for (int i = 0; i < n; i++) {
        uint64_t a = h3(k, (uint64_t)i, 7), b = h3(k, (uint64_t)i, 8);
        TraceNode *nd = &nodes[i];
        nd->p = unit(a) + 1e-7f;
        nd->P = (i == 0 ? 1.0f : nodes[(a >> 3) % (uint64_t)i].P) * nd->p;
        nd->H = unit(b) * 5.0f;
        nd->depth = (uint8_t)(1 + (b >> 50) % 10);
        nd->accepted = (uint8_t)((a >> 60) == 0);
        nd->token = (int32_t)(uint32_t)(a >> 17);      /* the whole int32 range */
        nd->parent = i == 0 ? -1 : (int32_t)((b >> 7) % (uint64_t)i) - (int32_t)((b >> 30) & 1);
        nd->rank = (uint8_t)(b >> 23);
    }
}

static void gen_names(const Gen *g, int q, char *bench, char *qid) {
    static const char *const B[] = {"mt_bench", "gsm8k", "humaneval", "naïve-ünïcode"};
    snprintf(bench, TRACE_BENCHMARK_LEN + 1, "%s", B[g->flat ? 1 : h3(g->seed, (uint64_t)q, 2) % 4]);
    if (g->flat) snprintf(qid, TRACE_QUESTION_ID_LEN + 1, "gsm8k/%d", 1000 + q);
    else if (q % 7 == 3)   /* the longest allowed id */
        for (int i = 0; i < TRACE_QUESTION_ID_LEN; i++) qid[i] = (char)('a' + (q + i) % 26), qid[i + 1] = 0;
    else snprintf(qid, TRACE_QUESTION_ID_LEN + 1, "%s/%d", B[q % 4], q * 13 + 1);
}

static TraceNode *node_buf(void) { return xmalloc(sizeof(TraceNode) * 17000); }

/* Writes questions [q0, q1); with report_fd >= 0 the index of every finished
 * question goes down that pipe. */
static int write_questions(TraceWriter *w, const Gen *g, int q0, int q1, int report_fd) {
    TraceNode *nodes = node_buf();
    int rc = 0;
    int32_t index = (int32_t)trace_n_questions(w);   /* the question's row in this file */
    for (int q = q0; q < q1 && rc == 0; q++, index++) {
        int nt = n_trees_of(g, q);
        for (int t = 0; t < nt && rc == 0; t++) {
            TraceTree tr;
            gen_tree(g, q, t, &tr, nodes);
            rc = trace_add_tree(w, &tr, nodes);
            if (rc == 0 && tr.question != index) { err_set("question filled as %d, want %d", tr.question, index); rc = -1; }
        }
        char bench[TRACE_BENCHMARK_LEN + 1], qid[TRACE_QUESTION_ID_LEN + 1];
        gen_names(g, q, bench, qid);
        if (rc == 0) rc = trace_finish_question(w, bench, qid);
        if (rc == 0 && report_fd >= 0) {
            int32_t x = q;
            if (write(report_fd, &x, sizeof x) != (ssize_t)sizeof x) rc = -1;
        }
    }
    free(nodes);
    return rc;
}

static int same_node(const TraceNode *a, const TraceNode *b) {
    return !memcmp(&a->P, &b->P, 4) && !memcmp(&a->H, &b->H, 4) && !memcmp(&a->p, &b->p, 4) &&
           a->token == b->token && a->parent == b->parent && a->depth == b->depth &&
           a->accepted == b->accepted && a->rank == b->rank;
}

/* The file holds exactly questions [0, nq) of g, value for value.  Reads in
 * odd-sized batches so reads straddle chunk boundaries.  Returns a failure
 * description or NULL. */
static const char *verify_file(const char *path, const Gen *g, int nq) {
    static char why[600];
    TraceReader *r = trace_open(path);
    if (!r) { snprintf(why, sizeof why, "trace_open: %s", err_get()); return why; }
    why[0] = 0;
    int64_t nt = 0, nn = 0;
    for (int q = 0; q < nq; q++)
        for (int t = 0; t < n_trees_of(g, q); t++) nt++, nn += n_nodes_of(g, q, t);
    if (trace_reader_questions(r) != nq || trace_reader_trees(r) != nt || trace_reader_nodes(r) != nn) {
        snprintf(why, sizeof why, "counts %lld/%lld/%lld, want %d/%lld/%lld", (long long)trace_reader_questions(r),
                 (long long)trace_reader_trees(r), (long long)trace_reader_nodes(r), nq, (long long)nt, (long long)nn);
        goto out;
    }
    TraceNode *want = node_buf(), *got = node_buf();
    TraceTree tw, tg;
    int64_t tree = 0, node = 0;
    for (int q = 0; q < nq && !why[0]; q++) {
        for (int t = 0; t < n_trees_of(g, q) && !why[0]; t++, tree++) {
            gen_tree(g, q, t, &tw, want);
            if (trace_read_trees(r, tree, 1, &tg) < 0) { snprintf(why, sizeof why, "%s", err_get()); break; }
            if (tg.question != q || tg.first_node != node || tg.turn != tw.turn || tg.cycle != tw.cycle ||
                tg.n_nodes != tw.n_nodes || tg.accept_len != tw.accept_len) {
                snprintf(why, sizeof why, "tree %lld differs (question %d first %lld n %d)", (long long)tree, tg.question,
                         (long long)tg.first_node, tg.n_nodes);
                break;
            }
            /* nodes in two odd pieces */
            int a = tw.n_nodes / 3;
            if (trace_read_nodes(r, node, a, got) < 0 || trace_read_nodes(r, node + a, tw.n_nodes - a, got + a) < 0) {
                snprintf(why, sizeof why, "%s", err_get());
                break;
            }
            for (int i = 0; i < tw.n_nodes; i++)
                if (!same_node(&want[i], &got[i])) {
                    snprintf(why, sizeof why, "node %lld (question %d tree %d node %d) differs: P %g/%g token %d/%d",
                             (long long)(node + i), q, t, i, got[i].P, want[i].P, got[i].token, want[i].token);
                    break;
                }
            node += tw.n_nodes;
        }
        TraceQuestion tq;
        char bench[TRACE_BENCHMARK_LEN + 1], qid[TRACE_QUESTION_ID_LEN + 1];
        gen_names(g, q, bench, qid);
        if (!why[0] && (trace_read_questions(r, q, 1, &tq) < 0 || strcmp(tq.benchmark, bench) || strcmp(tq.question_id, qid)))
            snprintf(why, sizeof why, "question %d differs: '%s' '%s'", q, tq.benchmark, tq.question_id);
    }
    free(want);
    free(got);
out:
    trace_reader_close(r);
    return why[0] ? why : NULL;
}

/* Two files hold the same records (counts, every row). */
static const char *same_records(const char *pa, const char *pb) {
    static char why[512];
    why[0] = 0;
    TraceReader *a = trace_open(pa), *b = trace_open(pb);
    if (!a || !b) { snprintf(why, sizeof why, "open: %s", err_get()); goto out; }
    if (trace_reader_questions(a) != trace_reader_questions(b) || trace_reader_trees(a) != trace_reader_trees(b) ||
        trace_reader_nodes(a) != trace_reader_nodes(b)) {
        snprintf(why, sizeof why, "counts differ: %lld/%lld/%lld vs %lld/%lld/%lld", (long long)trace_reader_questions(a),
                 (long long)trace_reader_trees(a), (long long)trace_reader_nodes(a), (long long)trace_reader_questions(b),
                 (long long)trace_reader_trees(b), (long long)trace_reader_nodes(b));
        goto out;
    }
    enum { B = 5000 };
    TraceNode *na = xmalloc(sizeof *na * B), *nb = xmalloc(sizeof *nb * B);
    for (int64_t i = 0; i < trace_reader_nodes(a) && !why[0]; i += B) {
        int64_t n = trace_reader_nodes(a) - i < B ? trace_reader_nodes(a) - i : B;
        if (trace_read_nodes(a, i, n, na) < 0 || trace_read_nodes(b, i, n, nb) < 0) snprintf(why, sizeof why, "%s", err_get());
        for (int64_t k = 0; k < n && !why[0]; k++)
            if (!same_node(&na[k], &nb[k])) snprintf(why, sizeof why, "node %lld differs", (long long)(i + k));
    }
    free(na);
    free(nb);
    for (int64_t i = 0; i < trace_reader_trees(a) && !why[0]; i++) {
        TraceTree x, y;
        if (trace_read_trees(a, i, 1, &x) < 0 || trace_read_trees(b, i, 1, &y) < 0) { snprintf(why, sizeof why, "%s", err_get()); break; }
        if (memcmp(&x.question, &y.question, 4) || x.turn != y.turn || x.cycle != y.cycle || x.first_node != y.first_node ||
            x.n_nodes != y.n_nodes || x.accept_len != y.accept_len)
            snprintf(why, sizeof why, "tree %lld differs", (long long)i);
    }
    for (int64_t i = 0; i < trace_reader_questions(a) && !why[0]; i++) {
        TraceQuestion x, y;
        if (trace_read_questions(a, i, 1, &x) < 0 || trace_read_questions(b, i, 1, &y) < 0) { snprintf(why, sizeof why, "%s", err_get()); break; }
        if (strcmp(x.benchmark, y.benchmark) || strcmp(x.question_id, y.question_id)) snprintf(why, sizeof why, "question %lld differs", (long long)i);
    }
out:
    trace_reader_close(a);
    trace_reader_close(b);
    return why[0] ? why : NULL;
}

static int write_trace_file(const char *path, TraceCompress c, const Gen *g, int q0, int q1, const char *shard) {
    TraceWriter *w = trace_create(path, c);
    if (!w) return -1;
    int rc = trace_set_attr_str(w, "target_model", "models/llama-68m (config 0123456789abcdef)");
    if (rc == 0) rc = trace_set_attr_num(w, "temperature", 0.0);
    if (rc == 0) rc = trace_set_attr_num(w, "topm", 20);
    if (rc == 0 && shard) rc = trace_set_attr_str(w, "shard", shard);
    if (rc == 0 && shard) rc = trace_set_attr_str(w, "start_time", shard[0] == '0' ? "2024-05-01T10:00:00" : "2024-05-01T11:30:00");
    if (rc == 0) rc = write_questions(w, g, q0, q1, -1);
    if (trace_close(w) < 0) rc = -1;
    return rc;
}

/* Every stored chunk of every dataset of the file: how many skip the
 * pipeline's last filter (the checksum); *chunks gets the total. */
static herr_t count_chunks(hid_t obj, const char *name, const H5O_info_t *info, void *arg) {
    int *cnt = arg;
    if (info->type != H5O_TYPE_DATASET) return 0;
    hid_t d = H5Dopen2(obj, name, H5P_DEFAULT), pl = H5Dget_create_plist(d), s = H5Dget_space(d);
    int nf = H5Pget_nfilters(pl);
    hsize_t n = 0;
    H5Dget_num_chunks(d, s, &n);
    for (hsize_t i = 0; i < n; i++) {
        unsigned mask = 0;
        haddr_t addr;
        hsize_t size;
        H5Dget_chunk_info(d, s, i, NULL, &mask, &addr, &size);
        cnt[0]++;
        if (nf == 0 || (mask >> (nf - 1)) & 1) cnt[1]++;
    }
    H5Sclose(s); H5Pclose(pl); H5Dclose(d);
    return 0;
}

static int unchecked_chunks(const char *path, int *chunks) {
    int cnt[2] = {0, 0};
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_NATIVE, count_chunks, cnt, H5O_INFO_BASIC);
    H5Fclose(f);
    *chunks = cnt[0];
    return cnt[1];
}

/* ---- round trip ---- */

static void roundtrip(TraceCompress c) {
    char name[32];
    snprintf(name, sizeof name, "rt_%s.h5", trace_compress_name(c));
    char *p = tpath(name);
    Gen g = {0x1234 + (uint64_t)c, 1, 0};
    TraceWriter *w = trace_create(p, c);
    REQUIRE(w, "create: %s", err_get());
    CHECK(trace_set_attr_str(w, "target_model", "models/t (config ab12)") == 0, "%s", err_get());
    CHECK(trace_set_attr_num(w, "temperature", 0.25) == 0, "%s", err_get());
    CHECK(trace_set_attr_num(w, "temperature", 0.5) == 0, "overwrite: %s", err_get());
    CHECK(trace_set_attr_str(w, "n_nodes", "x") != 0, "reserved attribute accepted");
    char *v = trace_get_attr_str(w, "temperature");
    CHECK(v && !strcmp(v, "0.5"), "temperature reads '%s'", v ? v : "(null)");
    free(v);
    CHECK(trace_get_attr_str(w, "absent") == NULL, "absent attribute not NULL");
    REQUIRE(write_questions(w, &g, 0, 9, -1) == 0, "write: %s", err_get());
    CHECK(trace_n_questions(w) == 9, "n_questions %lld", (long long)trace_n_questions(w));
    /* a tree of an unfinished question is not in the file */
    TraceNode *nodes = node_buf();
    TraceTree tr;
    gen_tree(&g, 50, 0, &tr, nodes);
    CHECK(trace_add_tree(w, &tr, nodes) == 0, "%s", err_get());
    free(nodes);
    CHECK(trace_finish_question(w, "b", "this-id-is-far-too-long-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") != 0,
          "overlong question_id accepted");
    CHECK(trace_close(w) == 0, "close: %s", err_get());
    const char *why = verify_file(p, &g, 9);
    CHECK(!why, "%s", why);
    TraceReader *r = trace_open(p);
    REQUIRE(r, "%s", err_get());
    char *a = trace_reader_attr(r, "target_model"), *t = trace_reader_attr(r, "temperature");
    char *sv = trace_reader_attr(r, "schema_version"), *cp = trace_reader_attr(r, "compression");
    CHECK(a && !strcmp(a, "models/t (config ab12)"), "target_model '%s'", a ? a : "(null)");
    CHECK(t && !strcmp(t, "0.5"), "temperature '%s'", t ? t : "(null)");
    CHECK(sv && !strcmp(sv, "1"), "schema_version '%s'", sv ? sv : "(null)");
    CHECK(cp && !strcmp(cp, trace_compress_name(c)), "compression '%s'", cp ? cp : "(null)");
    free(a); free(t); free(sv); free(cp);
    TraceNode one;
    CHECK(trace_read_nodes(r, trace_reader_nodes(r), 1, &one) != 0, "read past n_nodes succeeded");
    CHECK(strstr(err_get(), p) && strstr(err_get(), "out of range"), "range error: %s", err_get());
    CHECK(trace_read_nodes(r, -1, 1, &one) != 0, "negative start accepted");
    trace_reader_close(r);
    /* the dataset pipeline is what was asked for */
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "/nodes/P", H5P_DEFAULT), pl = H5Dget_create_plist(d);
    int nf = H5Pget_nfilters(pl), has_zstd = 0, has_deflate = 0, last = -1;
    for (int i = 0; i < nf; i++) {
        unsigned fl; size_t ncd = 0;
        H5Z_filter_t id = H5Pget_filter2(pl, (unsigned)i, &fl, &ncd, NULL, 0, NULL, NULL);
        has_zstd |= id == H5Z_FILTER_ZSTD;
        has_deflate |= id == H5Z_FILTER_DEFLATE;
        last = id;
    }
    CHECK(has_zstd == (c == TRACE_ZSTD) && has_deflate == (c == TRACE_GZIP) && (nf == 1) == (c == TRACE_NONE),
          "filters of /nodes/P: %d filters, zstd %d deflate %d", nf, has_zstd, has_deflate);
    CHECK(last == H5Z_FILTER_FLETCHER32, "the last filter of /nodes/P is %d, not fletcher32", last);
    H5Pclose(pl); H5Dclose(d); H5Fclose(f);
    int chunks, unchecked = unchecked_chunks(p, &chunks);
    CHECK(chunks >= 16 && unchecked == 0, "%d of %d chunks stored without the checksum", unchecked, chunks);
    free(p);
}

static void test_roundtrip_zstd(void) { roundtrip(TRACE_ZSTD); }
static void test_roundtrip_gzip(void) { roundtrip(TRACE_GZIP); }
static void test_roundtrip_none(void) { roundtrip(TRACE_NONE); }

/* The counts are updated by one write of one page: the root object header
 * starts in the file's first 4 KiB and the count attributes (name and value)
 * lie there too.  The superblock is version 3 and a clean close cleared its
 * status flags. */
static void test_counts_in_first_page(void) {
    char *p = tpath("rt_zstd.h5");
    size_t size;
    unsigned char *all = (unsigned char *)read_text_file(p, &size);
    REQUIRE(all && size > 4096, "read %s", p);
    CHECK(all[8] == 3, "superblock version %d, want 3", all[8]);
    CHECK(all[11] == 0, "status flags %d after a clean close", all[11]);
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    REQUIRE(f >= 0, "H5Fopen");
#if H5_VERSION_GE(1, 12, 0)
    H5O_native_info_t oi;
    H5Oget_native_info(f, &oi, H5O_NATIVE_INFO_HDR);
    H5O_info2_t bi;
    H5Oget_info3(f, &bi, H5O_INFO_BASIC);
    haddr_t addr = 0;
    H5VLnative_token_to_addr(f, bi.token, &addr);
#else
    H5O_info_t oi;
    H5Oget_info2(f, &oi, H5O_INFO_BASIC | H5O_INFO_HDR);
    haddr_t addr = oi.addr;
#endif
    H5Fclose(f);
    CHECK(addr < 4096 && !memcmp(all + addr, "OHDR", 4), "root object header at %llu", (unsigned long long)addr);
    const char *names[] = {"n_questions", "n_trees", "n_nodes"};
    for (int i = 0; i < 3; i++) {
        /* the attribute message: the name, its NUL, type, space, 8-byte value */
        unsigned char *hit = memmem(all + addr, 4096 - addr, names[i], strlen(names[i]) + 1);
        CHECK(hit && hit - all + 64 < 4096, "%s is not in the first page", names[i]);
    }
    free(all);
    free(p);
}

/* ---- h5py and h5dump ---- */

static uint32_t crc_table[256];
static uint32_t crc32_of(uint32_t crc, const void *buf, size_t n) {
    if (!crc_table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
    const unsigned char *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* build/tests/test_trace -> build/plugins */
static char *plugin_dir(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return xstrdup("build/plugins");
    exe[n] = 0;
    for (int up = 0; up < 2; up++) { char *s = strrchr(exe, '/'); if (s) *s = 0; }
    return path_join(exe, "plugins");
}

static char *capture(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    if (!p) { *status = -1; return xstrdup(""); }
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 >= cap) { cap *= 2; buf = xrealloc(buf, cap); }
    }
    buf[n] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return buf;
}

/* What our reader computes for one dataset: rows, crc32 of the rows'
 * little-endian bytes, sum. */
typedef struct { const char *name; int64_t rows; uint32_t crc; double sum; } Digest;

static void digest_file(const char *path, Digest *d) {
    TraceReader *r = trace_open(path);
    if (!r) return;
    int64_t nn = trace_reader_nodes(r), nt = trace_reader_trees(r), nq = trace_reader_questions(r);
    TraceNode *nodes = xmalloc(sizeof *nodes * (size_t)(nn ? nn : 1));
    TraceTree *trees = xmalloc(sizeof *trees * (size_t)(nt ? nt : 1));
    TraceQuestion *qs = xmalloc(sizeof *qs * (size_t)(nq ? nq : 1));
    trace_read_nodes(r, 0, nn, nodes);
    trace_read_trees(r, 0, nt, trees);
    trace_read_questions(r, 0, nq, qs);
    for (int k = 0; k < 16; k++) d[k].crc = 0, d[k].sum = 0;
#define DIG(k, nm, cnt, arr, field)                                     \
    d[k].name = nm; d[k].rows = cnt;                                    \
    for (int64_t i = 0; i < cnt; i++) {                                 \
        d[k].crc = crc32_of(d[k].crc, &arr[i].field, sizeof arr[i].field); \
        d[k].sum += (double)arr[i].field;                               \
    }
    DIG(0, "nodes/P", nn, nodes, P)
    DIG(1, "nodes/H", nn, nodes, H)
    DIG(2, "nodes/depth", nn, nodes, depth)
    DIG(3, "nodes/accepted", nn, nodes, accepted)
    DIG(4, "nodes/token", nn, nodes, token)
    DIG(5, "nodes/parent", nn, nodes, parent)
    DIG(6, "nodes/p", nn, nodes, p)
    DIG(7, "nodes/rank", nn, nodes, rank)
    DIG(8, "trees/question", nt, trees, question)
    DIG(9, "trees/turn", nt, trees, turn)
    DIG(10, "trees/cycle", nt, trees, cycle)
    DIG(11, "trees/first_node", nt, trees, first_node)
    DIG(12, "trees/n_nodes", nt, trees, n_nodes)
    DIG(13, "trees/accept_len", nt, trees, accept_len)
#undef DIG
    d[14].name = "questions/benchmark"; d[14].rows = nq;
    d[15].name = "questions/question_id"; d[15].rows = nq;
    for (int64_t i = 0; i < nq; i++) {
        char b[TRACE_BENCHMARK_LEN] = {0}, q[TRACE_QUESTION_ID_LEN] = {0};
        memcpy(b, qs[i].benchmark, strlen(qs[i].benchmark));
        memcpy(q, qs[i].question_id, strlen(qs[i].question_id));
        d[14].crc = crc32_of(d[14].crc, b, sizeof b);
        d[15].crc = crc32_of(d[15].crc, q, sizeof q);
    }
    free(nodes); free(trees); free(qs);
    trace_reader_close(r);
}

/* Runs tools/golden/trace_roundtrip.py (with extra options) under each python3
 * that has h5py (the one on PATH, Debian's, $C2T_PYTHON), HDF5_PLUGIN_PATH at our
 * plugin; what h5py reads must equal what our reader reads.  Returns how
 * many interpreters ran. */
static int h5py_compare(const char *p, const char *opts, const char *model) {
    Digest want[16];
    digest_file(p, want);
    char *plug = plugin_dir();
    char lib[PATH_MAX + 32];
    snprintf(lib, sizeof lib, "%s/libh5zstd.so", plug);
    CHECK(file_exists(lib), "%s missing (make builds it)", lib);
    const char *cands[3] = {getenv("C2T_PYTHON"), "python3", "/usr/bin/python3"};
    char seen[3][PATH_MAX];
    int nseen = 0, ran = 0;
    for (int ci = 0; ci < 3; ci++) {
        if (!cands[ci] || !*cands[ci]) continue;
        char cmd[PATH_MAX * 3];
        int st;
        snprintf(cmd, sizeof cmd, "%s -c 'import sys, h5py; print(sys.executable)' 2>/dev/null", cands[ci]);
        char *exe = capture(cmd, &st);
        exe[strcspn(exe, "\n")] = 0;
        int dup = st != 0 || !*exe;
        for (int k = 0; k < nseen && !dup; k++) dup = !strcmp(seen[k], exe);
        if (dup) { free(exe); continue; }
        snprintf(seen[nseen++], PATH_MAX, "%s", exe);
        snprintf(cmd, sizeof cmd, "HDF5_PLUGIN_PATH='%s' '%s' tools/golden/trace_roundtrip.py %s '%s'", plug, exe, opts, p);
        char *out = capture(cmd, &st);
        CHECK(st == 0, "%s: trace_roundtrip.py exit %d: %.300s", exe, st, out);
        cJSON *j = cJSON_Parse(out);
        CHECK(j, "%s: output is not JSON: %.300s", exe, out);
        if (j) {
            ran++;
            cJSON *ds = cJSON_GetObjectItemCaseSensitive(j, "datasets");
            for (int k = 0; k < 16; k++) {
                cJSON *e = cJSON_GetObjectItemCaseSensitive(ds, want[k].name);
                CHECK(e, "%s: no %s", exe, want[k].name);
                if (!e) continue;
                double rows = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "rows"));
                double crc = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "crc32"));
                CHECK(rows == (double)want[k].rows, "%s %s: rows %.0f, ours %lld", exe, want[k].name, rows, (long long)want[k].rows);
                CHECK(crc == (double)want[k].crc, "%s %s: crc32 %.0f, ours %u", exe, want[k].name, crc, want[k].crc);
                if (k < 14) {
                    double s = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "sum"));
                    CHECK(fabs(s - want[k].sum) <= 1e-9 * (fabs(want[k].sum) + 1), "%s %s: sum %.17g, ours %.17g", exe, want[k].name, s, want[k].sum);
                }
            }
            cJSON *filters = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "filters"), "nodes/P");
            int z = 0;
            for (int i = 0; filters && i < cJSON_GetArraySize(filters); i++)
                z |= cJSON_GetNumberValue(cJSON_GetArrayItem(filters, i)) == H5Z_FILTER_ZSTD;
            CHECK(z, "%s: /nodes/P does not use filter 32015", exe);
            cJSON *attrs = cJSON_GetObjectItemCaseSensitive(j, "attrs");
            const char *tm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(attrs, "target_model"));
            CHECK(tm && !strcmp(tm, model), "%s: target_model '%s'", exe, tm ? tm : "(null)");
            cJSON_Delete(j);
        }
        free(out);
        free(exe);
    }
    free(plug);
    return ran;
}

static void test_h5py_reads_zstd_through_plugin(void) {
    char *p = tpath("eco_zstd.h5");
    Gen g = {77, 1, 0};
    REQUIRE(write_trace_file(p, TRACE_ZSTD, &g, 0, 12, NULL) == 0, "write: %s", err_get());
    int ran = h5py_compare(p, "", "models/llama-68m (config 0123456789abcdef)");
    free(p);
    if (!ran) SKIP("no python3 with h5py (pip install -r tools/requirements.txt, or apt-get install python3-h5py)");
}

static void test_h5dump_reads_zstd_through_plugin(void) {
    int st;
    char *v = capture("h5dump --version 2>/dev/null", &st);
    free(v);
    if (st != 0) SKIP("h5dump not installed (apt-get install hdf5-tools)");
    char *p = tpath("eco_zstd.h5");
    if (!file_exists(p)) { Gen g = {77, 1, 0}; REQUIRE(write_trace_file(p, TRACE_ZSTD, &g, 0, 12, NULL) == 0, "%s", err_get()); }
    TraceReader *r = trace_open(p);
    REQUIRE(r, "%s", err_get());
    TraceNode nd[3];
    TraceQuestion q;
    REQUIRE(trace_read_nodes(r, 0, 3, nd) == 0 && trace_read_questions(r, 0, 1, &q) == 0, "%s", err_get());
    trace_reader_close(r);
    char *plug = plugin_dir();
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof cmd, "HDF5_PLUGIN_PATH='%s' h5dump -d /nodes/token -s 0 -c 3 '%s' 2>&1", plug, p);
    char *out = capture(cmd, &st);
    char want[128];
    snprintf(want, sizeof want, "(0): %d, %d, %d", nd[0].token, nd[1].token, nd[2].token);
    CHECK(st == 0, "h5dump exit %d: %.400s", st, out);
    CHECK(strstr(out, want), "h5dump output lacks '%s': %.400s", want, out);
    free(out);
    snprintf(cmd, sizeof cmd, "HDF5_PLUGIN_PATH='%s' h5dump -d /questions/question_id -s 0 -c 1 '%s' 2>&1", plug, p);
    out = capture(cmd, &st);
    CHECK(st == 0 && strstr(out, q.question_id), "h5dump of question_id (exit %d) lacks '%s': %.400s", st, q.question_id, out);
    free(out);
    /* /nodes/depth (small integers) is zstd-compressed for sure: h5dump
     * reads it with the plugin and fails without (random tokens may be
     * stored raw, as incompressible chunks are). */
    snprintf(want, sizeof want, "(0): %d, %d, %d", nd[0].depth, nd[1].depth, nd[2].depth);
    snprintf(cmd, sizeof cmd, "HDF5_PLUGIN_PATH='%s' h5dump -d /nodes/depth -s 0 -c 3 '%s' 2>&1", plug, p);
    out = capture(cmd, &st);
    CHECK(st == 0 && strstr(out, want), "h5dump of depth (exit %d) lacks '%s': %.400s", st, want, out);
    free(out);
    snprintf(cmd, sizeof cmd, "HDF5_PLUGIN_PATH=/nonexistent h5dump -d /nodes/depth -s 0 -c 3 '%s' 2>&1", p);
    out = capture(cmd, &st);
    CHECK(st != 0 || !strstr(out, want), "h5dump decoded zstd without the plugin: %.300s", out);
    free(out);
    free(plug);
    free(p);
}

/* ---- crash safety ---- */

/* Questions the crash test writes; C2T_TRACE_KILLS=300 C2T_TRACE_CRASH_Q=2000
 * make a long stress run. */
static int CRASH_Q = 60;

/* Child: create (first round) or resume the file and write the remaining
 * questions up to q1, reporting each finished one; exits 0 when all are
 * written. */
static void crash_child(const char *path, const Gen *g, int first, int q1, int fd) {
    TraceWriter *w;
    if (first) {
        w = trace_create(path, TRACE_ZSTD);
        if (!w || trace_set_attr_str(w, "target_model", "m") != 0) _exit(3);
    } else {
        w = trace_resume(path);
        if (!w) _exit(4);
    }
    int32_t ready = -1;
    if (write(fd, &ready, sizeof ready) != (ssize_t)sizeof ready) _exit(5);
    int q0 = (int)trace_n_questions(w);
    if (write_questions(w, g, q0, q1, fd) != 0) _exit(6);
    if (trace_close(w) != 0) _exit(7);
    _exit(0);
}

static void test_kill9_then_resume(void) {
    char *p = tpath("crash.h5"), *ref = tpath("crash_ref.h5"), *killed = tpath("crash_killed.h5");
    Gen g = {4242, 0, 0};
    const char *env = getenv("C2T_TRACE_KILLS");
    int kills = env ? atoi(env) : 30;
    if (getenv("C2T_TRACE_CRASH_Q")) CRASH_Q = atoi(getenv("C2T_TRACE_CRASH_Q"));
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    /* the uninterrupted run, timed: kills land anywhere in such a run */
    double t0 = now_seconds();
    TraceWriter *w = trace_create(ref, TRACE_ZSTD);
    REQUIRE(w && trace_set_attr_str(w, "target_model", "m") == 0, "%s", err_get());
    REQUIRE(write_questions(w, &g, 0, CRASH_Q, -1) == 0 && trace_close(w) == 0, "%s", err_get());
    double run = now_seconds() - t0;
    int finished = 0, rounds = 0, completed = 0;
    for (int round = 0; round < kills && !completed; round++) {
        int fds[2];
        REQUIRE(pipe(fds) == 0, "pipe");
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork");
        if (pid == 0) {
            close(fds[0]);
            crash_child(p, &g, round == 0, CRASH_Q, fds[1]);
        }
        close(fds[1]);
        int32_t x;
        if (round == 0) {   /* the guarantee starts once trace_create returned */
            ssize_t n = read(fds[0], &x, sizeof x);
            REQUIRE(n == (ssize_t)sizeof x && x == -1, "child did not create the file");
        }
        /* a random moment within the next ~10 questions: in resume, in a
         * tree, in a flush, ... */
        int ahead = CRASH_Q - finished < 10 ? CRASH_Q - finished : 10;
        double left = run * ahead / CRASH_Q * 1.2 + 0.002;
        usleep((useconds_t)(left * 1e6 * (rand() / (RAND_MAX + 1.0))));
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        int reported = finished;
        while (read(fds[0], &x, sizeof x) == (ssize_t)sizeof x) if (x >= 0) reported = x + 1;
        close(fds[0]);
        if (WIFEXITED(st)) {
            REQUIRE(WEXITSTATUS(st) == 0, "child failed with status %d", WEXITSTATUS(st));
            completed = 1;
        }
        TraceReader *r = trace_open(p);
        REQUIRE(r, "round %d: the killed file does not open: %s", round, err_get());
        int have = (int)trace_reader_questions(r);
        trace_reader_close(r);
        /* every question reported finished is there; at most one more
         * (finished, killed before it could report) */
        CHECK(have >= reported && have <= reported + 1 && have >= finished, "round %d: %d questions, %d reported finished (before: %d)",
              round, have, reported, finished);
        const char *why = verify_file(p, &g, have);
        CHECK(!why, "round %d (%d questions): %s", round, have, why);
        if (why) return;
        if (!completed && !file_exists(killed)) {   /* for h5py, below */
            size_t n;
            char *b = read_text_file(p, &n);
            FILE *f = fopen(killed, "wb");
            if (b && f) fwrite(b, 1, n, f);
            if (f) fclose(f);
            free(b);
        }
        if (getenv("C2T_TRACE_VERBOSE"))
            fprintf(stderr, "round %d: %s, %d questions (%d reported)\n", round, completed ? "completed" : "killed", have, reported);
        finished = have;
        rounds++;
    }
    /* finish in-process and compare with the uninterrupted run */
    if (!completed) {
        w = trace_resume(p);
        REQUIRE(w, "resume: %s", err_get());
        CHECK(trace_n_questions(w) == finished, "resume sees %lld questions, want %d", (long long)trace_n_questions(w), finished);
        REQUIRE(write_questions(w, &g, (int)trace_n_questions(w), CRASH_Q, -1) == 0, "%s", err_get());
        REQUIRE(trace_close(w) == 0, "%s", err_get());
    }
    const char *why = same_records(p, ref);
    CHECK(!why, "resumed file vs uninterrupted: %s", why);
    why = verify_file(p, &g, CRASH_Q);
    CHECK(!why, "%s", why);
    /* h5py reads a killed file too, with SWMR read access */
    if (file_exists(killed)) h5py_compare(killed, "--swmr", "m");
    if (getenv("C2T_TRACE_VERBOSE"))
        fprintf(stderr, "kill9: %d kills, uninterrupted run %.3fs\n", rounds, run);
    free(p);
    free(ref);
    free(killed);
}

/* kill -9 in the middle of each multi-page write in turn: a writer re-run
 * under tests/fault_write.c's tear mode (this binary again, in the child
 * role below) lands the first page of its k-th page-crossing write and is
 * killed.  Every finished question must survive whatever HDF5 was writing
 * then (metadata, chunks, the counts), and resuming must give the
 * uninterrupted file: first while creating and writing, then while
 * resuming a closed file.  Before the writer kept each metadata entry in
 * one page, a dataset's object header across a page boundary was torn this
 * way and the whole file lost (1 in ~2,000 random kills). */
enum { TEAR_Q = 12, TEAR_SEED = 77 };

/* The exec'ed child: C2T_TRACE_CHILD="path first q1 fd". */
static int tear_child(const char *spec) {
    char path[4096];
    int first, q1, fd;
    if (sscanf(spec, "%4095s %d %d %d", path, &first, &q1, &fd) != 4) return 2;
    Gen g = {TEAR_SEED, 0, 0};
    crash_child(path, &g, first, q1, fd);
    return 0;
}

/* Runs the child with its k-th page-crossing write torn; 1 if it was
 * killed (else it finished: no k-th such write), with the questions it
 * reported finished in *reported. */
static int torn_run(const char *p, int first, int k, int *reported) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char spec[4200], after[32];
        snprintf(spec, sizeof spec, "%s %d %d %d", p, first, TEAR_Q, fds[1]);
        snprintf(after, sizeof after, "%d", k);
        const char *asan = getenv("ASAN_OPTIONS");
        char asan_opts[1024];
        snprintf(asan_opts, sizeof asan_opts, "%s%sverify_asan_link_order=0", asan ? asan : "", asan ? ":" : "");
        setenv("C2T_TRACE_CHILD", spec, 1);
        setenv("C2T_FAULT_FILE", strrchr(p, '/') + 1, 1);
        setenv("C2T_FAULT_MODE", "tear", 1);
        setenv("C2T_FAULT_AFTER", after, 1);
        setenv("ASAN_OPTIONS", asan_opts, 1);
        setenv("LD_PRELOAD", fault_lib(), 1);
        execl("/proc/self/exe", "test_trace", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    int st;
    waitpid(pid, &st, 0);
    int32_t x;
    *reported = 0;
    while (read(fds[0], &x, sizeof x) == (ssize_t)sizeof x) if (x >= 0) *reported = x + 1;
    close(fds[0]);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) return 1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    return -st - 1;
}

static void test_kill9_mid_multipage_write(void) {
    char *p = tpath("tear.h5"), *ref = tpath("tear_ref.h5"), *half = tpath("tear_half.h5");
    Gen g = {TEAR_SEED, 0, 0};
    TraceWriter *w = trace_create(ref, TRACE_ZSTD);
    REQUIRE(w && trace_set_attr_str(w, "target_model", "m") == 0, "%s", err_get());
    REQUIRE(write_questions(w, &g, 0, TEAR_Q, -1) == 0 && trace_close(w) == 0, "%s", err_get());
    w = trace_create(half, TRACE_ZSTD);
    REQUIRE(w && trace_set_attr_str(w, "target_model", "m") == 0, "%s", err_get());
    REQUIRE(write_questions(w, &g, 0, TEAR_Q / 2, -1) == 0 && trace_close(w) == 0, "%s", err_get());
    int tears[2] = {0, 0};
    for (int resume = 0; resume < 2 && !h_failed; resume++) {
        for (int k = 0; !h_failed; k++) {
            unlink(p);
            if (resume) {
                size_t n;
                char *b = read_text_file(half, &n);
                FILE *f = fopen(p, "wb");
                REQUIRE(b && f && fwrite(b, 1, n, f) == n, "copy %s", half);
                fclose(f);
                free(b);
            }
            int reported, rc = torn_run(p, !resume, k, &reported);
            REQUIRE(rc >= 0, "%s, tear %d: the writer failed (status %d)", resume ? "resume" : "create", k, -rc - 1);
            if (rc == 0) break;
            tears[resume]++;
            if (!file_exists(p)) { CHECK(!resume && reported == 0, "tear %d: no file after %d questions", k, reported); continue; }
            int done = resume ? TEAR_Q / 2 > reported ? TEAR_Q / 2 : reported : reported;
            TraceReader *r = trace_open(p);
            CHECK(r, "%s, tear %d: the killed file does not open: %s", resume ? "resume" : "create", k, err_get());
            if (!r) break;
            int have = (int)trace_reader_questions(r);
            trace_reader_close(r);
            CHECK(have == done || have == done + 1, "%s, tear %d: %d questions, %d finished", resume ? "resume" : "create", k, have, done);
            const char *why = verify_file(p, &g, have);
            CHECK(!why, "%s, tear %d (%d questions): %s", resume ? "resume" : "create", k, have, why);
            w = trace_resume(p);
            CHECK(w, "%s, tear %d: resume: %s", resume ? "resume" : "create", k, err_get());
            if (!w) break;
            REQUIRE(write_questions(w, &g, (int)trace_n_questions(w), TEAR_Q, -1) == 0 && trace_close(w) == 0, "%s", err_get());
            why = same_records(p, ref);
            CHECK(!why, "%s, tear %d: resumed vs uninterrupted: %s", resume ? "resume" : "create", k, why);
        }
    }
    CHECK(tears[0] >= 10 && tears[1] >= 3, "only %d + %d page-crossing writes torn", tears[0], tears[1]);
    printf("# %d writes torn while creating, %d while resuming: every finished question kept\n", tears[0], tears[1]);
    free(p);
    free(ref);
    free(half);
}

/* Dies at every step of finishing a question in turn (collect/trace_writer.c's
 * crash points: each group's chunks, before and after the data flush,
 * before and after the counts' flush): each time the file opens and holds
 * exactly the questions finished before (or, past the counts' flush, with)
 * the one being finished; resuming it gives the uninterrupted file. */
extern int trace_crash_at;

static void test_crash_at_every_step(void) {
    char *p = tpath("step.h5"), *ref = tpath("step_ref.h5");
    Gen g = {888, 0, 0};
    enum { Q = 5 };
    TraceWriter *w = trace_create(ref, TRACE_GZIP);
    REQUIRE(w && write_questions(w, &g, 0, Q, -1) == 0 && trace_close(w) == 0, "%s", err_get());
    int steps = 0;
    for (int k = 1;; k++) {
        unlink(p);
        int fds[2];
        REQUIRE(pipe(fds) == 0, "pipe");
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork");
        if (pid == 0) {
            close(fds[0]);
            w = trace_create(p, TRACE_GZIP);
            if (!w) _exit(3);
            trace_crash_at = k;
            if (write_questions(w, &g, 0, Q, fds[1]) != 0) _exit(4);
            trace_crash_at = 0;
            _exit(trace_close(w) == 0 ? 0 : 5);
        }
        close(fds[1]);
        int st, reported = 0;
        int32_t x;
        waitpid(pid, &st, 0);
        while (read(fds[0], &x, sizeof x) == (ssize_t)sizeof x) reported = x + 1;
        close(fds[0]);
        REQUIRE(WIFEXITED(st) && (WEXITSTATUS(st) == 99 || WEXITSTATUS(st) == 0), "step %d: child status %d", k, st);
        if (WEXITSTATUS(st) == 0) break;   /* past the last crash point */
        steps++;
        TraceReader *r = trace_open(p);
        REQUIRE(r, "step %d: the file does not open: %s", k, err_get());
        int have = (int)trace_reader_questions(r);
        trace_reader_close(r);
        CHECK(have == reported || have == reported + 1, "step %d: %d questions, %d finished", k, have, reported);
        const char *why = verify_file(p, &g, have);
        CHECK(!why, "step %d (%d questions): %s", k, have, why);
        w = trace_resume(p);
        REQUIRE(w, "step %d: resume: %s", k, err_get());
        REQUIRE(write_questions(w, &g, (int)trace_n_questions(w), Q, -1) == 0 && trace_close(w) == 0, "%s", err_get());
        why = same_records(p, ref);
        CHECK(!why, "step %d: resumed vs uninterrupted: %s", k, why);
        if (h_failed) break;
    }
    CHECK(steps >= Q * 4, "only %d crash points passed", steps);
    free(p);
    free(ref);
}

/* Tears, in turn, each chunk rewrite HDF5 does in place (the hook writes
 * half of the new bytes and dies, as SIGKILL can in the middle of a
 * multi-page write): the finished rows in the torn chunk must survive.  The
 * writer only rewrites in place raw over raw (rule 2 in collect/trace_writer.c); the
 * random tokens make incompressible, raw chunks. */
extern int trace_tear_at;

static int torn_pass(TraceCompress c, int flat) {
    char *p = tpath("torn.h5"), *ref = tpath("torn_ref.h5");
    Gen g = {2024, 0, flat};
    int Q = flat ? 40 : 8;
    unlink(ref);
    TraceWriter *w = trace_create(ref, c);
    if (!w || write_questions(w, &g, 0, Q, -1) != 0 || trace_close(w) != 0) { CHECK(0, "%s", err_get()); return 0; }
    int tears = 0;
    for (int k = 1; !h_failed; k++) {
        unlink(p);
        int fds[2];
        if (pipe(fds) != 0) break;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            w = trace_create(p, c);
            if (!w) _exit(3);
            trace_tear_at = k;
            if (write_questions(w, &g, 0, Q, fds[1]) != 0) _exit(4);
            trace_tear_at = 0;
            _exit(trace_close(w) == 0 ? 0 : 5);
        }
        close(fds[1]);
        int st, reported = 0;
        int32_t x;
        waitpid(pid, &st, 0);
        while (read(fds[0], &x, sizeof x) == (ssize_t)sizeof x) reported = x + 1;
        close(fds[0]);
        CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 98 || WEXITSTATUS(st) == 0), "%s tear %d: child status %d", trace_compress_name(c), k, st);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 98) break;
        tears++;
        const char *why = verify_file(p, &g, reported);
        CHECK(!why, "%s tear %d (%d questions): %s", trace_compress_name(c), k, reported, why);
        w = trace_resume(p);
        CHECK(w, "%s tear %d: resume: %s", trace_compress_name(c), k, err_get());
        if (!w) break;
        CHECK(write_questions(w, &g, (int)trace_n_questions(w), Q, -1) == 0 && trace_close(w) == 0, "%s", err_get());
        why = same_records(p, ref);
        CHECK(!why, "%s tear %d: resumed vs uninterrupted: %s", trace_compress_name(c), k, why);
    }
    free(p);
    free(ref);
    return tears;
}

extern int trace_no_checksum;

static void test_torn_inplace_rewrite(void) {
    /* With the checksum (the last filter of every dataset) no chunk is
     * rewritten in place: a rewrite of the same size is moved aside first
     * (collect/trace_writer.c, write_chunk), so nothing is left to tear. */
    int in_place = torn_pass(TRACE_NONE, 0) + torn_pass(TRACE_ZSTD, 1) + torn_pass(TRACE_GZIP, 0);
    CHECK(in_place == 0, "%d chunk rewrites in place in checksummed files", in_place);
    /* Files of the format before checksums (still resumed): without filters
     * every tail rewrite is in place; with compression, a rewrite of the
     * same size but other bytes is stored raw instead (elsewhere), so only
     * raw-over-raw rewrites are left to tear. */
    trace_no_checksum = 1;
    int none = torn_pass(TRACE_NONE, 0);
    CHECK(none >= 8, "only %d in-place rewrites to tear", none);
    int gz = torn_pass(TRACE_GZIP, 0) + torn_pass(TRACE_GZIP, 1);
    int zs = torn_pass(TRACE_ZSTD, 1);
    trace_no_checksum = 0;
    if (getenv("C2T_TRACE_VERBOSE"))
        fprintf(stderr, "torn (no checksum): %d rewrites without filters, %d with gzip, %d with zstd\n", none, gz, zs);
}

/* ---- corruption ---- */

/* A flipped bit in any stored chunk is caught by the checksum: reading the
 * rows it holds fails with one line naming the file, the dataset and the
 * rows (never wrong numbers); rows of other chunks still read. */
static void test_bit_flip_detected(void) {
    TraceCompress modes[] = {TRACE_ZSTD, TRACE_GZIP, TRACE_NONE};
    const char *sets[] = {"/nodes/P", "/nodes/parent", "/trees/first_node"};
    for (int m = 0; m < 3; m++)
        for (int k = 0; k < 3; k++) {
            char name[64];
            snprintf(name, sizeof name, "flip_%s_%d.h5", trace_compress_name(modes[m]), k);
            char *p = tpath(name);
            Gen g = {777 + (uint64_t)k, 0, 0};
            REQUIRE(write_trace_file(p, modes[m], &g, 0, 12, NULL) == 0, "%s", err_get());
            long long row = flip_chunk_bit(p, sets[k]);
            REQUIRE(row >= 0, "%s: no chunk in %s", name, sets[k]);
            TraceReader *r = trace_open(p);
            REQUIRE(r, "%s: %s", name, err_get());
            int is_node = sets[k][1] == 'n';
            int64_t n = is_node ? trace_reader_nodes(r) : trace_reader_trees(r);
            int64_t block = 1024, bad_reads = 0, first_bad = -1;
            void *buf = xmalloc(is_node ? sizeof(TraceNode) * block : sizeof(TraceTree) * block);
            for (int64_t s0 = 0; s0 < n; s0 += block) {
                int64_t cnt = n - s0 < block ? n - s0 : block;
                int rc = is_node ? trace_read_nodes(r, s0, cnt, buf) : trace_read_trees(r, s0, cnt, buf);
                if (rc == 0) continue;
                bad_reads++;
                if (first_bad < 0) first_bad = s0;
                const char *e = err_get();
                CHECK(strstr(e, p) && strstr(e, sets[k]) && !strchr(e, '\n'), "%s: error %s", name, e);
                CHECK(strstr(e, "checksum") || strstr(e, "Fletcher"), "%s: error does not say checksum: %s", name, e);
            }
            CHECK(bad_reads >= 1, "%s: a flipped bit in %s (chunk from row %lld) read without error", name, sets[k], row);
            CHECK(first_bad <= row && row < first_bad + block, "%s: the failing read starts at %lld, the chunk at %lld", name,
                  (long long)first_bad, row);
            if (getenv("C2T_TRACE_VERBOSE") && first_bad >= 0) fprintf(stderr, "flip: %s\n", err_get());
            free(buf);
            trace_reader_close(r);
            free(p);
        }
}

/* Resume after a clean close continues the same file. */
static void test_resume_after_close(void) {
    char *p = tpath("resume.h5"), *ref = tpath("resume_ref.h5");
    Gen g = {99, 1, 0};
    REQUIRE(write_trace_file(p, TRACE_GZIP, &g, 0, 5, NULL) == 0, "%s", err_get());
    TraceWriter *w = trace_resume(p);
    REQUIRE(w, "%s", err_get());
    CHECK(trace_n_questions(w) == 5, "n_questions %lld", (long long)trace_n_questions(w));
    char *tm = trace_get_attr_str(w, "target_model");
    CHECK(tm && strstr(tm, "llama-68m"), "settings lost: %s", tm ? tm : "(null)");
    free(tm);
    /* one writer at a time */
    TraceWriter *w2 = trace_resume(p);
    CHECK(!w2 && strstr(err_get(), "being written by another process"), "second writer: %s", w2 ? "opened" : err_get());
    if (w2) trace_close(w2);
    REQUIRE(write_questions(w, &g, 5, 14, -1) == 0 && trace_close(w) == 0, "%s", err_get());
    REQUIRE(write_trace_file(ref, TRACE_GZIP, &g, 0, 14, NULL) == 0, "%s", err_get());
    const char *why = same_records(p, ref);
    CHECK(!why, "%s", why);
    why = verify_file(p, &g, 14);
    CHECK(!why, "%s", why);
    free(p);
    free(ref);
}

/* Attributes given to trace_create_ex are in the file when it appears at
 * its path; a reserved or valueless one fails the creation and leaves no
 * file there (nor a temporary one beside it). */
static void test_create_with_attributes(void) {
    char *p = tpath("attrs.h5"), tmp[512];
    const char *attrs[] = {"target_model", "llama-68m", "draft_model", "eagle-tiny", NULL};
    TraceCreateOpts o = {1, 0, attrs};
    TraceWriter *w = trace_create_ex(p, TRACE_ZSTD, &o);
    REQUIRE(w, "%s", err_get());
    REQUIRE(trace_close(w) == 0, "%s", err_get());
    TraceReader *r = trace_open(p);
    REQUIRE(r, "%s", err_get());
    char *tm = trace_reader_attr(r, "target_model"), *dm = trace_reader_attr(r, "draft_model");
    CHECK(tm && dm && !strcmp(tm, "llama-68m") && !strcmp(dm, "eagle-tiny"), "attributes: %s / %s", tm ? tm : "(none)",
          dm ? dm : "(none)");
    free(tm);
    free(dm);
    trace_reader_close(r);
    unlink(p);
    const char *reserved[] = {"schema_version", "7", NULL}, *novalue[] = {"target_model", NULL};
    const char *const *bad[] = {novalue, reserved};
    for (int i = 0; i < 2; i++) {
        /* in a child each: a failed creation leaves its HDF5 handles to the
         * process's exit (writer_abandon), which a second creation here trips on */
        pid_t pid = fork();
        REQUIRE(pid >= 0, "fork");
        if (pid == 0) {
            TraceCreateOpts ob = {1, 0, bad[i]};
            w = trace_create_ex(p, TRACE_ZSTD, &ob);
            _exit(w ? 2 : strstr(err_get(), bad[i][0]) ? 0 : 3);
        }
        int st;
        waitpid(pid, &st, 0);
        snprintf(tmp, sizeof tmp, "%s.creating", p);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && access(p, F_OK) != 0 && access(tmp, F_OK) != 0,
              "bad attribute %s: child status %d (2: created, 3: error unnamed), file %s", bad[i][0],
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, access(p, F_OK) ? "absent" : "left");
    }
    free(p);
}

/* ---- merge ---- */

static void test_merge(void) {
    char *a = tpath("shard0.h5"), *b = tpath("shard1.h5"), *all = tpath("all.h5"), *m = tpath("merged.h5");
    Gen g = {555, 1, 0};
    REQUIRE(write_trace_file(a, TRACE_ZSTD, &g, 0, 6, "0") == 0, "%s", err_get());
    REQUIRE(write_trace_file(b, TRACE_NONE, &g, 6, 15, "1") == 0, "%s", err_get());
    REQUIRE(write_trace_file(all, TRACE_GZIP, &g, 0, 15, NULL) == 0, "%s", err_get());
    const char *in[] = {a, b};
    REQUIRE(trace_merge(m, in, 2, TRACE_GZIP) == 0, "merge: %s", err_get());
    const char *why = same_records(m, all);
    CHECK(!why, "merged vs single file: %s", why);
    why = verify_file(m, &g, 15);
    CHECK(!why, "%s", why);
    TraceReader *r = trace_open(m);
    REQUIRE(r, "%s", err_get());
    char *tm = trace_reader_attr(r, "target_model"), *sh = trace_reader_attr(r, "shard"), *mf = trace_reader_attr(r, "merged_from");
    char *te = trace_reader_attr(r, "temperature"), *cp = trace_reader_attr(r, "compression");
    CHECK(tm && !strcmp(tm, "models/llama-68m (config 0123456789abcdef)"), "target_model '%s'", tm ? tm : "(null)");
    CHECK(te && !strcmp(te, "0"), "temperature '%s'", te ? te : "(null)");
    CHECK(sh && !strcmp(sh, "0; 1"), "shard '%s'", sh ? sh : "(null)");
    CHECK(mf && strstr(mf, "shard0.h5") && strstr(mf, "shard1.h5"), "merged_from '%s'", mf ? mf : "(null)");
    CHECK(cp && !strcmp(cp, "gzip"), "compression '%s'", cp ? cp : "(null)");
    free(tm); free(sh); free(mf); free(te); free(cp);
    trace_reader_close(r);
    CHECK(trace_merge(m, in, 2, TRACE_GZIP) != 0 && strstr(err_get(), "exists"), "merge over an existing file: %s", err_get());
    /* the same shard twice (or overlapping shards) would count its trees twice: refused, naming a question */
    char *md = tpath("merged_dup.h5");
    const char *twice[] = {a, b, a};
    CHECK(trace_merge(md, twice, 3, TRACE_GZIP) != 0 && strstr(err_get(), "is in both") && strstr(err_get(), "shard0.h5"),
          "a shard merged twice: %s", err_get());
    CHECK(!file_exists(md), "a refused merge left %s", md);
    const char *overlap[] = {a, all};
    CHECK(trace_merge(md, overlap, 2, TRACE_GZIP) != 0 && strstr(err_get(), "is in both"), "overlapping shards: %s",
          err_get());
    free(md);

    /* a differing setting is refused, naming it; nothing is left behind */
    char *c = tpath("shard_hot.h5"), *m2 = tpath("merged_bad.h5");
    TraceWriter *w = trace_create(c, TRACE_ZSTD);
    REQUIRE(w, "%s", err_get());
    trace_set_attr_str(w, "target_model", "models/llama-68m (config 0123456789abcdef)");
    trace_set_attr_num(w, "temperature", 0.7);
    trace_set_attr_num(w, "topm", 20);
    trace_set_attr_str(w, "shard", "2");
    write_questions(w, &g, 15, 17, -1);
    trace_close(w);
    const char *in2[] = {a, c};
    CHECK(trace_merge(m2, in2, 2, TRACE_ZSTD) != 0, "merge with a different temperature succeeded");
    CHECK(strstr(err_get(), "temperature") && strstr(err_get(), "0.69999999999999996"), "error does not name the attribute: %s", err_get());
    CHECK(!file_exists(m2), "a refused merge left %s", m2);
    char partial[PATH_MAX];
    snprintf(partial, sizeof partial, "%s.partial", m2);
    CHECK(!file_exists(partial), "a refused merge left %s", partial);
    /* an attribute only one side has */
    char *d = tpath("shard_nomodel.h5");
    w = trace_create(d, TRACE_ZSTD);
    REQUIRE(w, "%s", err_get());
    trace_set_attr_num(w, "temperature", 0.0);
    trace_set_attr_num(w, "topm", 20);
    trace_close(w);
    const char *in3[] = {a, d};
    CHECK(trace_merge(m2, in3, 2, TRACE_ZSTD) != 0 && strstr(err_get(), "target_model"), "missing attribute: %s", err_get());
    free(a); free(b); free(all); free(m); free(c); free(m2); free(d);
}

/* ---- bad input ---- */

/* trace_open and trace_resume fail with one line naming the file and the
 * problem, and HDF5 prints nothing. */
static void expect_bad(const char *path, const char *needle) {
    fflush(stderr);
    char errpath[] = "/tmp/c2t_trace_stderrXXXXXX";
    int efd = mkstemp(errpath), saved = dup(2);
    dup2(efd, 2);
    TraceReader *r = trace_open(path);
    char e1[1024];
    snprintf(e1, sizeof e1, "%s", err_get());
    TraceWriter *w = trace_resume(path);
    char e2[1024];
    snprintf(e2, sizeof e2, "%s", err_get());
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    struct stat st;
    fstat(efd, &st);
    close(efd);
    unlink(errpath);
    CHECK(!r, "%s: trace_open succeeded", needle);
    CHECK(!w, "%s: trace_resume succeeded", needle);
    trace_reader_close(r);
    if (w) trace_close(w);
    const char *errs[2] = {e1, e2};
    for (int i = 0; i < 2; i++) {
        CHECK(!strchr(errs[i], '\n'), "error is not one line: %s", errs[i]);
        CHECK(strstr(errs[i], path), "error does not name the file: %s", errs[i]);
        CHECK(strstr(errs[i], needle), "error does not say '%s': %s", needle, errs[i]);
    }
    CHECK(st.st_size == 0, "%s: %lld bytes printed on stderr", needle, (long long)st.st_size);
    if (getenv("C2T_TRACE_VERBOSE")) fprintf(stderr, "open: %s\nresume: %s\n", e1, e2);
}

static void h5_edit(const char *path, void (*edit)(hid_t)) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f >= 0) { edit(f); H5Fclose(f); }
}
static void drop_P(hid_t f) { H5Ldelete(f, "/nodes/P", H5P_DEFAULT); }
static void bump_version(hid_t f) {
    hid_t a = H5Aopen(f, "schema_version", H5P_DEFAULT);
    long long v = 2;
    H5Awrite(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a);
}
static void retype_depth(hid_t f) {
    H5Ldelete(f, "/nodes/depth", H5P_DEFAULT);
    hsize_t n = 0, mx = H5S_UNLIMITED, ch = 64;
    hid_t s = H5Screate_simple(1, &n, &mx), pl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(pl, 1, &ch);
    hid_t d = H5Dcreate2(f, "/nodes/depth", H5T_STD_I32LE, s, H5P_DEFAULT, pl, H5P_DEFAULT);
    H5Dclose(d); H5Pclose(pl); H5Sclose(s);
}

static void copy_prefix(const char *from, const char *to, double frac) {
    size_t n;
    char *b = read_text_file(from, &n);
    FILE *f = fopen(to, "wb");
    if (b && f) fwrite(b, 1, (size_t)(n * frac), f);
    if (f) fclose(f);
    free(b);
}

static void test_bad_input(void) {
    char *missing = tpath("does_not_exist.h5");
    expect_bad(missing, "No such file");
    char *text = tpath("text.h5");
    FILE *f = fopen(text, "w");
    fputs("model,question\nllama,1\n", f);
    fclose(f);
    expect_bad(text, "not an HDF5 file");
    char *empty = tpath("empty.h5");
    fclose(fopen(empty, "w"));
    expect_bad(empty, "empty file");

    Gen g = {31337, 1, 0};
    char *good = tpath("good.h5");
    REQUIRE(write_trace_file(good, TRACE_ZSTD, &g, 0, 8, NULL) == 0, "%s", err_get());
    char *trunc = tpath("cut.h5");
    copy_prefix(good, trunc, 0.6);
    expect_bad(trunc, "truncated: ");
    expect_bad(trunc, "bytes it was written with are there");
    char *tiny = tpath("stub.h5");
    copy_prefix(good, tiny, 0.002);
    expect_bad(tiny, "truncated: ");

    char *noP = tpath("no_P.h5");
    REQUIRE(write_trace_file(noP, TRACE_ZSTD, &g, 0, 2, NULL) == 0, "%s", err_get());
    h5_edit(noP, drop_P);
    expect_bad(noP, "missing dataset /nodes/P");
    char *v2 = tpath("v2.h5");
    REQUIRE(write_trace_file(v2, TRACE_ZSTD, &g, 0, 2, NULL) == 0, "%s", err_get());
    h5_edit(v2, bump_version);
    expect_bad(v2, "schema_version 2");
    char *depth = tpath("depth32.h5");
    REQUIRE(write_trace_file(depth, TRACE_NONE, &g, 0, 2, NULL) == 0, "%s", err_get());
    h5_edit(depth, retype_depth);
    expect_bad(depth, "/nodes/depth has type int32, expected uint8");
    char *plain = tpath("plain.h5");
    hid_t pf = H5Fcreate(plain, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(pf);
    expect_bad(plain, "no root attribute schema_version");

    CHECK(trace_create(good, TRACE_ZSTD) == NULL && strstr(err_get(), "already exists"), "create over a file: %s", err_get());
    TraceCompress c;
    CHECK(trace_compress_parse("lz4", &c) != 0 && strstr(err_get(), "lz4"), "parse: %s", err_get());
    CHECK(trace_compress_parse("gzip", &c) == 0 && c == TRACE_GZIP, "parse gzip");
    free(missing); free(text); free(empty); free(good); free(trunc); free(tiny);
    free(noP); free(v2); free(depth); free(plain);
}

int main(void) {
    if (getenv("C2T_TRACE_CHILD")) return tear_child(getenv("C2T_TRACE_CHILD"));
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    RUN(test_roundtrip_zstd);
    RUN(test_roundtrip_gzip);
    RUN(test_roundtrip_none);
    RUN(test_counts_in_first_page);
    RUN(test_h5py_reads_zstd_through_plugin);
    RUN(test_h5dump_reads_zstd_through_plugin);
    RUN(test_resume_after_close);
    RUN(test_create_with_attributes);
    RUN(test_crash_at_every_step);
    RUN(test_torn_inplace_rewrite);
    RUN(test_kill9_then_resume);
    RUN(test_kill9_mid_multipage_write);
    RUN(test_merge);
    RUN(test_bad_input);
    RUN(test_bit_flip_detected);
    if (!h_total_failed && !getenv("C2T_KEEP")) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    }
    return h_done();
}
