#include "infer/model/llama.h"
#include "kernels/base/quant.h"
#include "kernels/base/replay.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int llama_load_weight(const Backend *be, const SafeTensors *st, const char *name, int64_t rows,
                      int64_t cols, Weight *w) {
    /* a vector is stored 1-D: ask st_get for [cols] */
    const StTensor *t = rows == 1 ? st_get(st, name, cols, 0) : st_get(st, name, rows, cols);
    if (!t) return -1;
    if (be->weight(w, t->data, t->dtype, rows, cols)) {
        err_set("%s: tensor %s: %s", st_file_of(st, t), name, err_get());
        return -1;
    }
    w->mapped = !st->files[t->file].owned;   /* the CPU's repacked matrices then drop the file's pages */
    /* a backend that copied it (a device's memory) leaves the file's pages
     * too: a GPU run holds the model on the host only while loading */
    if (w->mapped && w->data != t->data) pages_drop(t->data, (size_t)rows * (size_t)quant_row_bytes(t->dtype, cols));
    return 0;
}

/* A norm vector as the forward applies it, (1 + w) * mul where the config
 * says norm_plus_one (Gemma 3's RMSNorm), else w * mul, in F32 at *at (the
 * caller's buffer, which outlives the weight), then *at moves past it.  The
 * sum and product in float, as transformers' float32 norm computes 1 + w. */
static int load_norm_as_applied(const Backend *be, const SafeTensors *st, const ModelConfig *c, const char *name,
                                int64_t n, float mul, Weight *w, float **at) {
    const StTensor *t = st_get(st, name, n, 0);
    if (!t) return -1;
    float *out = *at;
    for (int64_t i = 0; i < n; i++) {
        float x;
        if (t->dtype == DT_F32) memcpy(&x, (const float *)t->data + i, 4);
        else if (t->dtype == DT_F16) x = quant_half(((const uint16_t *)t->data)[i]);
        else if (t->dtype == DT_BF16) {
            const uint32_t u = (uint32_t)((const uint16_t *)t->data)[i] << 16;
            memcpy(&x, &u, 4);
        } else {
            err_set("%s: tensor %s: a norm must be F32, F16 or BF16, not %s", st_file_of(st, t), name, dtype_name(t->dtype));
            return -1;
        }
        out[i] = (c->norm_plus_one ? 1.0f + x : x) * mul;
    }
    if (be->weight(w, out, DT_F32, 1, n)) {
        err_set("%s: tensor %s: %s", st_file_of(st, t), name, err_get());
        return -1;
    }
    *at = out + n;
    return 0;
}

int llama_load_layer(const Backend *be, const SafeTensors *st, const ModelConfig *c, const char *prefix,
                     int need_attn_norm, int64_t attn_in, LlamaLayer *l) {
    const int64_t h = c->hidden, qd = (int64_t)c->heads * c->head_dim,
                  kvd = (int64_t)c->kv_heads * c->head_dim, ff = c->intermediate;
    struct { const char *name; int64_t rows, cols; Weight *w; } spec[] = {
        {"self_attn.q_proj.weight", qd, attn_in, &l->wq},
        {"self_attn.k_proj.weight", kvd, attn_in, &l->wk},
        {"self_attn.v_proj.weight", kvd, attn_in, &l->wv},
        {"self_attn.o_proj.weight", h, qd, &l->wo},
        {"mlp.gate_proj.weight", ff, h, &l->gate},
        {"mlp.up_proj.weight", ff, h, &l->up},
        {"mlp.down_proj.weight", h, ff, &l->down},
    };
    char name[256];
    for (size_t i = 0; i < sizeof spec / sizeof *spec; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, spec[i].name);
        if (llama_load_weight(be, st, name, spec[i].rows, spec[i].cols, spec[i].w)) return -1;
    }
    snprintf(name, sizeof name, "%sinput_layernorm.weight", prefix);
    l->has_attn_norm = need_attn_norm || st_find(st, name) != NULL;
    /* the norms and the vectors; Gemma 3's post_attention_layernorm is the
     * attention output's norm, LLaMA's the MLP's input norm */
    const int sw = c->sandwich_norms;
    /* Gemma 3's attention scale rides on q's norm (the scores are q·k / sqrt(head_dim) after) */
    const float q_mul = c->query_scale ? c->query_scale * sqrtf((float)c->head_dim) : 1.0f;
    if (q_mul != 1.0f && !c->qk_norm) { err_set("%s: query_pre_attn_scalar needs q/k norms here", c->path); return -1; }
    struct { const char *name; int64_t n; Weight *w; int has, norm; float mul; } vec[] = {
        {"input_layernorm.weight", h, &l->attn_norm, l->has_attn_norm, 1, 1},
        {sw ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight", h, &l->ffn_norm, 1, 1, 1},
        {"post_attention_layernorm.weight", h, &l->post_attn_norm, sw, 1, 1},
        {"post_feedforward_layernorm.weight", h, &l->post_ffn_norm, sw, 1, 1},
        {"self_attn.q_proj.bias", qd, &l->bq, c->qkv_bias, 0, 1}, {"self_attn.k_proj.bias", kvd, &l->bk, c->qkv_bias, 0, 1},
        {"self_attn.v_proj.bias", kvd, &l->bv, c->qkv_bias, 0, 1},
        {"self_attn.q_norm.weight", c->head_dim, &l->q_norm, c->qk_norm, 1, q_mul},
        {"self_attn.k_norm.weight", c->head_dim, &l->k_norm, c->qk_norm, 1, 1}};
    const int shifted = c->norm_plus_one || q_mul != 1.0f;
    if (shifted) l->norm_host = xmalloc(sizeof(float) * (4 * (size_t)h + 2 * (size_t)c->head_dim));
    float *at = l->norm_host;
    for (size_t i = 0; i < sizeof vec / sizeof *vec; i++) {
        if (!vec[i].has) continue;
        snprintf(name, sizeof name, "%s%s", prefix, vec[i].name);
        const int rc = shifted && vec[i].norm ? load_norm_as_applied(be, st, c, name, vec[i].n, vec[i].mul, vec[i].w, &at)
                                              : llama_load_weight(be, st, name, 1, vec[i].n, vec[i].w);
        if (rc) return -1;
    }
    return 0;
}

