/* The cycle (infer/speculative/cycle.h, decode.c): greedy turns of every
 * policy against goldens recorded before the policies' programs became the
 * only cycle (tests/golden/cycle_goldens.txt) and against plain greedy
 * decoding (ar's tokens, lossless); and for every policy the cycle run as a
 * GPU runs it (a backend that records units and issues each twice,
 * strict_backend.h), and verification by walking (--verify walk, decode.h),
 * against the same cycle run op by op with the tree forward: each cycle's
 * verified tree node by node (token, parent, depth, rank, p, P, H bit for
 * bit), the tokens, τ and γ, the units and the host reads (c2t on the
 * shipped classifiers and on made-up ones of every feature); on the test
 * checkpoints (every draft kind, a reduced EAGLE-3 draft vocabulary), the
 * demo family and SmolLM2 where it was made, and a draft without a model;
 * sampled decoding (temperature, top-k, top-p) the same recorded and op by
 * op from one seed, cycle by cycle and turn after turn (tests/test_decode.c
 * checks its distribution); and bad options refused in one line. */
#include "tests/harness.h"
#include "tests/script_draft.h"
#include "tests/strict_backend.h"
#include "infer/speculative/cycle.h"
#include "infer/speculative/decode.h"
#include "infer/session/observers.h"
#include "infer/model/generate.h"
#include "kernels/base/replay.h"
#include "kernels/base/util.h"
#include "kernels/cpu/cpu.h"
#include "train/export.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Different signatures a draft phase of fixed sizes may take in one run:
 * its buffers settle in the first cycles (a catch-up of more tokens than
 * before grows the head's scratch), and attention's context bound moves
 * every ATTN_CTX_BUCKET slots. */
#define DRAFT_SIGS_MAX 4

static const Backend *be;   /* the CPU backend, strict (main) */

/* The trees of one run, a copy per cycle (the reference), or the
 * comparison of another run's trees with them. */
typedef struct {
    Tree *trees;
    int n, cap;
    Decoder *dec;    /* the compared run: whose cycle to read */
    int mismatches, compared;
} TreeLog;

static void tree_copy(const Tree *t, Tree *out) {
    int *all = xmalloc(sizeof(int) * t->n);
    for (int i = 0; i < t->n; i++) all[i] = i;
    tree_init(out);
    tree_subset(t, all, t->n, out);
    free(all);
}

static int log_tree(void *ctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)n_path; (void)cycle;
    TreeLog *log = ctx;
    if (log->n == log->cap) {
        log->cap = log->cap ? 2 * log->cap : 64;
        log->trees = xrealloc(log->trees, sizeof(Tree) * log->cap);
    }
    tree_copy(t, &log->trees[log->n++]);
    return 0;
}

/* The rows of a verification of n nodes on a recording backend. */
static int rows_of(int n, int pad_max) { return n <= pad_max ? verify_rows_bound(n, pad_max) : n; }

/* The cycles after the first whose verification has no more rows than
 * any before (a tree of up to pad_max nodes padded to its bucket, as a
 * recording backend's is): a program that reads after drafting verifies
 * those in a unit (more rows allocate, op by op). */
static long verify_units_expected(const TreeLog *log, int pad_max) {
    long units = 0;
    int most = 0;
    for (int i = 0; i < log->n; i++) {
        const int rows = rows_of(log->trees[i].n, pad_max);
        units += i > 0 && rows <= most;
        if (rows > most) most = rows;
    }
    return units;
}

/* How many buckets the verified trees' sizes fall in, and how many sizes. */
static int log_buckets(const TreeLog *log, int pad_max, int *sizes) {
    int seen[1024] = {0}, buckets = 0;
    *sizes = 0;
    for (int i = 0; i < log->n; i++) {
        const int n = log->trees[i].n, r = rows_of(n, pad_max);
        if (n < 1024 && !(seen[n] & 1)) { seen[n] |= 1; ++*sizes; }
        if (r < 1024 && !(seen[r] & 2)) { seen[r] |= 2; buckets++; }
    }
    return buckets;
}

static int same_tree(const Tree *a, const Tree *b) {
    const size_t ni = sizeof(int) * a->n, nf = sizeof(float) * a->n;
    return a->n == b->n && !memcmp(a->token, b->token, ni) && !memcmp(a->parent, b->parent, ni) &&
           !memcmp(a->depth, b->depth, ni) && !memcmp(a->rank, b->rank, ni) && !memcmp(a->p, b->p, nf) &&
           !memcmp(a->P, b->P, nf) && !memcmp(a->H, b->H, nf);
}

static int check_tree(void *ctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)n_path;
    TreeLog *log = ctx;
    /* a walk's tree is the one it read; a tree forward's the copy read for the hook */
    const int copy_ok = log->dec->walk || t == decoder_hook_tree(log->dec);
    log->mismatches += !t || !copy_ok || cycle >= log->n || !same_tree(t, &log->trees[cycle]);
    log->compared++;
    return 0;
}

static void log_free(TreeLog *log) {
    for (int i = 0; i < log->n; i++) tree_free(&log->trees[i]);
    free(log->trees);
}

typedef struct {
    const char *policy, *settings;   /* settings: KEY=VALUE lines */
} Case;

/* SAGE with α = 1 (k 1), so that its depth limit is Dmax', which a window
 * of one cycle lowers after every cycle that accepted fewer than 1.5
 * tokens (the demo eagle head accepts one, the test checkpoints' fewer)
 * down to Dmin, and raises after one that accepted more than two. */
#define SAGE_FEEDBACK "sage_k=1 sage_dmin=1 sage_dmax=4 sage_dceil=6 sage_wmin=2 sage_wmax=4 sage_window=1 " \
                      "sage_lower=1.5 sage_upper=2 sage_theta=0 sage_nmax=24"

/* How a decoder of a comparison verifies: the tree forward (the reference
 * runs op by op, MODE_PLAIN; the compared one recording, MODE_DEVICE), or
 * walking the tree read back, op by op (MODE_WALK) or recording its draft
 * phases (MODE_WALK_RECORDED). */
enum { MODE_PLAIN, MODE_DEVICE, MODE_WALK, MODE_WALK_RECORDED };

/* Walks verify the root alone (Decoder.walk_root_only) where set. */
static int case_root_only;

/* The sampling settings of the decoders decoder_for makes (zero: greedy). */
static SampleParams case_sp;

/* A decoder for the case, in that mode; NULL with err_set. */
static Decoder *decoder_for(const LlamaModel *m, Draft *d, const Case *c, int want_entropy, int mode, int slots,
                            Policy **p) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "%s", c->policy);
    prm.want_entropy = want_entropy;
    prm.topm = want_entropy ? 16 : 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", c->settings);
    for (char *save, *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        if (policy_params_set(&prm, kv, NULL)) return NULL;
    if (!(*p = policy_new(&prm))) return NULL;
    Decoder *dec = decoder_new(m, (*p)->needs_draft ? d : NULL, *p, slots + policy_max_nodes(*p), case_sp);
    if (dec && (*p)->wants_cost) decoder_watch_costs(dec);
    if (dec) dec->walk = mode == MODE_WALK || mode == MODE_WALK_RECORDED || case_root_only;
    if (dec) dec->walk_root_only = dec->walk && case_root_only;
    return dec;
}

/* Over the programs that read after drafting: the sizes of their verified
 * trees, and the buckets those fall in (verify_rows_bound). */
static long verify_sizes_seen, verify_buckets_seen;

/* Runs of each case over each prompt op by op with the tree forward (the
 * reference; walking op by op against MODE_WALK_RECORDED) against runs in
 * mode: the same trees, tokens and statistics, and greedy, ar's tokens;
 * with entropies recorded (topm 16) too when entropy_too. */
