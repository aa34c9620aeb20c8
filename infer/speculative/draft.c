/* What every draft source shares: loading by kind, the committed length, the
 * temporary slots and masks of a cycle's tree nodes, and the distribution op
 * on their logits.  The sources' forwards are in draft_eagle.c,
 * draft_eagle3.c and draft_lm.c. */
#include "infer/speculative/draft.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adding a draft source: its DraftOps and one entry here. */
static const DraftOps *const sources[] = {&draft_eagle_ops, &draft_eagle3_ops, &draft_lm_ops};
#define N_SOURCES (sizeof sources / sizeof *sources)

static const DraftOps *source_of(const char *kind) {
    for (size_t i = 0; i < N_SOURCES; i++)
        if (!strcmp(kind, sources[i]->kind)) return sources[i];
    return NULL;
}

const char *draft_kind_name(const Draft *d) { return d->ops->kind; }

const char *draft_kind_names(void) {
    static char names[128];
    if (!names[0]) {
        for (size_t i = 0; i < N_SOURCES; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s | ", sources[i]->kind);
        snprintf(names + strlen(names), sizeof names - strlen(names), "auto");
    }
    return names;
}

int draft_kind_known(const char *kind) { return source_of(kind) || !strcmp(kind, "auto"); }

const char *draft_kind_help(void) {
    static char help[512];
    if (!help[0]) {
        snprintf(help, sizeof help, "%s (default auto:", draft_kind_names());
        const char *fallback = "";
        for (size_t i = 0; i < N_SOURCES; i++) {
            if (sources[i]->detect)
                snprintf(help + strlen(help), sizeof help - strlen(help), "\n%25s%s when the draft's config.json %s,", "",
                         sources[i]->kind, sources[i]->detect_rule);
            if (sources[i]->auto_default) fallback = sources[i]->kind;
        }
        snprintf(help + strlen(help), sizeof help - strlen(help), " else %s)", fallback);
    }
    return help;
}

/* d2t into backend memory (d2t_dev), for the device cycle's tree_grow */
static void upload_map(Draft *d) {
    if (d->d2t_dev) d->be->release(d->d2t_dev);
    d->d2t_dev = NULL;
    if (!d->d2t) return;
    d->d2t_dev = backend_alloc_ints(d->be, d->Vd);
    backend_ints_to_device(d->be, d->d2t_dev, d->d2t, d->Vd);
}

Draft *draft_new(const DraftOps *ops, void *impl) {
    Draft *d = xcalloc(1, sizeof *d);
    d->ops = ops;
    d->impl = impl;
    d->temperature = 1.0f;
    return d;
}

/* The source --draft-kind auto picks for the checkpoint in dir. */
static const char *detect_kind(const char *dir) {
    char *path = path_join(dir, "config.json");
    ModelConfig c;
    int rc = config_load(path, &c);
    free(path);
    if (rc) return NULL;
    const char *fallback = NULL;
    for (size_t i = 0; i < N_SOURCES; i++) {
        if (sources[i]->detect && sources[i]->detect(&c)) return sources[i]->kind;
        if (sources[i]->auto_default) fallback = sources[i]->kind;
    }
    return fallback;
}

Draft *draft_load(const char *kind, const char *dir, const LlamaModel *target, int slots) {
    if (!kind || !strcmp(kind, "auto")) kind = detect_kind(dir);
    if (!kind) return NULL;
    const DraftOps *ops = source_of(kind);
    if (!ops) { err_set("unknown draft kind '%s' (%s)", kind, draft_kind_names()); return NULL; }
    Draft *d = draft_new(ops, NULL);
    d->target = target;
    d->be = target->be;
    d->slots = slots;
    d->V = target->cfg.vocab;
    d->H = target->cfg.hidden;
    d->Vd = d->V;
    d->feat_width = d->H;
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    if (ops->load(d, dir)) { draft_free(d); return NULL; }
    upload_map(d);
    d->root_logits = d->be->alloc(d->Vd);
    return d;
}

int draft_capture(const Draft *d, LlamaState *s) {
    return llama_capture(s, d->feat_layers, d->n_feat_layers);
}

const float *draft_features(const Draft *d, const LlamaState *s) {
    return d->n_feat_layers ? s->aux : s->hidden;
}

Draft *draft_clone(const Draft *src) {
    Draft *d = xmalloc(sizeof *d);
    *d = *src;
    d->impl = NULL;
    d->slot_of = NULL;
    d->node_cap = 0;
    d->n_past = d->n_temp = 0;
    d->ent_token = d->ent_parent = d->keep_dev = NULL;
    d->ent_n = d->ent_cap = d->keep_cap = 0;
    d->gate = NULL;
    d->t_dist = 0;
    d->d2t = NULL;
    d->d2t_dev = NULL;
    memset(&d->dev_inputs, 0, sizeof d->dev_inputs);
    d->past_dev = NULL;
    d->root_logits = NULL;
    if (!src->ops->clone) {
        free(d);
        err_set("a %s draft cannot decode several sequences at once", src->ops->kind);
        return NULL;
    }
    if (src->d2t) {
        d->d2t = xmalloc(sizeof(int) * src->Vd);
        memcpy(d->d2t, src->d2t, sizeof(int) * src->Vd);
        upload_map(d);
    }
    d->root_logits = d->be->alloc(d->Vd);
    if (src->ops->clone(d, src)) { draft_free(d); return NULL; }
    return d;
}

void draft_free(Draft *d) {
    if (!d) return;
    if (d->ops->free) d->ops->free(d);
    if (d->root_logits) d->be->release(d->root_logits);
    if (d->d2t_dev) d->be->release(d->d2t_dev);
    tree_inputs_free(&d->dev_inputs);
    if (d->past_dev) d->be->release(d->past_dev);
    if (d->keep_dev) d->be->release(d->keep_dev);
    free(d->slot_of);
    free(d->ent_token);
    free(d->ent_parent);
    free(d->d2t);
    free(d);
}

/* qsort_r order over ids: count descending, then id ascending */
static int by_count(const void *a, const void *b, void *counts) {
    int i = *(const int *)a, j = *(const int *)b;
    const int64_t *c = counts;
    if (c[i] != c[j]) return c[i] > c[j] ? -1 : 1;
    return i - j;
}
static int ascending(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The draft's token counts in an order of every id, most frequent first
 * (ties to the lower id), into *order, their counts into *counts; -1 +
 * err_set when the file is absent or malformed. */
static int counts_by_frequency(const Draft *d, int **order, int64_t **counts) {
    char *path = path_join(d->dir, DRAFT_COUNTS_FILE);
    SafeTensors *st = st_open(path);
    const StTensor *t = st ? st_find(st, "token_counts") : NULL;
    int rc = -1;
    if (!st) err_set("--draft-vocab needs the draft's token counts: %s", err_get());
    else if (!t || t->dtype != DT_I64 || t->ndim != 1 || t->shape[0] != d->V)
        err_set("%s: expected a tensor token_counts of I64 [%d]", path, d->V);
    else {
        int64_t *c = xmalloc(sizeof(int64_t) * d->V);
        memcpy(c, t->data, sizeof(int64_t) * d->V);
        rc = 0;
        for (int i = 0; i < d->V && !rc; i++)
            if (c[i] < 0) { err_set("%s: token_counts[%d] is negative (%lld)", path, i, (long long)c[i]); rc = -1; }
        if (!rc) {
            *order = xmalloc(sizeof(int) * d->V);
            for (int i = 0; i < d->V; i++) (*order)[i] = i;
            qsort_r(*order, d->V, sizeof(int), by_count, c);
            *counts = c;
        } else {
            free(c);
        }
    }
    st_close(st);
    free(path);
    return rc;
}

/* The n most frequent ids of the draft's token counts, ascending. */
static int *top_tokens(const Draft *d, int n) {
    int *order;
    int64_t *c;
    if (counts_by_frequency(d, &order, &c)) return NULL;
    int *ids = xmalloc(sizeof(int) * n);
    memcpy(ids, order, sizeof(int) * n);
    qsort(ids, n, sizeof(int), ascending);
    free(order); free(c);
    return ids;
}

double *draft_vocab_coverage(const Draft *d, int *seen, int *rank) {
    int *order;
    int64_t *c;
    if (counts_by_frequency(d, &order, &c)) return NULL;
    double total = 0;
    for (int i = 0; i < d->V; i++) total += (double)c[i];
    if (total <= 0) {
        err_set("%s/%s: every token count is 0", d->dir, DRAFT_COUNTS_FILE);
        free(order); free(c);
        return NULL;
    }
    double *cov = xmalloc(sizeof(double) * (d->V + 1)), run = 0;
    cov[0] = 0;
    *seen = 0;
    for (int i = 0; i < d->V; i++) {
        run += (double)c[order[i]];
        cov[i + 1] = run / total;
        if (rank) rank[order[i]] = i;
        if (c[order[i]] > 0) *seen = i + 1;
    }
    free(order); free(c);
    return cov;
}

int draft_set_vocab(Draft *d, int n) {
    const int full = n <= 0 || n >= d->V;
    if (full && (!d->d2t || !d->ops->set_vocab)) return 0;   /* (an EAGLE-3 head's own vocabulary stays) */
    if (!d->ops->set_vocab) {
        err_set("--draft-vocab: a %s draft cannot score a reduced vocabulary", d->ops->kind);
        return -1;
    }
    if (full) n = d->V;
    int *ids = full ? NULL : top_tokens(d, n);
    if (!full && !ids) return -1;
    if (d->ops->set_vocab(d, ids, n)) { free(ids); return -1; }
    free(d->d2t);
    d->d2t = ids;
    d->Vd = n;
    upload_map(d);
    d->be->release(d->root_logits);
    d->root_logits = d->be->alloc(n);
    return 0;
}

/* draft logit columns -> target token ids */
static void to_target_ids(const Draft *d, int *ids, int n) {
    if (!d->d2t) return;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0) ids[i] = d->d2t[ids[i]];
}

void draft_rewind(Draft *d, int k) {
    d->n_past = k > 0 ? k + d->ops->first_token_entry : 0;
    d->n_temp = 0;
    d->ent_n = 0;
    if (d->ops->rewind) d->ops->rewind(d);
}

int draft_prefix_max(const Draft *d) {
    const int k = d->n_past - d->ops->first_token_entry;
    return k > 0 ? k : 0;
}

/* A step through the draft's gate, or at once. */
static int draft_step(Draft *d, DraftStep *step) {
    if (d->gate) {
        GateCall call = {.kind = GATE_DRAFT, .step = step};
        return d->gate->pass(d->gate, &call);
    }
    return d->ops->run(&step, 1);
}

int draft_run_steps(DraftStep *const *steps, int n) {
    DraftStep **group = xmalloc(sizeof *group * (n ? n : 1));
    int rc = 0;
    uint8_t *done = xcalloc(n ? n : 1, 1);
    for (int i = 0; i < n && !rc; i++) {
        if (done[i]) continue;
        int g = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && steps[j]->d->ops == steps[i]->d->ops && steps[j]->catch_up == steps[i]->catch_up &&
                steps[j]->on_device == steps[i]->on_device) {
                group[g++] = steps[j];
                done[j] = 1;
            }
        rc = steps[i]->d->ops->run(group, g);
    }
    free(done);
    free(group);
    return rc;
}