/* Where a checkpoint keeps its decoder: "model." as a causal LM saves it, or
 * a multimodal model's text decoder (Gemma 3 4B-27B: language_model.model.
 * as Google publishes them, model.language_model. as transformers saves them
 * from 4.52 on), its LM head beside it; the first whose embeddings exist
 * (none: "model.", whose missing tensor the load then names).  Other tensors
 * (a vision tower) are never read. */
static void llama_tensor_names(LlamaModel *m) {
    static const char *const at[][2] = {{"model.", "lm_head.weight"},
                                        {"language_model.model.", "language_model.lm_head.weight"},
                                        {"model.language_model.", "lm_head.weight"}};
    m->prefix = at[0][0];
    m->head_name = at[0][1];
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        char name[96];
        snprintf(name, sizeof name, "%sembed_tokens.weight", at[i][0]);
        if (st_find(m->st, name)) {
            m->prefix = at[i][0];
            m->head_name = at[i][1];
            return;
        }
    }
}

LlamaModel *llama_load(const char *dir, const Backend *be) {
    LlamaModel *m = xcalloc(1, sizeof *m);
    m->be = be;
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    char *cfg_path = path_join(dir, "config.json");
    int rc = config_load(cfg_path, &m->cfg);
    if (rc == 0) rc = file_hash_hex(cfg_path, m->config_hash);
    free(cfg_path);
    if (rc) { free(m); return NULL; }
    const ModelConfig *c = &m->cfg;
    m->st = st_open(dir);
    if (!m->st) { free(m); return NULL; }
    st_weight_types(m->st, m->weight_types, sizeof m->weight_types);
    m->layer = xcalloc(c->layers, sizeof(LlamaLayer));
    llama_tensor_names(m);
    char embed[96], norm[96];
    snprintf(embed, sizeof embed, "%sembed_tokens.weight", m->prefix);
    snprintf(norm, sizeof norm, "%snorm.weight", m->prefix);
    float *at = m->final_norm_host = c->norm_plus_one ? xmalloc(sizeof(float) * c->hidden) : NULL;
    rc = llama_load_weight(be, m->st, embed, c->vocab, c->hidden, &m->embed) ||
         (at ? load_norm_as_applied(be, m->st, c, norm, c->hidden, 1.0f, &m->final_norm, &at)
             : llama_load_weight(be, m->st, norm, 1, c->hidden, &m->final_norm));
    if (!rc) {
        /* tied checkpoints may still carry an lm_head copy; use it if present */
        if (!c->tie_embeddings || st_find(m->st, m->head_name))
            rc = llama_load_weight(be, m->st, m->head_name, c->vocab, c->hidden, &m->lm_head);
        else
            m->lm_head = m->embed;
    }
    for (int i = 0; i < c->layers && !rc; i++) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%slayers.%d.", m->prefix, i);
        rc = llama_load_layer(be, m->st, c, prefix, 1, c->hidden, &m->layer[i]);
        m->layer[i].window = config_layer_window(c, i);
    }
    if (rc) { llama_free(m); return NULL; }
    m->inv_freq = xmalloc(sizeof(float) * (c->head_dim / 2));
    config_inv_freq(c, m->inv_freq);
    if (c->sliding_window) {
        m->inv_freq_local = xmalloc(sizeof(float) * (c->head_dim / 2));
        config_inv_freq_local(c, m->inv_freq_local);
    }
    return m;
}

void llama_release_layer(const Backend *be, LlamaLayer *l) {
    Weight *w[] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_norm, &l->gate, &l->up, &l->down,
                   &l->bq, &l->bk, &l->bv, &l->q_norm, &l->k_norm, &l->post_attn_norm, &l->post_ffn_norm};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        if (w[i]->data) be->weight_release(w[i]);
    free(l->norm_host);
    l->norm_host = NULL;
}

