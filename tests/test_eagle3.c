/* EAGLE-3 heads (infer/speculative/draft_eagle3.c): the head's top-k, probabilities
 * and entropy after a prefill, over three tree steps and after a second
 * catch-up equal those of a reference built from transformers' modules
 * (tools/golden/eagle3_golden.py) — for a safetensors head with a reduced
 * draft vocabulary (d2t) and for a pytorch_model.bin head with its own embeddings
 * and named target layers; the target captures layer inputs only when
 * asked; the kind is detected; bad heads give one clear line. */
#include "tests/harness.h"
#include "infer/speculative/draft.h"
#include "kernels/base/util.h"
#include <stdint.h>
#include <sys/stat.h>

static const Backend *be = &cpu_backend;
static const char *target_dir = "tests/ckpt/tiny_chat_l8";
static char qfile[] = "/tmp/c2t_e3qXXXXXX";
static char tmp[] = "/tmp/c2t_e3XXXXXX";
enum { K = 8 };

static const int64_t *i64(const SafeTensors *g, const char *name) {
    const StTensor *t = st_find(g, name);
    return t && t->dtype == DT_I64 ? t->data : NULL;
}
static const float *f32(const SafeTensors *g, const char *name) {
    const StTensor *t = st_find(g, name);
    return t && t->dtype == DT_F32 ? t->data : NULL;
}

/* Worst differences of one draft call against the golden rows; ids must be
 * equal. */
typedef struct { float dp, dh; int id_mismatch; } Diff;
static void compare(Diff *df, const char *what, const int *ids, const float *p, const float *ent, int rows,
                    const int64_t *want_ids, const float *want_p, const float *want_ent) {
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < K; i++) {
            if (ids[r * K + i] != want_ids[r * K + i]) {
                if (!df->id_mismatch)
                    CHECK(0, "%s row %d rank %d: id %d, transformers %lld", what, r, i, ids[r * K + i],
                          (long long)want_ids[r * K + i]);
                df->id_mismatch++;
            }
            df->dp = fmaxf(df->dp, fabsf(p[r * K + i] - want_p[r * K + i]));
        }
        df->dh = fmaxf(df->dh, fabsf(ent[r] - want_ent[r]) / fmaxf(1.0f, want_ent[r]));
    }
}

