/* The decoding loop: lossless greedy decoding for every policy and draft
 * kind, EAGLE-2 / chain / static trees built from a scripted draft equal
 * the ones worked out by hand, and sampling that is lossless by a
 * chi-square test. */
#include "tests/harness.h"
#include "tests/strict_backend.h"
#include "infer/speculative/decode.h"
#include "infer/session/observers.h"
#include "infer/speculative/cycle.h"
#include "tests/script_draft.h"
#include "tests/build_tree.h"
#include "infer/model/generate.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include <limits.h>
#include <stdlib.h>

static const Backend *be;   /* the CPU backend, strict (main) */

/* ---- scripted draft: a fixed table of children per parent token ---- */
typedef struct { int parent_token, token; float p; } Edge;
static const Edge edges[] = {
    {0, 1, .6f}, {0, 2, .3f},                 /* root: a=1, b=2 */
    {1, 11, .5f}, {1, 12, .4f},               /* a: a1, a2 */
    {2, 21, .9f}, {2, 22, .05f},              /* b: b1, b2 */
    {11, 111, .7f}, {11, 112, .2f},           /* a1 */
    {12, 121, .5f}, {12, 122, .1f},           /* a2 */
    {21, 211, .3f}, {21, 212, .3f},           /* b1: a tie */
    {22, 221, .5f}, {22, 222, .2f},
    {111, 1111, .9f}, {111, 1112, .05f},
};
static int script(void *ctx, const Tree *t, int node, int k, int *ids, float *probs, float *ent) {
    int *calls = ctx;
    (*calls)++;
    int n = 0;
    for (size_t i = 0; i < sizeof edges / sizeof *edges && n < k; i++)
        if (edges[i].parent_token == t->token[node]) { ids[n] = edges[i].token; probs[n] = edges[i].p; n++; }
    for (; n < k; n++) { ids[n] = 9000 + t->token[node] * 10 + n; probs[n] = 0.001f; }
    if (ent) *ent = 0.1f * t->token[node];
    return 0;
}

/* One tree of the policy prm describes, drawn from the scripted draft. */
static int build_with(const PolicyParams *prm, Tree *t, int *calls) {
    Policy *p = policy_new(prm);
    if (!p) return -1;
    *calls = 0;
    Draft *d = draft_scripted(script, calls);
    int rc = build_tree_on_cpu(p, d, 0, t);
    draft_free(d);
    policy_free(p);
    return rc;
}

static int build(const char *policy, int topk, int depth, int total, const char *static_tree, Tree *t, int *calls) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "%s", policy);
    policy_params_set_int_if_owned(&prm, "topk", topk);
    policy_params_set_int_if_owned(&prm, "depth", depth);
    policy_params_set_int_if_owned(&prm, "total", total);
    policy_params_set_int_if_owned(&prm, "draft_len", depth);
    prm.want_entropy = 1;
    if (static_tree) policy_params_set(&prm, "static_tree", static_tree);
    return build_with(&prm, t, calls);
}

/* tokens and parent tokens, in tree order */
static int tree_is(const Tree *t, const int *tokens, const int *parent_tokens, int n) {
    if (t->n != n + 1) return 0;
    for (int i = 0; i < n; i++) {
        if (t->token[i + 1] != tokens[i]) return 0;
        if (t->token[t->parent[i + 1]] != parent_tokens[i]) return 0;
        if (t->parent[i + 1] >= i + 1) return 0;
    }
    return 1;
}

static void test_eagle2_tree_by_hand(void) {
    Tree t;
    tree_init(&t);
    int calls;
    /* k=2, depth=2, whole pool: layer 1 {a,b}; step 1 expands a,b (4 children:
     * a1 .30 a2 .24 b1 .27 b2 .015); step 2 expands the two best of those, a1
     * and b1 (not a2), adding a1x a1y b1x b1y.  1 + k + depth·k² = 11 nodes. */
    REQUIRE(build("eagle2", 2, 2, -1, NULL, &t, &calls) == 0, "build: %s", err_get());
    int pool_tok[] = {1, 2, 11, 12, 21, 22, 111, 112, 211, 212};
    int pool_par[] = {0, 0, 1, 1, 2, 2, 11, 11, 21, 21};
    CHECK(tree_is(&t, pool_tok, pool_par, 10), "pool differs from the hand-built one (n=%d)", t.n);
    CHECK(calls == 1 + 2 + 2, "draft calls %d, expected 5 (root, a, b, a1, b1)", calls);
    CHECK(fabsf(t.P[8] - 0.6f * 0.5f * 0.2f) < 1e-7f, "joint probability of a1y %g", t.P[8]);
    CHECK(t.depth[7] == 3 && t.rank[8] == 1, "depth/rank bookkeeping");
    CHECK(fabsf(t.H[3] - 0.1f) < 1e-6f, "entropy is the parent distribution's");

    /* rerank total=5: P order a .6, b .3 = a1 .3 (tie: shallower b first),
     * b1 .27, a2 .24 -> {a, b, a1, a2, b1} */
    REQUIRE(build("eagle2", 2, 2, 5, NULL, &t, &calls) == 0, "build: %s", err_get());
    int r5_tok[] = {1, 2, 11, 12, 21}, r5_par[] = {0, 0, 1, 1, 2};
    CHECK(tree_is(&t, r5_tok, r5_par, 5), "total=5 rerank differs");
    /* total=7 adds a1x .21 and then b1x/b1y tie at .081: the earlier, b1x */
    REQUIRE(build("eagle2", 2, 2, 7, NULL, &t, &calls) == 0, "build: %s", err_get());
    int r7_tok[] = {1, 2, 11, 12, 21, 111, 211}, r7_par[] = {0, 0, 1, 1, 2, 11, 21};
    CHECK(tree_is(&t, r7_tok, r7_par, 7), "total=7 rerank differs");
    for (int i = 1; i < t.n; i++) CHECK(t.parent[i] >= 0 && t.parent[i] < i, "reranked tree not connected at %d", i);
    tree_free(&t);
}

/* C2T with the hand-set classifier of tests/golden/c2t_hand.json: logit =
 * 10 P - d + 0.5, so at beta 0.5 a node passes iff P >= (d - 0.5)/10, i.e.
 * P >= .05 at depth 1, .15 at depth 2, .25 at depth 3. */
static int build_c2t(const char *policy, int topk, int dmax, float beta, int draft_len, Tree *t, int *calls) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "%s", policy);
    policy_params_set(&prm, "classifier", "tests/golden/c2t_hand.json");
    if (policy_has_setting(policy, "early_stop")) policy_params_set(&prm, "early_stop", "c2t");
    char beta_text[32];
    snprintf(beta_text, sizeof beta_text, "%.9g", beta);
    policy_params_set(&prm, "beta", beta_text);
    policy_params_set_int_if_owned(&prm, "topk", topk);
    policy_params_set_int_if_owned(&prm, "depth", dmax);
    policy_params_set_int_if_owned(&prm, "draft_len", draft_len);
    return build_with(&prm, t, calls);
}

