/* The SAGE and WETAP policies (seeds 002, 004): trees built from a scripted
 * draft equal the ones worked out by hand from the papers' formulas
 * (SAGE's confidence, widths, thresholds, node cap and acceptance history;
 * WETAP's entropy widths, score pruning, parent re-adding and trimming),
 * greedy decoding with them is lossless on every draft kind, and
 * --param parsing and parameter checks. */
#include "tests/harness.h"
#include "infer/speculative/decode.h"
#include "infer/session/observers.h"
#include "tests/script_draft.h"
#include "tests/example_policy.h"
#include "tests/build_tree.h"
#include "infer/model/generate.h"
#include "kernels/base/util.h"
#include "collect/collect.h"
#include "infer/speculative/classifier.h"
#include "train/dataset.h"
#include "train/export.h"
#include <cjson/cJSON.h>
#include <unistd.h>

static const Backend *be = &cpu_backend;

/* ---- scripted draft: children per parent token from a table ----
 * Tokens 500..599 are a certain chain (child token+1 with probability 1,
 * every other rank 0); token 600 is uniform over 601..610 (0.1 each).
 * Ranks the table does not fill get `fallback` probability (ids 900000+r). */
typedef struct { int parent_token, token; float p; } Edge;
typedef struct { const Edge *edges; size_t n; float fallback; int calls; } Script;

static int script(void *ctx, const Tree *t, int node, int k, int *ids, float *probs, float *ent) {
    Script *s = ctx;
    s->calls++;
    const int tok = t->token[node];
    int n = 0;
    if (tok >= 500 && tok < 600) {
        ids[n] = tok + 1; probs[n++] = 1.0f;
        for (; n < k; n++) { ids[n] = 900000 + n; probs[n] = 0.0f; }
    } else if (tok == 600) {
        for (; n < k && n < 10; n++) { ids[n] = 601 + n; probs[n] = 0.1f; }
    }
    for (size_t i = 0; i < s->n && n < k; i++)
        if (s->edges[i].parent_token == tok) { ids[n] = s->edges[i].token; probs[n] = s->edges[i].p; n++; }
    for (; n < k; n++) { ids[n] = 900000 + n; probs[n] = s->fallback; }
    if (ent) *ent = 0.25f;
    return 0;
}

static Policy *make_policy(const char *name, const char *const *params) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "%s", name);
    for (int i = 0; params && params[i]; i++)
        if (policy_params_set(&prm, params[i], NULL)) return NULL;
    return policy_new(&prm);
}

/* The policy's tree from the scripted draft (tests/build_tree.h). */
static int build_tree(Policy *p, Script *s, int root, Tree *t) {
    Draft *d = draft_scripted(script, s);
    int rc = build_tree_on_cpu(p, d, root, t);
    draft_free(d);
    return rc;
}

/* tokens and parent tokens, in tree order */
static int tree_is(const Tree *t, const int *tokens, const int *parent_tokens, int n) {
    if (t->n != n + 1) return 0;
    for (int i = 0; i < n; i++) {
        if (t->token[i + 1] != tokens[i]) return 0;
        if (t->parent[i + 1] < 0 || t->parent[i + 1] >= i + 1) return 0;
        if (t->token[t->parent[i + 1]] != parent_tokens[i]) return 0;
    }
    return 1;
}

static void print_tree(const Tree *t) {
    printf("#   tree (%d nodes):", t->n - 1);
    for (int i = 1; i < t->n; i++) printf(" %d<%d", t->token[i], t->token[t->parent[i]]);
    printf("\n");
}

/* ======================= SAGE ======================= */

/* Root R = 100; A..G = 1..7; a child of token x is x*10 + rank-ish. */
static const Edge sage_edges[] = {
    {100, 1, .5f}, {100, 2, .2f}, {100, 3, .1f}, {100, 4, .05f}, {100, 5, .05f}, {100, 6, .04f}, {100, 7, .03f},
    {1, 11, .6f}, {1, 12, .3f}, {1, 13, .06f}, {1, 14, .04f},
    {2, 21, .55f}, {2, 22, .2f}, {2, 23, .2f},
    {3, 31, .5f}, {3, 32, .45f},
    {4, 41, .9f}, {4, 42, .1f},
    {11, 111, .8f}, {11, 112, .15f},
    {12, 121, .5f}, {12, 122, .4f},
    {21, 211, .6f}, {21, 212, .3f},
    {111, 1111, .9f}, {111, 1112, .05f},
    {121, 1211, .99f}, {121, 1212, .01f},
    {211, 2111, .5f},
    {1111, 11111, .9f}, {1111, 11112, .1f},
    {11111, 111111, .9f}, {11111, 111112, .08f},
    {111111, 1111111, .9f},
};

/* First cycle, paper defaults (Dmin 3, Dmax 8, Wmin 2, Wmax 10, k 10,
 * N_max 64), α = 0.5 (Algorithm 1 line 3):
 *   D(α) = 3 + 0.5·5 = 5.5 → depth limit round(5.5) = 6 (floor would be 5)
 *   W(α) = 2 + 0.5·8 = 6;  θ_l = 0.1·l/5.5 = l/55
 *   W_l (l ≥ 2) = round(6·(1/l)·(0.5 + p_parent)), p_parent the local prob.
 * Level 1 (θ1 = .01818, W1 = 6): ranks 0..5 of R: A .5 B .2 C .1 D .05 E .05
 *   F .04 (all > θ1); G .03 is rank 6 ≥ W1 → out.
 * Level 2 (θ2 = .03636); every level-1 node has P > θ2, so all 6 expanded:
 *   A: W = round(3·1.0) = 3: A1 .30 ✓  A2 .15 ✓  A3 .03 ✗θ
 *   B: W = round(3·0.7 = 2.1) = 2: B1 .11 ✓  B2 .04 ✓  (B3 .04 rank 2 ✗W;
 *      ceil would take it)
 *   C: W = round(3·0.6 = 1.8) = 2: C1 .05 ✓  C2 .045 ✓ (floor would drop C2)
 *   D: W = round(1.65) = 2: D1 .045 ✓  D2 .005 ✗θ
 *   E, F: fallback children .001 → P ≤ .00005 ✗θ
 * Level 3 (θ3 = .05455): expanded only nodes with P > θ3: A1 A2 B1
 *   A1 (p .6): W = round(2·1.1) = 2: A11 .24 ✓  A12 .045 ✗θ
 *   A2 (p .3): W = round(2·0.8 = 1.6) = 2: A21 .075 ✓  A22 .06 ✓
 *      (with p_parent = joint P .15, W = round(1.3) = 1 and A22 would be out)
 *   B1 (p .55): W = round(2.1) = 2: B11 .066 ✓  B12 .033 ✗θ
 * Level 4 (θ4 = .07273): expanded A11 .24, A21 .075 (A22 .06, B11 .066 ≤ θ4)
 *   A11 (p .8): W = round(1.5·1.3 = 1.95) = 2: A111 .216 ✓  A112 .012 ✗θ
 *   A21 (p .5): W = round(1.5) = 2: A211 .07425 ✓  A212 .00075 ✗θ
 * Level 5 (θ5 = .09091): expanded A111: W = round(1.2·1.4 = 1.68) = 2:
 *   A1111 .1944 ✓  A1112 .0216 ✗θ
 * Level 6 (θ6 = .10909): expanded A1111: W = round(1·1.4) = 1:
 *   A11111 .17496 ✓  (A11112 rank 1 ✗W)
 * Depth limit 6: A11111 is not expanded (A111111 .157 would pass θ7 .127).
 * 21 nodes; draft calls: R + 6 + 3 + 2 + 1 + 1 = 14. */
static void test_sage_tree_by_hand(void) {
    Tree t;
    tree_init(&t);
    Script s = {sage_edges, sizeof sage_edges / sizeof *sage_edges, .001f, 0};
    Policy *p = make_policy("sage", NULL);
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "build: %s", err_get());
    int tok[] = {1, 2, 3, 4, 5, 6, 11, 12, 21, 22, 31, 32, 41, 111, 121, 122, 211, 1111, 1211, 11111, 111111};
    int par[] = {100, 100, 100, 100, 100, 100, 1, 1, 2, 2, 3, 3, 4, 11, 12, 12, 21, 111, 121, 1111, 11111};
    CHECK(tree_is(&t, tok, par, 21), "SAGE tree differs from the hand-built one");
    if (!tree_is(&t, tok, par, 21)) print_tree(&t);
    CHECK(s.calls == 14, "draft calls %d, expected 14", s.calls);
    CHECK(tree_max_depth(&t) == 6, "depth %d, expected round(5.5) = 6", tree_max_depth(&t));
    CHECK(fabsf(t.P[t.n - 1] - .5f * .6f * .8f * .9f * .9f * .9f) < 1e-6f, "joint probability of A11111");
    policy_free(p);

    /* N_max = 10 binds at level 2: level 1 takes 6, leaving 4 of the 7 level-2
     * candidates: those of highest P, A1 .30 A2 .15 B1 .11 C1 .05 (not B2 .04,
     * which the tree order A1 A2 B1 B2 would take); then the cap stops it. */
    const char *cap10[] = {"sage_nmax=10", NULL};
    p = make_policy("sage", cap10);
    REQUIRE(p, "%s", err_get());
    s.calls = 0;
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "build: %s", err_get());
    int ctok[] = {1, 2, 3, 4, 5, 6, 11, 12, 21, 31}, cpar[] = {100, 100, 100, 100, 100, 100, 1, 1, 2, 3};
    CHECK(tree_is(&t, ctok, cpar, 10), "N_max = 10 tree differs");
    if (!tree_is(&t, ctok, cpar, 10)) print_tree(&t);
    CHECK(s.calls == 7, "draft calls %d, expected 7 (R and level 1)", s.calls);
    policy_free(p);
    tree_free(&t);
}

/* α comes from the previous cycle's root distribution (lookahead):
 *   cycle 1, root R (α0 = .5): the tree above; R's top-10 is .5 .2 .1 .05 .05
 *     .04 .03 .001 .001 .001 (sum .973), renormalised entropy H = 1.46666,
 *     α = 1 − H/log 10 = 0.36336.
 *   cycle 2, root 500 (a certain chain): D = 3 + .36336·5 = 4.817 → 5: a
 *     chain of 5.  (α of 500 itself would give 8, α0 would give 6.)
 *     500's top-10 is (1, 0, …): H = 0, α = 1.
 *   cycle 3, root 500: D = Dmax = 8: a chain of 8.
 *   cycle 4, root 600 (uniform over 10): α = 1 → W = Wmin = 2, D = 8;
 *     level 1: 601, 602 (P .1 > θ1 = .0125); their children .001 ✗θ2.
 *     600's α = 1 − log 10/log 10 = 0.
 *   cycle 5, root 500: D = Dmin = 3: a chain of 3. */
static void test_sage_alpha_from_previous_cycle(void) {
    Tree t;
    tree_init(&t);
    Script s = {sage_edges, sizeof sage_edges / sizeof *sage_edges, .001f, 0};
    Policy *p = make_policy("sage", NULL);
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    CHECK(t.n == 22, "cycle 1: %d nodes", t.n - 1);
    REQUIRE(build_tree(p, &s, 500, &t) == 0, "%s", err_get());
    int c5[] = {501, 502, 503, 504, 505}, c5p[] = {500, 501, 502, 503, 504};
    CHECK(tree_is(&t, c5, c5p, 5), "cycle 2: expected a chain of 5 (alpha 0.363), got %d nodes depth %d", t.n - 1,
          tree_max_depth(&t));
    REQUIRE(build_tree(p, &s, 500, &t) == 0, "%s", err_get());
    CHECK(t.n == 9 && tree_max_depth(&t) == 8, "cycle 3: expected a chain of 8, got %d nodes depth %d", t.n - 1,
          tree_max_depth(&t));
    REQUIRE(build_tree(p, &s, 600, &t) == 0, "%s", err_get());
    int u[] = {601, 602}, up[] = {600, 600};
    CHECK(tree_is(&t, u, up, 2), "cycle 4: expected {601, 602} (W = Wmin)");
    if (!tree_is(&t, u, up, 2)) print_tree(&t);
    REQUIRE(build_tree(p, &s, 500, &t) == 0, "%s", err_get());
    CHECK(t.n == 4 && tree_max_depth(&t) == 3, "cycle 5: expected a chain of 3 (alpha 0), got %d nodes", t.n - 1);
    policy_free(p);
    tree_free(&t);
}