void llama_free(LlamaModel *m) {
    if (!m) return;
    const Backend *be = m->be;
    if (m->layer)
        for (int i = 0; i < m->cfg.layers; i++) llama_release_layer(be, &m->layer[i]);
    if (m->lm_head.data && m->lm_head.data != m->embed.data) be->weight_release(&m->lm_head);
    if (m->embed.data) be->weight_release(&m->embed);
    if (m->final_norm.data) be->weight_release(&m->final_norm);
    st_close(m->st);
    free(m->layer);
    free(m->inv_freq);
    free(m->inv_freq_local);
    free(m->final_norm_host);
    free(m);
}

int llama_lm_head_rows(const LlamaModel *m, const int *ids, int n, Weight *w, void **host) {
    const ModelConfig *c = &m->cfg;
    char embed[96];
    snprintf(embed, sizeof embed, "%sembed_tokens.weight", m->prefix);
    const char *name = st_find(m->st, m->head_name) ? m->head_name : embed;
    const StTensor *t = st_get(m->st, name, c->vocab, c->hidden);
    if (!t) return -1;
    const size_t row = (size_t)quant_row_bytes(t->dtype, c->hidden);
    char *rows = xmalloc(row * (size_t)n);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab) {
            free(rows);
            err_set("%s: draft vocabulary id %d outside the vocabulary of %d", m->dir, ids[i], c->vocab);
            return -1;
        }
        memcpy(rows + row * i, (const char *)t->data + row * ids[i], row);
    }
    if (m->be->weight(w, rows, t->dtype, n, c->hidden)) { free(rows); return -1; }
    *host = rows;
    return 0;
}

static size_t wbytes(const Weight *w) { return w->data ? (size_t)w->rows * (size_t)quant_row_bytes(w->dtype, w->cols) : 0; }

size_t llama_weight_bytes(const LlamaModel *m) {
    size_t b = wbytes(&m->final_norm) + wbytes(&m->lm_head) + (size_t)quant_row_bytes(m->embed.dtype, m->cfg.hidden);
    for (int i = 0; i < m->cfg.layers; i++) {
        const LlamaLayer *l = &m->layer[i];
        b += wbytes(&l->attn_norm) + wbytes(&l->wq) + wbytes(&l->wk) + wbytes(&l->wv) + wbytes(&l->wo) +
             wbytes(&l->ffn_norm) + wbytes(&l->gate) + wbytes(&l->up) + wbytes(&l->down) + wbytes(&l->bq) +
             wbytes(&l->bk) + wbytes(&l->bv) + wbytes(&l->q_norm) + wbytes(&l->k_norm) + wbytes(&l->post_attn_norm) +
             wbytes(&l->post_ffn_norm);
    }
    return b;
}

void layer_scratch_reserve(const Backend *be, const ModelConfig *c, LayerScratch *s, int n) {
    if (n <= s->cap) return;
    layer_scratch_free(be, s);
    const size_t qd = (size_t)c->heads * c->head_dim, kvd = (size_t)c->kv_heads * c->head_dim;
    s->cap = n;
    s->xb = be->alloc((size_t)n * c->hidden);
    s->q = be->alloc(n * qd);
    s->k = be->alloc(n * kvd);
    s->v = be->alloc(n * kvd);
    s->att = be->alloc(n * qd);
    s->gate = be->alloc((size_t)n * c->intermediate);
    s->up = be->alloc((size_t)n * c->intermediate);
}

void layer_scratch_free(const Backend *be, LayerScratch *s) {
    if (!s->cap) return;
    be->release(s->xb); be->release(s->q); be->release(s->k); be->release(s->v);
    be->release(s->att); be->release(s->gate); be->release(s->up);
    memset(s, 0, sizeof *s);
}

void llama_attention_block(const Backend *be, const ModelConfig *c, const LlamaLayer *l, const float *inv_freq,
                           int kv_layer, LayerScratch *s, const float *in, int n, const int *pos,
                           const SeqView *seqs, int n_seq) {
    const size_t kvd = (size_t)c->kv_heads * c->head_dim;
    float *qkv[3] = {s->q, s->k, s->v};
    const Weight *wqkv[3] = {&l->wq, &l->wk, &l->wv};
    be->matmul_many(qkv, in, wqkv, 3, n);
    if (l->bq.data) {   /* Qwen2: x W^T + b, the bias added to each of the n rows */
        be->add_bias(s->q, &l->bq, n);
        be->add_bias(s->k, &l->bk, n);
        be->add_bias(s->v, &l->bv, n);
    }
    if (l->q_norm.data) {   /* Qwen3: each head's q and k normalised over head_dim, before RoPE */
        be->rmsnorm(s->q, s->q, &l->q_norm, n * c->heads, c->rms_eps);
        be->rmsnorm(s->k, s->k, &l->k_norm, n * c->kv_heads, c->rms_eps);
    }
    const size_t qd = (size_t)c->heads * c->head_dim;
    AttnSeq one, *as = n_seq == 1 ? &one : xmalloc(sizeof *as * n_seq);
    for (int i = 0; i < n_seq; i++) {   /* each sequence's rows rotated and written to its own cache */
        const SeqView *q = &seqs[i];
        if (q->n)
            be->rope_kv(s->q + q->off * qd, s->k + q->off * kvd, s->v + q->off * kvd, pos + q->off, q->n, c->heads,
                        c->kv_heads, c->head_dim, inv_freq, q->kv, kv_layer, q->past);
        /* the context's bound in buckets: one recorded forward replays over many contexts (replay.h) */
        as[i] = (AttnSeq){q->kv, q->off, q->n, q->past, attn_ctx_bound(q->n_past + q->n, be->kv_slots(q->kv)), q->mask,
                          q->mask_w, l->window, pos + q->off};
    }
    be->attention(s->att, s->q, as, n_seq, kv_layer, c->heads, c->kv_heads, c->head_dim);
    if (as != &one) free(as);
    be->matmul(s->xb, s->att, &l->wo, n);   /* the residual add is the MLP block's, fused with its norm */
    if (l->post_attn_norm.data) be->rmsnorm(s->xb, s->xb, &l->post_attn_norm, n, c->rms_eps);
}