static void same_cycles_as(int mode, const LlamaModel *m, Draft *d, const Case *cases, int n_cases,
                           const int *const *prompts, const int *lens, int n_prompts, int max_new, int entropy_too,
                           const char *what) {
    int *ar = xmalloc(sizeof(int) * max_new * n_prompts), *n_ar = xmalloc(sizeof(int) * n_prompts);
    for (int q = 0; q < n_prompts && case_sp.temperature == 0; q++) {
        LlamaState *s = llama_state_new(m, lens[q] + max_new + 8);
        n_ar[q] = greedy_generate(s, prompts[q], lens[q], max_new, ar + q * max_new);
        llama_state_free(s);
    }
    for (int c = 0; c < n_cases; c++)
        for (int q = 0; q < n_prompts; q++)
            for (int ent = 0; ent < 1 + entropy_too; ent++) {
                Policy *ph = NULL, *pd = NULL;
                const int ref_mode = mode == MODE_WALK_RECORDED ? MODE_WALK : MODE_PLAIN;
                Decoder *host = decoder_for(m, d, &cases[c], ent, ref_mode, lens[q] + max_new + 8, &ph);
                Decoder *dev = host ? decoder_for(m, d, &cases[c], ent, mode, lens[q] + max_new + 8, &pd) : NULL;
                REQUIRE(host && dev, "%s %s %s: %s", what, cases[c].policy, cases[c].settings, err_get());
                TreeLog log = {0};
                decoder_set_hook(host, log_tree, &log, 1);
                int *out_h = xmalloc(sizeof(int) * max_new), *out_d = xmalloc(sizeof(int) * max_new);
                DecodeStats sh, sd;
                int nh = decoder_run(host, prompts[q], lens[q], max_new, out_h, &sh);
                log.dec = dev;
                decoder_set_hook(dev, check_tree, &log, 1);
                /* the compared run on a backend that records as a GPU does
                 * (strict_backend.h): every unit issued twice */
                strict_recording = mode == MODE_DEVICE || mode == MODE_WALK_RECORDED;
                strict_recording_reset();
                int nd = decoder_run(dev, prompts[q], lens[q], max_new, out_d, &sd);
                strict_recording = 0;
                REQUIRE(nh > 0 && nd > 0, "%s %s: %s", what, cases[c].policy, err_get());
                CHECK(case_sp.temperature > 0 || (nh == n_ar[q] && !memcmp(out_h, ar + q * max_new, sizeof(int) * nh)),
                      "%s %s %s prompt %d: not ar's tokens", what, cases[c].policy, cases[c].settings, q);
                CHECK(nh == nd && !memcmp(out_h, out_d, sizeof(int) * nh), "%s %s %s prompt %d: tokens differ", what,
                      cases[c].policy, cases[c].settings, q);
                CHECK(!case_root_only || sd.cycles == nd - 1, "%s %s: %lld cycles for %d tokens, walking the root "
                      "alone", what, cases[c].policy, (long long)sd.cycles, nd);
                /* A walk's draft features come from one-token products: the
                 * tree forward's bit for bit up to FEW_TOKENS nodes (cpu.h),
                 * in the last bits beyond (its tokens are still ar's). */
                if (mode == MODE_WALK && policy_max_nodes(ph) > FEW_TOKENS) {
                    printf("# %s %s %s prompt %d: %d of %d trees bit for bit (tau %.2f against %.2f)\n", what,
                           cases[c].policy, cases[c].settings, q, log.n - log.mismatches, log.n,
                           decode_stats_tau(&sd), decode_stats_tau(&sh));
                    goto next;
                }
                CHECK(sh.cycles == sd.cycles && sh.gamma == sd.gamma && sh.cycle_tokens == sd.cycle_tokens,
                      "%s %s %s prompt %d: cycles %lld/%lld gamma %lld/%lld", what, cases[c].policy, cases[c].settings,
                      q, (long long)sh.cycles, (long long)sd.cycles, (long long)sh.gamma, (long long)sd.gamma);
                CHECK(log.mismatches == 0 && log.compared == log.n,
                      "%s %s %s prompt %d entropy %d: %d of %d trees differ (%d compared)", what, cases[c].policy,
                      cases[c].settings, q, ent, log.mismatches, log.n, log.compared);
                /* the cycle's own reads, not the hook's copies of its trees */
                const long reads = mode == MODE_DEVICE ? cycle_host_reads(dev->dc) - dev->dc->tree_reads : 1;
                CHECK(reads > 0, "the cycle counts no host reads");
                /* Every forward reads its inputs on the device: the host
                 * reads the walk, once a cycle where it is not lazy, and
                 * pass counts only where a threshold prunes. */
                /* a walk reads each tree once, then forwards its path
                 * from the host; its draft phases are units as the tree
                 * forward's are, without the verification */
                if (mode == MODE_WALK_RECORDED) {
                    CHECK(dev->dc->tree_reads == sd.cycles && dev->dc->walk_reads == 0 && dev->dc->verify_units == 0,
                          "%s %s %s: %ld trees and %ld walks read in %lld cycles, %ld verifications in units", what,
                          cases[c].policy, cases[c].settings, dev->dc->tree_reads, dev->dc->walk_reads,
                          (long long)sd.cycles, dev->dc->verify_units);
                    CHECK(strict_unit_mismatches == 0 && strict_unit_transfers == 0,
                          "%s %s %s: %ld units issued differently, %ld transfers inside", what, cases[c].policy,
                          cases[c].settings, strict_unit_mismatches, strict_unit_transfers);
                }
                if (mode == MODE_DEVICE) {
                    const int thresholds = !strcmp(cases[c].policy, "c2t") || strstr(cases[c].settings, "early_stop");
                    CHECK(thresholds || dev->dc->count_reads == 0, "%s %s %s: %ld pass counts read without a threshold",
                          what, cases[c].policy, cases[c].settings, dev->dc->count_reads);
                    /* SAGE and WETAP read each expansion's distributions,
                     * eagle2's min_p each expansion's P, a draft without a
                     * model its inputs; nothing else does */
                    const int dists = pd->needs_draft && (!strcmp(cases[c].policy, "sage") ||
                                                          !strcmp(cases[c].policy, "wetap") ||
                                                          strstr(cases[c].settings, "min_p") || d->ops->expand);
                    CHECK(dists ? dev->dc->expand_reads >= sd.cycles : dev->dc->expand_reads == 0,
                          "%s %s %s: %ld expansions read in %lld cycles", what, cases[c].policy, cases[c].settings,
                          dev->dc->expand_reads, (long long)sd.cycles);
                    /* c2t's fixed-shape program reads its counts once a cycle */
                    CHECK(!pd->build_end || dev->dc->count_reads == sd.cycles, "%s %s %s: %ld count reads in %lld "
                          "cycles", what, cases[c].policy, cases[c].settings, dev->dc->count_reads, (long long)sd.cycles);
                    CHECK(policy_max_nodes(pd) > lazy_logits_nodes(be) || dev->dc->walk_reads == sd.cycles,
                          "%s %s %s: %ld walks read in %lld cycles", what, cases[c].policy, cases[c].settings,
                          dev->dc->walk_reads, (long long)sd.cycles);
                }
                if (mode == MODE_DEVICE) {
                    /* Recorded units: every forward and, where the policy
                     * and draft allow, each draft phase after the first,
                     * signed alike on both issues, with no transfer inside;
                     * at fixed sizes the draft phases sign alike from
                     * cycle to cycle (a GPU replays one graph). */
                    const int unit = pd->build_unit && pd->needs_draft && draft_unit_ok(d);
                    const DevCycle *dc = dev->dc;
                    CHECK(strict_units > 0 && strict_unit_mismatches == 0 && strict_unit_transfers == 0,
                          "%s %s %s: %ld units, %ld issued differently, %ld transfers inside", what, cases[c].policy,
                          cases[c].settings, strict_units, strict_unit_mismatches, strict_unit_transfers);
                    CHECK(dc->units == (unit ? dc->cycles - 1 : 0) && strict_draft_units == dc->units,
                          "%s %s %s: %ld of %ld draft phases as units (%ld seen growing a tree)", what,
                          cases[c].policy, cases[c].settings, dc->units, dc->cycles, strict_draft_units);
                    CHECK(strict_n_draft_sigs <= DRAFT_SIGS_MAX, "%s %s %s: %d signatures of %ld draft phases", what,
                          cases[c].policy, cases[c].settings, strict_n_draft_sigs, strict_draft_units);
                    /* a unit verifies and walks the tree too where every
                     * row gets logits: the cycle's one read is after it;
                     * a program that reads after drafting verifies in a
                     * unit of its own where its draft phase was one, op by
                     * op where the tree is larger than any before (it
                     * allocates) */
                    CHECK(strict_walk_units == dc->walked_units &&
                              dc->verify_units == (pd->build_end && unit ? verify_units_expected(&log, dc->pad_max) : dc->units) &&
                              (policy_max_nodes(pd) > lazy_logits_nodes(be) || dc->walked_units == dc->verify_units),
                          "%s %s %s: %ld of %ld units verified, %ld walked the tree (%ld seen)", what,
                          cases[c].policy, cases[c].settings, dc->verify_units, dc->units, dc->walked_units,
                          strict_walk_units);
                    /* a verification of its own (after a program's read)
                     * is padded to its size's bucket: a recording per
                     * bucket, not per size, and per bound of attention's
                     * context (attn_ctx_bound) the run's contexts span */
                    int sizes = 0, bounds = 0;
                    const int buckets = log_buckets(&log, dc->pad_max, &sizes), slots = lens[q] + max_new + 8 + dc->cap;
                    for (int ctx = lens[q], last = 0; ctx <= slots; ctx++) {
                        const int b = attn_ctx_bound(ctx, slots);
                        bounds += b != last;
                        last = b;
                    }
                    CHECK(!pd->build_end || strict_n_verify_sigs <= buckets * bounds,
                          "%s %s %s: %d signatures of verifications for trees of %d sizes in %d buckets, contexts "
                          "under %d bounds", what, cases[c].policy, cases[c].settings, strict_n_verify_sigs, sizes,
                          buckets, bounds);
                    if (pd->build_end) { verify_sizes_seen += sizes; verify_buckets_seen += buckets; }
                    if (q == 0 && ent == 0)
                        printf("# %s %s %s: %.1f host reads a cycle (tau %.2f); %ld cycles as units (%ld walked "
                               "in them), %d signatures; verifications: %d signatures, %d sizes in %d buckets\n",
                               what, cases[c].policy, cases[c].settings, (double)reads / sd.cycles,
                               decode_stats_tau(&sd), dc->units, dc->walked_units, strict_n_draft_sigs,
                               strict_n_verify_sigs, sizes, buckets);
                }
            next:
                log_free(&log);
                free(out_h); free(out_d);
                decoder_free(host); decoder_free(dev);
                policy_free(ph); policy_free(pd);
            }
    free(ar); free(n_ar);
}