static void parity(const char *target, const char *kind, const char *head, const char *golden, float tol) {
    SafeTensors *g = st_open(golden);
    REQUIRE(g, "golden: %s", err_get());
    const int64_t *in = i64(g, "input_ids"), *nx = i64(g, "next_id"), *tt = i64(g, "tree_token"),
                  *tp = i64(g, "tree_parent"), *en = i64(g, "exp_nodes"), *ec = i64(g, "exp_call"),
                  *cont = i64(g, "cont_ids"), *nx2 = i64(g, "next2_id");
    REQUIRE(in && nx && tt && tp && en && ec && cont && nx2, "golden tensors missing");
    const int T = (int)st_find(g, "input_ids")->shape[0], N = (int)st_find(g, "tree_token")->shape[0],
              E = (int)st_find(g, "exp_nodes")->shape[0], C = (int)st_find(g, "cont_ids")->shape[0];
    LlamaModel *m = llama_load(target, be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load(kind, head, m, 256);
    REQUIRE(d, "%s", err_get());
    CHECK(!strcmp(draft_kind_name(d), "eagle3"), "%s loaded as %s", head, draft_kind_name(d));
    LlamaState *s = llama_state_new(m, 64);
    REQUIRE(s && draft_capture(d, s) == 0, "%s", err_get());
    int ids[64], pos[64], next, *node_ids = xmalloc(sizeof(int) * E * K);
    float p[K * 16], ent[16];
    for (int i = 0; i < T; i++) { ids[i] = (int)in[i]; pos[i] = i; }
    REQUIRE(llama_forward(s, ids, pos, T, NULL, LOGITS_LAST) == 0, "%s", err_get());
    llama_commit(s, NULL, T);
    be->argmax(s->logits, 1, m->cfg.vocab, &next);
    REQUIRE(next == nx[0], "target's next token %d, transformers %lld", next, (long long)nx[0]);
    REQUIRE(draft_catch_up(d, ids, draft_features(d, s), T, next) == 0, "%s", err_get());
    Diff df = {0};
    Tree t;
    tree_init(&t);
    tree_reset(&t, next);
    int root = 0, top[K];
    REQUIRE(draft_expand(d, &t, &root, 1, K, 0, top, p, ent) == 0, "%s", err_get());
    compare(&df, "root", top, p, ent, 1, i64(g, "root_ids"), f32(g, "root_probs"), f32(g, "root_entropy"));
    /* the tree steps: every node first, then the draft calls of the golden */
    for (int i = 0; i < N; i++) tree_add(&t, (int)tp[i], (int)tt[i], 0.5f, 0, 0);
    for (int e0 = 0; e0 < E;) {
        int e1 = e0, nodes[16];
        while (e1 < E && ec[e1] == ec[e0]) { nodes[e1 - e0] = (int)en[e1]; e1++; }
        REQUIRE(draft_expand(d, &t, nodes, e1 - e0, K, 0, node_ids + e0 * K, p, ent) == 0, "%s", err_get());
        char what[32];
        snprintf(what, sizeof what, "tree call %lld", (long long)ec[e0]);
        compare(&df, what, node_ids + e0 * K, p, ent, e1 - e0, i64(g, "exp_ids") + e0 * K,
                f32(g, "exp_probs") + e0 * K, f32(g, "exp_entropy") + e0);
        e0 = e1;
    }
    /* end of the cycle; the target commits next, c1, c2 and emits next2 */
    draft_end_cycle(d);
    for (int i = 0; i < C; i++) { ids[i] = (int)cont[i]; pos[i] = T + i; }
    REQUIRE(llama_forward(s, ids, pos, C, NULL, LOGITS_LAST) == 0, "%s", err_get());
    llama_commit(s, NULL, C);
    be->argmax(s->logits, 1, m->cfg.vocab, &next);
    REQUIRE(next == nx2[0], "target's token after the continuation %d, transformers %lld", next, (long long)nx2[0]);
    REQUIRE(draft_catch_up(d, ids, draft_features(d, s), C, next) == 0, "%s", err_get());
    tree_reset(&t, next);
    REQUIRE(draft_expand(d, &t, &root, 1, K, 0, top, p, ent) == 0, "%s", err_get());
    compare(&df, "root after a second catch-up", top, p, ent, 1, i64(g, "root2_ids"), f32(g, "root2_probs"),
            f32(g, "root2_entropy"));
    CHECK(df.id_mismatch == 0, "%d ids differ from transformers", df.id_mismatch);
    CHECK(df.dp <= tol, "probabilities differ by %g", df.dp);
    CHECK(df.dh <= tol, "entropies differ by %g (relative)", df.dh);
    printf("# %s: %d draft calls (root, 3 tree steps, root after catch-up), top-%d ids equal, max |dp| %.1e, "
           "max entropy diff %.1e\n", head, 2 + 3, K, df.dp, df.dh);
    tree_free(&t);
    free(node_ids);
    llama_state_free(s);
    draft_free(d);
    llama_free(m);
    st_close(g);
}

static void test_safetensors_head_matches_transformers(void) {
    parity(target_dir, "eagle3", "tests/ckpt/eagle3_tiny", "tests/golden/eagle3_tiny.safetensors", 1e-5f);
}

/* pytorch_model.bin, kind detected from config.json */
static void test_bin_head_matches_transformers(void) {
    parity(target_dir, NULL, "tests/ckpt/eagle3_tiny_bin", "tests/golden/eagle3_tiny_bin.safetensors", 1e-5f);
}

/* The trained demo head (BF16, a reduced vocabulary of 2048, named layers
 * of the 6-layer demo target) on the first code_test prompt */
static void test_demo_head_matches_transformers(void) {
    parity("data/demo/target", NULL, "data/demo/eagle3", "tests/golden/demo_eagle3.safetensors", 1e-4f);
}

/* The SmolLM2 EAGLE-3 head where one was trained here
 * (tools/models/smollm2_drafts.py --stages features3,eagle3; not shipped): a
 * draft vocabulary of 8192, layers
 * 2, 15, 27 of the 30-layer BF16 target, against the references that
 * tools/golden/eagle3_golden.py --smollm2 wrote beside it */
static void test_smollm2_head_matches_transformers(void) {
    if (!file_exists("models/smollm2-eagle3/golden.safetensors") ||
        !file_exists("models/smollm2-135m-instruct/model.safetensors"))
        SKIP("no SmolLM2 EAGLE-3 head with its references here (data/smollm2/README.md)");
    parity("models/smollm2-135m-instruct", NULL, "models/smollm2-eagle3", "models/smollm2-eagle3/golden.safetensors",
           1e-4f);
}

/* Without a draft that asks, the target keeps no layer inputs; with one, the
 * captured rows are those inputs (layer 0's is the embedding) and the
 * forward's own outputs do not change. */
static void test_capture_only_when_asked(void) {
    LlamaModel *m = llama_load(target_dir, be);
    REQUIRE(m, "%s", err_get());
    const int n = 5, H = m->cfg.hidden, V = m->cfg.vocab;
    int ids[5] = {0, 17, 200, 33, 5}, pos[5] = {0, 1, 2, 3, 4};
    LlamaState *a = llama_state_new(m, 8), *b = llama_state_new(m, 8);
    REQUIRE(a && b, "%s", err_get());
    int layers[3] = {0, 3, 7};
    REQUIRE(llama_capture(b, layers, 3) == 0, "%s", err_get());
    REQUIRE(llama_forward(a, ids, pos, n, NULL, LOGITS_ALL) == 0 && llama_forward(b, ids, pos, n, NULL, LOGITS_ALL) == 0,
            "%s", err_get());
    CHECK(a->aux == NULL, "a state nobody asked to capture holds aux rows");
    float *la = xmalloc(sizeof(float) * n * V), *lb = xmalloc(sizeof(float) * n * V);
    float *aux = xmalloc(sizeof(float) * n * 3 * H), *emb = xmalloc(sizeof(float) * n * H);
    be->to_host(la, a->logits, (size_t)n * V);
    be->to_host(lb, b->logits, (size_t)n * V);
    CHECK(!memcmp(la, lb, sizeof(float) * n * V), "capturing changed the logits");
    be->to_host(aux, b->aux, (size_t)n * 3 * H);
    float *e = be->alloc((size_t)n * H);
    int *dids = backend_alloc_ints(be, n);   /* embed reads its ids from backend memory */
    backend_ints_to_device(be, dids, ids, n);
    be->embed(e, &m->embed, dids, n);
    be->to_host(emb, e, (size_t)n * H);
    be->release(e);
    be->release(dids);
    int same = 1;
    for (int t = 0; t < n; t++) same &= !memcmp(aux + (size_t)t * 3 * H, emb + (size_t)t * H, sizeof(float) * H);
    CHECK(same, "layer 0's captured input is not the embedding");
    int bad[1] = {8};
    CHECK(llama_capture(b, bad, 1) == -1 && strstr(err_get(), "layer 8"), "layer 8 of 8 accepted: %s", err_get());
    free(la); free(lb); free(aux); free(emb);
    llama_state_free(a);
    llama_state_free(b);
    llama_free(m);
}

static void test_kind_detection(void) {
    LlamaModel *m = llama_load(target_dir, be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("auto", "tests/ckpt/eagle3_tiny", m, 64);
    REQUIRE(d, "%s", err_get());
    CHECK(!strcmp(draft_kind_name(d), "eagle3") && d->Vd == 64 && d->feat_width == 3 * m->cfg.hidden,
          "kind %s, Vd %d, feature width %d", draft_kind_name(d), d->Vd, d->feat_width);
    CHECK(d->feat_layers[0] == 2 && d->feat_layers[1] == 4 && d->feat_layers[2] == 5,
          "EAGLE's rule on 8 layers gives 2, 4, 5; got %d, %d, %d", d->feat_layers[0], d->feat_layers[1],
          d->feat_layers[2]);
    CHECK(draft_set_vocab(d, 16) == -1 && strstr(err_get(), "eagle3"), "--draft-vocab on an EAGLE-3 head: %s", err_get());
    draft_free(d);
    d = draft_load(NULL, "tests/ckpt/eagle3_tiny_bin", m, 64);
    REQUIRE(d, "%s", err_get());
    CHECK(d->Vd == m->cfg.vocab && d->d2t == NULL, "a full draft vocabulary needs no map");
    CHECK(d->feat_layers[0] == 1 && d->feat_layers[1] == 3 && d->feat_layers[2] == 6, "named layers, in layer order");
    draft_free(d);
    CHECK(draft_load("eagle", "tests/ckpt/eagle3_tiny", m, 64) == NULL && strstr(err_get(), "--draft-kind eagle3"),
          "an EAGLE-3 head loaded as EAGLE-1: %s", err_get());
    llama_free(m);
    m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    d = draft_load(NULL, "tests/ckpt/eagle_tiny", m, 64);
    CHECK(d && !strcmp(draft_kind_name(d), "eagle"), "an EAGLE-1 head is not detected as eagle: %s", err_get());
    draft_free(d);
    llama_free(m);
}

/* ---- bad heads: a copy of eagle3_tiny with one thing wrong ---- */

static char bad_dir[512];

/* Rewrites eagle3_tiny into bad_dir: tensor `drop` left out, `narrow`
 * declared with half its columns, d2t entry `d2t_at` set to d2t_val;
 * config.json with `config_extra` spliced in after its opening brace. */
static void bad_head(const char *drop, const char *narrow, int d2t_at, int64_t d2t_val, const char *config_extra) {
    snprintf(bad_dir, sizeof bad_dir, "%s/head", tmp);
    mkdir(bad_dir, 0755);
    SafeTensors *st = st_open("tests/ckpt/eagle3_tiny/model.safetensors");
    StWrite *w = xcalloc(st->ntensors, sizeof *w);
    int64_t *d2t = NULL;
    int n = 0;
    for (int i = 0; i < st->ntensors; i++) {
        const StTensor *t = &st->tensors[i];
        /* t2d (BOOL, which st_write does not write) is not read anyway */
        if ((drop && !strcmp(t->name, drop)) || !strcmp(t->name, "t2d")) continue;
        w[n] = (StWrite){t->name, t->dtype, t->ndim, {0}, t->data};
        memcpy(w[n].shape, t->shape, sizeof t->shape);
        if (narrow && !strcmp(t->name, narrow)) w[n].shape[1] /= 2;
        if (!strcmp(t->name, "d2t") && d2t_at >= 0) {
            d2t = xmalloc(t->nbytes);
            memcpy(d2t, t->data, t->nbytes);
            d2t[d2t_at] = d2t_val;
            w[n].data = d2t;
        }
        n++;
    }
    char *p = path_join(bad_dir, "model.safetensors");
    REQUIRE(st_write(p, w, n) == 0, "%s", err_get());
    free(p); free(w); free(d2t);
    st_close(st);
    size_t len;
    char *cfg = read_text_file("tests/ckpt/eagle3_tiny/config.json", &len);
    REQUIRE(cfg && cfg[0] == '{', "config");
    char *out = xmalloc(len + strlen(config_extra ? config_extra : "") + 8);
    sprintf(out, "{%s%s", config_extra ? config_extra : "", cfg + 1);
    p = path_join(bad_dir, "config.json");
    write_file(p, out);
    free(p); free(out); free(cfg);
}

/* The library and spec-eval both refuse bad_dir with one line naming needle. */
static void expect_refused(const char *what, const char *needle) {
    LlamaModel *m = llama_load(target_dir, be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load(NULL, bad_dir, m, 64);
    CHECK(d == NULL, "%s: loaded", what);
    if (d) draft_free(d);
    else CHECK(strstr(err_get(), needle), "%s: error does not name '%s': %s", what, needle, err_get());
    llama_free(m);
    char err[4096];
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target %s --draft %s --template none --questions %s "
                     "--max-new-tokens 4 --no-baseline", bin_dir(), target_dir, bad_dir, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, needle);
}

static void test_bad_heads_refused(void) {
    bad_head("midlayer.hidden_norm.weight", NULL, -1, 0, NULL);
    expect_refused("missing hidden_norm", "midlayer.hidden_norm.weight");
    bad_head("lm_head.weight", NULL, -1, 0, NULL);
    expect_refused("missing lm_head", "lm_head.weight");
    bad_head(NULL, "fc.weight", -1, 0, NULL);
    expect_refused("fc of 2H inputs", "fc.weight");
    bad_head(NULL, "midlayer.self_attn.k_proj.weight", -1, 0, NULL);
    expect_refused("k_proj reading H", "midlayer.self_attn.k_proj.weight");
    bad_head("d2t", NULL, -1, 0, NULL);
    expect_refused("no d2t", "d2t");
    bad_head(NULL, NULL, 5, 1000, NULL);
    expect_refused("d2t past the vocabulary", "d2t[5]");
    bad_head(NULL, NULL, 7, -9000000000000000000LL, NULL);
    expect_refused("d2t hugely negative", "d2t[7]");
    SafeTensors *st = st_open("tests/ckpt/eagle3_tiny/model.safetensors");
    REQUIRE(st && st_find(st, "d2t"), "%s", err_get());
    int64_t d2t0;
    memcpy(&d2t0, st_find(st, "d2t")->data, sizeof d2t0);
    st_close(st);
    bad_head(NULL, NULL, 1, d2t0 - 1, NULL);   /* draft id 1 -> draft id 0's target id */
    expect_refused("d2t maps two ids to one", "two draft ids");
    bad_head(NULL, NULL, -1, 0, "\"eagle_aux_hidden_state_layer_ids\": [1, 1, 3], ");
    expect_refused("a layer twice", "not three distinct layers");
    bad_head(NULL, NULL, -1, 0, "\"eagle_aux_hidden_state_layer_ids\": [0, 4, 8], ");
    expect_refused("a layer past the target", "not three distinct layers");
    bad_head(NULL, NULL, -1, 0, "\"eagle_aux_hidden_state_layer_ids\": [0, 4], ");
    expect_refused("two layers", "eagle_aux_hidden_state_layer_ids");
    bad_head(NULL, NULL, -1, 0, "\"target_hidden_size\": 48, ");
    expect_refused("another target's hidden size", "target hidden size 48");
}

/* EAGLE's rule 2, L/2, L-3 names only two layers of a 6-layer target (and
 * one of a 5-layer one): refused with a pointer to the config key. */
static void test_shallow_target_needs_named_layers(void) {
    char tdir[512];
    snprintf(tdir, sizeof tdir, "%s/l6", tmp);
    mkdir(tdir, 0755);
    const char *files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        char *from = realpath(target_dir, NULL), *a = path_join(from, files[i]), *b = path_join(tdir, files[i]);
        unlink(b);
        REQUIRE(symlink(a, b) == 0, "symlink %s", b);
        free(from); free(a); free(b);
    }
    size_t len;
    char *cfg = read_text_file("tests/ckpt/tiny_chat_l8/config.json", &len);
    char *at = strstr(cfg, "\"num_hidden_layers\": 8");
    REQUIRE(at, "config layout");
    at[strlen("\"num_hidden_layers\": ")] = '6';
    char *p = path_join(tdir, "config.json");
    write_file(p, cfg);
    free(p); free(cfg);
    LlamaModel *m = llama_load(tdir, be);
    REQUIRE(m && m->cfg.layers == 6, "%s", err_get());
    CHECK(draft_load(NULL, "tests/ckpt/eagle3_tiny", m, 64) == NULL && strstr(err_get(), "eagle_aux_hidden_state_layer_ids"),
          "6 layers: %s", err_get());
    bad_head(NULL, NULL, -1, 0, "\"eagle_aux_hidden_state_layer_ids\": [1, 3, 5], ");
    Draft *d = draft_load(NULL, bad_dir, m, 64);
    CHECK(d != NULL, "named layers 1, 3, 5 of 6 refused: %s", err_get());
    draft_free(d);
    llama_free(m);
}

int main(void) {
    if (!mkdtemp(tmp)) return 1;
    close(mkstemp(qfile));
    write_file(qfile, "{\"question_id\": 1, \"category\": \"t\", \"turns\": [\"static int x = 1;\"]}\n");
    RUN(test_safetensors_head_matches_transformers);
    RUN(test_bin_head_matches_transformers);
    RUN(test_demo_head_matches_transformers);
    RUN(test_smollm2_head_matches_transformers);
    RUN(test_capture_only_when_asked);
    RUN(test_kind_detection);
    RUN(test_bad_heads_refused);
    RUN(test_shallow_target_needs_named_layers);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) {}
    unlink(qfile);
    return h_done();
}