/* x += the attention output in s->xb, then the MLP over norm(x), its output
 * left in s->xb: the caller adds it (batch_ops fused with the next norm). */
static void mlp_open(const Backend *be, const ModelConfig *c, const LlamaLayer *l, LayerScratch *s, float *x, int n) {
    be->add_rmsnorm(s->xb, x, s->xb, &l->ffn_norm, n, c->rms_eps);
    float *gu[2] = {s->gate, s->up};
    const Weight *wgu[2] = {&l->gate, &l->up};
    be->matmul_many(gu, s->xb, wgu, 2, n);
    if (c->act == ACT_GELU_TANH) be->geglu(s->gate, s->up, (size_t)n * c->intermediate);
    else be->swiglu(s->gate, s->up, (size_t)n * c->intermediate);
    be->matmul(s->xb, s->gate, &l->down, n);
    if (l->post_ffn_norm.data) be->rmsnorm(s->xb, s->xb, &l->post_ffn_norm, n, c->rms_eps);
}

void llama_mlp_block(const Backend *be, const ModelConfig *c, const LlamaLayer *l, LayerScratch *s, float *x, int n) {
    mlp_open(be, c, l, s, x, n);
    be->add(x, s->xb, (size_t)n * c->hidden);
}

/* A layer's input, norm(x) or x itself where the layer has no norm, into
 * s->xb; with add (the last layer's MLP output, in s->xb) x += add first,
 * fused with the norm. */
static void layer_input(const Backend *be, const ModelConfig *c, const LlamaLayer *l, LayerScratch *s, float *x,
                        const float *add, int n) {
    const size_t size = (size_t)n * c->hidden;
    if (l->has_attn_norm && add) be->add_rmsnorm(s->xb, x, add, &l->attn_norm, n, c->rms_eps);
    else if (l->has_attn_norm) be->rmsnorm(s->xb, x, &l->attn_norm, n, c->rms_eps);
    else {
        if (add) be->add(x, add, size);
        be->copy(s->xb, x, size);
    }
}

void llama_layer_forward(const Backend *be, const ModelConfig *c, const LlamaLayer *l, const float *inv_freq,
                         int kv_layer, LayerScratch *s, float *x, int n, const int *pos, const SeqView *seqs,
                         int n_seq) {
    layer_input(be, c, l, s, x, NULL, n);
    llama_attention_block(be, c, l, inv_freq, kv_layer, s, s->xb, n, pos, seqs, n_seq);
    llama_mlp_block(be, c, l, s, x, n);
}

LlamaState *llama_state_new(const LlamaModel *m, int slots) {
    const ModelConfig *c = &m->cfg;
    LlamaState *s = xcalloc(1, sizeof *s);
    s->m = m;
    s->slots = slots;
    s->kv = m->be->kv_create(c->layers, slots, c->kv_heads * c->head_dim);
    if (!s->kv) { free(s); err_set("cannot allocate a KV cache of %d slots", slots); return NULL; }
    return s;
}

static void alloc_aux(LlamaState *s) {
    const Backend *be = s->m->be;
    if (s->aux) be->release(s->aux);
    if (s->aux_rows) be->release(s->aux_rows);
    s->aux = NULL;
    s->aux_rows = NULL;
    if (!s->n_capture || !s->cap) return;
    s->aux = be->alloc((size_t)s->cap * s->n_capture * s->m->cfg.hidden);
    const size_t n = (size_t)s->cap * s->n_capture;
    int *rows = xmalloc(sizeof(int) * n);
    for (int j = 0; j < s->n_capture; j++)
        for (int t = 0; t < s->cap; t++) rows[(size_t)j * s->cap + t] = t * s->n_capture + j;
    s->aux_rows = backend_alloc_ints(be, n);
    backend_ints_to_device(be, s->aux_rows, rows, n);
    free(rows);
}