/* The acceptance history (window 10, thresholds 2 and 3, ±1 per cycle once
 * the window is full, floor Dmin 3, ceiling sage_dceil 12).  Root 500 every
 * cycle, so α = 1 from cycle 2 on and the tree is a chain of exactly the
 * current maximum depth Dmax'; cycle 1 uses α0 = .5: round(5.5) = 6.
 * Accepted counts fed back: cycles 1–10: 0, 11–20: 10, 21–38: 0.
 * Dmax' after feedback n (build c uses the value after feedback c−1):
 *   1–9  window not full                           8
 *   10   mean 0   < 2 → 7          11  mean 1 → 6
 *   12   mean 2.0 (not < 2) → 6    13  mean 3.0 (not > 3) → 6
 *   14   mean 4 → 7   15 → 8   16 → 9   17 → 10   18 → 11   19 → 12
 *   20   mean 10 → 12 (ceiling)    21–26 means 9 … 4, at the ceiling: 12
 *   27   mean 3.0 → 12             28  mean 2.0 → 12
 *   29   mean 1 → 11   30 → 10  31 → 9  32 → 8  33 → 7  34 → 6  35 → 5
 *   36 → 4   37 → 3   38 → 3 (floor). */
static void test_sage_history_adjusts_max_depth(void) {
    static const int expect[40] = {0, /* cycle 1.. */ 6, 8, 8, 8, 8, 8, 8, 8, 8, 8, /* 11 */ 7, 6, 6, 6, 7, 8, 9, 10,
                                   11, 12, /* 21 */ 12, 12, 12, 12, 12, 12, 12, 12, 12, 11, /* 31 */ 10, 9, 8, 7, 6,
                                   5, 4, 3, 3};
    Tree t;
    tree_init(&t);
    Script s = {NULL, 0, 0.0f, 0};
    Policy *p = make_policy("sage", NULL);
    REQUIRE(p, "%s", err_get());
    for (int c = 1; c <= 39; c++) {
        REQUIRE(build_tree(p, &s, 500, &t) == 0, "%s", err_get());
        int d = tree_max_depth(&t);
        CHECK(d == expect[c] && t.n == d + 1, "cycle %d: chain depth %d (%d nodes), expected %d", c, d, t.n - 1,
              expect[c]);
        int accepted = c <= 10 ? 0 : c <= 20 ? 10 : 0;
        p->feedback(p, accepted);
    }
    policy_free(p);

    /* a small window: thresholds act after 2 cycles */
    const char *w2[] = {"sage_window=2", "sage_dmax=5", "sage_dceil=6", NULL};
    p = make_policy("sage", w2);
    REQUIRE(p, "%s", err_get());
    /* Dmin 3, Dmax 5, ceiling 6, every cycle accepts 9:
     * cycle 1: α0 = .5: round(3 + .5·2) = 4; window not full after #1
     * cycle 2: α = 1: D = Dmax' = 5; after #2 mean 9 > 3 → 6
     * cycle 3: 6; after #3 mean 9, at the ceiling → 6;  cycle 4: 6 */
    int got[4];
    for (int c = 0; c < 4; c++) {
        REQUIRE(build_tree(p, &s, 500, &t) == 0, "%s", err_get());
        got[c] = tree_max_depth(&t);
        p->feedback(p, 9);
    }
    CHECK(got[0] == 4 && got[1] == 5 && got[2] == 6 && got[3] == 6, "window 2: depths %d %d %d %d, expected 4 5 6 6",
          got[0], got[1], got[2], got[3]);
    policy_free(p);
    tree_free(&t);
}

/* ======================= WETAP ======================= */

/* Root 100; a b c = 1 2 3; children x*10 + rank. */
static const Edge wetap_edges[] = {
    {100, 1, .46f}, {100, 2, .44f}, {100, 3, .10f}, {100, 4, .0001f},   /* d: rank 3, outside Wmin = 3 */
    {1, 11, .5f}, {1, 12, .4f}, {1, 13, .05f},
    {2, 21, .1f}, {2, 22, .05f},
    {3, 31, .9f}, {3, 32, .05f},
    {11, 111, .8f}, {11, 112, .1f},
    {12, 121, .3f}, {12, 122, .2f},
    {21, 211, .5f},
    {31, 311, .95f}, {31, 312, .03f},
};

static Policy *wetap_alpha(int budget, const char *gamma, const char *alpha) {
    char b[64], g[64], a[64];
    snprintf(b, sizeof b, "wetap_budget=%d", budget);
    snprintf(g, sizeof g, "wetap_gamma=%s", gamma);
    snprintf(a, sizeof a, "wetap_alpha=%s", alpha);
    const char *prm[] = {"wetap_depth=3", "wetap_wmin=3", "wetap_wmax=5", a, b, g, NULL};
    return make_policy("wetap", prm);
}
static Policy *wetap(int budget, const char *gamma) { return wetap_alpha(budget, gamma, "0.5"); }

/* L = 3, W ∈ [3, 5], γ = 1, α = .5; draft probabilities 0 beyond the table.
 * Layer 1 = R's top-Wmin = 3: a .46, b .44, c .10.
 *   H_1 over (.46, .44, .10) = 0.94869, / log 3 = 0.86354,
 *   W_2 = 3 + 2·0.86354 = 4.727 → 5 (floor would be 4).
 * Layer 2: a, b, c expanded (5 children asked each); candidates by P:
 *   a1 .23  a2 .184  c1 .09  b1 .044  a3 .023 | b2 .022  c2 .005 → top 5:
 *   a1 a2 a3 b1 c1 (tree order).
 *   H_2 over (.23 .184 .023 .044 .09)/.571 = 1.34930, / log 5 = 0.83837,
 *   W_3 = 3 + 2·0.83837 = 4.677 → 5.
 * Layer 3: a1 a2 a3 b1 c1 expanded; candidates: a11 .184  c11 .0855
 *   a21 .0552  a22 .0368  a12 .023 | b11 .022  c12 .0027 → a11 a12 a21 a22 c11.
 * Pool: 13 nodes, 9 draft calls (R + 3 + 5).
 * With γ = 2: W_2 = 3 + 2·0.86354² = 4.491 → 4 (a3 out), then layer 2 =
 *   (.23 .184 .044 .09): H = 1.23001 / log 4 = 0.88726, W_3 = 3 + 2·0.88726²
 *   = 4.574 → 5: the same layer 3.  Pool: 12 nodes. */
static void test_wetap_pool_by_hand(void) {
    Tree t;
    tree_init(&t);
    Script s = {wetap_edges, sizeof wetap_edges / sizeof *wetap_edges, 0.0f, 0};
    Policy *p = wetap(100, "1");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok[] = {1, 2, 3, 11, 12, 13, 21, 31, 111, 112, 121, 122, 311};
    int par[] = {100, 100, 100, 1, 1, 1, 2, 3, 11, 11, 12, 12, 31};
    CHECK(tree_is(&t, tok, par, 13), "WETAP pool (gamma 1) differs from the hand-built one");
    if (!tree_is(&t, tok, par, 13)) print_tree(&t);
    CHECK(s.calls == 9, "draft calls %d, expected 9", s.calls);
    policy_free(p);

    p = wetap(100, "2");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok2[] = {1, 2, 3, 11, 12, 21, 31, 111, 112, 121, 122, 311};
    int par2[] = {100, 100, 100, 1, 1, 2, 3, 11, 11, 12, 12, 31};
    CHECK(tree_is(&t, tok2, par2, 12), "WETAP pool (gamma 2) differs from the hand-built one");
    if (!tree_is(&t, tok2, par2, 12)) print_tree(&t);
    policy_free(p);
    tree_free(&t);
}

/* Pruning the γ = 1 pool above.  Pmin = .023, Pmax = .46;
 * Score = .5·(P − .023)/(.437 + 1e-6) + .5·d/3:
 *   a11 .68421  a .66667  b .64378  c11 .57151  a1 .57017  a21 .53684
 *   a2 .51754  a22 .51579  a12 .5  c1 .40999  b1 .35736  a3 .33333  c .25477
 * Budget 6: best 6 = a11 a b c11 a1 a21; omitted parents re-added: a2 (of
 *   a21), c1 and c (of c11) → 9 nodes.  Stage 1 (leaves above the deepest
 *   layer, shallow first): b (depth 1, no kept child) → 8.  Stage 2 (leaf
 *   of lowest P): leaves a11 .184 a21 .0552 c11 .0855 → drop a21; then a2
 *   is a leaf: a2 .184 a11 .184 c11 .0855 → drop c11 → 6:
 *   {a, c, a1, a2, c1, a11}.
 *   (Without stage 1, stage 2 would drop a21, c11, a11 and keep b.)
 * Budget 5: best 5 = a11 a b c11 a1; re-add c1, c → 7; stage 1 drops b → 6;
 *   stage 2 drops c11 (.0855 < a11 .184) → {a, c, a1, c1, a11}.
 * Budget 4: best 4 = a11 a b c11; re-add a1, c1, c → 7; stage 1 drops b → 6;
 *   stage 2 drops c11 (.0855), which leaves c1 a leaf: c1 .09 < a11 .184 →
 *   drop c1 → {a, c, a1, a11}.  (Were the deepest layer's leaves stage-1
 *   leaves too, stage 1 would drop b, c11, a11 and keep c1.)
 * α = .8, budget 6: Score = .8·(P − .023)/.437 + .2·d/3:
 *   a .86667  b .83005  a1 .51228  a11 .49474  a2 .42807  c11 .31442
 *   a21 .25895  c1 .25599  a22 .22526  c .20763  a12 .2  b1 .17178  a3 .13333
 *   best 6 = a b a1 a11 a2 c11; re-add c1, c → 8; stage 1: the leaves above
 *   depth 3 are b (depth 1) and a2 (depth 2, a21/a22 not kept): drop b, then
 *   a2 → {a, c, a1, c1, a11, c11}.  (With α and 1 − α swapped the best 6
 *   would be the six depth-3 and depth-2 nodes of highest P instead.)
 * α = .9, budget 7: Score = .9·(P − .023)/.437 + .1·d/3:
 *   a .93333  b .89214  a1 .49298  a11 .43158  a2 .39824  c11 .22872
 *   c1 .20465  c .19191  a21 .16632 …; best 7 = a b a1 a11 a2 c11 c1;
 *   re-add c → 8; stage 1 leaves above depth 3: b (depth 1), a2 (depth 2);
 *   shallow first drops b → {a, c, a1, a2, c1, a11, c11} (deep first would
 *   have dropped a2 and kept b). */