/* Whether d records its entries for a catch-up to keep: a source that can
 * (DraftOps.keeps_path) with the tree and the KV cache in host memory (the
 * CPU backend; on a GPU the catch-up's forward costs about one token's
 * whatever it holds, and reading the tree back would wait on the device). */
static int entries_readable(const Draft *d, const Backend *tree_be) {
    return d->ops->keeps_path && !strcmp(d->be->name, "cpu") && !strcmp(tree_be->name, "cpu");
}

/* Entries [base, base + m) of this cycle: tokens tok[i] under the entries
 * parent[i] (-1: the root).  A record is whole from a cycle's first step
 * (base 0) while n_past stays. */
static void note_entries(Draft *d, int base, int m, const int *tok, const int *parent) {
    if (base == 0) {
        d->ent_n = 0;
        d->ent_past = d->n_past;
    }
    if (d->ent_n != base || d->ent_past != d->n_past) {
        d->ent_n = -1;
        return;
    }
    if (base + m > d->ent_cap) {
        d->ent_cap = 2 * (base + m);
        d->ent_token = xrealloc(d->ent_token, sizeof(int) * d->ent_cap);
        d->ent_parent = xrealloc(d->ent_parent, sizeof(int) * d->ent_cap);
    }
    for (int i = 0; i < m; i++) {
        d->ent_token[base + i] = tok[i];
        d->ent_parent[base + i] = parent[i] < base + i ? parent[i] : -2;   /* -2: matches nothing */
    }
    d->ent_n = base + m;
}