static void state_reserve(LlamaState *s, int n) {
    const Backend *be = s->m->be;
    const ModelConfig *c = &s->m->cfg;
    if (n <= s->cap) return;
    if (s->cap) { be->release(s->hidden); be->release(s->logits); }
    s->cap = n;
    s->hidden = be->alloc((size_t)n * c->hidden);
    s->logits = be->alloc((size_t)n * c->vocab);
    alloc_aux(s);
}

int llama_capture(LlamaState *s, const int *layers, int n) {
    if (n < 0 || n > LLAMA_MAX_CAPTURE) { err_set("cannot capture %d layers (at most %d)", n, LLAMA_MAX_CAPTURE); return -1; }
    for (int j = 0; j < n; j++)
        if (layers[j] < 0 || layers[j] >= s->m->cfg.layers) {
            err_set("%s: no decoder layer %d to capture (the model has %d)", s->m->dir, layers[j], s->m->cfg.layers);
            return -1;
        }
    memcpy(s->capture, layers, sizeof(int) * n);
    s->n_capture = n;
    alloc_aux(s);
    return 0;
}

/* When s captures layer l: aux row block j of each of its n tokens <- x,
 * their rows of the batch's residual stream */
static void capture_layer_input(LlamaState *s, int l, int n, const float *x) {
    for (int j = 0; j < s->n_capture; j++) {
        if (s->capture[j] != l || n == 0) continue;
        s->m->be->copy_rows(s->aux, s->aux_rows + (size_t)j * s->cap, x, NULL, n, s->m->cfg.hidden);
    }
}

void llama_state_free(LlamaState *s) {
    if (!s) return;
    const Backend *be = s->m->be;
    if (s->cap) { be->release(s->hidden); be->release(s->logits); }
    if (s->aux) be->release(s->aux);
    if (s->aux_rows) be->release(s->aux_rows);
    llama_batch_free(s->solo);
    be->kv_free(s->kv);
    free(s);
}

static int forward_batch(LlamaBatch *b, LlamaState *const *states, int n_seq, const int *tokens, const int *pos,
                         const int *off, const uint8_t *const *masks, const int *mask_w, const LogitsMode *modes,
                         int on_host);

/* One sequence's forward, its arrays on the host or (on_host 0) in
 * backend memory. */
static int forward_solo(LlamaState *s, const int *tokens, const int *pos, int n, const uint8_t *mask, LogitsMode mode,
                        int on_host) {
    if (n <= 0) { err_set("forward of %d tokens", n); return -1; }
    if (s->n_past + n > s->slots) {
        err_set("context of %d tokens exceeds the KV cache (%d slots)", s->n_past + n, s->slots);
        return -1;
    }
    if (!s->solo) s->solo = llama_batch_new(s->m);
    const int off[2] = {0, n};
    return forward_batch(s->solo, &s, 1, tokens, pos, off, &mask, NULL, &mode, on_host);
}

int llama_forward(LlamaState *s, const int *tokens, const int *pos, int n, const uint8_t *mask,
                  LogitsMode mode) {
    return forward_solo(s, tokens, pos, n, mask, mode, 1);
}

int llama_warm(LlamaModel *m) {
    LlamaState *s = llama_state_new(m, 1);
    if (!s) return -1;
    const int token = 0, pos = 0;
    const int rc = llama_forward(s, &token, &pos, 1, NULL, LOGITS_LAST);
    llama_state_free(s);
    return rc;
}

int llama_forward_dev(LlamaState *s, const int *tokens, const int *pos, int n, const uint8_t *mask,
                      LogitsMode mode) {
    return forward_solo(s, tokens, pos, n, mask, mode, 0);
}

void forward_ctl_begin(ForwardCtl *c) {
    c->used = 0;
    c->n_copies = 0;
}

/* words more ints of staging at c->used, the last one zeroed (a mask's
 * tail bytes: defined); returns where they start */
static size_t ctl_grow(ForwardCtl *c, size_t words) {
    const size_t at = c->used;
    if (at + words > c->host_cap) {
        c->host_cap = 2 * (at + words);
        c->host = xrealloc(c->host, sizeof(int) * c->host_cap);
    }
    if (words) c->host[at + words - 1] = 0;
    c->used = at + words;
    return at;
}

size_t forward_ctl_add(ForwardCtl *c, const void *host, size_t bytes) {
    const size_t at = ctl_grow(c, (bytes + 3) / 4);
    if (bytes) memcpy(c->host + at, host, bytes);
    return at;
}

size_t forward_ctl_add_dev(ForwardCtl *c, const int *dev, size_t n) {
    const size_t at = ctl_grow(c, n);
    if (!n) return at;
    memset(c->host + at, 0, sizeof(int) * n);   /* a placeholder the copy overwrites */
    if (c->n_copies == c->copies_cap) {
        c->copies_cap = c->copies_cap ? 2 * c->copies_cap : 16;
        c->copies = xrealloc(c->copies, sizeof *c->copies * c->copies_cap);
    }
    c->copies[c->n_copies].at = at;
    c->copies[c->n_copies].words = n;
    c->copies[c->n_copies++].src = dev;
    return at;
}