static void test_c2t_tree_by_hand(void) {
    Tree t;
    tree_init(&t);
    int calls;
    /* K=2, d_max=5, beta .5.  Depth 1: a .6, b .3 pass; both expand.
     * Depth 2: a1 .30, a2 .24, b1 .27 pass (>= .15), b2 .015 does not; all
     * three join the tree but only the two most confident, a1 and b1,
     * expand (second top-K pruning: a2 stays a leaf).  Depth 3: a1x .21,
     * a1y .06, b1x .081, b1y .081 are all below .25: building stops. */
    REQUIRE(build_c2t("c2t", 2, 5, 0.5f, 0, &t, &calls) == 0, "c2t: %s", err_get());
    int tok[] = {1, 2, 11, 12, 21}, par[] = {0, 0, 1, 1, 2};
    CHECK(tree_is(&t, tok, par, 5), "c2t tree differs from the hand-built one (n=%d)", t.n);
    CHECK(calls == 5, "draft calls %d: expected root, a, b, a1, b1 (a2 not expanded)", calls);
    /* d_max = 1 stops after the first layer */
    REQUIRE(build_c2t("c2t", 2, 1, 0.5f, 0, &t, &calls) == 0, "c2t: %s", err_get());
    int tok1[] = {1, 2}, par1[] = {0, 0};
    CHECK(tree_is(&t, tok1, par1, 2) && calls == 1, "d_max 1: n=%d calls=%d", t.n, calls);
    /* beta .9 (logit >= 2.197): depth 1 needs P >= .27, depth 2 P >= .37 */
    REQUIRE(build_c2t("c2t", 2, 5, 0.9f, 0, &t, &calls) == 0, "c2t: %s", err_get());
    CHECK(tree_is(&t, tok1, par1, 2), "beta .9: only a and b pass (n=%d)", t.n);
    /* K=1: only the top child of each frontier node is scored */
    REQUIRE(build_c2t("c2t", 1, 5, 0.5f, 0, &t, &calls) == 0, "c2t: %s", err_get());
    int tokk[] = {1, 11}, park[] = {0, 1};
    CHECK(tree_is(&t, tokk, park, 2), "K=1: chain a, a1 (a1x .21 < .25) n=%d", t.n);
    /* chain with C2T early stopping: a .6 (d1), a1 .30 (d2), then a1x .21 at
     * depth 3 is below .25: stop */
    REQUIRE(build_c2t("chain", 1, -1, 0.5f, 6, &t, &calls) == 0, "chain c2t: %s", err_get());
    CHECK(tree_is(&t, tokk, park, 2), "chain --early-stop c2t: n=%d", t.n);
    tree_free(&t);
}

static void test_chain_and_static_trees_by_hand(void) {
    Tree t;
    tree_init(&t);
    int calls;
    REQUIRE(build("chain", 1, 3, 0, NULL, &t, &calls) == 0, "chain: %s", err_get());
    int ch_tok[] = {1, 11, 111}, ch_par[] = {0, 1, 11};
    CHECK(tree_is(&t, ch_tok, ch_par, 3), "chain of 3 differs");
    REQUIRE(build("static", 1, 0, 0, "0;1;0,0;0,1;1,0;0,0,0", &t, &calls) == 0, "static: %s", err_get());
    int st_tok[] = {1, 2, 11, 12, 21, 111}, st_par[] = {0, 0, 1, 1, 2, 11};
    CHECK(tree_is(&t, st_tok, st_par, 6), "static tree differs");
    CHECK(build("static", 1, 0, 0, "0;0,0,1", &t, &calls) != 0, "a path without its parent accepted");
    REQUIRE(build("static", 1, 0, 0, "eagle1", &t, &calls) == 0, "eagle1 preset: %s", err_get());
    CHECK(t.n == 26 && tree_max_depth(&t) == 5, "EAGLE-1 default tree has %d nodes, depth %d", t.n - 1, tree_max_depth(&t));
    tree_free(&t);
}

/* ---- lossless greedy decoding ---- */

static int decode(const LlamaModel *target, Draft *d, const PolicyParams *prm, const int *prompt, int np,
                  int max_new, int *out, DecodeStats *st) {
    Policy *p = policy_new(prm);
    if (!p) return -1;
    SampleParams sp = {0};
    Decoder *dec = decoder_new(target, d, p, np + max_new + policy_max_nodes(p) + 8, sp);
    if (dec && p->wants_cost) decoder_watch_costs(dec);
    int n = dec ? decoder_run(dec, prompt, np, max_new, out, st) : -1;
    decoder_free(dec);
    policy_free(p);
    return n;
}

static void lossless_on(const char *target_dir, const char *draft_kind, const char *draft_dir) {
    LlamaModel *m = llama_load(target_dir, be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load(draft_kind, draft_dir, m, 4096);
    REQUIRE(d, "%s", err_get());
    const int max_new = 40;
    int prompts[3][8] = {{1, 21, 208, 255, 244, 151, 37, 9}, {1, 5, 6, 7, 8, 9, 10, 11}, {1, 99, 98, 97, 96, 95, 94, 93}};
    struct { const char *policy; int topk, depth, total, draft_len; } cases[] = {
        {"ar", 0, 0, 0, 0}, {"chain", 1, 0, 0, 4}, {"static", 4, 0, 0, 0}, {"eagle2", 4, 3, 12, 0},
        {"eagle2", 10, 6, 60, 0}, {"eagle2", 5, 4, -1, 0}, {"c2t", 4, 6, -1, 0}, {"c2t", 10, 8, -1, 0}, {"c2t", 4, 6, 8, 0},
        {"chain-c2t", 1, 0, 0, 6},
    };
    /* every case on every draft kind over one prompt's 40 tokens; make
     * test-long adds two more prompts */
    for (int q = 0; q < TEST_SIZE(1, 3); q++) {
        LlamaState *s = llama_state_new(m, 64);
        int ref[64];
        int nref = greedy_generate(s, prompts[q], 8, max_new, ref);
        llama_state_free(s);
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            PolicyParams prm;
            policy_params_default(&prm);
            snprintf(prm.name, sizeof prm.name, "%s", cases[c].policy);
            if (!strcmp(prm.name, "chain-c2t")) {
                snprintf(prm.name, sizeof prm.name, "chain");
                policy_params_set(&prm, "early_stop", "c2t");
            }
            if (policy_has_setting(prm.name, "classifier")) {
                policy_params_set(&prm, "classifier", "tests/golden/c2t_hand.json");
                policy_params_set(&prm, "beta", "0.2");   /* lets enough nodes through to make trees */
            }
            policy_params_set_int_if_owned(&prm, "topk", cases[c].topk);
            policy_params_set_int_if_owned(&prm, "depth", cases[c].depth);
            policy_params_set_int_if_owned(&prm, "total", cases[c].total);
            policy_params_set_int_if_owned(&prm, "draft_len", cases[c].draft_len);
            int out[64];
            DecodeStats st;
            int n = decode(m, d, &prm, prompts[q], 8, max_new, out, &st);
            REQUIRE(n >= 0, "%s: %s", cases[c].policy, err_get());
            int same = n == nref;
            for (int i = 0; same && i < n; i++) same = out[i] == ref[i];
            CHECK(same, "%s draft %s policy %s (k=%d depth=%d total=%d) prompt %d: tokens differ from ar",
                  target_dir, draft_dir, cases[c].policy, cases[c].topk, cases[c].depth, cases[c].total, q);
            CHECK(st.cycle_tokens == st.new_tokens - 1, "token accounting");
            if (!strcmp(cases[c].policy, "ar")) CHECK(st.gamma == 0 && st.cycles == n - 1, "ar: one token per cycle");
        }
    }
    draft_free(d);
    llama_free(m);
}

static void test_lossless_greedy_every_draft(void) {
    for (int i = 0; i < N_LOSSLESS_DRAFTS; i++) lossless_on(LOSSLESS_DRAFTS[i][0], LOSSLESS_DRAFTS[i][1], LOSSLESS_DRAFTS[i][2]);
}

/* A self-draft accepts every greedy guess: τ must reach the chain length. */
static void test_self_draft_accepts_everything(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("lm", "tests/ckpt/llama3_f32", m, 4096);
    REQUIRE(d, "%s", err_get());
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "chain");
    policy_params_set(&prm, "draft_len", "4");
    int prompt[4] = {1, 21, 208, 255}, out[64];
    DecodeStats st;
    int n = decode(m, d, &prm, prompt, 4, 41, out, &st);
    REQUIRE(n == 41, "decoded %d", n);
    CHECK(st.cycles == 8 && st.gamma == 32, "chain of 4 with a perfect draft: %d cycles, gamma %lld",
          st.cycles, (long long)st.gamma);
    draft_free(d);
    llama_free(m);
}