/* The longest prefix tokens[1..1+k) of an accepted path (tokens[0] the
 * root) that this cycle's entries hold, their entries into keep[0..k)
 * (ascending: a child's entry follows its parent's); k. */
static int kept_path(const Draft *d, const int *tokens, int m, int *keep) {
    if (d->ent_n <= 0 || d->ent_past != d->n_past) return 0;
    int k = 0, cur = -1;
    for (int j = 1; j < m; j++) {
        int e = cur + 1;
        while (e < d->ent_n && (d->ent_parent[e] != cur || d->ent_token[e] != tokens[j])) e++;
        if (e == d->ent_n) break;
        keep[k++] = cur = e;
    }
    return k;
}

int draft_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next) {
    d->n_temp = 0;
    int *keep = d->ent_n > 0 && m > 1 ? xmalloc(sizeof(int) * (m - 1)) : NULL;
    const int kept = keep ? kept_path(d, tokens, m, keep) : 0;
    d->ent_n = 0;   /* the catch-up writes over them */
    if (kept > d->keep_cap) {
        if (d->keep_dev) d->be->release(d->keep_dev);
        d->keep_cap = 2 * kept;
        d->keep_dev = backend_alloc_ints(d->be, d->keep_cap);
    }
    if (kept) backend_ints_to_device(d->be, d->keep_dev, keep, kept);
    free(keep);
    DraftStep step = {.d = d, .catch_up = 1, .tokens = tokens, .hidden = hidden, .m = m, .next = next,
                      .keep = d->keep_dev, .kept = kept};
    if (draft_step(d, &step)) return -1;
    d->kept_tokens += kept;
    d->rows_scored++;   /* the new root's */
    d->steps_scored++;
    d->n_past += step.added;
    return 0;
}