/* Both comparisons: recording and walking (walk_too 0: recording alone). */
static void same_cycles_walk(const LlamaModel *m, Draft *d, const Case *cases, int n_cases, const int *const *prompts,
                             const int *lens, int n_prompts, int max_new, int entropy_too, int walk_too,
                             const char *what) {
    same_cycles_as(MODE_DEVICE, m, d, cases, n_cases, prompts, lens, n_prompts, max_new, entropy_too, what);
    if (!walk_too) return;
    char walk[128];
    snprintf(walk, sizeof walk, "%s, walking", what);
    same_cycles_as(MODE_WALK, m, d, cases, n_cases, prompts, lens, n_prompts, max_new, entropy_too, walk);
}
static void same_cycles(const LlamaModel *m, Draft *d, const Case *cases, int n_cases, const int *const *prompts,
                        const int *lens, int n_prompts, int max_new, int entropy_too, const char *what) {
    same_cycles_walk(m, d, cases, n_cases, prompts, lens, n_prompts, max_new, entropy_too, 1, what);
}

static const Case TREE_CASES[] = {
    {"ar", ""}, {"static", ""}, {"static", "static_tree=0;1;2;0,0;0,1;1,0;0,0,0;0,0,1"},
    {"eagle2", ""}, {"eagle2", "topk=4 depth=3 total=12"}, {"eagle2", "topk=5 depth=4 total=all"},
    {"eagle2", "topk=3 depth=5 total=6"}, {"eagle2", "topk=4 depth=4 total=10 min_p=0.004"},
};
#define N_TREE_CASES (int)(sizeof TREE_CASES / sizeof *TREE_CASES)
static const Case CHAIN_CASE[] = {{"chain", "draft_len=5"}, {"ar", ""}};

/* SAGE and WETAP, whose device programs choose on the host from the
 * distributions they read: SAGE with the cap binding, with widths from α
 * (θ low enough for the test models' flat drafts), and with α = 1 (k 1:
 * depth limit Dmax') and a window of one cycle that moves Dmax' after
 * nearly every cycle (feedback); WETAP pruned to its budget by both
 * stages, with other γ and α, and unpruned. */
static const Case SAGE_WETAP_CASES[] = {
    {"sage", "sage_dmin=2 sage_dmax=4 sage_wmin=1 sage_wmax=3 sage_k=4 sage_nmax=8 sage_window=2 sage_dceil=6 "
             "sage_theta=0.01"},
    {"sage", "sage_theta=0.002 sage_nmax=20 sage_wmax=6 sage_k=6"},
    {"sage", SAGE_FEEDBACK},
    {"wetap", "wetap_wmin=4 wetap_wmax=16 wetap_budget=24"},
    {"wetap", "wetap_depth=3 wetap_wmin=2 wetap_wmax=6 wetap_gamma=0.5 wetap_alpha=0.3 wetap_budget=8"},
    {"wetap", "wetap_depth=4 wetap_wmin=3 wetap_wmax=5 wetap_budget=100"},
};
#define N_SAGE_WETAP (int)(sizeof SAGE_WETAP_CASES / sizeof *SAGE_WETAP_CASES)

/* Two made-up classifiers for c2t (written once, to /tmp): one of every
 * known feature, P and p through log; one of depth and rank alone, whose
 * confidences tie within a layer and along paths, so that the frontier's
 * and the cap's tie rules decide. */
static char cls_all[64], cls_ties[64];