/* ---- cycles that draft nothing (auto sizes' DraftSwitch) ---- */

/* What each cycle drafted, keyed by the tokens emitted before it (a hook);
 * an observer of the cycle (observer.h) turns drafting off in stretches of
 * three cycles among drafting ones. */
typedef struct {
    Decoder *dec;
    int switching, n, begin_at;
    int at[64], nodes[64], len[64], tokens[64][8];
    float P[64][8];
    int n_report, drafted[64];
    double deferred_s[64];
} SwitchRun;

static int switch_hook(void *ctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)cycle;
    SwitchRun *r = ctx;
    if (r->n < 64) {
        r->at[r->n] = r->begin_at;
        r->nodes[r->n] = t->n;
        r->len[r->n] = n_path;
        for (int i = 1; i < t->n && i < 8; i++) { r->tokens[r->n][i] = t->token[i]; r->P[r->n][i] = t->P[i]; }
        r->n++;
    }
    return 0;
}

typedef struct {
    Observer base;
    SwitchRun *run;
} PauseWatch;

static void pause_cycle_begin(Observer *o, Decoder *dec) {
    SwitchRun *r = ((PauseWatch *)o)->run;
    const int64_t c = dec->turn.st->cycles;   /* this cycle's number */
    r->begin_at = dec->turn.n_out;
    if (r->switching && c > 0) dec->cycle_off = (c - 1) % 7 >= 2 && (c - 1) % 7 <= 4;
}

static int pause_cycle_end(Observer *o, Decoder *dec, const CycleReport *rep) {
    (void)dec;
    SwitchRun *r = ((PauseWatch *)o)->run;
    if (r->n_report < 64) {
        r->drafted[r->n_report] = rep->drafted;
        r->deferred_s[r->n_report++] = rep->deferred_s;
    }
    return 0;
}

static void pause_destroy(Observer *o) { free(o); }

static int switch_run(const LlamaModel *m, Draft *d, const int *prompt, int np, int max_new, int switching,
                      SwitchRun *r, int *out) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "chain");
    policy_params_set(&prm, "draft_len", "4");
    Policy *p = policy_new(&prm);
    SampleParams sp = {0};
    memset(r, 0, sizeof *r);
    r->dec = decoder_new(m, d, p, np + max_new + 16, sp);
    if (!r->dec) { policy_free(p); return -1; }
    r->switching = switching;
    PauseWatch *w = xcalloc(1, sizeof *w);
    w->base = (Observer){.name = "pauses", .cycle_begin = pause_cycle_begin, .cycle_end = pause_cycle_end,
                         .destroy = pause_destroy};
    w->run = r;
    decoder_watch(r->dec, &w->base);
    decoder_set_hook(r->dec, switch_hook, r, 1);
    DecodeStats st;
    const int n = decoder_run(r->dec, prompt, np, max_new, out, &st);
    decoder_free(r->dec);
    policy_free(p);
    return n;
}

/* Cycles without a draft leave the draft behind; it catches up on every
 * token they committed (and on the prompt's features, when a turn starts
 * without drafting) before it drafts again.  So: the tokens are greedy's;
 * a self-draft still accepts every node it drafts; and an EAGLE head drafts
 * at each position the tree it drafts there when it never pauses. */
static void test_cycles_without_draft_catch_up(void) {
    const char *cases[][3] = {{"tests/ckpt/llama3_f32", "lm", "tests/ckpt/llama3_f32"},
                              {"tests/ckpt/tiny_chat", "eagle", "tests/ckpt/tiny_chat_eagle"}};
    const int prompt[8] = {1, 21, 208, 255, 244, 151, 37, 9}, max_new = 40;
    for (int c = 0; c < 2; c++) {
        LlamaModel *m = llama_load(cases[c][0], be);
        REQUIRE(m, "%s", err_get());
        Draft *d = draft_load(cases[c][1], cases[c][2], m, 4096);
        REQUIRE(d, "%s", err_get());
        LlamaState *s = llama_state_new(m, 64);
        int ref[64], out[2][64];
        const int nref = greedy_generate(s, prompt, 8, max_new, ref);
        llama_state_free(s);
        static SwitchRun run[2];
        int n[2], off = 0, compared = 0, same_tree = 1, all_accepted = 1;
        for (int k = 0; k < 2; k++) n[k] = switch_run(m, d, prompt, 8, max_new, k, &run[k], out[k]);
        CHECK(n[1] == nref && !memcmp(out[1], ref, sizeof(int) * nref) && n[0] == nref,
              "%s: tokens differ from greedy with pauses in drafting", cases[c][2]);
        for (int i = 0; i < run[1].n; i++) {
            off += run[1].nodes[i] == 1;
            if (run[1].nodes[i] > 1 && run[1].len[i] != run[1].nodes[i]) all_accepted = 0;
            for (int j = 0; j < run[0].n; j++) {
                if (run[0].at[j] != run[1].at[i] || run[1].nodes[i] == 1 || run[0].nodes[j] != run[1].nodes[i]) continue;
                compared++;
                for (int x = 1; x < run[1].nodes[i] && x < 8; x++)
                    same_tree &= run[0].tokens[j][x] == run[1].tokens[i][x] &&
                                 fabsf(run[0].P[j][x] - run[1].P[i][x]) < 1e-4f * run[0].P[j][x] + 1e-6f;
            }
        }
        CHECK(off >= 3, "%s: %d cycles without a draft", cases[c][2], off);
        /* a catch-up is drafting's cost where the cycle before drafted; on
         * the prompt or after a pause it is apart (CycleReport.deferred_s) */
        int deferred_ok = 1;
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < run[k].n_report; i++) {
                const int apart = run[k].drafted[i] && (i == 0 || !run[k].drafted[i - 1]);
                deferred_ok &= apart ? run[k].deferred_s[i] > 0 : run[k].deferred_s[i] == 0;
            }
        CHECK(deferred_ok, "%s: a catch-up on the prompt's or a pause's tokens was not reported apart, "
                           "or a drafting cycle's was", cases[c][2]);
        if (c == 0) CHECK(all_accepted, "the self-draft lost nodes after a pause: its catch-up is wrong");
        else CHECK(compared >= 3 && same_tree, "%s: %d trees at shared positions, the same: %d", cases[c][2], compared,
                   same_tree);
        draft_free(d);
        llama_free(m);
    }
}

/* ---- lossless sampling ---- */

/* Upper alpha=0.001 quantile of chi-square with k dof (Wilson-Hilferty). */
static double chi2_crit(int k) {
    double z = 3.090, a = 2.0 / (9.0 * k);
    return k * pow(1 - a + z * sqrt(a), 3);
}

static double chi2(const long *count, const double *p, int n, long total) {
    double x = 0;
    for (int i = 0; i < n; i++) {
        double e = p[i] * total;
        if (e > 0) x += (count[i] - e) * (count[i] - e) / e;
    }
    return x;
}

/* The target's sampling distribution of a row of logits (host): the CPU's
 * weights (sample_dev's), normalised. */
static void target_probs(const float *logits, int V, const SampleParams *sp, float *p) {
    float *scratch = xmalloc(sizeof(float) * V);
    const double total = cpu_sample_weights(logits, V, sp, p, scratch);
    for (int j = 0; j < V; j++) p[j] = (float)(p[j] / total);
    free(scratch);
}

/* The first two tokens after a fixed prompt: the first comes from the
 * prefill, the second from the first draft-verify cycle (sample_dev and
 * tree_accept); their joint distribution must be the target's. */