static void reserve_nodes(Draft *d, int nodes) {
    if (nodes <= d->node_cap) return;
    d->node_cap = nodes * 2;
    d->slot_of = xrealloc(d->slot_of, sizeof(int) * d->node_cap);
}

static int same_dist_shape(const DistCall *a, const DistCall *b) {
    return a->vocab == b->vocab && a->k == b->k && a->topm == b->topm && a->temperature == b->temperature &&
           !a->ids == !b->ids && !a->probs == !b->probs && !a->entropy == !b->entropy && a->on_device == b->on_device;
}

static void dist_run(const Backend *be, const DistCall *c, const float *logits, int n, int *ids, float *probs,
                     float *entropy) {
    if (c->on_device) be->softmax_topk_dev(logits, n, c->vocab, c->temperature, c->k, ids, probs, c->topm, entropy);
    else be->softmax_topk(logits, n, c->vocab, c->temperature, c->k, ids, probs, c->topm, entropy);
}

/* The group's outputs, rows [r, r + x->n) of the gathered ones, to x's
 * arrays (a device copy where they are backend memory). */
static void dist_scatter(const Backend *be, const DistCall *x, int r, int k, const int *ids, const float *probs,
                         const float *ent) {
    const size_t nk = (size_t)x->n * k;
    if (x->on_device) {
        if (ids) be->copy((float *)x->ids, (const float *)(ids + (size_t)r * k), nk);
        if (probs) be->copy(x->probs, probs + (size_t)r * k, nk);
        if (ent) be->copy(x->entropy, ent + r, x->n);
    } else {
        if (ids) memcpy(x->ids, ids + (size_t)r * k, sizeof(int) * nk);
        if (probs) memcpy(x->probs, probs + (size_t)r * k, sizeof(float) * nk);
        if (ent) memcpy(x->entropy, ent + r, sizeof(float) * x->n);
    }
}

void draft_dists(const Backend *be, DistCall *const *calls, int n) {
    uint8_t *done = xcalloc(n ? n : 1, 1);
    DistCall **group = xmalloc(sizeof *group * (n ? n : 1));
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        const DistCall *c = calls[i];
        int g = 0, rows = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && same_dist_shape(calls[j], c)) { group[g++] = calls[j]; rows += calls[j]->n; done[j] = 1; }
        if (g == 1) {
            dist_run(be, c, c->logits, c->n, c->ids, c->probs, c->entropy);
            continue;
        }
        const int k = c->k > 0 ? c->k : 0;
        const size_t nk = (size_t)rows * k + 1;
        /* a batched draft step's logits lie side by side in the order its
         * steps were given (the gate's): read in place, not gathered */
        int in_place = 1;
        for (int j = 1; j < g && in_place; j++)
            in_place = group[j]->logits == group[j - 1]->logits + (size_t)group[j - 1]->n * c->vocab;
        float *all = in_place ? NULL : be->alloc((size_t)rows * c->vocab);
        int *ids = !c->ids ? NULL : c->on_device ? backend_alloc_ints(be, nk) : xmalloc(sizeof(int) * nk);
        float *probs = !c->probs ? NULL : c->on_device ? be->alloc(nk) : xmalloc(sizeof(float) * nk);
        float *ent = !c->entropy ? NULL : c->on_device ? be->alloc(rows) : xmalloc(sizeof(float) * rows);
        for (int j = 0, r = 0; j < g && !in_place; r += group[j]->n, j++)
            be->copy(all + (size_t)r * c->vocab, group[j]->logits, (size_t)group[j]->n * c->vocab);
        dist_run(be, c, in_place ? group[0]->logits : all, rows, ids, probs, ent);
        for (int j = 0, r = 0; j < g; r += group[j]->n, j++) dist_scatter(be, group[j], r, k, ids, probs, ent);
        if (all) be->release(all);
        if (c->on_device) { be->release(ids); be->release(probs); be->release(ent); }
        else { free(ids); free(probs); free(ent); }
    }
    free(group);
    free(done);
}