void forward_ctl_send(ForwardCtl *c, const Backend *be) {
    if (c->be != be || c->used > c->dev_cap) {
        if (c->dev) c->be->release(c->dev);
        c->be = be;
        c->dev_cap = c->used > c->dev_cap ? 2 * c->used : c->dev_cap;
        if (c->dev_cap < 64) c->dev_cap = 64;
        c->dev = backend_alloc_ints(be, c->dev_cap);
    }
    if (c->used) backend_ints_to_device(be, c->dev, c->host, c->used);
    for (int i = 0; i < c->n_copies; i++)   /* after the upload, in backend order */
        be->copy((float *)(void *)(c->dev + c->copies[i].at), (const float *)(const void *)c->copies[i].src,
                 c->copies[i].words);
}

const void *forward_ctl_at(const ForwardCtl *c, size_t off) { return c->dev + off; }

void forward_ctl_add_inputs(ForwardCtl *c, const int *tokens, const int *pos, int n, const SeqView *seqs, int n_seq,
                            size_t *at_tokens, size_t *at_pos, size_t *at_masks) {
    *at_tokens = forward_ctl_add(c, tokens, sizeof(int) * n);
    *at_pos = forward_ctl_add(c, pos, sizeof(int) * n);
    *at_masks = c->used;
    for (int i = 0; i < n_seq; i++)   /* each mask from an int boundary */
        if (seqs[i].mask) forward_ctl_add(c, seqs[i].mask, (size_t)seqs[i].n * seqs[i].mask_w);
}

void forward_ctl_masks(const ForwardCtl *c, SeqView *seqs, int n_seq, size_t at_masks) {
    for (int i = 0; i < n_seq; i++) {
        if (!seqs[i].mask) continue;
        seqs[i].mask = forward_ctl_at(c, at_masks);
        at_masks += ((size_t)seqs[i].n * seqs[i].mask_w + 3) / 4;
    }
}

size_t forward_ctl_add_pasts(ForwardCtl *c, const SeqView *seqs, int n_seq) {
    const size_t at = c->used;
    for (int i = 0; i < n_seq; i++) forward_ctl_add(c, &seqs[i].n_past, sizeof(int));
    return at;
}

void forward_ctl_pasts(const ForwardCtl *c, SeqView *seqs, int n_seq, size_t at_pasts) {
    const int *past = forward_ctl_at(c, at_pasts);
    for (int i = 0; i < n_seq; i++) seqs[i].past = past + i;
}

void forward_ctl_free(ForwardCtl *c) {
    if (c->dev) c->be->release(c->dev);
    free(c->host);
    free(c->copies);
    memset(c, 0, sizeof *c);
}

LlamaBatch *llama_batch_new(const LlamaModel *m) {
    LlamaBatch *b = xcalloc(1, sizeof *b);
    b->m = m;
    return b;
}

void llama_batch_free(LlamaBatch *b) {
    if (!b) return;
    const Backend *be = b->m->be;
    if (b->cap) { be->release(b->x); be->release(b->hidden); be->release(b->head_in); }
    if (b->logits_cap) be->release(b->logits);
    layer_scratch_free(be, &b->ls);
    forward_ctl_free(&b->ctl);
    free(b->seqs); free(b->logit_rows);
    free(b);
}

static void batch_reserve(LlamaBatch *b, int n, int n_seq) {
    const Backend *be = b->m->be;
    const ModelConfig *c = &b->m->cfg;
    if (n_seq > b->seq_cap) {
        b->seq_cap = n_seq;
        b->seqs = xrealloc(b->seqs, sizeof(SeqView) * n_seq);
    }
    if (n <= b->cap) return;
    if (b->cap) { be->release(b->x); be->release(b->hidden); be->release(b->head_in); }
    b->cap = n;
    b->x = be->alloc((size_t)n * c->hidden);
    b->hidden = be->alloc((size_t)n * c->hidden);
    b->head_in = be->alloc((size_t)n * c->hidden);
    b->logit_rows = xrealloc(b->logit_rows, sizeof(int) * n);
    layer_scratch_reserve(be, c, &b->ls, n);
}

static void reserve_logits(LlamaBatch *b, int n) {
    if (n <= b->logits_cap) return;
    if (b->logits_cap) b->m->be->release(b->logits);
    b->logits_cap = n;
    b->logits = b->m->be->alloc((size_t)n * b->m->cfg.vocab);
}

void llama_reserve(LlamaState *s, int n) {
    if (!s->solo) s->solo = llama_batch_new(s->m);
    state_reserve(s, n);
    batch_reserve(s->solo, n, 1);
    reserve_logits(s->solo, n);
}


typedef struct {
    LlamaBatch *b;
    LlamaState *const *states;
    int n_seq;
    const int *tokens, *pos, *off;
    const LogitsMode *modes;
    const int *logit_rows;   /* b->logit_rows in backend memory */
    int n_logit_rows;
    int n_with, with;   /* sequences that want logits; the last of them */
} BatchArgs;