static void sampling_case(const char *policy, SampleParams sp) {
    LlamaModel *m = llama_load("tests/ckpt/v8_target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("lm", "tests/ckpt/v8_draft", m, 256);
    REQUIRE(d, "%s", err_get());
    const int V = 8, draws = 40000;
    int prompt[3] = {0, 3, 5};
    /* expected joint distribution from the target itself */
    double expect[64];
    float *p1 = xmalloc(sizeof(float) * V), *p2 = xmalloc(sizeof(float) * V);
    LlamaState *s = llama_state_new(m, 16);
    int pos[4] = {0, 1, 2, 3};
    llama_forward(s, prompt, pos, 3, NULL, LOGITS_LAST);
    llama_commit(s, NULL, 3);
    target_probs(s->logits, V, &sp, p1);
    for (int a = 0; a < V; a++) {
        llama_truncate(s, 3);
        llama_forward(s, &a, &pos[3], 1, NULL, LOGITS_LAST);
        target_probs(s->logits, V, &sp, p2);
        for (int b = 0; b < V; b++) expect[a * V + b] = (double)p1[a] * p2[b];
    }
    llama_state_free(s);

    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "%s", policy);
    policy_params_set_int_if_owned(&prm, "topk", 3);
    policy_params_set_int_if_owned(&prm, "depth", 2);
    policy_params_set_int_if_owned(&prm, "total", -1);
    policy_params_set_int_if_owned(&prm, "draft_len", 3);
    Policy *p = policy_new(&prm);
    long count[64] = {0};
    Decoder *dec = decoder_new(m, d, p, 64, sp);
    REQUIRE(dec, "%s", err_get());
    for (int i = 0; i < draws; i++) {
        int out[2];
        DecodeStats st;
        rng_seed(&dec->rng, 1000 + i);
        int n = decoder_run(dec, prompt, 3, 2, out, &st);
        REQUIRE(n == 2, "decode: %s", err_get());
        count[out[0] * V + out[1]]++;
    }
    int cells = 0;
    for (int i = 0; i < 64; i++) cells += expect[i] > 0;
    double x = chi2(count, expect, 64, draws), crit = chi2_crit(cells - 1);
    printf("# sampling %s T=%.1f top_k=%d top_p=%.2f: chi2 %.1f (dof %d, critical %.1f at alpha 0.001)\n",
           policy, sp.temperature, sp.top_k, sp.top_p, x, cells - 1, crit);
    CHECK(x < crit, "%s: emitted tokens are not distributed as the target's (chi2 %.1f >= %.1f)", policy, x, crit);

    /* power: the same number of draws from a slightly biased sampler (5% of
     * the mass moved to the most likely cell) must fail the test */
    double biased[64];
    int top = 0;
    for (int i = 0; i < 64; i++) { biased[i] = 0.95 * expect[i]; if (expect[i] > expect[top]) top = i; }
    biased[top] += 0.05;
    Rng r;
    rng_seed(&r, 7);
    long bc[64] = {0};
    for (int i = 0; i < draws; i++) {
        double u = rng_uniform(&r), c = 0;
        int k = 63;
        for (int j = 0; j < 64; j++) { c += biased[j]; if (u < c) { k = j; break; } }
        bc[k]++;
    }
    CHECK(chi2(bc, expect, 64, draws) > crit, "the test cannot tell a 5%% bias apart");
    decoder_free(dec);
    policy_free(p);
    draft_free(d);
    llama_free(m);
    free(p1); free(p2);
}

static void test_sampling_is_lossless_eagle2(void) {
    SampleParams sp = {1.0f, 0, 1.0f, 0};
    sampling_case("eagle2", sp);
}
static void test_sampling_is_lossless_chain_with_processors(void) {
    SampleParams sp = {0.7f, 5, 0.9f, 0};
    sampling_case("chain", sp);
}

static void test_bad_policy_parameters(void) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "beam");
    CHECK(policy_new(&prm) == NULL && strstr(err_get(), "unknown policy"), "unknown policy accepted");
    snprintf(prm.name, sizeof prm.name, "eagle2");
    policy_params_set(&prm, "--topk", "0");
    CHECK(policy_new(&prm) == NULL && strstr(err_get(), "--topk"), "topk 0 accepted or unnamed: %s", err_get());
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "chain");
    policy_params_set(&prm, "draft_len", "0");
    CHECK(policy_new(&prm) == NULL, "draft_len 0 accepted");
    /* a setting the policy does not have is named, not ignored */
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "chain");
    policy_params_set(&prm, "--topk", "4");
    CHECK(policy_new(&prm) == NULL && strstr(err_get(), "--topk does not apply to policy chain"), "chain took --topk: %s",
          err_get());
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "eagle2");
    policy_params_set(&prm, "--total", "many");
    CHECK(policy_new(&prm) == NULL && strstr(err_get(), "'all' or 'auto'"), "--total many: %s", err_get());
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    CHECK(draft_load("lm", "tests/ckpt/v8_draft", m, 64) == NULL && strstr(err_get(), "vocabulary"),
          "a draft with another vocabulary accepted: %s", err_get());
    CHECK(draft_load("eagle", "tests/ckpt/v8_draft", m, 64) == NULL, "a mismatched EAGLE head accepted");
    CHECK(draft_load("medusa", "tests/ckpt/eagle_tiny", m, 64) == NULL, "unknown draft kind accepted");
    /* --draft-kind auto: a draft of several layers is an LM, one layer an EAGLE head */
    static const char *const autos[][2] = {{"tests/ckpt/llama2_f32", "lm"}, {"tests/ckpt/eagle_tiny", "eagle"}};
    for (int i = 0; i < 2; i++) {
        Draft *d = draft_load("auto", autos[i][0], m, 64);
        CHECK(d && !strcmp(d->ops->kind, autos[i][1]), "auto kind of %s: %s", autos[i][0], d ? d->ops->kind : err_get());
        draft_free(d);
    }
    llama_free(m);
}

/* The demo EAGLE head's distribution under the root after a prefill equals
 * the one built from transformers' LlamaDecoderLayer
 * (tools/golden/demo_refs.py). */
static void test_demo_eagle_head_matches_transformers(void) {
    SafeTensors *g = st_open("tests/golden/demo_eagle.safetensors");
    REQUIRE(g, "golden: %s", err_get());
    const StTensor *gi = st_find(g, "input_ids"), *gn = st_find(g, "next_id"), *gl = st_find(g, "root_logits");
    REQUIRE(gi && gn && gl, "golden tensors missing");
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/demo/eagle", m, 256);
    REQUIRE(d, "%s", err_get());
    const int T = (int)gi->shape[0], V = m->cfg.vocab;
    int *ids = xmalloc(sizeof(int) * T), *pos = xmalloc(sizeof(int) * T);
    for (int i = 0; i < T; i++) { ids[i] = (int)((const int64_t *)gi->data)[i]; pos[i] = i; }
    LlamaState *s = llama_state_new(m, T);
    REQUIRE(llama_forward(s, ids, pos, T, NULL, LOGITS_LAST) == 0, "%s", err_get());
    int next;
    be->argmax(s->logits, 1, V, &next);
    CHECK(next == (int)((const int64_t *)gn->data)[0], "target's next token %d, transformers %lld", next,
          (long long)((const int64_t *)gn->data)[0]);
    REQUIRE(draft_catch_up(d, ids, s->hidden, T, next) == 0, "%s", err_get());
    Tree t;
    tree_init(&t);
    tree_reset(&t, next);
    enum { K = 10 };
    int top[K], want[K], root = 0;
    float p[K], wp[K], ent, went;
    REQUIRE(draft_expand(d, &t, &root, 1, K, 0, top, p, &ent) == 0, "%s", err_get());
    cpu_backend.softmax_topk(gl->data, 1, V, 1.0f, K, want, wp, 0, &went);
    float worst = 0;
    for (int i = 0; i < K; i++) {
        CHECK(top[i] == want[i], "rank %d: head gives id %d, transformers %d", i, top[i], want[i]);
        worst = fmaxf(worst, fabsf(p[i] - wp[i]));
    }
    CHECK(worst <= 1e-4f, "top-%d probabilities differ by %g", K, worst);
    CHECK(fabsf(ent - went) <= 1e-4f * fmaxf(1.0f, went), "entropy %g, transformers %g", ent, went);
    printf("# demo EAGLE head: top-1 %d p %.4f (ref %.4f), max |dp| %.1e, entropy %.4f (ref %.4f)\n", top[0], p[0],
           wp[0], worst, ent, went);
    /* Down the head's greedy chain: a node's distribution comes from its
     * parent's output feature, attending to the context and its ancestors
     * (what EagleHead.unroll in tools/drafts/heads.py trains the
     * head for). */
    const StTensor *ci = st_find(g, "chain_ids"), *cl = st_find(g, "chain_logits");
    REQUIRE(ci && cl && cl->shape[1] == V, "golden chain tensors missing");
    int node = 0;
    for (int i = 0; i < (int)ci->shape[0]; i++) {
        const int want_id = (int)((const int64_t *)ci->data)[i];
        CHECK(top[0] == want_id, "depth %d: head's top-1 %d, transformers %d", i + 1, top[0], want_id);
        node = tree_add(&t, node, top[0], p[0], ent, 0);
        REQUIRE(draft_expand(d, &t, &node, 1, K, 0, top, p, &ent) == 0, "%s", err_get());
        cpu_backend.softmax_topk((const float *)cl->data + (size_t)i * V, 1, V, 1.0f, K, want, wp, 0, &went);
        float dp = 0;
        for (int r = 0; r < K; r++) {
            CHECK(top[r] == want[r], "depth %d rank %d: head gives id %d, transformers %d", i + 2, r, top[r],
                  want[r]);
            dp = fmaxf(dp, fabsf(p[r] - wp[r]));
        }
        CHECK(dp <= 1e-4f, "depth %d: top-%d probabilities differ by %g", i + 2, K, dp);
        printf("# demo EAGLE head, depth %d: top-1 %d p %.4f (ref %.4f), max |dp| %.1e\n", i + 2, top[0], p[0],
               wp[0], dp);
    }
    tree_free(&t);
    free(ids); free(pos);
    llama_state_free(s);
    draft_free(d);
    llama_free(m);
    st_close(g);
}