/* One DistCall through the draft's gate (batched with the other waiting
 * sequences' where their shapes agree), or at once.  -1 when the gate's run
 * failed (the outputs were not written). */
static int dist_pass(Draft *d, DistCall *c) {
    double t0 = now_seconds();
    if (d->gate) {
        GateCall call = {.kind = GATE_DIST, .dist = c};
        if (d->gate->pass(d->gate, &call)) return -1;
    } else {
        draft_dists(d->be, &c, 1);
    }
    d->t_dist += now_seconds() - t0;
    return 0;
}

/* The distribution of n rows of draft logits through the draft's gate, or
 * at once; then draft columns -> target ids.  -1 when the gate's run failed
 * (the outputs were not written). */
static int draft_dist(Draft *d, const float *logits, int n, int k, int topm, int *ids, float *probs,
                      float *entropy) {
    DistCall c = {logits, n, d->Vd, k, topm, d->temperature, ids, probs, entropy, 0};
    if (dist_pass(d, &c)) return -1;
    to_target_ids(d, ids, n * k);
    return 0;
}

int draft_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                 float *probs, float *entropy) {
    if (n == 1 && nodes[0] == 0 && !d->ops->expand)   /* the catch-up scored the root */
        return draft_dist(d, d->root_logits, 1, k, topm, ids, probs, entropy);
    d->rows_scored += n;
    d->steps_scored++;
    if (d->ops->expand) return d->ops->expand(d, t, nodes, n, k, topm, ids, probs, entropy);
    reserve_nodes(d, t->n);
    const int base = d->n_past + d->n_temp, nctx = base + n;
    if (nctx > d->slots) {
        err_set("draft tree of %d entries exceeds the draft KV cache (%d slots)", nctx, d->slots);
        return -1;
    }
    int *tok = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n), *par = xmalloc(sizeof(int) * n);
    const int w = nctx - d->n_past;   /* the mask's window: this cycle's entries */
    uint8_t *mask = xcalloc((size_t)n * w, 1);
    for (int i = 0; i < n; i++) {
        int v = nodes[i];
        tok[i] = t->token[v];
        par[i] = t->parent[v];
        pos[i] = d->n_past - 1 + t->depth[v];
        uint8_t *row = mask + (size_t)i * w;
        for (int a = t->parent[v]; a > 0; a = t->parent[a]) row[d->slot_of[a] - d->n_past] = 1;
        row[base + i - d->n_past] = 1;
        d->slot_of[v] = base + i;
    }
    DraftStep step = {.d = d, .nodes = nodes, .par = par, .tok = tok, .pos = pos, .n = n, .tree_n = t->n, .mask = mask,
                      .mask_w = w};
    int rc = draft_step(d, &step);
    if (!rc && entries_readable(d, d->be)) {   /* the entries' parents, for note_entries */
        for (int i = 0; i < n; i++) par[i] = t->parent[nodes[i]] > 0 ? d->slot_of[t->parent[nodes[i]]] - d->n_past : -1;
        note_entries(d, d->n_temp, n, tok, par);
    }
    if (!rc) {
        d->n_temp += n;
        rc = draft_dist(d, step.logits, n, k, topm, ids, probs, entropy);
    }
    free(tok); free(pos); free(par); free(mask);
    return rc;
}