/* Each sequence's inputs of layer l, where it captures them. */
static void batch_capture(const BatchArgs *a, int l) {
    const int h = a->b->m->cfg.hidden;
    for (int i = 0; i < a->n_seq; i++)
        capture_layer_input(a->states[i], l, a->off[i + 1] - a->off[i], a->b->x + (size_t)a->off[i] * h);
}

/* The LM head once over every row some sequence wants logits of (reading
 * the head once, not once per sequence), each sequence's rows then copied
 * to its state; one sequence's rows go straight there. */
static void batch_logits(const BatchArgs *a) {
    LlamaBatch *b = a->b;
    const LlamaModel *m = b->m;
    const Backend *be = m->be;
    const int h = m->cfg.hidden, V = m->cfg.vocab, nl = a->n_logit_rows;
    if (a->n_with == 0) return;
    if (a->n_with == 1) {
        LlamaState *st = a->states[a->with];
        const int first = b->logit_rows[0] - a->off[a->with];
        be->matmul(st->logits, st->hidden + (size_t)first * h, &m->lm_head, nl);
        return;
    }
    be->copy_rows(b->head_in, NULL, b->hidden, a->logit_rows, nl, h);
    be->matmul(b->logits, b->head_in, &m->lm_head, nl);
    for (int i = 0, r = 0; i < a->n_seq; i++) {
        const int ni = a->off[i + 1] - a->off[i];
        const int rows = ni == 0 ? 0 : a->modes[i] == LOGITS_ALL ? ni : a->modes[i] == LOGITS_LAST ? 1 : 0;
        if (rows) be->copy(a->states[i]->logits, b->logits + (size_t)r * V, (size_t)rows * V);
        r += rows;
    }
}

/* the ops of one forward, nothing returned to the host: a GPU runs them as
 * one recorded graph (backend_recorded) */
static void batch_ops(void *arg) {
    const BatchArgs *a = arg;
    LlamaBatch *b = a->b;
    const LlamaModel *m = b->m;
    const Backend *be = m->be;
    const ModelConfig *c = &m->cfg;
    const int n = a->off[a->n_seq], h = c->hidden;
    be->embed(b->x, &m->embed, a->tokens, n);
    /* in F32 like every activation here, as llama.cpp and transformers' float32 forward scale
     * (transformers in BF16 scales by the BF16 rounding of sqrt(hidden)) */
    if (c->embed_scale != 0) be->scale(b->x, c->embed_scale, (size_t)n * h);
    /* each layer's last residual add goes into the next layer's input norm
     * (the final norm after the last): one launch instead of two */
    for (int l = 0; l < c->layers; l++) {
        layer_input(be, c, &m->layer[l], &b->ls, b->x, l ? b->ls.xb : NULL, n);
        batch_capture(a, l);   /* x is the layer's input now */
        llama_attention_block(be, c, &m->layer[l], m->layer[l].window ? m->inv_freq_local : m->inv_freq, l, &b->ls,
                              b->ls.xb, n, a->pos, b->seqs, a->n_seq);
        mlp_open(be, c, &m->layer[l], &b->ls, b->x, n);
    }
    be->add_rmsnorm(b->hidden, b->x, b->ls.xb, &m->final_norm, n, c->rms_eps);
    for (int i = 0; i < a->n_seq; i++) {
        const int o = a->off[i], ni = a->off[i + 1] - o;
        if (ni) be->copy(a->states[i]->hidden, b->hidden + (size_t)o * h, (size_t)ni * h);
    }
    batch_logits(a);
}

int llama_forward_batch(LlamaBatch *b, LlamaState *const *states, int n_seq, const int *tokens, const int *pos,
                        const int *off, const uint8_t *const *masks, const int *mask_w,
                        const LogitsMode *modes) {
    return forward_batch(b, states, n_seq, tokens, pos, off, masks, mask_w, modes, 1);
}

int llama_forward_batch_dev(LlamaBatch *b, LlamaState *const *states, int n_seq, const int *tokens, const int *pos,
                            const int *off, const uint8_t *const *masks, const int *mask_w,
                            const LogitsMode *modes) {
    return forward_batch(b, states, n_seq, tokens, pos, off, masks, mask_w, modes, 0);
}