/* A copy of a draft checkpoint (links) with token counts beside it: count of
 * id i is (i * 37) % 11, so ties are many and the order is not the ids'. */
static void draft_with_counts(const char *src, char *dir, int V) {
    strcpy(dir, "/tmp/c2t_dvocabXXXXXX");
    REQUIRE(mkdtemp(dir), "mkdtemp");
    const char *files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char *from = realpath(src, NULL), *a = path_join(from, files[i]), *b = path_join(dir, files[i]);
        REQUIRE(symlink(a, b) == 0, "symlink %s", b);
        free(from); free(a); free(b);
    }
    int64_t *c = xmalloc(sizeof(int64_t) * V);
    for (int i = 0; i < V; i++) c[i] = (i * 37) % 11;
    StWrite w = {"token_counts", DT_I64, 1, {V}, c};
    char *p = path_join(dir, DRAFT_COUNTS_FILE);
    REQUIRE(st_write(p, &w, 1) == 0, "%s", err_get());
    free(p); free(c);
}

static void remove_draft_dir(const char *dir) {
    const char *files[] = {"config.json", "model.safetensors", DRAFT_COUNTS_FILE};
    for (int i = 0; i < 3; i++) {
        char *p = path_join(dir, files[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

/* --draft-vocab N: the draft's children are among the N most frequent ids
 * (count descending, ties to the lower id), with the full draft's
 * probabilities renormalised over those N; greedy decoding stays lossless. */
/* A draft LM's catch-up keeps the entries drafting wrote for the accepted
 * path (DraftOps.keeps_path) and forwards only the rest: its state after
 * is that of a draft that forwarded the whole path, the next root's
 * distribution and a step under it the same. */
static void test_lm_catch_up_keeps_drafted_path(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    Draft *kept = draft_load("lm", "tests/ckpt/llama2_f32", m, 256), *whole = draft_load("lm", "tests/ckpt/llama2_f32", m, 256);
    REQUIRE(kept && whole, "%s", err_get());
    const int V = m->cfg.vocab;
    int prompt[6] = {1, 21, 208, 255, 244, 151};
    REQUIRE(draft_catch_up(kept, prompt, NULL, 6, 37) == 0 && draft_catch_up(whole, prompt, NULL, 6, 37) == 0, "%s",
            err_get());
    /* a tree of two branches, three layers deep; the accepted path runs
     * down the second branch past its last expanded node */
    enum { K = 2 };
    Tree t;
    tree_init(&t);
    tree_reset(&t, 37);
    int ids[2 * K], root = 0, layer[2];
    float p[2 * K], ent[2];
    REQUIRE(draft_expand(kept, &t, &root, 1, K, 0, ids, p, ent) == 0, "%s", err_get());
    for (int j = 0; j < K; j++) layer[j] = tree_add(&t, 0, ids[j], p[j], 0, j);
    for (int depth = 2; depth <= 3; depth++) {
        REQUIRE(draft_expand(kept, &t, layer, 2, K, 0, ids, p, ent) == 0, "%s", err_get());
        for (int i = 0; i < 2; i++) layer[i] = tree_add(&t, layer[i], ids[i * K], p[i * K], 0, 0);
    }
    int path[8], n = tree_path(&t, layer[1], path), tokens[8];
    for (int i = 0; i < n; i++) tokens[i] = t.token[path[i]];
    draft_end_cycle(kept);
    REQUIRE(draft_catch_up(kept, tokens, NULL, n, 99) == 0 && draft_catch_up(whole, tokens, NULL, n, 99) == 0, "%s",
            err_get());
    CHECK(kept->kept_tokens == n - 2 && whole->kept_tokens == 0, "kept %lld of the %d expanded path tokens",
          kept->kept_tokens, n - 2);
    CHECK(kept->n_past == whole->n_past, "committed %d against %d", kept->n_past, whole->n_past);
    float *a = xmalloc(sizeof(float) * V), *b = xmalloc(sizeof(float) * V), worst = 0;
    be->to_host(a, kept->root_logits, V);
    be->to_host(b, whole->root_logits, V);
    for (int i = 0; i < V; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
    CHECK(worst <= 1e-5f, "the next root's logits differ by %g", worst);
    tree_reset(&t, 99);
    int next = tree_add(&t, 0, 5, 1, 0, 0), ia[K], ib[K];
    float pa[K], pb[K], ea, eb;
    REQUIRE(draft_expand(kept, &t, &next, 1, K, 0, ia, pa, &ea) == 0 && draft_expand(whole, &t, &next, 1, K, 0, ib, pb, &eb) == 0,
            "%s", err_get());
    for (int j = 0; j < K; j++)
        CHECK(ia[j] == ib[j] && fabsf(pa[j] - pb[j]) <= 1e-5f, "a step after: rank %d id %d p %g against %d %g", j, ia[j],
              pa[j], ib[j], pb[j]);
    printf("# catch-up of %d tokens kept %lld drafted entries; logits within %.1e of forwarding them\n", n - 1,
           kept->kept_tokens, worst);
    free(a); free(b);
    tree_free(&t);
    draft_free(kept);
    draft_free(whole);
    llama_free(m);
}

/* eagle2 at top-k 4, the depth and total given */
static void eagle2_params(PolicyParams *prm, const char *depth, const char *total) {
    policy_params_default(prm);
    snprintf(prm->name, sizeof prm->name, "eagle2");
    policy_params_set(prm, "topk", "4");
    policy_params_set(prm, "depth", depth);
    policy_params_set(prm, "total", total);
}

static void test_reduced_draft_vocabulary(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    const int V = m->cfg.vocab, N = V / 4;
    const char *srcs[2][2] = {{"eagle", "tests/ckpt/eagle_tiny"}, {"lm", "tests/ckpt/llama2_f32"}};
    for (int k = 0; k < 2; k++) {
        char dir[32];
        draft_with_counts(srcs[k][1], dir, V);
        Draft *full = draft_load(srcs[k][0], dir, m, 4096), *red = draft_load(srcs[k][0], dir, m, 4096);
        REQUIRE(full && red, "%s", err_get());
        REQUIRE(draft_set_vocab(red, N) == 0, "%s", err_get());
        CHECK(red->Vd == N && full->Vd == V, "Vd %d / %d", red->Vd, full->Vd);
        /* the expected set: counts 10, 9, ... down, lower ids first */
        uint8_t *in = xcalloc(V, 1);
        int taken = 0;
        for (int cnt = 10; cnt >= 0 && taken < N; cnt--)
            for (int i = 0; i < V && taken < N; i++)
                if ((i * 37) % 11 == cnt) { in[i] = 1; taken++; }
        int prompt[8] = {1, 21, 208, 255, 244, 151, 37, 9}, pos[8];
        for (int i = 0; i < 8; i++) pos[i] = i;
        LlamaState *s = llama_state_new(m, 16);
        REQUIRE(llama_forward(s, prompt, pos, 8, NULL, LOGITS_LAST) == 0, "%s", err_get());
        int next;
        be->argmax(s->logits, 1, V, &next);
        REQUIRE(draft_catch_up(full, prompt, s->hidden, 8, next) == 0 &&
                draft_catch_up(red, prompt, s->hidden, 8, next) == 0, "%s", err_get());
        Tree t;
        tree_init(&t);
        tree_reset(&t, next);
        enum { K = 8 };
        int root = 0, ids[K], *all = xmalloc(sizeof(int) * V);
        float p[K], *pall = xmalloc(sizeof(float) * V), ent, eall;
        REQUIRE(draft_expand(red, &t, &root, 1, K, 0, ids, p, &ent) == 0 &&
                draft_expand(full, &t, &root, 1, V, 0, all, pall, &eall) == 0, "%s", err_get());
        double mass = 0;
        float *pfull = xcalloc(V, sizeof(float));
        for (int i = 0; i < V; i++) pfull[all[i]] = pall[i];
        for (int i = 0; i < V; i++) if (in[i]) mass += pfull[i];
        float worst = 0;
        int outside = 0;
        for (int j = 0; j < K; j++) {
            outside += !in[ids[j]];
            worst = fmaxf(worst, fabsf(p[j] - (float)(pfull[ids[j]] / mass)));
        }
        CHECK(!outside, "%s: %d drafted ids outside the reduced vocabulary", srcs[k][0], outside);
        CHECK(worst < 1e-5f, "%s: probabilities differ from the renormalised full draft by %g", srcs[k][0], worst);
        /* the best in-set id of the full draft is the reduced draft's top-1 */
        int best = -1;
        for (int i = 0; i < V && best < 0; i++) if (in[all[i]]) best = all[i];
        CHECK(ids[0] == best, "%s: top-1 %d, the full draft's best kept id %d", srcs[k][0], ids[0], best);
        /* reduced, then back to the whole vocabulary (--draft-vocab auto
         * switches before a catch-up, which scores the root in the new
         * one): the full draft's children and probabilities again */
        Draft *back = draft_load(srcs[k][0], dir, m, 4096);
        REQUIRE(back && draft_set_vocab(back, N) == 0 && draft_set_vocab(back, V) == 0, "%s", err_get());
        CHECK(back->Vd == V && !back->d2t, "%s: restored Vd %d", srcs[k][0], back->Vd);
        REQUIRE(draft_catch_up(back, prompt, s->hidden, 8, next) == 0, "%s", err_get());
        int ids2[K], differ = 0;
        float p2[K], e2;
        REQUIRE(draft_expand(back, &t, &root, 1, K, 0, ids2, p2, &e2) == 0, "%s", err_get());
        for (int j = 0; j < K; j++) differ += ids2[j] != all[j] || p2[j] != pall[j];
        CHECK(!differ, "%s: the restored vocabulary's children differ from the full draft's in %d of %d", srcs[k][0],
              differ, K);
        draft_free(back);
        tree_free(&t);
        free(all); free(pall); free(pfull); free(in);
        llama_state_free(s);
        draft_free(full);
        /* lossless with the reduced vocabulary (a fresh draft: nothing committed) */
        draft_free(red);
        red = draft_load(srcs[k][0], dir, m, 4096);
        REQUIRE(red && draft_set_vocab(red, N) == 0, "%s", err_get());
        LlamaState *g = llama_state_new(m, 64);
        int ref[40], out[40];
        int nref = greedy_generate(g, prompt, 8, 32, ref);
        llama_state_free(g);
        PolicyParams prm;
        eagle2_params(&prm, "4", "12");
        DecodeStats st;
        int n = decode(m, red, &prm, prompt, 8, 32, out, &st);
        int same = n == nref;
        for (int i = 0; same && i < n; i++) same = out[i] == ref[i];
        CHECK(same, "%s with --draft-vocab %d: tokens differ from ar", srcs[k][0], N);
        draft_free(red);
        remove_draft_dir(dir);
    }
    /* no counts beside the draft: one line naming the file */
    Draft *d = draft_load("eagle", "tests/ckpt/eagle_tiny", m, 64);
    REQUIRE(d, "%s", err_get());
    CHECK(draft_set_vocab(d, 16) == -1 && strstr(err_get(), DRAFT_COUNTS_FILE), "missing counts: '%s'", err_get());
    CHECK(draft_set_vocab(d, V) == 0 && d->Vd == V, "--draft-vocab >= V keeps the full vocabulary");
    draft_free(d);
    llama_free(m);
}

/* --draft-vocab auto's choice on synthetic measurements: the accepted and
 * bonus tokens outside each candidate counted, the lines through the timed
 * steps, and the predicted tokens per second of each, by the formulas of
 * vocab_auto.h; then the watch after a choice of fewer ids. */
static void test_draft_vocab_choice_by_hand(void) {
    VocabAuto va = {.n_cand = 2, .cand = {64, 128}, .coverage = {0.5, 1}, .chosen = -1, .calibrated = 1, .V = 200};
    int rank[200];
    for (int i = 0; i < 200; i++) rank[i] = 199 - i;   /* id 199 the most frequent */
    va.rank = rank;
    const int path_a[2] = {189, 99}, path_b[3] = {120, 194, 190};   /* ranks 10, 100; 79, 5, 9 */
    vocab_auto_observe(&va, path_a, 2, 190, 0.1, 0.05, 8, 3);   /* bonus rank 9 */
    vocab_auto_observe(&va, path_b, 3, 30, 0.1, 0.05, 16, 7);   /* bonus rank 169: outside both */
    CHECK(va.cycles == 2 && va.accepted == 5 && va.rows == 16 && va.steps == 7, "cycles %lld, accepted %lld, rows %lld, steps %lld",
          va.cycles, va.accepted, va.rows, va.steps);
    CHECK(va.outside[0] == 2 && va.outside[1] == 0 && va.bonus_outside[0] == 1 && va.bonus_outside[1] == 1,
          "outside 64: %lld accepted, %lld bonus; 128: %lld, %lld", va.outside[0], va.bonus_outside[0], va.outside[1],
          va.bonus_outside[1]);
    /* the lines through the timed steps: exact where the times lie on one */
    VocabAuto line = {.n_cand = 3, .cand = {64, 128, 256}, .step1_s = {0.0011, 0.0012, 0.0014}, .step_s = {0.0030, 0.0040, 0.0060}};
    vocab_auto_fit(&line);
    CHECK(fabs(line.step1_fit_s[1] - 0.0012) < 1e-12 && fabs(line.step_fit_s[2] - 0.0060) < 1e-12,
          "fit through a line: %g %g", line.step1_fit_s[1], line.step_fit_s[2]);
    line.step1_s[1] = 0.0030;   /* one noisy time moves the line less than itself */
    line.step_s[0] = line.step_s[1] = line.step_s[2] = 0.004;
    vocab_auto_fit(&line);
    CHECK(line.step1_fit_s[1] < 0.0030 && line.step1_fit_s[1] > 0.0012 && fabs(line.step_fit_s[0] - 0.004) < 1e-12,
          "fit: %g (a noisy 0.003), %g (flat)", line.step1_fit_s[1], line.step_fit_s[0]);
    line.step_s[0] = 0.005;   /* falling with the columns: no column saves anything */
    vocab_auto_fit(&line);
    CHECK(line.step_fit_s[0] == line.step_fit_s[2], "a falling line: %g %g", line.step_fit_s[0], line.step_fit_s[2]);
    /* 10 cycles: 15 accepted tokens, 5 of them outside 64 ids; 0.1 s verifying, 0.05 s drafting
     * and 8 rows in one step a cycle; a step 0.008 s at 128 columns (8 rows; 0.001 s for one), 0
     * at 64 */
    memset(va.outside, 0, sizeof va.outside);
    memset(va.bonus_outside, 0, sizeof va.bonus_outside);
    va.cycles = 10;
    va.accepted = 15;
    va.outside[0] = 5;
    va.verify_s = 1;
    va.draft_s = 0.5;
    va.rows = 80;
    va.steps = 10;
    va.step1_fit_s[1] = 0.001;
    va.step_fit_s[1] = 0.008;
    int c = vocab_auto_choose(&va);
    /* at 64 ids: the 25 tokens take 15 cycles; each cycle saves its step's 0.008 s */
    const double want1 = 2.5 / 0.15, want0 = (25.0 / 15) / (0.15 - 0.001 - 7 * (0.008 - 0.001) / 7);
    CHECK(fabs(va.rate[1] - want1) < 1e-9 && fabs(va.rate[0] - want0) < 1e-9, "rates %g %g, want %g %g", va.rate[0],
          va.rate[1], want0, want1);
    CHECK(c == 1, "chose %d: the full vocabulary pays here", c);
    /* every accepted token inside: the same tokens, the cheaper vocabulary wins */
    va.outside[0] = 0;
    c = vocab_auto_choose(&va);
    CHECK(c == 0, "nothing outside: chose %d, want the cheapest", c);
    /* equal step times: the larger vocabulary (ties go to it) */
    va.step_fit_s[1] = va.step1_fit_s[1] = 0;
    c = vocab_auto_choose(&va);
    CHECK(c == 1, "equal costs: chose %d, want the larger vocabulary", c);
    /* a drafting-bound cycle where the small vocabulary loses little */
    va.outside[0] = 1;
    va.step_fit_s[1] = 0.1;
    va.step1_fit_s[1] = 0.1;   /* the head's read: one row costs as much as eight */
    va.draft_s = 10;           /* 1 s a cycle, 0.1 s of it saved at 64 */
    c = vocab_auto_choose(&va);
    CHECK(c == 0, "drafting-bound: chose %d (rates %g %g)", c, va.rate[0], va.rate[1]);
    /* the same cost spread over one-row steps: 8 steps a cycle save 8 x 0.1 s at 64 columns,
     * where pricing by rows alone would save 0.1 s */
    va.steps = 80;
    c = vocab_auto_choose(&va);
    CHECK(c == 0 && fabs(va.rate[0] - (25.0 / 11) / (1.1 - 0.8)) < 1e-9, "one-row steps: chose %d (rate %g, want %g)", c,
          va.rate[0], (25.0 / 11) / (1.1 - 0.8));
    /* the watch: 64 chosen, where exploration saw 2 of 12 cycle ends outside (q = 3/13 with
     * its pseudo-counts); a run of bonuses outside sends the draft back to exploring */
    va.chosen = 0;
    va.cut_share = 3.0 / 13;
    va.watch_cycles = va.watch_cuts = 0;
    int k = 0;
    const int inside_path[1] = {199};
    while (va.chosen == 0 && k < 200) {
        vocab_auto_observe(&va, inside_path, 1, k % 2 ? 30 : 199, 0.1, 0.05, 0, 0);   /* half the bonuses outside */
        k++;
    }
    CHECK(va.chosen == -1 && va.reexplored == 1 && va.cycles == 0 && k >= 8 && k <= 64,
          "half the bonuses outside where a quarter were: back to exploring after %d cycles (chosen %d)", k, va.chosen);
    va.chosen = 0;
    va.watch_cycles = va.watch_cuts = 0;
    for (k = 0; k < 1000; k++) vocab_auto_observe(&va, inside_path, 1, k % 5 ? 199 : 30, 0.1, 0.05, 0, 0);
    CHECK(va.chosen == 0 && va.reexplored == 1 && va.drafted[0] >= 1000, "a fifth outside where a quarter were: kept (%d, %lld)",
          va.chosen, va.reexplored);
}

/* A decoder of eagle2 with --total auto and --draft-vocab auto: eagle_tiny
 * (with token counts, in dir) over m, the cost watch and the vocabulary's;
 * ref: greedy decoding's VOCAB_RUN_NEW tokens after VOCAB_RUN_PROMPT. */
#define VOCAB_RUN_NEW 150
static const int VOCAB_RUN_PROMPT[8] = {1, 21, 208, 255, 244, 151, 37, 9};
typedef struct {
    char dir[32];
    Draft *d;
    Policy *p;
    Decoder *dec;
    int ref[VOCAB_RUN_NEW + 8], nref;
} VocabRun;

static void vocab_run_open(VocabRun *r, LlamaModel *m, VocabAuto *va) {
    draft_with_counts("tests/ckpt/eagle_tiny", r->dir, m->cfg.vocab);
    r->d = draft_load("eagle", r->dir, m, 4096);
    REQUIRE(r->d, "%s", err_get());
    REQUIRE(vocab_auto_init(va, r->d) == 0, "%s", err_get());
    LlamaState *g = llama_state_new(m, 8 + VOCAB_RUN_NEW + 8);
    r->nref = greedy_generate(g, VOCAB_RUN_PROMPT, 8, VOCAB_RUN_NEW, r->ref);
    llama_state_free(g);
    PolicyParams prm;
    eagle2_params(&prm, "3", "auto");
    r->p = policy_new(&prm);
    REQUIRE(r->p, "%s", err_get());
    SampleParams sp = {0};
    r->dec = decoder_new(m, r->d, r->p, 8 + VOCAB_RUN_NEW + policy_max_nodes(r->p) + 8, sp);
    REQUIRE(r->dec, "%s", err_get());
    if (r->p->wants_cost) decoder_watch_costs(r->dec);
    decoder_watch_vocab(r->dec, va);
}

/* whether out[0..n) are the reference's tokens */
static int vocab_run_same(const VocabRun *r, const int *out, int n) {
    int same = n == r->nref;
    for (int i = 0; same && i < n; i++) same = out[i] == r->ref[i];
    return same;
}

static void vocab_run_close(VocabRun *r, VocabAuto *va) {
    decoder_free(r->dec);
    policy_free(r->p);
    draft_free(r->d);
    vocab_auto_free(va);
    remove_draft_dir(r->dir);
}

/* --draft-vocab auto in a decoder: candidates from the counts, a timed
 * step at each, exploration from the whole vocabulary, then the choice; the
 * tokens stay those of greedy decoding.  With --total auto the draft switch
 * judges only the cycles after the choice (the exploration drafts from the
 * largest vocabulary: judged by those, drafting was turned off where it
 * paid).  On the CPU backend as it is and recording as a GPU does (the
 * chooser's choice follows measured times, so the two need not choose
 * alike: tokens equal ar's on each). */
static void test_draft_vocab_auto_is_lossless(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    const int V = m->cfg.vocab;
    VocabAuto va;
    for (int recording = 0; recording < 2; recording++) {
        VocabRun r;
        vocab_run_open(&r, m, &va);
        /* counts (i*37)%11: the ids with a multiple of 11 are never seen */
        const int seen = V - (V + 10) / 11;
        /* explored from the whole vocabulary: the counts need not cover the text */
        CHECK(va.n_cand == 4 && va.cand[0] == 64 && va.cand[1] == 128 && va.cand[2] == seen && va.cand[3] == V &&
                  r.d->Vd == V && !r.d->d2t,
              "candidates %d: %d %d %d %d (Vd %d), want 64 128 %d %d", va.n_cand, va.cand[0], va.cand[1], va.cand[2],
              va.cand[3], r.d->Vd, seen, V);
        CHECK(va.coverage[2] == 1 && va.coverage[3] == 1 && va.coverage[0] < va.coverage[1] && va.coverage[1] < 1,
              "coverage %g %g %g", va.coverage[0], va.coverage[1], va.coverage[2]);
        /* recording as a GPU does: the switches come between cycles, and
         * every unit is issued twice */
        strict_recording = recording;
        strict_recording_reset();
        DecodeStats st;
        int out[VOCAB_RUN_NEW + 8];
        const int n = decoder_run(r.dec, VOCAB_RUN_PROMPT, 8, VOCAB_RUN_NEW, out, &st);
        strict_recording = 0;
        CHECK(r.dec->dc->cycles == st.cycles && (!recording || (strict_units > 0 && strict_unit_mismatches == 0 &&
                                                                strict_unit_transfers == 0)),
              "recording %d: %ld of %lld cycles, %ld units, %ld issued differently, %ld transfers inside", recording,
              r.dec->dc->cycles, (long long)st.cycles, strict_units, strict_unit_mismatches,
              strict_unit_transfers);
        CHECK(vocab_run_same(&r, out, n), "--draft-vocab auto: tokens differ from ar (%d against %d)", n, r.nref);
        CHECK(st.cycles > VOCAB_AUTO_EXPLORE, "only %lld cycles", (long long)st.cycles);
        CHECK(va.calibrated && va.step_s[0] > 0 && va.step_s[2] > 0, "calibration: %g %g", va.step_s[0], va.step_s[2]);
        long long drafted = 0;
        for (int i = 0; i < va.n_cand; i++) drafted += va.drafted[i];
        CHECK(va.choices >= 1 && va.chosen >= 0 && r.d->Vd == va.cand[va.chosen] && drafted <= (long long)st.cycles - 1 &&
                  va.drafted[va.n_cand - 1] >= VOCAB_AUTO_EXPLORE,
              "%lld choices, chose %d, Vd %d; %lld of %lld cycles drafted (%lld from the whole vocabulary)", va.choices,
              va.chosen, r.d->Vd, drafted, (long long)st.cycles, va.drafted[va.n_cand - 1]);
        const CostWatch *cw = decoder_cost_watch(r.dec);
        const long long judged = (long long)(cw->model.sw.cycles[0] + cw->model.sw.cycles[1]);
        CHECK(cw->sw && judged > 0 && judged <= (long long)st.cycles - VOCAB_AUTO_EXPLORE,
              "the draft switch judged %lld of %lld cycles: some while the vocabulary was explored", judged,
              (long long)st.cycles);
        printf("# candidates 64/128/%d/%d: steps %.2g/%.2g/%.2g/%.2g s; chose %d (%lld choices, %lld returns) (tau %.2f)\n",
               seen, V, va.step_s[0], va.step_s[1], va.step_s[2], va.step_s[3], va.cand[va.chosen], va.choices, va.reexplored,
               decode_stats_tau(&st));
        int monotone = 1;   /* a larger vocabulary holds every id a smaller one does */
        for (int i = 1; i < va.n_cand; i++)
            monotone &= va.outside[i] <= va.outside[i - 1] && va.bonus_outside[i] <= va.bonus_outside[i - 1];
        CHECK(monotone && va.outside[va.n_cand - 1] == 0 && va.bonus_outside[va.n_cand - 1] == 0,
              "tokens outside not monotone in size, or outside the whole vocabulary");
        vocab_run_close(&r, &va);
    }
    /* a draft without counts: one line naming the file */
    Draft *e = draft_load("eagle", "tests/ckpt/eagle_tiny", m, 64);
    REQUIRE(e, "%s", err_get());
    CHECK(vocab_auto_init(&va, e) == -1 && strstr(err_get(), DRAFT_COUNTS_FILE), "no counts: '%s'", err_get());
    draft_free(e);
    llama_free(m);
}

/* The draft switch left off as the vocabulary goes back to exploring (a
 * probe without drafting begun on the cycle where the watch sent it back,
 * as a plain SmolLM2 run once did: 80 of its 2,033 cycles drafted, the
 * switch holding still and the exploration with it): while the vocabulary
 * explores, cycles draft whatever the switch says, the choice comes, and
 * the switch's probe goes on after it. */
static void test_switch_waits_for_the_vocabulary(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    VocabAuto va;
    VocabRun r;
    vocab_run_open(&r, m, &va);
    /* a first turn calibrates the cost curve (which sets the switch up
     * afresh) and the vocabulary's steps, and explores a few cycles */
    DecodeStats st;
    int out[VOCAB_RUN_NEW + 8];
    decoder_run(r.dec, VOCAB_RUN_PROMPT, 8, 4, out, &st);
    REQUIRE(va.calibrated && va.chosen < 0 && va.cycles < VOCAB_AUTO_EXPLORE, "calibrated %d, chosen %d, %lld cycles",
            va.calibrated, va.chosen, (long long)va.cycles);
    DraftSwitch *sw = &decoder_cost_watch(r.dec)->model.sw;
    sw->off = 1;   /* a probe without drafting, drafting the chosen mode */
    sw->left = sw->probe_cycles;
    const long long explored = va.drafted[va.n_cand - 1];
    const int n = decoder_run(r.dec, VOCAB_RUN_PROMPT, 8, VOCAB_RUN_NEW, out, &st);
    CHECK(vocab_run_same(&r, out, n), "tokens differ from ar (%d against %d)", n, r.nref);
    CHECK(va.choices >= 1 && va.drafted[va.n_cand - 1] >= VOCAB_AUTO_EXPLORE &&
              st.drafted_cycles >= VOCAB_AUTO_EXPLORE - explored && st.drafted_cycles <= st.cycles,
          "the vocabulary explored in %lld cycles of %lld (%lld before; %lld drafted), %lld choices",
          va.drafted[va.n_cand - 1], (long long)st.cycles, explored, (long long)st.drafted_cycles, va.choices);
    /* and judged the cycles after the choice alone */
    CHECK(sw->cycles[0] + sw->cycles[1] > 0 &&
              sw->cycles[0] + sw->cycles[1] <= st.cycles - (VOCAB_AUTO_EXPLORE - explored),
          "the switch judged %lld + %lld of %lld cycles", (long long)sw->cycles[0], (long long)sw->cycles[1],
          (long long)st.cycles);
    vocab_run_close(&r, &va);
    llama_free(m);
}

int main(void) {
    be = strict_backend();
    RUN(test_eagle2_tree_by_hand);
    RUN(test_chain_and_static_trees_by_hand);
    RUN(test_c2t_tree_by_hand);
    RUN(test_lossless_greedy_every_draft);
    RUN(test_demo_eagle_head_matches_transformers);
    RUN(test_self_draft_accepts_everything);
    RUN(test_cycles_without_draft_catch_up);
    RUN(test_sampling_is_lossless_eagle2);
    RUN(test_sampling_is_lossless_chain_with_processors);
    RUN(test_bad_policy_parameters);
    RUN(test_reduced_draft_vocabulary);
    RUN(test_lm_catch_up_keeps_drafted_path);
    RUN(test_draft_vocab_choice_by_hand);
    RUN(test_draft_vocab_auto_is_lossless);
    RUN(test_switch_waits_for_the_vocabulary);
    RUN(test_forward_inputs_in_backend_memory);
    return h_done();
}