static void test_wetap_pruning_by_hand(void) {
    Tree t;
    tree_init(&t);
    Script s = {wetap_edges, sizeof wetap_edges / sizeof *wetap_edges, 0.0f, 0};
    Policy *p = wetap(6, "1");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok6[] = {1, 3, 11, 12, 31, 111}, par6[] = {100, 100, 1, 1, 3, 11};
    CHECK(tree_is(&t, tok6, par6, 6), "budget 6: pruned tree differs from the hand-built one");
    if (!tree_is(&t, tok6, par6, 6)) print_tree(&t);
    for (int i = 1; i < t.n; i++) CHECK(t.parent[i] >= 0 && t.parent[i] < i, "pruned tree not connected at %d", i);
    CHECK(fabsf(t.P[6] - .46f * .5f * .8f) < 1e-6f && t.depth[6] == 3, "a11 kept its joint probability and depth");
    policy_free(p);

    p = wetap(5, "1");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok5[] = {1, 3, 11, 31, 111}, par5[] = {100, 100, 1, 3, 11};
    CHECK(tree_is(&t, tok5, par5, 5), "budget 5: pruned tree differs from the hand-built one");
    if (!tree_is(&t, tok5, par5, 5)) print_tree(&t);
    policy_free(p);

    p = wetap(4, "1");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok4[] = {1, 3, 11, 111}, par4[] = {100, 100, 1, 11};
    CHECK(tree_is(&t, tok4, par4, 4), "budget 4: pruned tree differs from the hand-built one");
    if (!tree_is(&t, tok4, par4, 4)) print_tree(&t);
    policy_free(p);

    p = wetap_alpha(6, "1", "0.8");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok8[] = {1, 3, 11, 31, 111, 311}, par8[] = {100, 100, 1, 3, 11, 31};
    CHECK(tree_is(&t, tok8, par8, 6), "alpha 0.8, budget 6: pruned tree differs from the hand-built one");
    if (!tree_is(&t, tok8, par8, 6)) print_tree(&t);
    policy_free(p);

    p = wetap_alpha(7, "1", "0.9");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    int tok9[] = {1, 3, 11, 12, 31, 111, 311}, par9[] = {100, 100, 1, 1, 3, 11, 31};
    CHECK(tree_is(&t, tok9, par9, 7), "alpha 0.9, budget 7: pruned tree differs from the hand-built one");
    if (!tree_is(&t, tok9, par9, 7)) print_tree(&t);
    policy_free(p);

    /* budget 13 = the pool: nothing pruned */
    p = wetap(13, "1");
    REQUIRE(p, "%s", err_get());
    REQUIRE(build_tree(p, &s, 100, &t) == 0, "%s", err_get());
    CHECK(t.n == 14, "a pool within the budget was pruned to %d", t.n - 1);
    policy_free(p);
    tree_free(&t);
}

/* ======================= lossless greedy decoding ======================= */

typedef struct { const Policy *p; int bad, cycles, sizes[256]; long gamma; } HookCtx;

static int check_tree(void *vctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)n_path;
    HookCtx *h = vctx;
    if (t->n > policy_max_nodes(h->p)) h->bad++;
    for (int i = 1; i < t->n; i++) if (t->parent[i] < 0 || t->parent[i] >= i) h->bad++;
    if (cycle < 256) h->sizes[cycle] = t->n;
    h->gamma += t->n - 1;
    h->cycles = cycle + 1;
    return 0;
}

static int decode_with(const LlamaModel *m, Draft *d, Policy *p, const int *prompt, int np, int max_new, int *out,
                       HookCtx *h) {
    SampleParams sp = {0};
    Decoder *dec = decoder_new(m, d, p, np + max_new + policy_max_nodes(p) + 8, sp);
    if (!dec) return -1;
    if (p->wants_cost) decoder_watch_costs(dec);
    decoder_set_hook(dec, check_tree, h, 1);
    h->p = p;
    DecodeStats st;
    int n = decoder_run(dec, prompt, np, max_new, out, &st);
    if (n >= 0 && st.cycle_tokens != st.new_tokens - 1) n = -2;
    decoder_free(dec);
    return n;
}

static void lossless_on(const char *target_dir, const char *draft_kind, const char *draft_dir) {
    LlamaModel *m = llama_load(target_dir, be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load(draft_kind, draft_dir, m, 4096);
    REQUIRE(d, "%s", err_get());
    const int max_new = 40;
    int prompts[3][8] = {{1, 21, 208, 255, 244, 151, 37, 9}, {1, 5, 6, 7, 8, 9, 10, 11}, {1, 99, 98, 97, 96, 95, 94, 93}};
    /* the tiny test models are nearly flat, so θ_l = 0.1·l/D(α) lets few nodes
     * in at the paper's 0.1; lower coefficients give full trees */
    static const char *sage_small[] = {"sage_dmin=2", "sage_dmax=4", "sage_wmin=1", "sage_wmax=3", "sage_k=4",
                                       "sage_nmax=8", "sage_window=2", "sage_dceil=6", "sage_theta=0.01", NULL};
    static const char *sage_wide[] = {"sage_theta=0.0001", NULL};
    static const char *wetap_small[] = {"wetap_depth=4", "wetap_wmin=2", "wetap_wmax=6", "wetap_budget=6",
                                        "wetap_gamma=0.5", "wetap_alpha=0.3", NULL};
    static const char *wetap_whole[] = {"wetap_depth=3", "wetap_wmin=2", "wetap_wmax=4", "wetap_budget=1000", NULL};
    static const char *eagle2_auto[] = {"topk=4", "depth=3", "total=auto", NULL};
    static const char *eagle2_min_p[] = {"topk=4", "depth=3", "total=all", "min_p=0.002", NULL};
    static const char *chain_auto[] = {"draft_len=auto", NULL};
    static const char *sage_auto[] = {"sage_theta=0.01", "sage_nmax=auto", NULL};
    struct { const char *policy; const char *const *params; const char *label; } cases[] = {
        {"sage", NULL, "defaults"}, {"sage", sage_small, "small"}, {"sage", sage_wide, "theta 1e-4"},
        {"wetap", NULL, "defaults"}, {"wetap", wetap_small, "small budget"}, {"wetap", wetap_whole, "unpruned"},
        {"eagle2", eagle2_auto, "total auto"}, {"eagle2", eagle2_min_p, "min_p 0.002"},
        {"chain", chain_auto, "draft_len auto"}, {"sage", sage_auto, "sage_nmax auto"},
    };
    /* every case on every draft kind over one prompt's 40 tokens (a dozen
     * cycles or more); make test-long adds two more prompts */
    for (int q = 0; q < TEST_SIZE(1, 3); q++) {
        LlamaState *s = llama_state_new(m, 64);
        int ref[64];
        int nref = greedy_generate(s, prompts[q], 8, max_new, ref);
        llama_state_free(s);
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            Policy *p = make_policy(cases[c].policy, cases[c].params);
            REQUIRE(p, "%s: %s", cases[c].policy, err_get());
            HookCtx h = {0};
            int out[64];
            int n = decode_with(m, d, p, prompts[q], 8, max_new, out, &h);
            REQUIRE(n >= 0, "%s %s: %s", cases[c].policy, cases[c].label, n == -2 ? "token accounting" : err_get());
            int same = n == nref;
            for (int i = 0; same && i < n; i++) same = out[i] == ref[i];
            CHECK(same, "%s draft %s policy %s (%s) prompt %d: tokens differ from ar", target_dir, draft_dir,
                  cases[c].policy, cases[c].label, q);
            CHECK(!h.bad, "%s (%s): a verified tree exceeded policy_max_nodes or was not parent-first",
                  cases[c].policy, cases[c].label);
            /* not vacuous: these settings draft trees (SAGE's defaults may not,
             * on a flat tiny model) */
            /* (an auto size may rightly keep no node on a flat model) */
            if (cases[c].params && !strstr(cases[c].label, "auto")) CHECK(h.gamma > h.cycles, "%s (%s): only %ld nodes in %d cycles", cases[c].policy,
                                       cases[c].label, h.gamma, h.cycles);
            policy_free(p);
        }
    }
    draft_free(d);
    llama_free(m);
}

static void test_lossless_greedy_every_draft(void) {
    for (int i = 0; i < N_LOSSLESS_DRAFTS; i++) lossless_on(LOSSLESS_DRAFTS[i][0], LOSSLESS_DRAFTS[i][1], LOSSLESS_DRAFTS[i][2]);
}

/* SAGE's α, history and maximum depth start afresh with every prompt: a
 * policy that already decoded another prompt builds the same trees as a new
 * one.  A window of 2 makes the history act within the first prompt. */
static void test_sage_state_resets_per_prompt(void) {
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    static const char *const kinds[2][2] = {{"lm", "tests/ckpt/llama3_f32"}, {"eagle", "tests/ckpt/eagle_tiny"}};
    for (int k = 0; k < 2; k++) {
        Draft *d = draft_load(kinds[k][0], kinds[k][1], m, 4096);
        REQUIRE(d, "%s", err_get());
        const char *prm[] = {"sage_window=2", NULL};
        int p1[8] = {1, 21, 208, 255, 244, 151, 37, 9}, p2[8] = {1, 99, 98, 97, 96, 95, 94, 93}, out[64];
        Policy *used = make_policy("sage", prm), *fresh = make_policy("sage", prm);
        REQUIRE(used && fresh, "%s", err_get());
        HookCtx h1 = {0}, h2 = {0}, h3 = {0};
        REQUIRE(decode_with(m, d, used, p1, 8, 40, out, &h1) >= 0, "%s", err_get());
        REQUIRE(decode_with(m, d, used, p2, 8, 40, out, &h2) >= 0, "%s", err_get());
        REQUIRE(decode_with(m, d, fresh, p2, 8, 40, out, &h3) >= 0, "%s", err_get());
        int same = h2.cycles == h3.cycles;
        for (int c = 0; same && c < h2.cycles && c < 256; c++) same = h2.sizes[c] == h3.sizes[c];
        CHECK(same, "%s draft: the second prompt's trees depend on the first prompt (%d vs %d cycles, first tree %d vs %d)",
              kinds[k][0], h2.cycles, h3.cycles, h2.sizes[0], h3.sizes[0]);
        policy_free(used);
        policy_free(fresh);
        draft_free(d);
    }
    llama_free(m);
}

/* ======================= parameters ======================= */

/* A policy made with the given --param pairs (NULL-terminated), or NULL
 * with policy_new's error. */
static Policy *policy_with(const char *name, const char *const *pairs) {
    PolicyParams p;
    policy_params_default(&p);
    snprintf(p.name, sizeof p.name, "%s", name);
    for (int i = 0; pairs && pairs[i]; i++)
        if (policy_params_set(&p, pairs[i], NULL)) return NULL;
    return policy_new(&p);
}

static double param_of(const Policy *p, const char *want) {
    double v;
    return policy_param_num(p, want, &v) ? NAN : v;
}

/* Each policy owns its parameters: defaults from its paper, --param values
 * checked against its own table, and an error naming the key otherwise. */