static int forward_batch(LlamaBatch *b, LlamaState *const *states, int n_seq, const int *tokens, const int *pos,
                         const int *off, const uint8_t *const *masks, const int *mask_w, const LogitsMode *modes,
                         int on_host) {
    const ModelConfig *c = &b->m->cfg;
    if (n_seq <= 0 || off[0] != 0) { err_set("a batch of %d sequences starting at token %d", n_seq, n_seq > 0 ? off[0] : 0); return -1; }
    for (int i = 0; i < n_seq; i++) {
        const int ni = off[i + 1] - off[i];
        if (states[i]->m != b->m) { err_set("batch: sequence %d belongs to another model", i); return -1; }
        if (ni < 0 || (ni == 0 && modes && modes[i] == LOGITS_LAST)) { err_set("batch: sequence %d has %d tokens", i, ni); return -1; }
        const int w = mask_w ? mask_w[i] : ni;
        if (masks && masks[i] && (w < ni || w > states[i]->n_past + ni)) {
            err_set("batch: sequence %d: a mask window of %d slots for %d new tokens after %d", i, w, ni,
                    states[i]->n_past);
            return -1;
        }
        if (states[i]->n_past + ni > states[i]->slots) {
            err_set("batch: sequence %d: context of %d tokens exceeds its KV cache (%d slots)", i,
                    states[i]->n_past + ni, states[i]->slots);
            return -1;
        }
    }
    const int n = off[n_seq];
    if (n <= 0) { err_set("forward of %d tokens", n); return -1; }
    for (int t = 0; t < n && on_host; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab) { err_set("token id %d outside vocabulary of %d", tokens[t], c->vocab); return -1; }
    batch_reserve(b, n, n_seq);
    LogitsMode *mode = xmalloc(sizeof *mode * n_seq);
    int nl = 0, n_with = 0, with = -1;
    for (int i = 0; i < n_seq; i++) {
        const int ni = off[i + 1] - off[i];
        state_reserve(states[i], ni > 0 ? ni : 1);
        b->seqs[i] = (SeqView){states[i]->kv, states[i]->n_past, off[i], ni, masks ? masks[i] : NULL,
                               mask_w ? mask_w[i] : ni, NULL};
        mode[i] = modes ? modes[i] : LOGITS_ALL;
        if (ni && mode[i] == LOGITS_ALL)
            for (int t = off[i]; t < off[i + 1]; t++) b->logit_rows[nl++] = t;
        else if (ni && mode[i] == LOGITS_LAST) b->logit_rows[nl++] = off[i + 1] - 1;
        if (ni && mode[i] != LOGITS_NONE) { n_with++; with = i; }
    }
    if (n_with > 1) reserve_logits(b, nl);
    /* the host's arrays (and the rows of the LM head's gather) to backend
     * memory in one copy; nothing where every array is there already */
    ForwardCtl *ctl = &b->ctl;
    size_t at_tok = 0, at_pos = 0, at_masks = 0;
    int staged = on_host || n_with > 1;
    for (int i = 0; i < n_seq; i++) staged |= !states[i]->past_dev;
    const int *logit_rows = NULL;
    if (staged) {
        forward_ctl_begin(ctl);
        if (on_host) forward_ctl_add_inputs(ctl, tokens, pos, n, b->seqs, n_seq, &at_tok, &at_pos, &at_masks);
        const size_t at_rows = forward_ctl_add(ctl, b->logit_rows, sizeof(int) * (n_with > 1 ? nl : 0));
        const size_t at_pasts = forward_ctl_add_pasts(ctl, b->seqs, n_seq);
        forward_ctl_send(ctl, b->m->be);
        forward_ctl_pasts(ctl, b->seqs, n_seq, at_pasts);
        logit_rows = forward_ctl_at(ctl, at_rows);
        if (on_host) {
            tokens = forward_ctl_at(ctl, at_tok);
            pos = forward_ctl_at(ctl, at_pos);
            forward_ctl_masks(ctl, b->seqs, n_seq, at_masks);
        }
    }
    for (int i = 0; i < n_seq; i++)
        if (states[i]->past_dev) b->seqs[i].past = states[i]->past_dev;
    BatchArgs ba = {b, states, n_seq, tokens, pos, off, mode, logit_rows, nl, n_with, with};
    backend_recorded(b->m->be, batch_ops, &ba);
    free(mode);
    for (int i = 0; i < n_seq; i++) states[i]->n_new = off[i + 1] - off[i];
    return 0;
}

const float *llama_row_logits(LlamaState *s, int row) {
    const LlamaModel *m = s->m;
    m->be->matmul(s->logits, s->hidden + (size_t)row * m->cfg.hidden, &m->lm_head, 1);
    return s->logits;
}

void llama_rows_logits(LlamaBatch *b, LlamaState *const *states, const int *rows, int n) {
    const LlamaModel *m = b->m;
    const Backend *be = m->be;
    const int h = m->cfg.hidden, V = m->cfg.vocab;
    if (n == 1) { llama_row_logits(states[0], rows[0]); return; }
    batch_reserve(b, n, 1);
    reserve_logits(b, n);
    for (int i = 0; i < n; i++) be->copy(b->head_in + (size_t)i * h, states[i]->hidden + (size_t)rows[i] * h, h);
    be->matmul(b->logits, b->head_in, &m->lm_head, n);
    for (int i = 0; i < n; i++) be->copy(states[i]->logits, b->logits + (size_t)i * V, V);
}

void llama_commit(LlamaState *s, const int *keep, int m) {
    if (keep) s->m->be->kv_keep(s->kv, s->n_past, keep, m);
    s->n_past += m;
    s->n_new = 0;
}

void llama_truncate(LlamaState *s, int n_past) {
    if (n_past < s->n_past) s->n_past = n_past;
    s->n_new = 0;
}