int draft_expand_dev(Draft *d, const Backend *tree_be, Gate *tree_gate, const DevTree *t, int n, int root,
                     const int *rows, int m, int k, int topm, int *ids, float *probs, float *entropy) {
    const float *logits = d->root_logits;
    if (!root) {
        const int base = d->n_past + d->n_temp, nctx = base + m;
        if (nctx > d->slots) {
            err_set("draft tree of %d entries exceeds the draft KV cache (%d slots)", nctx, d->slots);
            return -1;
        }
        if (!d->past_dev) {
            err_set("a device cycle's draft step before draft_cycle_origin");
            return -1;
        }
        /* counted from n_past where draft_cycle_origin put it: the same
         * arguments every cycle */
        tree_inputs_make(&d->dev_inputs, tree_be, tree_gate, t, rows, m, d->past_dev, d->n_temp, 0, -1, d->n_temp + m);
        const int *in = d->dev_inputs.dev;   /* the forward reads them where they are */
        DraftStep step = {.d = d, .nodes = in + 3 * m, .par = in + 2 * m, .tok = in, .pos = in + m, .n = m,
                          .tree_n = n, .mask = d->dev_inputs.dev_mask, .mask_w = nctx - d->n_past, .on_device = 1,
                          .past = in + 4 * m};
        if (draft_step(d, &step)) return -1;
        if (entries_readable(d, tree_be)) {   /* t and the inputs are host memory */
            int *par = xmalloc(sizeof(int) * m);
            for (int i = 0; i < m; i++) {
                const int p = t->parent[in[3 * m + i]];
                par[i] = p > 0 ? t->slot[p] - d->n_past : -1;   /* slots count from 0 there */
            }
            note_entries(d, d->n_temp, m, in, par);
            free(par);
        }
        d->n_temp += m;
        d->rows_scored += m;
        d->steps_scored++;
        logits = step.logits;
    } else {
        m = 1;
    }
    DistCall c = {logits, m, d->Vd, k, topm, d->temperature, ids, probs, entropy, 1};
    return dist_pass(d, &c);
}

void draft_end_cycle(Draft *d) {
    d->n_temp = 0;
    if (d->ops->end_cycle) d->ops->end_cycle(d);
}

void draft_cycle_origin(Draft *d) {
    if (d->ops->expand) return;   /* no model: no slots or positions */
    if (!d->past_dev) d->past_dev = backend_alloc_ints(d->be, 1);
    backend_ints_to_device(d->be, d->past_dev, &d->n_past, 1);
}

int draft_unit_ok(const Draft *d) { return !d->gate && !d->ops->expand; }

DraftCounts draft_counts(const Draft *d) { return (DraftCounts){d->n_temp, d->rows_scored, d->steps_scored, d->t_dist}; }

void draft_counts_restore(Draft *d, const DraftCounts *c) {
    d->n_temp = c->n_temp;
    d->rows_scored = c->rows_scored;
    d->steps_scored = c->steps_scored;
    d->t_dist = c->t_dist;
}

/* ---- A forward's inputs over rows of a tree (TreeInputs, tree.h): made in
 * backend memory by the tree op, read by the draft's and the target's
 * forwards. */

/* words of an input buffer of m rows with masks of w slots */
static size_t input_words(int m, int w) { return 4 * (size_t)m + 1 + ((size_t)m * w + 3) / 4; }

/* at least `words` words in in's buffer (twice that where it grows) */
static void inputs_room(TreeInputs *in, const Backend *be, size_t words, size_t grow_to) {
    if (in->be != be) { tree_inputs_free(in); in->be = be; }
    if (words <= in->cap) return;
    if (in->dev) be->release(in->dev);
    in->cap = grow_to;
    in->dev = backend_alloc_ints(be, in->cap);
}

void tree_inputs_reserve(TreeInputs *in, const Backend *be, int m, int w) {
    inputs_room(in, be, input_words(m, w), input_words(m, w));
}

void tree_inputs_make(TreeInputs *in, const Backend *be, Gate *gate, const DevTree *t, const int *rows, int m,
                      const int *at, int base, int ones, int pos0, int nctx) {
    const size_t ints = 4 * (size_t)m + 1, words = input_words(m, nctx - ones);
    inputs_room(in, be, words, 2 * words);
    in->dev_mask = (const uint8_t *)(const void *)(in->dev + ints);
    gate_tree_op(gate, be, &(TreeOp){.kind = TREE_OP_INPUTS, .t = *t, .rows = rows, .m = m, .at = at, .base = base,
                                     .ones = ones, .pos0 = pos0, .nctx = nctx, .out = in->dev,
                                     .mask = (uint8_t *)(void *)(in->dev + ints)});
}

void tree_inputs_free(TreeInputs *in) {
    if (in->dev) in->be->release(in->dev);
    memset(in, 0, sizeof *in);
}