static void write_classifier(char *path, const ClsFeatureId *ids, int n_feat, uint64_t seed, float bias) {
    Classifier *c = classifier_new(16, n_feat, ids);
    REQUIRE(c, "%s", err_get());
    for (int k = 0; k < n_feat; k++) {
        const int log_it = ids[k] == CLS_F_P || ids[k] == CLS_F_LOCAL_P;
        const int entropy = ids[k] == CLS_F_H || ids[k] == CLS_F_PARENT_H;   /* the test models' H are large */
        c->feat[k] = (ClsFeature){ids[k], log_it ? CLS_LOG : CLS_RAW, 1e-6f, log_it ? -3.0f : entropy ? 3.0f : 1.0f, 2.0f};
    }
    const int n = classifier_nparams(c);
    float *theta = xmalloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
        theta[i] = (float)((seed >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
    }
    classifier_set_params(c, theta);
    c->fc2_b = bias;   /* the share of nodes that pass */
    cJSON *j = classifier_to_json(c);
    char *text = cJSON_Print(j);
    snprintf(path, 64, "/tmp/c2t_cycle_cls_%d_XXXXXX", n_feat);
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    write_file(path, text);
    free(text); cJSON_Delete(j); free(theta); classifier_free(c);
}

static void make_classifiers(void) {
    if (cls_all[0]) return;
    const ClsFeatureId all[] = {CLS_F_P, CLS_F_H, CLS_F_DEPTH, CLS_F_LOCAL_P, CLS_F_RANK, CLS_F_PARENT_H};
    const ClsFeatureId ties[] = {CLS_F_DEPTH, CLS_F_RANK};
    write_classifier(cls_all, all, 6, 0x243F6A8885A308D3ULL, 1.5f);
    write_classifier(cls_ties, ties, 2, 0x13198A2E03707344ULL, 0.0f);
}

static void remove_classifiers(void) {
    if (cls_all[0]) { unlink(cls_all); unlink(cls_ties); }
}

/* c2t on the made-up classifiers: the whole tree, a cap, ties, each by
 * the program a recording backend gets (auto: fixed shapes) and two by the
 * per-layer one; and the chain's early stops (DyMax, DyJoint, C2T's
 * confidence), by both programs */
static char c2t_settings[11][256];
static Case C2T_CASES[5], STOP_CASES[6];
static void c2t_cases(void) {
    make_classifiers();
    snprintf(c2t_settings[0], 256, "classifier=%s topk=6 beta=0.45", cls_all);
    snprintf(c2t_settings[1], 256, "classifier=%s topk=4 depth=5 beta=0.3 total=7", cls_all);
    snprintf(c2t_settings[2], 256, "classifier=%s topk=3 depth=6 beta=0.2 total=10", cls_ties);
    snprintf(c2t_settings[3], 256, "classifier=%s topk=6 beta=0.45 program=layers", cls_all);
    snprintf(c2t_settings[4], 256, "classifier=%s topk=3 depth=6 beta=0.2 total=10 program=layers", cls_ties);
    snprintf(c2t_settings[5], 256, "draft_len=6 early_stop=dymax threshold=0.05");
    snprintf(c2t_settings[6], 256, "draft_len=6 early_stop=dyjoint threshold=0.002");
    snprintf(c2t_settings[7], 256, "draft_len=6 early_stop=c2t classifier=%s beta=0.5", cls_all);
    snprintf(c2t_settings[8], 256, "draft_len=6 early_stop=dymax threshold=0.05 program=layers");
    snprintf(c2t_settings[9], 256, "draft_len=6 early_stop=dyjoint threshold=0.002 program=layers");
    snprintf(c2t_settings[10], 256, "draft_len=6 early_stop=c2t classifier=%s beta=0.5 program=layers", cls_all);
    for (int i = 0; i < 5; i++) C2T_CASES[i] = (Case){"c2t", c2t_settings[i]};
    for (int i = 0; i < 6; i++) STOP_CASES[i] = (Case){"chain", c2t_settings[5 + i]};
}

/* A draft without a model (DraftOps.expand): children from the node's
 * token, depth and rank alone, over the target's vocabulary of *ctx ids. */
static int made_up_children(void *ctx, const Tree *t, int node, int k, int *ids, float *probs, float *entropy) {
    const int V = *(const int *)ctx;
    for (int r = 0; r < k; r++) {
        ids[r] = (t->token[node] * 31 + t->depth[node] * 7 + r * 13) % V;
        probs[r] = 0.6f / (float)(r + 1 + t->depth[node]);
    }
    if (entropy) *entropy = 0.25f * (float)(1 + t->depth[node]);
    return 0;
}

/* Sizes: make test compares each case on one prompt over 24 new tokens, a
 * dozen cycles or more whose trees vary in size and shape (the padding
 * test below checks that sizes shared buckets); a second prompt and more
 * tokens only repeat the same comparisons, so make test-long runs them
 * (two prompts, 40-48 tokens). */
#define N_PROMPTS TEST_SIZE(1, 2)

/* The test checkpoints: each draft kind, a reduced draft vocabulary.  The
 * first draft of each kind (LM, EAGLE, EAGLE-3) runs every case, with and
 * without entropies: every guess accepted (the target as its own draft)
 * and most rejected (the heads).  The others differ from it in family,
 * dtype, block types, file format or draft vocabulary, which change the
 * forwards and the draft phase a unit records, not the policies' programs:
 * they run one case of each program (a chain or EAGLE-2's tree, the static
 * tree, c2t's two programs, an early stop, SAGE, WETAP); make test-long
 * runs every case on every draft. */
static int first_of_kind(int i) {
    for (int j = 0; j < i; j++)
        if (!strcmp(LOSSLESS_DRAFTS[j][1], LOSSLESS_DRAFTS[i][1])) return 0;
    return 1;
}

static void test_cycle_recorded_every_draft(void) {
    const int p0[] = {1, 21, 208, 255, 244, 151, 37, 9}, p1[] = {1, 99, 98, 97, 96, 95, 94, 93};
    const int *prompts[] = {p0, p1}, lens[] = {8, 8}, np = N_PROMPTS, max_new = TEST_SIZE(24, 40);
    c2t_cases();
    for (int i = 0; i < N_LOSSLESS_DRAFTS; i++) {
        LlamaModel *m = llama_load(LOSSLESS_DRAFTS[i][0], be);
        REQUIRE(m, "%s", err_get());
        Draft *d = draft_load(LOSSLESS_DRAFTS[i][1], LOSSLESS_DRAFTS[i][2], m, 4096);
        REQUIRE(d, "%s", err_get());
        const int lm = !strcmp(LOSSLESS_DRAFTS[i][1], "lm");
        const char *what = LOSSLESS_DRAFTS[i][2];
        if (first_of_kind(i) || test_long()) {
            same_cycles(m, d, lm ? CHAIN_CASE : TREE_CASES, lm ? 2 : N_TREE_CASES, prompts, lens, np, max_new, 1, what);
            if (lm) same_cycles(m, d, TREE_CASES + 1, 2, prompts, lens, np, max_new, 1, what);
            same_cycles(m, d, C2T_CASES, 5, prompts, lens, np, max_new, 1, what);
            same_cycles(m, d, STOP_CASES, 6, prompts, lens, np, max_new, 1, what);
            same_cycles_walk(m, d, SAGE_WETAP_CASES, N_SAGE_WETAP, prompts, lens, np, max_new, 1, 0, what);
        } else {
            const Case each[] = {lm ? CHAIN_CASE[0] : TREE_CASES[3], TREE_CASES[1], C2T_CASES[0], C2T_CASES[3],
                                 STOP_CASES[2], SAGE_WETAP_CASES[0], SAGE_WETAP_CASES[3]};
            same_cycles(m, d, each, (int)(sizeof each / sizeof *each), prompts, lens, np, max_new, 0, what);
        }
        draft_free(d);
        llama_free(m);
    }
}

/* Walking (the program's tree read, then the host's walk) with its draft
 * phases recorded against walking op by op: the same trees, tokens, τ and
 * γ, over each kind of program (fixed shape, one read after drafting, a
 * threshold per layer, SAGE's feedback, WETAP), an EAGLE-3 draft, and
 * verifying the root alone (--every-position). */
static void test_cycle_walks(void) {
    const int p0[] = {1, 21, 208, 255, 244, 151, 37, 9}, *prompts[] = {p0}, lens[] = {8}, max_new = 24;
    c2t_cases();
    const Case cases[] = {TREE_CASES[4], TREE_CASES[5], CHAIN_CASE[0], C2T_CASES[1], C2T_CASES[3], STOP_CASES[2],
                          SAGE_WETAP_CASES[2], SAGE_WETAP_CASES[3]};
    for (int i = 2; i < 4; i++) {
        LlamaModel *m = llama_load(LOSSLESS_DRAFTS[i][0], be);
        REQUIRE(m, "%s", err_get());
        Draft *d = draft_load(LOSSLESS_DRAFTS[i][1], LOSSLESS_DRAFTS[i][2], m, 4096);
        REQUIRE(d, "%s", err_get());
        same_cycles_as(MODE_WALK_RECORDED, m, d, cases, i == 2 ? 8 : 2, prompts, lens, 1, max_new, 0,
                       LOSSLESS_DRAFTS[i][2]);
        case_root_only = 1;
        same_cycles_as(MODE_WALK_RECORDED, m, d, cases, 4, prompts, lens, 1, max_new, 0, "the root alone");
        case_root_only = 0;
        draft_free(d);
        llama_free(m);
    }
}

/* A draft without a model expands on the host from the cycle's pool
 * (read, counted): ar's tokens, and the same trees, tokens and statistics
 * recorded as op by op, for a fixed shape, a threshold and the policies
 * that read their distributions. */
static void test_cycle_draft_without_model(void) {
    const int p0[] = {1, 21, 208, 255, 244, 151, 37, 9}, *prompts[] = {p0}, lens[] = {8};
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", be);
    REQUIRE(m, "%s", err_get());
    int V = m->cfg.vocab;
    Draft *d = draft_scripted(made_up_children, &V);
    const Case cases[] = {{"eagle2", "topk=3 depth=3 total=10"}, {"chain", "draft_len=4 early_stop=dymax threshold=0.2"},
                          SAGE_WETAP_CASES[0], SAGE_WETAP_CASES[4]};
    same_cycles_walk(m, d, cases, 4, prompts, lens, 1, 16, 0, 0, "a draft without a model");
    draft_free(d);
    llama_free(m);
}

/* The demo family: its EAGLE head and its draft LM. */
static void test_cycle_recorded_demo(void) {
    const int p0[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, p1[] = {1, 7, 7, 7, 8000, 12, 19};
    const int *prompts[] = {p0, p1}, lens[] = {10, 7}, np = N_PROMPTS, max_new = TEST_SIZE(24, 48);
    const int ent = test_long();   /* entropies (topm 16): every draft kind of the test checkpoints compares them */
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/demo/eagle", m, 4096);
    REQUIRE(d, "%s", err_get());
    same_cycles(m, d, TREE_CASES, N_TREE_CASES, prompts, lens, np, max_new, ent, "demo eagle");
    const Case shipped[] = {{"c2t", "classifier=data/demo/classifier.json"}};
    c2t_cases();
    same_cycles(m, d, shipped, 1, prompts, lens, np, max_new, ent, "demo eagle, its classifier");
    same_cycles(m, d, C2T_CASES, 5, prompts, lens, np, max_new, ent, "demo eagle");
    draft_free(d);
    d = draft_load("lm", "data/demo/draft", m, 4096);
    REQUIRE(d, "%s", err_get());
    same_cycles(m, d, CHAIN_CASE, 1, prompts, lens, np, max_new, ent, "demo draft LM");
    const Case demo_stop[] = {{"chain", "early_stop=c2t classifier=data/demo/classifier.json"},
                              {"chain", "early_stop=c2t classifier=data/demo/classifier.json program=layers"}};
    same_cycles(m, d, demo_stop, 2, prompts, lens, np, max_new, ent, "demo draft LM, its classifier");
    same_cycles(m, d, STOP_CASES, 2, prompts, lens, np, max_new, ent, "demo draft LM");
    draft_free(d);
    llama_free(m);
}

/* SmolLM2 with the shipped head: EAGLE-2's defaults and a small tree over
 * a reduced draft vocabulary. */
static void test_cycle_recorded_smollm2(void) {
    if (!file_exists("models/smollm2-135m-instruct/model.safetensors")) SKIP("models/smollm2-135m-instruct absent (make smollm2)");
    const int p0[] = {1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3717, 314, 216, 30, 2, 198, 1, 4093, 198,
                      19161, 549, 253, 2203, 1730, 30, 2, 198, 1, 520, 9531, 198};
    const int *prompts[] = {p0}, lens[] = {(int)(sizeof p0 / sizeof *p0)};
    LlamaModel *m = llama_load("models/smollm2-135m-instruct", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/smollm2/eagle", m, 4096);
    REQUIRE(d, "%s", err_get());
    const Case full[] = {{"eagle2", ""}, {"c2t", "classifier=data/smollm2/classifier.json"}, {"static", ""},
                         {"c2t", "classifier=data/smollm2/classifier.json program=layers"}},
               small[] = {{"eagle2", "topk=4 depth=5 total=8"},
                          {"c2t", "classifier=data/smollm2/classifier.json topk=4 depth=5 total=8"}};
    /* On a real model, as on the small ones: the shipped head's full trees
     * (eagle2's 60 nodes) over 12 tokens, four cycles or more, and eagle2's
     * and c2t's small trees over a reduced vocabulary.  c2t on the shipped
     * classifier, the static tree and c2t's per-layer program add nothing
     * the demo family does not check, at 49,152-row products every draft
     * step, and walking, a forward a token, is compared on the small
     * models; make test-long runs them too, over 32 tokens. */
    const int max_new = TEST_SIZE(12, 32), walk = test_long();
    same_cycles_walk(m, d, full, TEST_SIZE(1, 4), prompts, lens, 1, max_new, 0, walk, "smollm2");
    REQUIRE(draft_set_vocab(d, 4096) == 0, "%s", err_get());
    same_cycles_walk(m, d, small, 2, prompts, lens, 1, max_new, 0, walk, "smollm2 draft vocabulary 4096");
    draft_free(d);
    llama_free(m);
}

/* Sampled decoding, turn after turn on one decoder op by op and one
 * recording: the tokens, cycles, accepted tokens and γ of every turn
 * equal, and the walks went past the root.  Adds the turns' accepted
 * tokens beyond one a cycle to *beyond. */
static void same_turns(const LlamaModel *m, Draft *d, const Case *c, const int *const *prompts, const int *lens,
                       int turns, int max_new, long *beyond) {
    Policy *ph = NULL, *pd = NULL;
    Decoder *host = decoder_for(m, d, c, 0, MODE_PLAIN, 64 + max_new, &ph);
    Decoder *dev = host ? decoder_for(m, d, c, 0, MODE_DEVICE, 64 + max_new, &pd) : NULL;
    REQUIRE(host && dev, "%s %s: %s", c->policy, c->settings, err_get());
    int *out_h = xmalloc(sizeof(int) * max_new), *out_d = xmalloc(sizeof(int) * max_new);
    for (int q = 0; q < turns; q++) {
        DecodeStats sh, sd;
        const int nh = decoder_run(host, prompts[q], lens[q], max_new, out_h, &sh);
        strict_recording = 1;
        const int nd = decoder_run(dev, prompts[q], lens[q], max_new, out_d, &sd);
        strict_recording = 0;
        REQUIRE(nh > 0 && nd > 0, "%s %s: %s", c->policy, c->settings, err_get());
        CHECK(nh == nd && !memcmp(out_h, out_d, sizeof(int) * nh) && sh.cycles == sd.cycles &&
                  sh.cycle_tokens == sd.cycle_tokens && sh.gamma == sd.gamma,
              "sampled %s %s turn %d: tokens or statistics differ (cycles %lld/%lld, tau %.3f/%.3f, gamma %lld/%lld)",
              c->policy, c->settings, q, (long long)sh.cycles, (long long)sd.cycles, decode_stats_tau(&sh),
              decode_stats_tau(&sd), (long long)sh.gamma, (long long)sd.gamma);
        *beyond += sd.cycle_tokens - sd.cycles;
    }
    free(out_h); free(out_d);
    decoder_free(host); decoder_free(dev);
    policy_free(ph); policy_free(pd);
}

/* Sampling (temperature > 0, with and without top-k and top-p): the cycle
 * draws every row's id at once (sample_dev) and walks (tree_accept), or
 * where the logits are lazy draws along the path; recorded and op by op,
 * with one seed both draw from the same keys and must take the same paths
 * and bonuses (test_decode.c checks what they emit against the target's
 * distribution).  Per cycle
 * (same_cycles_as: trees, tokens, τ, γ, units, reads) on eagle2 (a small
 * tree, and EAGLE-2's 60 nodes, whose logits are lazy on the CPU), c2t on
 * the demo classifier and a chain of the demo draft LM; then three turns
 * on one decoder pair, whose stream runs on from turn to turn. */
static void test_cycle_sampling_recorded(void) {
    const int p0[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, p1[] = {1, 7, 7, 7, 8000, 12, 19}, p2[] = {1, 31, 9};
    const int *prompts[] = {p0, p1, p2}, lens[] = {10, 7, 3};
    const SampleParams sps[] = {{0.8f, 0, 1.0f, 11}, {1.0f, 20, 0.9f, 12}};
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *eagle = draft_load("eagle", "data/demo/eagle", m, 4096), *lm = draft_load("lm", "data/demo/draft", m, 4096);
    REQUIRE(eagle && lm, "%s", err_get());
    const Case trees[] = {{"eagle2", "topk=3 depth=5 total=6"}, {"eagle2", ""},
                          {"c2t", "classifier=data/demo/classifier.json"}},
               chain[] = {{"chain", "draft_len=5"}};
    long beyond = 0;
    for (int i = 0; i < 2; i++) {
        case_sp = sps[i];
        char what[64];
        snprintf(what, sizeof what, "demo sampled T=%.1f top_k=%d top_p=%.1f", sps[i].temperature, sps[i].top_k,
                 sps[i].top_p);
        same_cycles_as(MODE_DEVICE, m, eagle, trees, 3, prompts, lens, 1, 24, 0, what);
        same_cycles_as(MODE_DEVICE, m, lm, chain, 1, prompts, lens, 1, 24, 0, what);
        for (int c = 0; c < 3; c++) same_turns(m, eagle, &trees[c], prompts, lens, 3, 16, &beyond);
        same_turns(m, lm, &chain[0], prompts, lens, 3, 16, &beyond);
    }
    case_sp = (SampleParams){0};
    CHECK(beyond > 0, "no sampled walk went past the root: the comparison says nothing of the walks");
    printf("# sampled turns: %ld tokens accepted beyond the bonus\n", beyond);
    draft_free(eagle); draft_free(lm);
    llama_free(m);
}

/* The keys a device program sized each drafted tree by against the tree
 * read back. */
typedef struct {
    Decoder *dec;
    int cycles, mismatches;
} KeysCheck;
static int check_keys(void *ctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)n_path; (void)cycle;
    KeysCheck *k = ctx;
    const Tree *keys = &k->dec->dc->keys;
    if (k->dec->cycle_off) return 0;   /* drafting switched off: the root alone */
    k->cycles++;
    int same = keys->n == t->n;
    for (int i = 0; same && i < t->n; i++) same = keys->P[i] == t->P[i] && keys->depth[i] == t->depth[i];
    k->mismatches += !same;
    return 0;
}

/* eagle2's total auto by the fixed program a GPU runs
 * (the whole pool drafted, one read of its keys, the host's ranking and
 * cost rule, the rerank there):
 * ar's tokens; one key read a drafted cycle; each verified tree holds the
 * nodes the host ranked and kept (tree_top's order is the host's); every
 * unit issued alike, nothing read inside.  Which size it keeps depends on
 * measured times, so no size is asserted. */
static void test_auto_sizes_fixed_program(void) {
    const int p0[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, p1[] = {1, 7, 7, 7, 8000, 12, 19};
    const int *prompts[] = {p0, p1}, lens[] = {10, 7}, max_new = 48;
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/demo/eagle", m, 4096);
    REQUIRE(d, "%s", err_get());
    const Case ar = {"ar", ""}, autos[] = {{"eagle2", "total=auto program=fixed"},
                                            {"eagle2", "topk=4 depth=3 total=auto program=fixed"}};
    for (int c = 0; c < 2; c++)
        for (int q = 0; q < 2; q++) {
            Policy *pa = NULL, *pd = NULL;
            Decoder *plain = decoder_for(m, d, &ar, 0, MODE_PLAIN, lens[q] + max_new + 8, &pa);
            Decoder *dev = plain ? decoder_for(m, d, &autos[c], 0, MODE_DEVICE, lens[q] + max_new + 8, &pd) : NULL;
            REQUIRE(plain && dev, "%s: %s", autos[c].settings, err_get());
            int *out_a = xmalloc(sizeof(int) * max_new), *out_d = xmalloc(sizeof(int) * max_new);
            DecodeStats sa, sd;
            const int na = decoder_run(plain, prompts[q], lens[q], max_new, out_a, &sa);
            KeysCheck k = {dev, 0, 0};
            decoder_set_hook(dev, check_keys, &k, 1);
            strict_recording = 1;
            strict_recording_reset();
            const int nd = decoder_run(dev, prompts[q], lens[q], max_new, out_d, &sd);
            strict_recording = 0;
            REQUIRE(na > 0 && nd > 0, "%s: %s", autos[c].settings, err_get());
            CHECK(na == nd && !memcmp(out_a, out_d, sizeof(int) * na), "%s prompt %d: not ar's tokens",
                  autos[c].settings, q);
            CHECK(k.cycles > 0 && k.mismatches == 0 && dev->dc->key_reads == k.cycles,
                  "%s prompt %d: %d of %d trees not as sized, %ld key reads", autos[c].settings, q, k.mismatches,
                  k.cycles, dev->dc->key_reads);
            const CostModel *cm = pd->cost;
            CHECK(cm->chosen == k.cycles && strict_unit_mismatches == 0 && strict_unit_transfers == 0,
                  "%s prompt %d: %ld sizes chosen in %d cycles; %ld units issued differently, %ld transfers inside",
                  autos[c].settings, q, (long)cm->chosen, k.cycles, strict_unit_mismatches,
                  strict_unit_transfers);
            if (q == 0)
                printf("# demo eagle2 %s on the device: tau %.2f, %.1f nodes a tree (p10 %d, p90 %d), %ld of %ld "
                       "cycles' draft phases as units\n",
                       autos[c].settings, decode_stats_tau(&sd), (double)cm->chosen_sum / cm->chosen,
                       cost_chosen_quantile(cm, 0.1), cost_chosen_quantile(cm, 0.9), dev->dc->units,
                       dev->dc->cycles);
            free(out_a); free(out_d);
            decoder_free(plain); decoder_free(dev);
            policy_free(pa); policy_free(pd);
        }
    draft_free(d);
    llama_free(m);
}

/* A cost model that every cycle of a decoder starts from (an observer
 * after the decoder's own "cost", which measures): the decisions of two
 * decoders holding it depend on their trees alone.  Its times are in units
 * of 2^60 seconds, so that the build's own measured expansion time
 * (cost_observe_expand, before its rerank) is lost in rounding. */
typedef struct {
    Observer base;
    CostModel costs;
} FixedCosts;
static void fixed_costs_begin(Observer *o, Decoder *dec) { *dec->policy->cost = ((FixedCosts *)o)->costs; }
static void fixed_costs_free(Observer *o) { free(o); }
static void fix_costs(Decoder *dec) {
    FixedCosts *f = xcalloc(1, sizeof *f);
    const double unit = 0x1p60;
    const int n[] = {1, 2, 4, 8, 16, 32, 64, 128};
    cost_init(&f->costs);
    for (int i = 0; i < 8; i++) cost_add_point(&f->costs, n[i], unit * (1 + 0.01 * n[i]));
    f->costs.draft_s = 0.15 * unit;
    f->costs.expand_s = 0.03 * unit;
    f->costs.expands = 4;
    f->costs.expand_cycles = f->costs.cycles = 100;
    /* acceptance below P, less so near the root (cost_estimate's factors) */
    for (int d = 1; d <= COST_DEPTHS; d++) f->costs.accept_ratio[d] = 1 - 0.04 * (d < 8 ? d : 8);
    f->base = (Observer){.name = "fixed costs", .cycle_begin = fixed_costs_begin, .destroy = fixed_costs_free};
    *dec->policy->cost = f->costs;   /* calibrated: the turn does not time a pass */
    decoder_watch(dec, &f->base);
}

/* The auto sizes' programs that read each expansion (a CPU's default;
 * eagle2's program=layers), op by op and recording under the same cost
 * model (fix_costs): the same trees node for node; ar's tokens; sizes
 * neither the whole pool nor the root alone; one expansion read (and
 * nothing else but the walk) per expansion, no key or count read. */
static void test_auto_sizes_reading_expansions(void) {
    const int p0[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, p1[] = {1, 7, 7, 7, 8000, 12, 19};
    const int *prompts[] = {p0, p1}, lens[] = {10, 7}, max_new = 32;
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/demo/eagle", m, 4096);
    REQUIRE(d, "%s", err_get());
    const Case ar = {"ar", ""}, autos[] = {
        {"eagle2", "total=auto program=layers"}, {"eagle2", "topk=4 depth=5 total=auto min_p=0.02"},
        {"chain", "draft_len=auto"}, {"chain", "draft_len=auto early_stop=dymax threshold=0.2"},
        {"c2t", "classifier=data/demo/classifier.json total=auto"}, {"sage", "sage_nmax=auto"}};
    /* the second prompt with entropies kept (H read with each expansion) */
    for (int c = 0; c < (int)(sizeof autos / sizeof *autos); c++)
        for (int q = 0; q < 2; q++) {
            Policy *pa = NULL, *ph = NULL, *pd = NULL;
            const int slots = lens[q] + max_new + 8;
            Decoder *plain = decoder_for(m, d, &ar, 0, MODE_PLAIN, slots, &pa);
            Decoder *host = plain ? decoder_for(m, d, &autos[c], q, MODE_PLAIN, slots, &ph) : NULL;
            Decoder *dev = host ? decoder_for(m, d, &autos[c], q, MODE_DEVICE, slots, &pd) : NULL;
            REQUIRE(plain && host && dev, "%s %s: %s", autos[c].policy, autos[c].settings, err_get());
            CHECK(!pd->build_end && !pd->build_unit, "%s %s: not the program that reads each expansion",
                  autos[c].policy, autos[c].settings);
            fix_costs(host);
            fix_costs(dev);
            int *out_a = xmalloc(sizeof(int) * max_new), *out_h = xmalloc(sizeof(int) * max_new),
                *out_d = xmalloc(sizeof(int) * max_new);
            DecodeStats sa, sh, sd;
            TreeLog log = {0};
            decoder_set_hook(host, log_tree, &log, 1);
            const int na = decoder_run(plain, prompts[q], lens[q], max_new, out_a, &sa);
            const int nh = decoder_run(host, prompts[q], lens[q], max_new, out_h, &sh);
            log.dec = dev;
            decoder_set_hook(dev, check_tree, &log, 1);
            strict_recording = 1;
            const int nd = decoder_run(dev, prompts[q], lens[q], max_new, out_d, &sd);
            strict_recording = 0;
            REQUIRE(na > 0 && nh > 0 && nd > 0, "%s %s: %s", autos[c].policy, autos[c].settings, err_get());
            CHECK(na == nd && !memcmp(out_a, out_d, sizeof(int) * na), "%s %s prompt %d: not ar's tokens",
                  autos[c].policy, autos[c].settings, q);
            CHECK(log.mismatches == 0 && log.compared == log.n && log.n == sd.cycles && sh.gamma == sd.gamma,
                  "%s %s prompt %d: %d of %d trees differ (%d compared), gamma %lld/%lld", autos[c].policy,
                  autos[c].settings, q, log.mismatches, log.n, log.compared, (long long)sh.gamma,
                  (long long)sd.gamma);
            /* the sizes chosen: not all of the pool, nor the root alone */
            const int most = policy_max_nodes(pd) - 1;
            CHECK(sd.gamma > sd.cycles && sd.gamma < (long long)most * sd.cycles,
                  "%s %s prompt %d: %lld nodes in %lld cycles of at most %d: the costs decide nothing",
                  autos[c].policy, autos[c].settings, q, (long long)sd.gamma, (long long)sd.cycles, most);
            const DevCycle *dc = dev->dc;
            CHECK(dc->key_reads == 0 && dc->count_reads == 0 && dc->expand_reads >= sd.cycles &&
                      cycle_host_reads(dc) - dc->tree_reads == dc->expand_reads + dc->walk_reads,
                  "%s %s prompt %d: %ld expansion, %ld key, %ld count and %ld walk reads in %lld cycles",
                  autos[c].policy, autos[c].settings, q, dc->expand_reads, dc->key_reads, dc->count_reads,
                  dc->walk_reads, (long long)sd.cycles);
            if (q == 0)
                printf("# %s %s: %.1f nodes a tree, %.1f expansion reads a cycle (tau %.2f)\n",
                       autos[c].policy, autos[c].settings, (double)sd.gamma / sd.cycles,
                       (double)dc->expand_reads / sd.cycles, decode_stats_tau(&sd));
            log_free(&log);
            free(out_a); free(out_h); free(out_d);
            decoder_free(plain); decoder_free(host); decoder_free(dev);
            policy_free(pa); policy_free(ph); policy_free(pd);
        }
    draft_free(d);
    llama_free(m);
}

/* The largest depth of the tree the hook is shown (read for it), per
 * cycle. */
typedef struct { int depths[256], cycles; } DepthLog;
static int log_depth(void *ctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)path; (void)n_path;
    DepthLog *log = ctx;
    if (cycle < 256) log->depths[cycle] = tree_max_depth(t);
    log->cycles = cycle + 1;
    return 0;
}

/* SAGE and WETAP: ar's tokens (lossless greedy decoding) on the demo family;
 * and SAGE's feedback at work there: its depth limit, Dmax' (α = 1),
 * takes more than one value over the turn, which only the accepted
 * counts fed back move. */
static void test_sage_wetap_lossless(void) {
    const int p0[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, p1[] = {1, 7, 7, 7, 8000, 12, 19};
    const int *prompts[] = {p0, p1}, lens[] = {10, 7}, max_new = TEST_SIZE(32, 48);
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    Draft *d = draft_load("eagle", "data/demo/eagle", m, 4096);
    REQUIRE(d, "%s", err_get());
    const Case ar = {"ar", ""};
    for (int c = 0; c < N_SAGE_WETAP; c++)
        for (int q = 0; q < N_PROMPTS; q++) {
            Policy *pa = NULL, *pd = NULL;
            Decoder *plain = decoder_for(m, d, &ar, 0, MODE_PLAIN, lens[q] + max_new + 8, &pa);
            Decoder *dev = plain ? decoder_for(m, d, &SAGE_WETAP_CASES[c], 0, MODE_PLAIN, lens[q] + max_new + 8, &pd) : NULL;
            REQUIRE(plain && dev, "%s: %s", SAGE_WETAP_CASES[c].settings, err_get());
            int *out_a = xmalloc(sizeof(int) * max_new), *out_d = xmalloc(sizeof(int) * max_new);
            DecodeStats sa, sd;
            DepthLog log = {{0}, 0};
            decoder_set_hook(dev, log_depth, &log, 1);
            const int na = decoder_run(plain, prompts[q], lens[q], max_new, out_a, &sa);
            const int nd = decoder_run(dev, prompts[q], lens[q], max_new, out_d, &sd);
            REQUIRE(na > 0 && nd > 0, "%s: %s", SAGE_WETAP_CASES[c].settings, err_get());
            CHECK(na == nd && !memcmp(out_a, out_d, sizeof(int) * na), "%s %s prompt %d: not ar's tokens",
                  SAGE_WETAP_CASES[c].policy, SAGE_WETAP_CASES[c].settings, q);
            CHECK(sd.gamma > sd.cycles, "%s %s prompt %d: %lld nodes drafted in %lld cycles, too few to tell",
                  SAGE_WETAP_CASES[c].policy, SAGE_WETAP_CASES[c].settings, q, (long long)sd.gamma,
                  (long long)sd.cycles);
            if (!strcmp(SAGE_WETAP_CASES[c].settings, SAGE_FEEDBACK)) {
                int lo = 64, hi = 0;
                for (int i = 0; i < log.cycles && i < 256; i++) {
                    if (log.depths[i] < lo) lo = log.depths[i];
                    if (log.depths[i] > hi) hi = log.depths[i];
                }
                CHECK(hi > lo, "sage feedback prompt %d: every tree %d deep over %d cycles", q, hi, log.cycles);
                if (q == 0) printf("# sage feedback: depths %d to %d over %d cycles\n", lo, hi, log.cycles);
            }
            free(out_a); free(out_d);
            decoder_free(plain); decoder_free(dev);
            policy_free(pa); policy_free(pd);
        }
    draft_free(d);
    llama_free(m);
}

/* Run after the comparisons: their trees of varying size took fewer
 * buckets than sizes, so the per-case bound on verification signatures
 * (one a bucket) said more than one a size would. */
static void test_padding_bounds_recordings(void) {
    CHECK(verify_sizes_seen > verify_buckets_seen, "%ld sizes of verified trees in %ld buckets: padding untested",
          verify_sizes_seen, verify_buckets_seen);
    printf("# programs that read after drafting: %ld sizes of verified trees in %ld buckets\n", verify_sizes_seen,
           verify_buckets_seen);
}

/* Goldens for the cycle's rework, labelled so: per draft, case and prompt,
 * a greedy turn's tokens (FNV-1a hash), cycles, γ and cycle tokens on the
 * demo family, recorded from the host cycle (each policy's host build and
 * host walk) before the policies' programs became the only cycle; the
 * cycle reproduces them line for line.  Not to be recorded again from the
 * cycle they check. */
#define GOLDENS "tests/golden/cycle_goldens.txt"
static void golden_line(const LlamaModel *m, Draft *d, const char *draft, const Case *c, const int *prompt, int np,
                        int q, char *line, size_t size) {
    const int max_new = 48;
    Policy *p = NULL;
    Decoder *dec = decoder_for(m, d, c, 0, MODE_PLAIN, np + max_new + 8, &p);
    REQUIRE(dec, "%s %s: %s", c->policy, c->settings, err_get());
    int out[48];
    DecodeStats st;
    const int n = decoder_run(dec, prompt, np, max_new, out, &st);
    REQUIRE(n > 0, "%s %s: %s", c->policy, c->settings, err_get());
    char settings[256];
    snprintf(settings, sizeof settings, "%s", *c->settings ? c->settings : "-");
    for (char *s = settings; *s; s++) if (*s == ' ') *s = ',';
    snprintf(line, size, "%s %s %s %d: n=%d hash=%016llx cycles=%lld gamma=%lld cycle_tokens=%lld\n", draft, c->policy,
             settings, q, n, (unsigned long long)fnv1a(out, sizeof(int) * n, FNV1A_START), (long long)st.cycles,
             (long long)st.gamma, (long long)st.cycle_tokens);
    decoder_free(dec);
    policy_free(p);
}

static void test_cycle_goldens(void) {
    const int p0[] = {1, 450, 3, 77, 1200, 31, 9, 600, 42, 5}, p1[] = {1, 7, 7, 7, 8000, 12, 19};
    const int *prompts[] = {p0, p1}, lens[] = {10, 7};
    static const Case eagle_cases[] = {
        {"ar", ""}, {"static", ""}, {"eagle2", ""}, {"eagle2", "topk=4 depth=3 total=12"},
        {"eagle2", "topk=4 depth=4 total=16 min_p=0.02"}, {"c2t", "classifier=data/demo/classifier.json"},
        {"sage", ""}, {"wetap", ""}, {"chain", "draft_len=4"}};
    static const Case lm_cases[] = {
        {"chain", "draft_len=5"}, {"chain", "early_stop=c2t classifier=data/demo/classifier.json"},
        {"eagle2", "topk=4 depth=4 total=16"}, {"sage", ""}, {"wetap", ""}};
    const struct { const char *kind, *dir; const Case *cases; int n; } drafts[] = {
        {"eagle", "data/demo/eagle", eagle_cases, (int)(sizeof eagle_cases / sizeof *eagle_cases)},
        {"lm", "data/demo/draft", lm_cases, (int)(sizeof lm_cases / sizeof *lm_cases)}};
    char *want = read_text_file(GOLDENS, NULL);
    REQUIRE(want, "%s: %s", GOLDENS, err_get());
    LlamaModel *m = llama_load("data/demo/target", be);
    REQUIRE(m, "%s", err_get());
    int lines = 0;
    for (int k = 0; k < 2; k++) {
        Draft *d = draft_load(drafts[k].kind, drafts[k].dir, m, 4096);
        REQUIRE(d, "%s", err_get());
        for (int c = 0; c < drafts[k].n; c++)
            for (int q = 0; q < 2; q++) {
                char line[512];
                golden_line(m, d, drafts[k].kind, &drafts[k].cases[c], prompts[q], lens[q], q, line, sizeof line);
                lines++;
                CHECK(strstr(want, line), "not in %s: %s", GOLDENS, line);
            }
        /* the LM's catch-ups kept the entries drafting wrote for accepted
         * paths (DraftOps.keeps_path) and the turns stayed the goldens' */
        if (d->ops->keeps_path) CHECK(d->kept_tokens > 0, "%s: no catch-up kept a drafted entry", drafts[k].dir);
        printf("# %s draft: %lld catch-up tokens kept from drafting\n", drafts[k].kind, d->kept_tokens);
        draft_free(d);
    }
    int golden_lines = 0;   /* every golden turn is one the cycle ran */
    for (const char *s = want; *s; s++) golden_lines += *s == '\n';
    CHECK(lines == golden_lines, "%d turns run against %d golden lines", lines, golden_lines);
    free(want);
    llama_free(m);
    printf("# %d golden turns reproduced\n", lines);
}

/* options the cycle cannot run, and an old command line's --cycle (one
 * cycle now: no such option): one line each */
static void test_bad_cycle_options(void) {
    char err[512];
    int rc;
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/llama3_f32 --questions x.jsonl --cycle device", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--cycle");
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/llama3_f32 --questions x.jsonl --verify all", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--verify");
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/llama3_f32 --draft tests/ckpt/eagle_tiny "
                 "--questions data/demo/prompts/code_test.jsonl "
                 "--verify walk --temperature 0.7", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--verify walk");
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --draft data/demo/eagle --template none "
                 "--questions data/demo/prompts/code_test.jsonl --max-new-tokens 8 --verify walk --total auto", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--total auto");
}

int main(void) {
    be = strict_backend();
    RUN(test_cycle_recorded_every_draft);
    RUN(test_cycle_recorded_demo);
    RUN(test_cycle_draft_without_model);
    RUN(test_cycle_walks);
    RUN(test_cycle_recorded_smollm2);
    RUN(test_cycle_sampling_recorded);
    RUN(test_auto_sizes_fixed_program);
    RUN(test_auto_sizes_reading_expansions);
    RUN(test_cycle_goldens);
    RUN(test_sage_wetap_lossless);
    RUN(test_bad_cycle_options);
    RUN(test_padding_bounds_recordings);
    remove_classifiers();
    RUN(test_forward_inputs_in_backend_memory);
    return h_done();
}