static void test_params_set_and_defaults(void) {
    Policy *sage = policy_with("sage", NULL), *wetap = policy_with("wetap", NULL);
    REQUIRE(sage && wetap, "default sage / wetap: %s", err_get());
    CHECK(param_of(sage, "sage_dmax") == 8 && param_of(sage, "sage_dmin") == 3 && param_of(sage, "sage_wmax") == 10 &&
          param_of(sage, "sage_wmin") == 2 && param_of(sage, "sage_k") == 10 && param_of(sage, "sage_nmax") == 64 &&
          param_of(sage, "sage_window") == 10 && param_of(sage, "sage_lower") == 2 && param_of(sage, "sage_upper") == 3 &&
          param_of(sage, "sage_alpha0") == 0.5 && fabs(param_of(sage, "sage_theta") - 0.1) < 1e-7,
          "SAGE defaults are not the paper's");
    CHECK(param_of(wetap, "wetap_depth") == 8 && param_of(wetap, "wetap_wmin") == 16 &&
          param_of(wetap, "wetap_wmax") == 128 && param_of(wetap, "wetap_budget") == 64 &&
          fabs(param_of(wetap, "wetap_gamma") - 1.2) < 1e-6 && fabs(param_of(wetap, "wetap_alpha") - 0.6) < 1e-6,
          "WETAP defaults");
    /* WETAP's: its unpruned pool, 1 + Wmin + (L − 1)·Wmax, which the device program holds */
    CHECK(policy_max_nodes(sage) == 65 && policy_max_nodes(wetap) == 1 + 16 + 7 * 128, "node bounds %d %d",
          policy_max_nodes(sage), policy_max_nodes(wetap));
    int n = 0;
    const char *key;
    double v;
    while (policy_param_get(sage, n, &key, &v, NULL) == 0) {   /* every listed key can be set back */
        char pair[64];
        snprintf(pair, sizeof pair, "%s=%g", key, v);
        const char *one[] = {pair, NULL};
        Policy *q = policy_with("sage", one);
        CHECK(q != NULL, "listed key %s cannot be set back: %s", key, err_get());
        policy_free(q);
        n++;
    }
    CHECK(n == 12, "sage lists %d keys", n);
    policy_free(sage);
    policy_free(wetap);

    /* the shared policies own theirs the same way, with their own defaults */
    Policy *e2 = policy_with("eagle2", NULL), *c2t = NULL, *chain = policy_with("chain", NULL);
    const char *c2t_set[] = {"classifier=tests/golden/c2t_hand.json", NULL};
    c2t = policy_with("c2t", c2t_set);
    REQUIRE(e2 && c2t && chain, "default eagle2 / c2t / chain: %s", err_get());
    CHECK(param_of(e2, "topk") == 10 && param_of(e2, "depth") == 6 && param_of(e2, "total") == 60 &&
          param_of(c2t, "topk") == 10 && param_of(c2t, "depth") == 8 && fabs(param_of(c2t, "beta") - 0.5) < 1e-7 &&
          param_of(chain, "draft_len") == 5 && isnan(param_of(chain, "topk")) && isnan(param_of(e2, "beta")),
          "eagle2 / c2t / chain defaults");
    const char *text = NULL;
    for (int i = 0; policy_param_get(chain, i, &key, &v, &text) == 0; i++)
        if (!strcmp(key, "early_stop")) break;
    CHECK(text && !strcmp(text, "none"), "chain early_stop default '%s'", text ? text : "(none)");
    CHECK(policy_has_setting("c2t", "--beta") && policy_has_setting("chain", "--draft-len") &&
          !policy_has_setting("eagle2", "beta") && !policy_has_setting("nonesuch", "topk"), "policy_has_setting");
    policy_free(e2);
    policy_free(c2t);
    policy_free(chain);

    const char *set[] = {"sage_dmin=4", "sage_upper=2.5", NULL};
    Policy *q = policy_with("sage", set);
    REQUIRE(q, "sage_dmin=4: %s", err_get());
    CHECK(param_of(q, "sage_dmin") == 4 && param_of(q, "sage_upper") == 2.5, "values not applied");
    const char *nmax[] = {"sage_nmax=10", NULL};
    policy_free(q);
    q = policy_with("sage", nmax);
    CHECK(q && policy_max_nodes(q) == 11, "sage_nmax=10 does not bound the tree");
    policy_free(q);

    struct { const char *policy, *pair, *must_name; } bad[] = {
        {"sage", "sage_fanout=3", "sage_fanout"}, {"sage", "sage_dmin=x", "'x'"}, {"sage", "sage_dmin=3.5", "sage_dmin"},
        {"sage", "sage_nmax=", "sage_nmax"},      {"wetap", "wetap_alpha=1.5", "wetap_alpha"},
        {"wetap", "wetap_gamma=0", "wetap_gamma"}, {"wetap", "wetap_budget=0", "wetap_budget"},
        {"wetap", "sage_dmax=8", "sage_dmax"},    {"eagle2", "sage_dmax=8", "(topk depth total min_p program)"},
        {"ar", "topk=4", "has none"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *one[] = {bad[i].pair, NULL};
        q = policy_with(bad[i].policy, one);
        CHECK(!q && strstr(err_get(), bad[i].must_name) && !strchr(err_get(), '\n'), "%s --param %s: %s",
              bad[i].policy, bad[i].pair, q ? "accepted" : err_get());
        policy_free(q);
    }
    PolicyParams p;
    policy_params_default(&p);
    CHECK(policy_params_set(&p, "wetap_budget", NULL) == -1 && strstr(err_get(), "KEY=VALUE"), "missing '='");
    CHECK(policy_params_set(&p, "wetap_budget", "5") == 0 && strstr(p.settings, "wetap_budget=5"), "KEY, VALUE form");
}

/* The prefix an "auto" size keeps (cost.h) on synthetic costs: free
 * verification keeps every node worth anything; a curve that jumps after two
 * tokens keeps the root's best child only; worthless nodes are never kept;
 * the curve is interpolated, extended past its last point and scaled by the
 * measured ratio, which follows the cycles. */
/* The switch between drafting and not, on a synthetic clock: where plain
 * cycles give more tokens per second it stops drafting after its first
 * probe and drafts in under 5% of a long run; where drafting pays it
 * drafts in over 95% and never changes; when the costs change it follows
 * within its longest period and a confirming probe; one probe alone does
 * not stop drafting; a probe much slower than the chosen mode is
 * put off to the longest period at once, a near-tie's is not; a cycle of
 * the other mode than the stretch's (a batch's round built before a
 * change) moves nothing. */
static double switch_fraction_off(DraftSwitch *s, int cycles, double on_tokens, double on_s, double off_s) {
    int64_t off0 = s->cycles[1], all0 = s->cycles[0] + s->cycles[1];
    for (int i = 0; i < cycles; i++) {
        const int off = s->off;
        draft_switch_observe(s, off, off ? 1 : on_tokens, off ? off_s : on_s);
    }
    return (double)(s->cycles[1] - off0) / (double)(s->cycles[0] + s->cycles[1] - all0);
}

static void test_draft_switch_synthetic(void) {
    DraftSwitch s;
    draft_switch_init(&s, 1);
    CHECK(!s.off, "starts drafting");
    double f = switch_fraction_off(&s, SWITCH_REF + SWITCH_PROBE, 2, 0.010, 0.004);   /* 200 against 250 tokens/s */
    CHECK(!s.off && !s.chosen_off && s.confirming, "one probe turned drafting off (off %d)", s.off);
    f = switch_fraction_off(&s, SWITCH_REF + SWITCH_PROBE, 2, 0.010, 0.004);
    CHECK(s.off && s.chosen_off && s.changes == 1, "drafting at 200 tokens/s kept against 250 without: off %d", s.off);
    f = switch_fraction_off(&s, 4000, 2, 0.010, 0.004);
    CHECK(f > 0.95 && s.changes == 1, "not drafting in %.3f of the cycles, %lld changes", f, (long long)s.changes);

    draft_switch_init(&s, 1);
    f = switch_fraction_off(&s, 4000, 3, 0.010, 0.004);   /* 300 against 250 */
    CHECK(f < 0.05 && s.changes == 0 && !s.chosen_off, "paying drafts: off in %.3f, %lld changes", f,
          (long long)s.changes);
    /* the rates over every cycle seen of each mode, what the report gives beside the last windows' */
    CHECK(s.seen_seconds[1] > 0 && fabs(s.seen_tokens[0] / s.seen_seconds[0] - 300) < 1e-6 &&
              fabs(s.seen_tokens[1] / s.seen_seconds[1] - 250) < 1e-6,
          "tokens per second over all cycles: %g drafting, %g not", s.seen_tokens[0] / s.seen_seconds[0],
          s.seen_tokens[1] / s.seen_seconds[1]);
    /* the load changes: drafting now costs twice as much */
    f = switch_fraction_off(&s, SWITCH_PERIOD_MAX + SWITCH_REF + 3 * SWITCH_PROBE, 3, 0.020, 0.004);
    CHECK(s.chosen_off && s.changes == 1, "the change of costs not followed within %d cycles",
          SWITCH_PERIOD_MAX + SWITCH_REF + 3 * SWITCH_PROBE);
    /* one lucky probe (a window where not drafting ran at 500 tokens/s against drafting's 300)
     * followed by one as usual (250): drafting stays */
    draft_switch_init(&s, 1);
    switch_fraction_off(&s, SWITCH_REF, 3, 0.010, 0.002);
    switch_fraction_off(&s, SWITCH_PROBE, 3, 0.010, 0.002);
    CHECK(s.confirming && !s.chosen_off && !s.off, "a lucky probe: confirming %d, off %d", s.confirming, s.off);
    switch_fraction_off(&s, SWITCH_REF + SWITCH_PROBE, 3, 0.010, 0.004);
    CHECK(!s.confirming && !s.chosen_off && s.changes == 0, "a lucky probe then a usual one: off chosen %d, %lld changes",
          s.chosen_off, (long long)s.changes);
    /* a probe's period follows its cost: drafting at a fifth of the chosen
     * rate is next probed after the longest period, a near-tie soon */
    draft_switch_init(&s, 1);
    switch_fraction_off(&s, 2 * (SWITCH_REF + SWITCH_PROBE), 1, 0.020, 0.004);   /* 50 against 250 tokens/s */
    CHECK(s.chosen_off && s.period == SWITCH_PERIOD, "50 against 250 tokens/s: off %d, period %d", s.chosen_off, s.period);
    switch_fraction_off(&s, SWITCH_PERIOD + SWITCH_PROBE, 1, 0.020, 0.004);
    CHECK(s.chosen_off && s.period == SWITCH_PERIOD_MAX, "a probe 5x slower: the next in %d cycles, not %d", s.period,
          SWITCH_PERIOD_MAX);
    draft_switch_init(&s, 1);
    switch_fraction_off(&s, 2 * (SWITCH_REF + SWITCH_PROBE) + SWITCH_PERIOD + SWITCH_PROBE, 2.4, 0.010, 0.004);   /* 240 against 250 */
    CHECK(s.chosen_off && s.period > SWITCH_PERIOD && s.period < 2 * SWITCH_PERIOD,
          "a near-tie's probe (2%% of its period): the next in %d cycles", s.period);
    /* a straggler of the other mode only counts */
    DraftSwitch before = s;
    draft_switch_observe(&s, !s.off, 100, 0.001);
    CHECK(s.left == before.left && s.off == before.off && s.ref_tokens == before.ref_tokens &&
          s.probe_tokens == before.probe_tokens, "a cycle of the other mode moved the stretch");
    /* batched: windows of rounds, the sequence-cycles over the batch, at least SWITCH_MIN_ROUNDS */
    draft_switch_init(&s, 8);
    CHECK(s.ref_cycles == SWITCH_MIN_ROUNDS && s.probe_cycles == SWITCH_MIN_ROUNDS && s.left == s.ref_cycles,
          "batch 8: windows of %d and %d rounds", s.ref_cycles, s.probe_cycles);
    draft_switch_init(&s, 2);
    CHECK(s.ref_cycles == SWITCH_REF / 2 && s.probe_cycles == SWITCH_PROBE / 2, "batch 2: windows of %d and %d rounds",
          s.ref_cycles, s.probe_cycles);
}

/* Batched: two sequences verified in one forward, each choosing its prefix
 * with the other's latest choice as its load (CostModel.load_*), settle on
 * the pair that maximises the round's tokens per second (found here by
 * trying every pair); alone, each would take the tokens the flat part of
 * the curve gives one sequence. */
static void test_cost_batch_load(void) {
    const float a[] = {0.9f, 0.8f, 0.7f, 0.05f}, b[] = {0.85f, 0.75f, 0.6f, 0.05f};
    CostModel ma, mb;
    cost_init(&ma);
    cost_add_point(&ma, 1, 0.010);
    cost_add_point(&ma, 4, 0.010);   /* flat to 4 tokens, then 2 ms a token */
    cost_add_point(&ma, 64, 0.130);
    mb = ma;
    CHECK(cost_best_prefix(&ma, a, 4, 0) == 3, "alone: the 3 nodes the flat curve verifies for free");
    int ka = 3, kb = -1;
    for (int round = 0; round < 4; round++) {
        mb.load_tokens = ma.last_tokens;
        mb.load_gain = ma.last_gain;
        kb = cost_best_prefix(&mb, b, 4, 0);
        ma.load_tokens = mb.last_tokens;
        ma.load_gain = mb.last_gain;
        ka = cost_best_prefix(&ma, a, 4, 0);
    }
    double best = 0, got = 0;
    for (int i = 0; i <= 4; i++)
        for (int j = 0; j <= 4; j++) {
            double gain = 2;
            for (int x = 0; x < i; x++) gain += a[x];
            for (int x = 0; x < j; x++) gain += b[x];
            const double rate = gain / cost_verify_s(&ma, i + j + 2);
            if (rate > best) best = rate;
            if (i == ka && j == kb) got = rate;
        }
    CHECK(fabs(got - best) < 1e-9 && ka + kb < 6, "batched choice (%d, %d): %g tokens/s, the best pair %g", ka, kb,
          got, best);
    /* the load's tokens count in the price too: beyond the flat part, a node must pay 2 ms */
    const double rate = cost_best_rate(&ma, a, 4, 0, 0, 0, &ka);
    CHECK(fabs(cost_node_price(&ma, a, 4, 0, 4) - rate * 0.002) < 1e-9, "price under load %g, want %g",
          cost_node_price(&ma, a, 4, 0, 4), rate * 0.002);
}

/* Lazily scored trees pay their walk: past lazy_nodes the curve times a
 * forward without logits, and each row the walk scores (one per token the
 * tree yields) costs row_s more.  The Qwen2.5 1.5B Q4_K_M on a Xeon: 8
 * tokens with logits 80 ms, 12 without 93, one head row 13 ms, one token 64:
 * a 12-node tree yielding 6.6 tokens costs 93 + 86 ms, where 8 nodes
 * yielding 5.35 cost 80, so the prefix stops at 7 nodes; without row_s it
 * took all 11.  A lazy
 * cycle's time is net of its rows before it corrects the curve: the
 * forward's own cost teaches no ratio. */
static void test_cost_prices_lazy_rows(void) {
    const float est[] = {0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.45f, 0.4f, 0.35f, 0.3f, 0.3f, 0.3f};
    CostModel m;
    cost_init(&m);
    cost_add_point(&m, 1, 0.064);
    cost_add_point(&m, 8, 0.080);
    cost_add_point(&m, 12, 0.093);
    cost_settle_calibration(&m);
    CHECK(cost_best_prefix(&m, est, 11, 0.020) == 11, "without walk pricing: %d nodes kept", m.last_tokens - 1);
    m.lazy_nodes = 8;
    m.row_s = 0.013;
    const int k = cost_best_prefix(&m, est, 11, 0.020);
    CHECK(k == 7, "a walk of 13 ms rows past 8 tokens: %d nodes kept (want 7)", k);
    int kb;
    double gain = 1;
    for (int i = 0; i < 11; i++) gain += est[i];
    const double all = cost_best_rate(&m, est, 11, 0.020, 0, 0, &kb), want = (1 + 0.9 + 0.8 + 0.7 + 0.6 + 0.5 + 0.45 + 0.4) / (0.020 + 0.080);
    CHECK(kb == 7 && fabs(all / want - 1) < 1e-6 && gain / (0.020 + 0.093 + gain * 0.013) < want,
          "the best rate %g at %d nodes (want %g at 7)", all, kb, want);
    for (int i = 0; i < 200; i++) cost_observe(&m, 12, 0.093 + 4 * 0.013, 0.020, 4);
    CHECK(fabs(cost_verify_s(&m, 12) / 0.093 - 1) < 1e-6 && fabs(m.scale - 1) < 1e-6,
          "lazy cycles of 12 tokens walking 4 rows moved the curve: %g s at 12 (calibrated 0.093), scale %g",
          cost_verify_s(&m, 12), m.scale);
    for (int i = 0; i < 200; i++) cost_observe(&m, 12, 0.110 + 4 * 0.013, 0.020, 4);
    CHECK(fabs(cost_verify_s(&m, 12) / 0.110 - 1) < 0.05, "a slower forward is learnt net of the rows: %g s (want 0.110)",
          cost_verify_s(&m, 12));
}

/* The cycles correct the calibrated curve's shape, not only its level: a
 * calibration that timed 8 tokens at 11 ms where they cost 16 made a tree
 * of 7 nodes look nearly free; verifications at 1 and 8 tokens teach each
 * point its own ratio, and the choice shrinks.  A calibration's point above
 * a later one is lowered to it; the corrected curve never decreases; the
 * corrected curve goes to the cache once enough cycles were seen. */
static void test_cost_curve_corrected(void) {
    const float est[] = {0.7f, 0.5f, 0.4f, 0.3f, 0.25f, 0.2f, 0.15f};
    CostModel m;
    cost_init(&m);
    cost_add_point(&m, 1, 0.010);
    cost_add_point(&m, 8, 0.011);   /* truly 0.016 */
    cost_add_point(&m, 64, 0.080);
    cost_settle_calibration(&m);
    CHECK(cost_best_prefix(&m, est, 7, 0.002) == 7, "the flat calibration keeps %d nodes", m.last_tokens - 1);
    for (int i = 0; i < 100; i++) {
        cost_observe(&m, 8, 0.016, 0.002, 0);
        cost_observe(&m, 1, 0.010, 0.002, 0);
    }
    CHECK(fabs(cost_verify_s(&m, 8) / 0.016 - 1) < 0.05 && fabs(cost_verify_s(&m, 1) / 0.010 - 1) < 0.05,
          "corrected curve: %g s at 8 tokens (want 0.016), %g s at 1 (want 0.010)", cost_verify_s(&m, 8),
          cost_verify_s(&m, 1));
    const int k = cost_best_prefix(&m, est, 7, 0.002);
    double best = 0;   /* the best prefix under the true curve */
    int k_true = 0;
    double gain = 1;
    for (int j = 0; j <= 7; j++) {
        if (j > 0) gain += est[j - 1];
        const double rate = gain / (0.002 + 0.010 + (0.016 - 0.010) * j / 7.0);
        if (rate > best) { best = rate; k_true = j; }
    }
    CHECK(k == k_true && k < 7, "after correction: %d nodes kept, the true curve's best %d", k, k_true);
    {   /* a held cycle (a thread tuner's probe) teaches nothing of time */
        const CostModel before = m;
        m.hold = 1;
        for (int i = 0; i < 10; i++) cost_observe(&m, 8, 0.100, 0.050, 0);
        cost_observe_expand(&m, 3, 0.090);
        m.hold = 0;
        CHECK(m.cycles == before.cycles && m.scale == before.scale && m.draft_s == before.draft_s &&
                  m.expand_cycles == before.expand_cycles && m.expand_s == before.expand_s &&
                  !memcmp(m.ratio, before.ratio, sizeof m.ratio) && !memcmp(m.weight, before.weight, sizeof m.weight),
              "held cycles changed the model: %g s at 8 tokens (was %g), draft %g s", cost_verify_s(&m, 8),
              cost_verify_s(&before, 8), m.draft_s);
    }

    /* calibration noise only adds time: a point above a later one is lowered */
    cost_init(&m);
    cost_add_point(&m, 1, 0.012);
    cost_add_point(&m, 2, 0.010);
    cost_add_point(&m, 4, 0.011);
    cost_settle_calibration(&m);
    CHECK(m.verify_s[0] == 0.010 && m.verify_s[1] == 0.010 && m.verify_s[2] == 0.011, "settled: %g %g %g",
          m.verify_s[0], m.verify_s[1], m.verify_s[2]);
    /* the cycles teach point 4 a lower ratio than point 2's: the curve stays flat there */
    for (int i = 0; i < 50; i++) { cost_observe(&m, 2, 0.014, 0, 0); cost_observe(&m, 4, 0.011, 0, 0); }
    CHECK(cost_verify_s(&m, 4) >= cost_verify_s(&m, 2) && cost_verify_s(&m, 3) >= cost_verify_s(&m, 2),
          "the corrected curve decreases: %g %g %g", cost_verify_s(&m, 2), cost_verify_s(&m, 3), cost_verify_s(&m, 4));

    /* past the last point the curve grows at least in proportion to it,
     * however flat its last segment: a calibration cut short after 4 tokens (the
     * 1.5B in BF16 on 2 AVX2 cores), settled flat from 3 to 4, must not make
     * 400 weak nodes look free */
    cost_init(&m);
    const int cut_n[4] = {1, 2, 3, 4};
    const double cut_s[4] = {0.061, 0.132, 0.2007, 0.2007};
    for (int i = 0; i < 4; i++) cost_add_point(&m, cut_n[i], cut_s[i]);
    cost_settle_calibration(&m);
    CHECK(fabs(cost_verify_s(&m, 400) / (0.2007 * 100) - 1) < 1e-9, "400 tokens cost %g s past a last point of %g s at 4",
          cost_verify_s(&m, 400), cost_verify_s(&m, 4));
    float weak[400];
    for (int i = 0; i < 400; i++) weak[i] = 0.05f;
    int kept = -1;
    cost_best_rate(&m, weak, 400, 0.010, 0, 0, &kept);
    CHECK(kept >= 0 && kept < 4, "%d nodes of acceptance 0.05 kept past a calibration of 4 tokens", kept);

    /* the cache: corrected after COST_REFRESH_CYCLES, not before */
    char dir[] = "/tmp/c2t_costXXXXXX", path[64];
    REQUIRE(mkdtemp(dir), "mkdtemp");
    snprintf(path, sizeof path, "%s/cost.json", dir);
    CostModel few;
    cost_init(&few);
    cost_add_point(&few, 1, 0.010);
    cost_add_point(&few, 8, 0.011);
    snprintf(few.cache_key, sizeof few.cache_key, "test key");
    REQUIRE(cost_cache_put(path, few.cache_key, &few) == 0, "%s", err_get());
    for (int i = 0; i < COST_REFRESH_CYCLES - 1; i++) cost_observe(&few, 8, 0.016, 0, 0);
    CHECK(cost_cache_refresh(path, &few) == 0, "refreshed after %d cycles", COST_REFRESH_CYCLES - 1);
    cost_observe(&few, 8, 0.016, 0, 0);
    CHECK(cost_cache_refresh(path, &few) == 1, "not refreshed after %d cycles: %s", COST_REFRESH_CYCLES, err_get());
    CostModel got;
    REQUIRE(cost_cache_get(path, "test key", &got) == 1, "the refreshed curve: %s", err_get());
    CHECK(got.n_pts == 2 && fabs(got.verify_s[1] - cost_verify_s(&few, 8)) < 1e-12 && got.verify_s[1] > 0.015,
          "cached %d points, %g s at 8 (corrected %g)", got.n_pts, got.verify_s[1], cost_verify_s(&few, 8));
    unlink(path);
    rmdir(dir);
}

/* Acceptance by depth: trees whose P says twice what depth 1 accepts and
 * three times what depth 2 does teach those factors; an unobserved depth
 * leans on the one above it; estimates stay at most 1 and are P without a
 * model; overstated P grows the chosen prefix, corrected it shrinks to the
 * best under the true acceptance. */
static void test_cost_acceptance_by_depth(void) {
    CostModel m;
    cost_init(&m);
    /* root, two children of P 0.4, a grandchild of P 0.3: 0.8 predicted at
     * depth 1 and 0.3 at depth 2; accepted depth 1 in 4 cycles of 10, depth 2 in 1 */
    const float P[] = {1, 0.4f, 0.4f, 0.3f};
    const int depth[] = {0, 1, 1, 2};
    for (int c = 0; c < 400; c++) cost_observe_acceptance(&m, P, depth, 4, c % 10 == 0 ? 2 : c % 10 < 4);
    CHECK(fabs(m.accept_ratio[1] - 0.5) < 0.02 && fabs(m.accept_ratio[2] - 1.0 / 3) < 0.05,
          "factors %g at depth 1 (want 0.5), %g at 2 (want 0.333)", m.accept_ratio[1], m.accept_ratio[2]);
    CHECK(fabs(cost_estimate(&m, 0.2f, 3) - 0.2 * m.accept_ratio[2]) < 1e-6,
          "an unobserved depth: %g, the depth above's factor gives %g", cost_estimate(&m, 0.2f, 3), 0.2 * m.accept_ratio[2]);
    CHECK(fabs(m.verified_tokens / (double)m.verified_cycles - 1.5) < 1e-9, "measured tau %g, want 1.5",
          m.verified_tokens / (double)m.verified_cycles);
    CHECK(cost_estimate(NULL, 0.7f, 2) == 0.7f, "no model: %g", cost_estimate(NULL, 0.7f, 2));
    CostModel hi;
    cost_init(&hi);
    const float Pc[] = {1, 0.5f};
    const int dc[] = {0, 1};
    for (int c = 0; c < 100; c++) cost_observe_acceptance(&hi, Pc, dc, 2, 1);   /* P understates: every child accepted */
    CHECK(cost_estimate(&hi, 0.9f, 1) <= 1.0f && hi.accept_ratio[1] > 1.5, "estimate %g (factor %g): at most 1",
          cost_estimate(&hi, 0.9f, 1), hi.accept_ratio[1]);

    /* the choice: 10 ms + 3.5 ms a verified token; est in rank order by depth */
    const float raw[] = {0.8f, 0.6f, 0.45f, 0.3f};
    const int rd[] = {1, 2, 3, 4};
    const double truth[] = {0.4, 0.3, 0.225, 0.15};   /* each depth's true acceptance: half of P */
    CostModel c;
    cost_init(&c);
    cost_add_point(&c, 1, 0.010);
    cost_add_point(&c, 64, 0.010 + 63 * 0.0035);
    const int k_raw = cost_best_prefix(&c, raw, 4, 0);
    for (int i = 0; i < 800; i++) {   /* the chain verified; depth d accepted in truth[d] of the cycles, spread evenly */
        const float Pt[] = {1, 0.8f, 0.6f, 0.45f, 0.3f};
        const int dt[] = {0, 1, 2, 3, 4};
        const double u = fmod(i * 0.6180339887, 1.0);
        int accepted = 0;
        while (accepted < 4 && u < truth[accepted]) accepted++;
        cost_observe_acceptance(&c, Pt, dt, 5, accepted);
    }
    float est[4];
    for (int i = 0; i < 4; i++) est[i] = cost_estimate(&c, raw[i], rd[i]);
    const int k = cost_best_prefix(&c, est, 4, 0);
    double best = 0, gain = 1;   /* the best prefix under the true acceptance */
    int k_true = 0;
    for (int j = 0; j <= 4; j++) {
        if (j > 0) gain += truth[j - 1];
        const double rate = gain / (0.010 + 0.0035 * j);
        if (rate > best) { best = rate; k_true = j; }
    }
    CHECK(k == k_true && k < k_raw, "corrected: %d kept, the truth's best %d, P's %d", k, k_true, k_raw);
}

static void test_cost_prefix_synthetic(void) {
    const float est[] = {0.9f, 0.6f, 0.3f, 0.1f, 0.01f, 0.0f};
    const int n = 6;
    CostModel m;
    cost_init(&m);
    cost_add_point(&m, 1, 0.01);
    cost_add_point(&m, 64, 0.01);
    CHECK(cost_best_prefix(&m, est, n, 0.005) == 5, "constant cost: kept %d of the 5 nodes worth something",
          cost_best_prefix(&m, est, n, 0.005));

    cost_init(&m);
    cost_add_point(&m, 1, 0.010);
    cost_add_point(&m, 2, 0.0105);
    cost_add_point(&m, 3, 0.050);
    int k = cost_best_prefix(&m, est, n, 0);
    CHECK(k == 1, "steep after two tokens: kept %d, want the best child only", k);
    CHECK(fabs(cost_verify_s(&m, 4) - 0.0895) < 1e-9, "extension past the last point: %g", cost_verify_s(&m, 4));

    cost_init(&m);
    cost_add_point(&m, 1, 0.01);
    cost_add_point(&m, 9, 0.09);
    CHECK(fabs(cost_verify_s(&m, 5) - 0.05) < 1e-12, "interpolation: %g", cost_verify_s(&m, 5));
    const float none[] = {0, 0, 0};
    CHECK(cost_best_prefix(&m, none, 3, 0) == 0, "worthless nodes kept");
    for (int i = 0; i < 200; i++) cost_observe(&m, 5, 0.10, 0.02, 0);   /* twice the curve, 20 ms drafts */
    CHECK(fabs(m.scale - 2) < 1e-9 && fabs(m.draft_s - 0.02) < 1e-9 && m.cycles == 200,
          "observed: scale %g draft %g", m.scale, m.draft_s);
    CHECK(fabs(cost_verify_s(&m, 5) - 0.10) < 1e-12, "scaled curve %g", cost_verify_s(&m, 5));
    for (int i = 0; i < 200; i++) cost_observe(&m, 5, 0.05, 0.02, 0);   /* the load goes: back to the curve */
    CHECK(fabs(m.scale - 1) < 1e-3, "the ratio does not follow a change: %g", m.scale);
    CHECK(cost_add_point(&m, 9, 1) == -1 && cost_add_point(&m, 3, 1) == -1, "points out of order accepted");
    /* the chosen sizes so far: 0 (worthless) only */
    CHECK(cost_chosen_quantile(&m, 0.5) == 0 && m.chosen == 1, "histogram");

    /* another layer: 10 ms a step, 30 ms of drafting a cycle in 2 steps
     * (10 ms besides them), verification 10 ms + 1 ms a token */
    cost_init(&m);
    cost_add_point(&m, 1, 0.010);
    cost_add_point(&m, 64, 0.073);
    cost_observe(&m, 1, 0.010, 0.030, 0);
    cost_observe_expand(&m, 2, 0.020);
    CHECK(fabs(cost_draft_s(&m, 2) - 0.030) < 1e-12 && fabs(cost_draft_s(&m, 5) - 0.060) < 1e-12,
          "draft time by steps: %g %g", cost_draft_s(&m, 2), cost_draft_s(&m, 5));
    const float pool[] = {0.9f, 0.8f, 0.05f};
    /* now: (1 + 1.7) / (30 + 12 ms) = 64.3/s; a layer worth 0.75 more: 3.45 / (40 + 13 ms) = 65.1/s */
    CHECK(cost_layer_pays(&m, pool, 3, 2, 0.75), "a layer worth 0.75 of acceptance for 11 ms does not pay");
    CHECK(!cost_layer_pays(&m, pool, 3, 2, 0.05), "a layer worth at most 0.05 for 11 ms pays");

    /* a node's price: the best rate times the cheapest average cost of j more tokens */
    {
        CostModel f;
        cost_init(&f);
        cost_add_point(&f, 1, 0.01);
        cost_add_point(&f, 64, 0.01);
        CHECK(cost_node_price(&f, pool, 3, 0.03, 8) == 0, "free verification: price %g", cost_node_price(&f, pool, 3, 0.03, 8));
        /* linear, 1 ms a token past 10 ms: two kept, rate 2.7 / (30 + 12 ms), price rate * 1 ms
         * (the estimates are floats: relative tolerances) */
        const double rate = 2.7 / 0.042, price = cost_node_price(&m, pool, 3, 0.03, 8);
        CHECK(fabs(price / (rate * 0.001) - 1) < 1e-6, "linear curve: price %g, want %g", price, rate * 0.001);
        /* a step: 20 ms from 5 tokens on, flat after; 4 more tokens after the 4 verified cost 10 ms in all */
        cost_init(&f);
        cost_add_point(&f, 1, 0.010);
        cost_add_point(&f, 4, 0.010);
        cost_add_point(&f, 5, 0.020);
        cost_add_point(&f, 64, 0.020);
        const double r2 = 2.75 / 0.04, p1 = cost_node_price(&f, pool, 3, 0.03, 1), p4 = cost_node_price(&f, pool, 3, 0.03, 4);
        CHECK(fabs(p1 / (r2 * 0.010) - 1) < 1e-6 && fabs(p4 / (r2 * 0.010 / 4) - 1) < 1e-6,
              "step curve: price %g with one more token (want %g), %g with up to four (want %g)", p1, r2 * 0.01, p4,
              r2 * 0.0025);
        /* the frontier: nodes below the price are dropped, in order */
        Tree t;
        tree_init(&t);
        tree_reset(&t, 1);
        const float P[] = {0.9f, 0.5f, 0.004f, 0.3f};
        int front[4];
        for (int i = 0; i < 4; i++) front[i] = tree_add(&t, 0, 10 + i, P[i], 0, i);
        cost_init(&f);
        cost_add_point(&f, 1, 0.010);
        cost_add_point(&f, 64, 0.073);
        int pays = -1;
        const int kept = policy_front_worth(&t, front, 4, 4, &f, 1, &pays);
        CHECK(kept == 3 && front[0] == 1 && front[1] == 2 && front[2] == 4, "frontier kept %d: %d %d %d", kept, front[0],
              front[1], front[2]);
        /* the kept frontier's layer, as policy_layer_pays judges it from the same ranking */
        CHECK(pays == policy_layer_pays(&t, front, 3, &f, 1), "pays %d, policy_layer_pays %d", pays,
              policy_layer_pays(&t, front, 3, &f, 1));
        tree_free(&t);
    }

    /* "auto" is a size of eagle2's: stored, reported as text, max nodes the pool's */
    const char *set[] = {"total=auto", NULL};
    Policy *p = policy_with("eagle2", set);
    REQUIRE(p, "total=auto: %s", err_get());
    const char *key, *text = NULL;
    double v;
    for (int i = 0; policy_param_get(p, i, &key, &v, &text) == 0; i++)
        if (!strcmp(key, "total")) break;
    CHECK(p->wants_cost && text && !strcmp(text, "auto") && policy_max_nodes(p) == 1 + 10 + 6 * 100,
          "total=auto: wants_cost %d, reported '%s', max nodes %d", p->wants_cost, text ? text : "(a number)",
          policy_max_nodes(p));
    policy_free(p);
    const char *bad[] = {"total=automatic", NULL};
    p = policy_with("eagle2", bad);
    CHECK(!p && strstr(err_get(), "'auto'"), "total=automatic: %s", p ? "accepted" : err_get());
    policy_free(p);
    /* predicted tokens: 1 + the kept estimates, per choice (0.9 + 0.6 + 0.3 + 0.1 + 0.01 kept above, then 1 + 0) */
    cost_init(&m);
    cost_add_point(&m, 1, 0.01);
    cost_add_point(&m, 64, 0.01);
    cost_best_prefix(&m, est, n, 0.005);
    cost_best_prefix(&m, none, 3, 0.005);
    CHECK(m.chosen == 2 && fabs(m.predicted_tokens - (1 + 1.91 + 1)) < 1e-5, "predicted tokens %g over %lld choices",
          m.predicted_tokens, (long long)m.chosen);
}

static void test_bad_policy_parameters(void) {
    struct { const char *policy; const char *param; const char *needle; } bad[] = {
        {"sage", "sage_dmin=9", "sage_dmin"},       /* above dmax 8 */
        {"sage", "sage_dceil=7", "sage_dceil"},     /* below dmax 8 */
        {"sage", "sage_wmin=11", "sage_wmin"},      /* above wmax 10 */
        {"sage", "sage_lower=4", "sage_lower"},     /* above upper 3 */
        {"wetap", "wetap_wmin=200", "wetap_wmin"},  /* above wmax 128 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *prm[] = {bad[i].param, NULL};
        Policy *p = make_policy(bad[i].policy, prm);
        CHECK(!p && strstr(err_get(), bad[i].needle), "%s %s accepted or unnamed: %s", bad[i].policy, bad[i].param,
              err_get());
        policy_free(p);
    }
    Policy *s = make_policy("sage", NULL), *w = make_policy("wetap", NULL);
    REQUIRE(s && w, "%s", err_get());
    CHECK(policy_max_nodes(s) == 65 && policy_max_nodes(w) == 1 + 16 + 7 * 128,
          "max nodes %d %d, expected 1 + 64 and WETAP's unpruned pool", policy_max_nodes(s), policy_max_nodes(w));
    CHECK(strstr(policy_names(), "sage") && strstr(policy_names(), "wetap"), "not registered: %s", policy_names());
    policy_free(s);
    policy_free(w);
}


/* ======================= classifier features ======================= */

/* A scripted draft whose children differ in p, and whose distributions
 * differ in entropy, from node to node (hashes of the token), so that every
 * known feature varies within a tree. */
static uint32_t mix(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}
static int varied_script(void *ctx, const Tree *t, int node, int k, int *ids, float *probs, float *ent) {
    (void)ctx;
    uint32_t h = mix((uint32_t)t->token[node]);
    float decay = 0.3f + (float)(h % 1000) / 600.0f, w = 1.0f, sum = 0;
    for (int j = 0; j < k; j++) { probs[j] = w; sum += w; w *= expf(-decay); }
    for (int j = 0; j < k; j++) probs[j] /= sum * (1.0f + (float)(h % 7) / 10.0f);
    for (int j = 0; j < k; j++) ids[j] = (int)(mix(h + (uint32_t)j + 1) % 1000000);
    if (ent) *ent = 0.2f + (float)(mix(h) % 4000) / 1000.0f;
    return 0;
}

static char *feat_dir;

/* A classifier over the given features, hidden 4, seeded weights and
 * standardisation, written as spec-train writes one; its path. */
static char *write_feature_classifier(const char *name, const ClsFeatureId *ids, int nf, uint64_t seed) {
    Classifier *c = classifier_new(4, nf, ids);
    Rng r;
    rng_seed_stream(&r, seed, RNG_STREAM_MISC, 3);
    for (int i = 0; i < 4 * nf; i++) c->fc1_w[i] = (float)(4 * rng_uniform(&r) - 2);
    for (int i = 0; i < 4; i++) { c->fc1_b[i] = (float)(rng_uniform(&r) - 0.5); c->fc2_w[i] = (float)(4 * rng_uniform(&r) - 2); }
    c->fc2_b = (float)(rng_uniform(&r) - 0.5);
    for (int k = 0; k < nf; k++) {
        c->feat[k].kind = ids[k] == CLS_F_P || ids[k] == CLS_F_LOCAL_P ? CLS_LOG : CLS_RAW;
        c->feat[k].mean = (float)rng_uniform(&r);
        c->feat[k].std = (float)(0.5 + rng_uniform(&r));
    }
    char *path = path_join(feat_dir, name);
    cJSON *j = classifier_to_json(c);
    int bad = write_json(path, j);
    cJSON_Delete(j);
    classifier_free(c);
    return bad ? NULL : path;
}

/* The confidences spec-train and spec-analyze give a built tree's nodes:
 * from its trace rows (collect_tree_rows, as spec-collect writes them) by
 * dataset_tree_nodes.  conf[i] belongs to tree node i + 1. */
static float *row_confidences(const Tree *t, const Classifier *c, TraceNode *rows) {
    int n = t->n - 1;
    collect_tree_rows(t, rows);
    ClsNode *x = xmalloc(sizeof(ClsNode) * (size_t)(n + 1));
    dataset_tree_nodes(rows, n, x);
    float *conf = xmalloc(sizeof(float) * (size_t)(n + 1));
    classifier_forward(c, x, n, conf);
    free(x);
    return conf;
}

/* A tree built by policy name with the varied script from root token
 * root, and the confidences of its nodes from its trace rows. */
static float *build_varied(const char *name, const char *const *params, int root, Tree *t, const Classifier *c) {
    Policy *p = make_policy(name, params);
    if (!p) return NULL;
    Draft *d = draft_scripted(varied_script, NULL);
    int rc = build_tree_on_cpu(p, d, root, t);
    draft_free(d);
    policy_free(p);
    if (rc) return NULL;
    TraceNode *rows = xmalloc(sizeof(TraceNode) * (size_t)t->n);
    float *conf = row_confidences(t, c, rows);
    free(rows);
    return conf;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* How a c2t tree disagrees with the confidences conf[i - 1] of its nodes
 * i: *below = kept nodes below beta; the return value = nodes whose having
 * children contradicts their place among their depth's nodes sorted by
 * confidence (ties: tree order).  With exact (beta 0: every candidate
 * joins) the K first at each depth but the deepest are exactly the nodes
 * with children; otherwise (a candidate below beta leaves no trace) only
 * nodes among the K first may have children. */
static int c2t_disagreements(const Tree *t, const float *conf, int K, float beta, int exact, int *below, int *depths) {
    int bad = 0;
    *below = 0;
    *depths = 0;
    for (int i = 1; i < t->n; i++) *below += conf[i - 1] < beta;
    int *has_child = xcalloc((size_t)t->n, sizeof(int)), *at = xmalloc(sizeof(int) * (size_t)t->n);
    for (int i = 1; i < t->n; i++) has_child[t->parent[i]] = 1;
    for (int dep = 1; dep < tree_max_depth(t); dep++) {   /* the last layer expands nothing */
        int m = 0;
        for (int i = 1; i < t->n; i++) if (t->depth[i] == dep) at[m++] = i;
        for (int a = 1; a < m; a++)   /* stable: tree order on ties */
            for (int q = a; q > 0 && conf[at[q] - 1] > conf[at[q - 1] - 1]; q--) { int x = at[q]; at[q] = at[q - 1]; at[q - 1] = x; }
        (*depths)++;
        for (int q = 0; q < m; q++) bad += exact ? has_child[at[q]] != (q < K) : has_child[at[q]] && q >= K;
    }
    free(has_child); free(at);
    return bad;
}

/* c2t builds its tree from the confidences of its candidates; with beta 0
 * every candidate joins and the tree is fixed by their order alone.  That
 * holds with the confidences computed from the tree's trace rows only if
 * the decoding loop's features equal spec-train's.  Then at a beta that
 * keeps about half of the first layer: every kept node reaches beta by its
 * row's confidence, and only nodes among their depth's K most confident
 * have children. */
static void check_c2t_tree(const char *weights, int K) {
    char cls_kv[600], topk[32], beta_kv[64];
    snprintf(cls_kv, sizeof cls_kv, "classifier=%s", weights);
    snprintf(topk, sizeof topk, "topk=%d", K);
    Classifier *c = classifier_load(weights);
    REQUIRE(c, "%s", err_get());
    Tree t;
    tree_init(&t);
    float beta = 0;
    for (int pass = 0; pass < 2; pass++) {
        snprintf(beta_kv, sizeof beta_kv, "beta=%.9g", (double)beta);
        const char *params[] = {cls_kv, topk, "depth=5", beta_kv, NULL};
        float *conf = build_varied("c2t", params, 4242, &t, c);
        REQUIRE(conf, "build: %s", err_get());
        int below, depths, bad = c2t_disagreements(&t, conf, K, beta, pass == 0, &below, &depths);
        CHECK(below == 0, "%s beta %g: %d kept nodes below beta by their trace rows' confidence", weights, (double)beta, below);
        CHECK(bad == 0, "%s beta %g: %d nodes expanded (or not) against the trace rows' confidence order",
              weights, (double)beta, bad);
        CHECK(pass || (depths >= 2 && t.n > 2 * K), "%s: a tree too small to tell (%d nodes, %d depths)", weights, t.n, depths);
        CHECK(!pass || t.n >= 2, "%s beta %g: nothing kept", weights, (double)beta);
        /* next: the median confidence of the full tree's depth-1 nodes */
        float *v = xmalloc(sizeof(float) * (size_t)t.n);
        int m = 0;
        for (int i = 1; i < t.n; i++) if (t.depth[i] == 1) v[m++] = conf[i - 1];
        qsort(v, (size_t)m, sizeof(float), cmp_float);
        beta = m ? v[m / 2] : 0.5f;
        free(v); free(conf);
    }
    tree_free(&t);
    classifier_free(c);
}

/* c2t's cap (`total`): the capped tree is the full tree's root and its
 * `total` nodes of highest path confidence (the smallest confidence of a
 * node's trace row and its ancestors'; ties: the earlier node), every node's
 * confidence computed from its trace row. */
static void check_c2t_cap(const char *weights, int K) {
    char cls_kv[600], topk[32], total_kv[32];
    snprintf(cls_kv, sizeof cls_kv, "classifier=%s", weights);
    snprintf(topk, sizeof topk, "topk=%d", K);
    Classifier *c = classifier_load(weights);
    REQUIRE(c, "%s", err_get());
    Tree full, capped, want;
    tree_init(&full); tree_init(&capped); tree_init(&want);
    const char *all[] = {cls_kv, topk, "depth=4", "beta=0", NULL};
    float *conf = build_varied("c2t", all, 4242, &full, c);
    REQUIRE(conf, "build: %s", err_get());
    const int n = full.n - 1;
    float *pm = xmalloc(sizeof(float) * (size_t)full.n);
    int *order = xmalloc(sizeof(int) * (size_t)full.n), *keep = xmalloc(sizeof(int) * (size_t)full.n);
    pm[0] = 2;
    for (int i = 1; i < full.n; i++) pm[i] = conf[i - 1] < pm[full.parent[i]] ? conf[i - 1] : pm[full.parent[i]];
    for (int i = 0; i < n; i++) order[i] = i + 1;
    for (int a = 1; a < n; a++)   /* stable: the earlier node on ties */
        for (int q = a; q > 0 && pm[order[q]] > pm[order[q - 1]]; q--) { int x = order[q]; order[q] = order[q - 1]; order[q - 1] = x; }
    const int caps[] = {1, 3, n / 2, n - 1};
    for (int k = 0; k < 4; k++) {
        const int N = caps[k];
        snprintf(total_kv, sizeof total_kv, "total=%d", N);
        const char *cap[] = {cls_kv, topk, "depth=4", "beta=0", total_kv, NULL};
        float *cc = build_varied("c2t", cap, 4242, &capped, c);
        REQUIRE(cc, "build: %s", err_get());
        keep[0] = 0;
        memcpy(keep + 1, order, sizeof(int) * (size_t)N);
        qsort(keep, (size_t)N + 1, sizeof(int), cmp_int);
        tree_subset(&full, keep, N + 1, &want);
        int same = capped.n == want.n;
        for (int i = 0; same && i < want.n; i++) same = capped.token[i] == want.token[i] && capped.parent[i] == want.parent[i];
        CHECK(same, "%s: c2t total %d kept %d nodes, not the %d of highest path confidence", weights, N, capped.n - 1, N);
        free(cc);
    }
    CHECK(n > 8, "%s: a tree too small to tell (%d nodes)", weights, n);
    free(pm); free(order); free(keep); free(conf);
    tree_free(&full); tree_free(&capped); tree_free(&want);
    classifier_free(c);
}

/* The same with a real draft model while decoding: every verified c2t
 * tree (what spec-collect would write) agrees with its rows' confidences. */
typedef struct { const Classifier *c; int K, exact, trees, nodes, below, bad; float beta; float *confs; int n_confs, cap; } RowCheck;

static int check_rows_hook(void *vctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)n_path; (void)cycle;
    RowCheck *h = vctx;
    TraceNode *rows = xmalloc(sizeof(TraceNode) * (size_t)t->n);
    float *conf = row_confidences(t, h->c, rows);
    int below, depths;
    h->bad += c2t_disagreements(t, conf, h->K, h->beta, h->exact, &below, &depths);
    h->below += below;
    h->trees++;
    h->nodes += t->n - 1;
    for (int i = 0; i < t->n - 1; i++) {
        if (h->n_confs == h->cap) { h->cap = h->cap ? 2 * h->cap : 256; h->confs = xrealloc(h->confs, sizeof(float) * (size_t)h->cap); }
        h->confs[h->n_confs++] = conf[i];
    }
    free(conf); free(rows);
    return 0;
}

static void check_c2t_decoding(const char *weights, const char *target_dir, const char *draft_kind, const char *draft_dir) {
    LlamaModel *m = llama_load(target_dir, be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load(draft_kind, draft_dir, m, 4096);
    REQUIRE(d, "%s", err_get());
    Classifier *c = classifier_load(weights);
    REQUIRE(c, "%s", err_get());
    char cls_kv[600], beta_kv[64];
    snprintf(cls_kv, sizeof cls_kv, "classifier=%s", weights);
    const int prompt[8] = {1, 21, 208, 255, 244, 151, 37, 9};
    float beta = 0;
    for (int pass = 0; pass < 2; pass++) {
        snprintf(beta_kv, sizeof beta_kv, "beta=%.9g", (double)beta);
        const char *params[] = {cls_kv, "topk=3", "depth=4", beta_kv, NULL};
        Policy *p = make_policy("c2t", params);
        REQUIRE(p, "%s", err_get());
        RowCheck h = {c, 3, pass == 0, 0, 0, 0, 0, beta, NULL, 0, 0};
        SampleParams sp = {0};
        Decoder *dec = decoder_new(m, d, p, 8 + 24 + policy_max_nodes(p) + 8, sp);
        REQUIRE(dec, "%s", err_get());
        if (p->wants_cost) decoder_watch_costs(dec);
        decoder_set_hook(dec, check_rows_hook, &h, 1);
        int out[32];
        DecodeStats st;
        REQUIRE(decoder_run(dec, prompt, 8, 24, out, &st) >= 0, "decode: %s", err_get());
        decoder_free(dec);
        policy_free(p);
        CHECK(h.below == 0 && h.bad == 0, "%s on %s (%s): beta %g: %d kept nodes below beta, %d expansions against the "
              "rows' confidence order, in %d trees", weights, draft_dir, draft_kind, (double)beta, h.below, h.bad, h.trees);
        CHECK(h.trees > 0 && h.nodes > 2 * h.trees, "%s on %s: beta %g: %d nodes in %d trees, too few to tell", weights,
              draft_dir, (double)beta, h.nodes, h.trees);
        qsort(h.confs, (size_t)h.n_confs, sizeof(float), cmp_float);
        beta = h.n_confs ? h.confs[h.n_confs / 2] : 0.5f;
        free(h.confs);
    }
    classifier_free(c);
    draft_free(d);
    llama_free(m);
}

/* chain's early stop: the chain built at beta 0 (no stop; the entropy is
 * computed, which a chain without early stop skips), and the confidences
 * of its nodes from their rows; at a beta just above one of them the chain
 * ends exactly before the first node below beta. */
static void check_chain_stop(const char *weights) {
    char cls_kv[600], beta_kv[64];
    snprintf(cls_kv, sizeof cls_kv, "classifier=%s", weights);
    Classifier *c = classifier_load(weights);
    REQUIRE(c, "%s", err_get());
    Tree full, t;
    tree_init(&full);
    tree_init(&t);
    const char *plain[] = {"early_stop=c2t", "draft_len=12", cls_kv, "beta=0", NULL};
    float *conf = build_varied("chain", plain, 777, &full, c);
    REQUIRE(conf && full.n == 13, "chain: %s", err_get());
    for (int k = 0; k < 12; k += 3) {
        float beta = nextafterf(conf[k], 2.0f);
        int want = 0;
        while (want < 12 && conf[want] >= beta) want++;
        snprintf(beta_kv, sizeof beta_kv, "beta=%.9g", (double)beta);
        const char *params[] = {"early_stop=c2t", "draft_len=12", cls_kv, beta_kv, NULL};
        float *cs = build_varied("chain", params, 777, &t, c);
        REQUIRE(cs, "chain with early stop: %s", err_get());
        CHECK(t.n - 1 == want, "chain %s beta %.9g: %d nodes, the rows' confidences say %d", weights, (double)beta,
              t.n - 1, want);
        free(cs);
    }
    free(conf);
    tree_free(&full); tree_free(&t);
    classifier_free(c);
}

static void test_policy_features_match_traces(void) {
    char tmpl[] = "/tmp/c2t_featXXXXXX";
    REQUIRE(mkdtemp(tmpl), "mkdtemp");
    feat_dir = tmpl;
    /* the rows: parent_H is the parent's H, a depth-1 node's own H */
    {
        Tree t;
        tree_init(&t);
        tree_reset(&t, 1);
        int a = tree_add(&t, 0, 10, 0.5f, 1.5f, 0), b = tree_add(&t, a, 11, 0.25f, 2.5f, 3);
        tree_add(&t, b, 12, 0.125f, 0.75f, 1);
        TraceNode rows[3];
        ClsNode x[3];
        collect_tree_rows(&t, rows);
        dataset_tree_nodes(rows, 3, x);
        CHECK(x[0].v[CLS_F_PARENT_H] == 1.5f && x[1].v[CLS_F_PARENT_H] == 1.5f && x[2].v[CLS_F_PARENT_H] == 2.5f,
              "parent_H from rows: %g %g %g", (double)x[0].v[CLS_F_PARENT_H], (double)x[1].v[CLS_F_PARENT_H],
              (double)x[2].v[CLS_F_PARENT_H]);
        CHECK(x[2].v[CLS_F_P] == 0.5f * 0.25f * 0.125f && x[2].v[CLS_F_LOCAL_P] == 0.125f && x[1].v[CLS_F_RANK] == 3 &&
              x[2].v[CLS_F_DEPTH] == 3 && x[2].v[CLS_F_H] == 0.75f, "P, p, rank, depth, H from rows");
        tree_free(&t);
    }
    static const ClsFeatureId all[CLS_N_KNOWN] = {CLS_F_P, CLS_F_H, CLS_F_DEPTH, CLS_F_LOCAL_P, CLS_F_RANK, CLS_F_PARENT_H};
    for (int f = 0; f < CLS_N_KNOWN; f++) {
        char name[64];
        snprintf(name, sizeof name, "only_%s.json", cls_feature_names[f]);
        char *w = write_feature_classifier(name, &all[f], 1, 10 + f);
        REQUIRE(w, "%s", err_get());
        check_c2t_tree(w, 3);
        check_chain_stop(w);
        free(w);
    }
    /* all six, in an order other than the registry's */
    static const ClsFeatureId six[CLS_N_KNOWN] = {CLS_F_PARENT_H, CLS_F_P, CLS_F_RANK, CLS_F_H, CLS_F_LOCAL_P, CLS_F_DEPTH};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        char name[64];
        snprintf(name, sizeof name, "six_%d.json", (int)seed);
        char *w = write_feature_classifier(name, six, CLS_N_KNOWN, seed);
        REQUIRE(w, "%s", err_get());
        check_c2t_tree(w, 4);
        check_c2t_cap(w, 4);
        check_chain_stop(w);
        if (seed == 1) {
            check_c2t_decoding(w, LOSSLESS_DRAFTS[2][0], LOSSLESS_DRAFTS[2][1], LOSSLESS_DRAFTS[2][2]);
            check_c2t_decoding(w, LOSSLESS_DRAFTS[3][0], LOSSLESS_DRAFTS[3][1], LOSSLESS_DRAFTS[3][2]);
        }
        free(w);
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    if (system(cmd)) {}
}

/* The example policy of one file (tests/example_policy.h): its tree by
 * hand from the scripted draft, a setting the policy does not have refused,
 * and on the demo family ar's tokens, with γ its 6 nodes every cycle. */
static void test_example_policy_in_one_file(void) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "fan");
    policy_params_set(&prm, "width", "3");
    Policy *p = policy_new_with(&policy_fan, &prm);
    REQUIRE(p, "%s", err_get());
    static const Edge edges[] = {{7, 70, 0.5f}, {7, 71, 0.3f}, {7, 72, 0.1f}, {70, 700, 0.9f}, {71, 710, 0.6f},
                                 {72, 720, 0.2f}};
    Script sc = {edges, sizeof edges / sizeof *edges, 0.0f, 0};
    Tree t;
    tree_init(&t);
    REQUIRE(build_tree(p, &sc, 7, &t) == 0, "%s", err_get());
    const int tok[] = {70, 71, 72, 700, 710, 720}, par[] = {7, 7, 7, 70, 71, 72};
    CHECK(tree_is(&t, tok, par, 6) && policy_max_nodes(p) == 7 && fabsf(t.P[4] - 0.45f) < 1e-6f,
          "fan's tree differs from the one worked out by hand");
    tree_free(&t);
    policy_free(p);
    PolicyParams bad = prm;
    policy_params_set(&bad, "topk", "3");
    CHECK(!policy_new_with(&policy_fan, &bad) && strstr(err_get(), "topk"), "a setting fan lacks was accepted: %s",
          err_get());

    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/demo/eagle", m, 4096);
    REQUIRE(d, "%s", err_get());
    const int prompt[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, np = 10, max_new = 32;
    LlamaState *s = llama_state_new(m, np + max_new + 8);
    int ref[64], out[64];
    const int nref = greedy_generate(s, prompt, np, max_new, ref);
    llama_state_free(s);
    DecodeStats st;
    Policy *q = policy_new_with(&policy_fan, &prm);
    Decoder *dec = decoder_new(m, d, q, np + max_new + policy_max_nodes(q) + 8, (SampleParams){0});
    REQUIRE(dec, "%s", err_get());
    const int n = decoder_run(dec, prompt, np, max_new, out, &st);
    CHECK(n == nref && !memcmp(out, ref, sizeof(int) * n), "fan: not ar's tokens");
    CHECK(st.cycles > 0 && st.gamma == 6 * st.cycles, "fan: %lld cycles, gamma %lld", (long long)st.cycles,
          (long long)st.gamma);
    printf("# fan width 3 on the demo family: tau %.2f\n", decode_stats_tau(&st));
    decoder_free(dec);
    policy_free(q);
    draft_free(d);
    llama_free(m);
}

int main(void) {
    RUN(test_sage_tree_by_hand);
    RUN(test_sage_alpha_from_previous_cycle);
    RUN(test_sage_history_adjusts_max_depth);
    RUN(test_wetap_pool_by_hand);
    RUN(test_wetap_pruning_by_hand);
    RUN(test_lossless_greedy_every_draft);
    RUN(test_sage_state_resets_per_prompt);
    RUN(test_params_set_and_defaults);
    RUN(test_bad_policy_parameters);
    RUN(test_cost_prefix_synthetic);
    RUN(test_cost_curve_corrected);
    RUN(test_cost_prices_lazy_rows);
    RUN(test_cost_acceptance_by_depth);
    RUN(test_cost_batch_load);
    RUN(test_draft_switch_synthetic);
    RUN(test_policy_features_match_traces);
    RUN(test_example_policy_in_one_file);
    return h_done();
}
