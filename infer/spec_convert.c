/* spec-convert: a llama.cpp GGUF checkpoint to a Hugging Face checkpoint
 * directory our runtime (and transformers) load: model.safetensors,
 * config.json, tokenizer.json (byte-level BPE) or tokenizer.model
 * (SentencePiece), tokenizer_config.json (with the GGUF's chat template),
 * generation_config.json.  No torch, no Python: the GGUF reader
 * (infer/model/gguf.c) dequantises as ggml does.
 *
 * Architectures: llama (LlamaForCausalLM), qwen2 (Qwen2ForCausalLM:
 * LLaMA with q/k/v biases) and qwen3 (Qwen3ForCausalLM: each head of q and
 * k RMS-normalised, a head size of its own, no biases).  What GGUF changes
 * on the way in, and we undo:
 * tensor names (blk.N.attn_q → model.layers.N.self_attn.q_proj); for llama
 * only, the rows of q and k, which llama.cpp's converter interleaves per
 * head for its RoPE (HF row h·hd + j·hd/2 + i is GGUF row h·hd + 2i + j) —
 * it leaves qwen2's and qwen3's as published, rotated by halves as in
 * Hugging Face; and
 * a tied LM head, which GGUF stores only as token_embd (tie_word_embeddings
 * true).  --dtype keep writes every tensor as stored, a quantized one as its
 * blocks (safetensors.h says how), for the runtime's block products;
 * --dtype q4_0 every matrix in Q4_0 blocks from its dequantised values, as
 * llama.cpp's quantize with --allow-requantize makes them. */
#include "infer/cli.h"
#include "infer/model/gguf.h"
#include "infer/model/safetensors.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *prog = "spec-convert";

static void usage(FILE *f) {
    fprintf(f,
"usage: spec-convert IN.gguf OUTDIR [--dtype bf16|f16|f32|keep|q4_0] [--tokenizer-only]\n"
"Converts a llama.cpp GGUF checkpoint of a LLaMA, Qwen2, Qwen3 or Gemma 3 architecture model with a\n"
"GPT-2 style byte-level BPE tokenizer (pre-tokenizer gpt-2, smollm, qwen2, llama-bpe,\n"
"deepseek-coder or deepseek-llm) or a SentencePiece one (tokenizer model llama: LLaMA 2\n"
"and its kin) into a Hugging Face checkpoint directory: model.safetensors (BF16 by\n"
"default), config.json, tokenizer.json (BPE) or tokenizer.model (SentencePiece),\n"
"tokenizer_config.json, generation_config.json.\n"
"Tensors may be F32, F16, BF16 or any quantized type the GGUF reader knows (dequantised as\n"
"llama.cpp does); other types are refused.\n"
"OUTDIR is created; an existing OUTDIR/model.safetensors is not overwritten.\n"
"  --dtype D     bf16 (default) or f16 (both rounded to nearest even), f32 (the exact\n"
"                dequantised values), or keep: every tensor as the GGUF stores it, the\n"
"                quantized ones in their blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K to\n"
"                Q6_K, IQ4_NL, IQ4_XS), which the runtime computes with in place\n"
"                (docs/models.md); or\n"
"                q4_0: every matrix (embeddings and LM head too) in Q4_0 blocks of its\n"
"                dequantised values (4.5 bits a weight, as llama.cpp's quantize writes\n"
"                them), norms and biases F32: a cheaper draft step for a draft LM\n"
"  --tokenizer-only  the tokenizer files alone, from any GGUF\n"
"                that holds a tokenizer (llama.cpp's vocabulary-only files too)\n"
"  -h, --help\n");
}

typedef struct {
    char arch[16];          /* llama, qwen2, qwen3 or gemma3: the prefix of its metadata keys */
    int qwen2, qwen3, gemma3;
    /* gemma3: its sliding layers (window 0: none) every pattern-th layer
     * full (or sliding[l] per layer where the file lists them), their RoPE
     * base, and the attention's query_pre_attn_scalar */
    int window, pattern;
    uint8_t *sliding;
    double rope_local_theta, query_pre_attn_scalar;
    int layers, hidden, ffn, heads, kv_heads, head_dim, vocab, ctx;
    double rope_theta, eps;
    /* LLaMA 3's RoPE scaling (rope_freqs.weight), or factor 0: none */
    double rope_factor, rope_low, rope_high;
    int rope_orig_ctx;
    double rope_linear;     /* rope.scaling.type linear: positions divided by it (0: none) */
} Shape;

static int64_t need_int(const Gguf *g, const char *key) {
    int64_t v;
    if (gguf_get_i64(g, key, &v) || v <= 0 || v > (1 << 24)) die(prog, "%s", err_get());
    return v;
}

/* "<arch>.<key>" */
static const char *akey(const Shape *s, const char *key) {
    static char k[128];
    snprintf(k, sizeof k, "%s.%s", s->arch, key);
    return k;
}

/* What the GGUF says of its attention beyond the shapes: RoPE over whole
 * heads of head_dim (hidden / heads, or qwen3's key_length), unscaled or
 * scaled linearly (s->rope_linear);
 * anything config.json will not say is refused in one line, since the
 * converted model would decode garbage without a word.  A key present with
 * a type that is not an integer counts as a lie. */
static void read_rope_keys(const Gguf *g, Shape *s) {
    const int64_t head = s->head_dim;
    static const char *const same_as_head[] = {"rope.dimension_count", "attention.key_length", "attention.value_length"};
    for (int i = 0; i < 3; i++) {
        const char *key = akey(s, same_as_head[i]);
        int64_t v;
        if (!gguf_find(g, key)) continue;
        if (gguf_get_i64(g, key, &v)) die(prog, "%s", err_get());
        if (v != head) die(prog, "%s = %lld, not the head size %lld: not supported", key, (long long)v, (long long)head);
    }
    char *type = gguf_find(g, akey(s, "rope.scaling.type")) ? gguf_get_str(g, akey(s, "rope.scaling.type")) : NULL;
    if (type && !strcmp(type, "linear")) {   /* DeepSeek-Coder's: positions divided by the factor */
        if (gguf_get_f64(g, akey(s, "rope.scaling.factor"), &s->rope_linear) || !(s->rope_linear > 0) ||
            !isfinite(s->rope_linear))
            die(prog, "%s.rope.scaling.type = linear needs a positive %s.rope.scaling.factor", s->arch, s->arch);
    } else if (gguf_find(g, akey(s, "rope.scaling.type")) && (!type || strcmp(type, "none"))) {
        die(prog, "%s = '%s': only linear RoPE scaling is converted (convert the Hugging Face checkpoint, whose "
            "config.json's rope_scaling the runtime reads)", akey(s, "rope.scaling.type"), type ? type : "?");
    }
    free(type);
}

/* LLaMA 3's divisor of frequency i (of half, base^(-2i/head)) under
 * rope_scaling llama3 (factor, low, high, original context), in float as
 * llama.cpp's converter and transformers compute it */
static float llama3_divisor(const Shape *s, int i, double factor, double low, double high, double ctx) {
    const int head = s->head_dim;
    const float f = (float)(1.0 / pow(s->rope_theta, (double)(2 * i) / head));
    const double wl = 2 * M_PI / f;
    if (wl < ctx / high) return 1.0f;
    if (wl > ctx / low) return (float)factor;
    const double sm = (ctx / wl - low) / (high - low);
    return (float)(1.0 / ((1 - sm) / factor + sm));
}

/* rope_freqs.weight (llama.cpp's converter's form of rope_type llama3: the
 * divisors of the head / 2 frequencies) back to config.json's rope_scaling.
 * The divisors fix factor (the largest) but not low_freq_factor,
 * high_freq_factor and the original context apart: with LLaMA 3.1 and 3.2's
 * 1 and 4, the original context is what a divisor between the bands asks
 * (else the largest power of two the bands allow); every divisor is then
 * computed again from those and must agree, else the tensor is refused. */
static void read_llama3_rope(const Gguf *g, Shape *s) {
    const GgufTensor *t = gguf_find_tensor(g, "rope_freqs.weight");
    if (!t) return;
    const int half = s->head_dim / 2;
    if (t->type != GGML_F32 || t->ne[0] != half || t->ne[1] != 1)
        die(prog, "tensor rope_freqs.weight: expected %d F32 values (a divisor per frequency)", half);
    float *r = xmalloc(sizeof(float) * (size_t)half);
    if (gguf_tensor_f32(g, t, r)) die(prog, "%s", err_get());
    const double low = 1, high = 4;
    double factor = 0, ctx = 0;
    for (int i = 0; i < half; i++)
        if (r[i] > factor) factor = r[i];
    if (!(factor > 1) || !isfinite(factor)) die(prog, "tensor rope_freqs.weight: no divisor above 1 (largest %g)", factor);
    double most = INFINITY, least = 0;   /* the original context the bands allow: (least, most) */
    for (int i = 0; i < half; i++) {
        const double wl = 2 * M_PI * pow(s->rope_theta, (double)(2 * i) / (2 * half));
        if (r[i] == 1.0f) { if (wl * high > least) least = wl * high; }
        else if (r[i] == (float)factor) { if (wl * low < most) most = wl * low; }
        else if (ctx == 0) ctx = round(wl * (low + (1 / r[i] - 1 / factor) / (1 - 1 / factor) * (high - low)));
    }
    if (ctx == 0)
        for (double p = 1 << 20; p >= 1 && ctx == 0; p /= 2)
            if (p > least && p < most) ctx = p;
    int agree = ctx > 0;
    for (int i = 0; agree && i < half; i++) {
        const float want = llama3_divisor(s, i, factor, low, high, ctx);
        agree = fabsf(want - r[i]) <= 1e-5f * want;
    }
    free(r);
    if (!agree)
        die(prog, "tensor rope_freqs.weight: its divisors are not LLaMA 3's scaling with low_freq_factor 1 and "
            "high_freq_factor 4 (convert the Hugging Face checkpoint, whose config.json's rope_scaling the runtime reads)");
    s->rope_factor = factor;
    s->rope_low = low;
    s->rope_high = high;
    s->rope_orig_ctx = (int)ctx;
}

/* Gemma 3's keys as llama.cpp reads them: a sliding window (absent or 0:
 * every layer attends the whole context) with the layers' pattern, a
 * number (every pattern-th layer full; 6 when absent) or a flag per layer,
 * the sliding layers' RoPE base (10000 when absent), and the attention
 * scale, which the file does not hold: 1 / sqrt(head size) but for the
 * 27B (62 layers), whose is 1 / sqrt(hidden / heads), as Google's own
 * reference code sets query_pre_attn_scalar.  A logit soft-cap (Gemma 2's)
 * is refused. */
static void read_gemma3_keys(const Gguf *g, Shape *s) {
    double cap = 0;
    if (gguf_find(g, akey(s, "final_logit_softcapping")) && (gguf_get_f64(g, akey(s, "final_logit_softcapping"), &cap) || cap != 0))
        die(prog, "%s: logit soft-capping is not supported", akey(s, "final_logit_softcapping"));
    int64_t w = 0;
    if (gguf_find(g, akey(s, "attention.sliding_window")) && (gguf_get_i64(g, akey(s, "attention.sliding_window"), &w) || w < 0 ||
                                                               w > (1 << 24)))
        die(prog, "%s must be a window of 0 to 2^24 tokens", akey(s, "attention.sliding_window"));
    s->window = (int)w;
    s->pattern = 6;
    const GgufKV *pat = gguf_find(g, akey(s, "attention.sliding_window_pattern"));
    if (pat && pat->type == GGUF_ARRAY) {
        if (pat->n != (uint64_t)s->layers) die(prog, "%s lists %llu layers, not %d", pat->key, (unsigned long long)pat->n, s->layers);
        s->sliding = xmalloc((size_t)s->layers);
        for (int l = 0; l < s->layers; l++) {
            double v;
            if (gguf_arr_num(pat, (uint64_t)l, &v)) die(prog, "%s: element %d is not a flag", pat->key, l);
            s->sliding[l] = v != 0;
        }
    } else if (pat) {
        s->pattern = (int)need_int(g, pat->key);
    }
    if (gguf_get_f64(g, akey(s, "rope.freq_base_swa"), &s->rope_local_theta)) s->rope_local_theta = 10000.0;
    s->query_pre_attn_scalar = s->layers == 62 ? (double)s->hidden / s->heads : s->head_dim;
}

static void read_shape(const Gguf *g, Shape *s) {
    memset(s, 0, sizeof *s);   /* what the file does not set stays 0 (the RoPE scaling: none) */
    char *arch = gguf_get_str(g, "general.architecture");
    if (!arch || (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3") && strcmp(arch, "gemma3")))
        die(prog, "architecture '%s': only llama, qwen2, qwen3 and gemma3 are supported", arch ? arch : "?");
    snprintf(s->arch, sizeof s->arch, "%s", arch);
    s->qwen2 = !strcmp(arch, "qwen2");
    s->qwen3 = !strcmp(arch, "qwen3");
    s->gemma3 = !strcmp(arch, "gemma3");
    free(arch);
    s->layers = (int)need_int(g, akey(s, "block_count"));
    s->hidden = (int)need_int(g, akey(s, "embedding_length"));
    s->ffn = (int)need_int(g, akey(s, "feed_forward_length"));
    s->heads = (int)need_int(g, akey(s, "attention.head_count"));
    s->kv_heads = (int)need_int(g, akey(s, "attention.head_count_kv"));
    s->ctx = (int)need_int(g, akey(s, "context_length"));
    const GgufKV *toks = gguf_find(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_ARRAY || toks->elem_type != GGUF_STRING) die(prog, "no tokenizer.ggml.tokens");
    s->vocab = (int)toks->n;
    if (gguf_get_f64(g, akey(s, "rope.freq_base"), &s->rope_theta)) s->rope_theta = 10000.0;
    if (gguf_get_f64(g, akey(s, "attention.layer_norm_rms_epsilon"), &s->eps)) die(prog, "%s", err_get());
    if (s->heads % s->kv_heads) die(prog, "kv heads %d do not divide heads %d", s->kv_heads, s->heads);
    /* qwen3's and gemma3's heads have a size of their own (key_length), others hidden / heads */
    s->head_dim = (s->qwen3 || s->gemma3) && gguf_find(g, akey(s, "attention.key_length"))
                      ? (int)need_int(g, akey(s, "attention.key_length"))
                      : s->hidden % s->heads ? 0 : s->hidden / s->heads;
    if (!s->head_dim || s->head_dim % 2)
        die(prog, "heads of %d do not divide hidden %d into even halves", s->heads, s->hidden);
    read_rope_keys(g, s);
    read_llama3_rope(g, s);
    if (s->rope_linear > 0 && s->rope_factor > 0)
        die(prog, "%s = linear and a rope_freqs.weight tensor: two RoPE scalings", akey(s, "rope.scaling.type"));
    if (s->gemma3) read_gemma3_keys(g, s);
}

/* One GGUF tensor's values [rows][cols]: as F32, or with keep as stored
 * (F32, F16 or blocks: dt says which); checked against the shape we
 * expect. */
typedef struct { void *data; DType dt; size_t row_bytes; } Vals;

/* Dies naming the tensor when one of its n values (rows of cols; a vector:
 * cols 0) is NaN or infinite, stored so (the GGUF) or made so (too large
 * for --dtype). */
static void need_finite(const char *name, DType dt, const void *data, int64_t n, int64_t cols, const char *why) {
    const int64_t bad = quant_first_nonfinite(dt, data, n);
    if (bad < 0) return;
    char at[64];
    if (cols) snprintf(at, sizeof at, "[%lld, %lld]", (long long)(bad / cols), (long long)(bad % cols));
    else snprintf(at, sizeof at, "%lld", (long long)bad);
    die(prog, "tensor %s: %s %s is NaN or infinite%s", name,
        dtype_is_quant(dt) ? "the scale of the block at element" : "element", at, why);
}

static Vals load(const Gguf *g, const char *name, int64_t rows, int64_t cols, int keep) {
    const GgufTensor *t = gguf_find_tensor(g, name);
    if (!t) die(prog, "tensor %s is missing", name);
    int64_t want0 = cols ? cols : rows, want1 = cols ? rows : 1;
    if (t->ne[0] != want0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        die(prog, "tensor %s: shape [%lld, %lld], expected [%lld, %lld]", name, (long long)t->ne[1],
            (long long)t->ne[0], (long long)want1, (long long)want0);
    const DType st = gguf_tensor_dtype(t);
    if (keep && st != DT_COUNT) {   /* its blocks */
        int64_t rb = quant_row_bytes(st, want0);
        if (rb < 0) die(prog, "tensor %s: %s", name, err_get());
        void *v = xmalloc((size_t)(rb * want1));
        if (gguf_tensor_blocks(g, t, v)) die(prog, "%s", err_get());
        need_finite(name, st, v, want0 * want1, cols, " in the GGUF (weights must be finite numbers)");
        return (Vals){v, st, (size_t)rb};
    }
    float *v = xmalloc(sizeof(float) * (size_t)(want0 * want1));
    if (gguf_tensor_f32(g, t, v)) die(prog, "%s", err_get());
    need_finite(name, DT_F32, v, want0 * want1, cols, " in the GGUF (weights must be finite numbers)");
    return (Vals){v, DT_F32, sizeof(float) * (size_t)want0};
}

/* Undoes llama.cpp's per-head interleave of q / k rows (see the top); rows
 * of any type (a block type's rows are whole blocks). */
static void unpermute(Vals w, int n_head, int head_dim) {
    const size_t rb = w.row_bytes;
    char *tmp = xmalloc(rb * (size_t)head_dim);
    for (int h = 0; h < n_head; h++) {
        char *blk = (char *)w.data + (size_t)h * head_dim * rb;
        for (int i = 0; i < head_dim / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(tmp + (size_t)(j * head_dim / 2 + i) * rb, blk + (size_t)(2 * i + j) * rb, rb);
        memcpy(blk, tmp, rb * (size_t)head_dim);
    }
    free(tmp);
}

/* the tensors written; dt the element type of F32 values (keep: DT_COUNT,
 * every tensor as stored; DT_Q4_0: matrices in its blocks, vectors F32) */
typedef struct { StWrite *w; char (*names)[96]; int n; DType dt; } Out;

static void add(Out *o, const char *name, Vals vals, int64_t rows, int64_t cols) {
    StWrite *w = &o->w[o->n];
    snprintf(o->names[o->n], 96, "%s", name);
    size_t n = (size_t)(rows * (cols ? cols : 1));
    float *v = vals.data;
    void *data = v;
    if (vals.dt != DT_F32) {   /* kept as stored */
        *w = (StWrite){o->names[o->n], vals.dt, cols ? 2 : 1, {rows, cols}, data};
        o->n++;
        return;
    }
    if (o->dt == DT_Q4_0 && cols) {
        const int64_t rb = quant_row_bytes(DT_Q4_0, cols);
        if (rb < 0) die(prog, "tensor %s: %s (--dtype q4_0)", name, err_get());
        char *q = xmalloc((size_t)(rows * rb));
        for (int64_t r = 0; r < rows; r++) quant_q4_0_row(v + r * cols, cols, q + r * rb);
        free(v);
        need_finite(name, DT_Q4_0, q, rows * cols, cols, " in Q4_0, too large for its F16 scale (--dtype f32 keeps it)");
        *w = (StWrite){o->names[o->n], DT_Q4_0, 2, {rows, cols}, q};
        o->n++;
        return;
    }
    if (o->dt == DT_BF16) {
        uint16_t *b = xmalloc(2 * n);
        for (size_t i = 0; i < n; i++) b[i] = f32_to_bf16(v[i]);
        free(v);
        data = b;
    } else if (o->dt == DT_F16) {
        uint16_t *h = xmalloc(2 * n);
        for (size_t i = 0; i < n; i++) h[i] = quant_f16_bits(v[i]);
        free(v);
        data = h;
    }
    if (o->dt == DT_BF16 || o->dt == DT_F16)   /* finite in F32, so too large for the type */
        need_finite(name, o->dt, data, (int64_t)n, cols,
                    o->dt == DT_F16 ? " in F16, too large for it (--dtype bf16 or f32 keeps it)"
                                    : " in BF16, too large for it (--dtype f32 keeps it)");
    *w = (StWrite){o->names[o->n], o->dt == DT_COUNT || o->dt == DT_Q4_0 ? DT_F32 : o->dt, cols ? 2 : 1, {rows, cols},
                   data};
    if (!cols) w->shape[0] = rows;
    o->n++;
}

/* A Gemma 3 norm's stored 1 + w back to w (F32 values: llama.cpp writes
 * its vectors so) */
static void minus_one(Vals v, const char *name) {
    if (v.dt != DT_F32) die(prog, "tensor %s: a Gemma 3 norm must be F32 in the GGUF, not %s", name, dtype_name(v.dt));
    float *x = v.data;
    for (size_t i = 0; i < v.row_bytes / sizeof(float); i++) x[i] -= 1.0f;
}

/* dt DT_COUNT: keep (every tensor as the GGUF stores it) */
static void write_weights(const Gguf *g, const Shape *s, const char *dir, DType dt, int *tied) {
    const int hd = s->head_dim, L = s->layers, keep = dt == DT_COUNT;
    Out o = {xcalloc((size_t)(3 + 16 * L), sizeof(StWrite)), xcalloc((size_t)(3 + 16 * L), 96), 0, dt};   /* at most 13 a layer (gemma3) */
    add(&o, "model.embed_tokens.weight", load(g, "token_embd.weight", s->vocab, s->hidden, keep), s->vocab, s->hidden);
    Vals fn = load(g, "output_norm.weight", s->hidden, 0, keep);
    if (s->gemma3) minus_one(fn, "output_norm.weight");
    add(&o, "model.norm.weight", fn, s->hidden, 0);
    *tied = gguf_find_tensor(g, "output.weight") == NULL;
    if (!*tied) add(&o, "lm_head.weight", load(g, "output.weight", s->vocab, s->hidden, keep), s->vocab, s->hidden);
    Progress pr;
    progress_start(&pr, "spec-convert layers", L);
    for (int l = 0; l < L; l++) {
        char src[96], dst[96];
#define TK(gg, hf, kind, r, c, fix)                                               \
        do {                                                                      \
            snprintf(src, sizeof src, "blk.%d.%s." kind, l, gg);                 \
            snprintf(dst, sizeof dst, "model.layers.%d.%s." kind, l, hf);        \
            Vals v_ = load(g, src, r, c, keep);                                   \
            fix;                                                                  \
            add(&o, dst, v_, r, c);                                               \
        } while (0)
#define T(gg, hf, r, c, fix) TK(gg, hf, "weight", r, c, fix)
        /* Gemma 3's norms hold 1 + w (llama.cpp's converter adds the 1 its
         * RMSNorm applies): w again, exact for every stored value of 0.5 or
         * more, as a published weight then is */
#define NORM_FIX (s->gemma3 ? minus_one(v_, src) : (void)0)
        T("attn_norm", "input_layernorm", s->hidden, 0, NORM_FIX);
        if (s->gemma3) {   /* rows as published; each head's q and k norm; a norm after attention and MLP */
            T("attn_q", "self_attn.q_proj", s->heads * hd, s->hidden, (void)0);
            T("attn_k", "self_attn.k_proj", s->kv_heads * hd, s->hidden, (void)0);
            T("attn_q_norm", "self_attn.q_norm", hd, 0, NORM_FIX);
            T("attn_k_norm", "self_attn.k_norm", hd, 0, NORM_FIX);
            T("post_attention_norm", "post_attention_layernorm", s->hidden, 0, NORM_FIX);
            T("post_ffw_norm", "post_feedforward_layernorm", s->hidden, 0, NORM_FIX);
        } else if (s->qwen2) {   /* rows as published; q/k/v biases */
            T("attn_q", "self_attn.q_proj", s->heads * hd, s->hidden, (void)0);
            T("attn_k", "self_attn.k_proj", s->kv_heads * hd, s->hidden, (void)0);
            TK("attn_q", "self_attn.q_proj", "bias", s->heads * hd, 0, (void)0);
            TK("attn_k", "self_attn.k_proj", "bias", s->kv_heads * hd, 0, (void)0);
            TK("attn_v", "self_attn.v_proj", "bias", s->kv_heads * hd, 0, (void)0);
        } else if (s->qwen3) {   /* rows as published; each head's q and k norm */
            T("attn_q", "self_attn.q_proj", s->heads * hd, s->hidden, (void)0);
            T("attn_k", "self_attn.k_proj", s->kv_heads * hd, s->hidden, (void)0);
            T("attn_q_norm", "self_attn.q_norm", hd, 0, (void)0);
            T("attn_k_norm", "self_attn.k_norm", hd, 0, (void)0);
        } else {
            T("attn_q", "self_attn.q_proj", s->heads * hd, s->hidden, unpermute(v_, s->heads, hd));
            T("attn_k", "self_attn.k_proj", s->kv_heads * hd, s->hidden, unpermute(v_, s->kv_heads, hd));
        }
        T("attn_v", "self_attn.v_proj", s->kv_heads * hd, s->hidden, (void)0);
        T("attn_output", "self_attn.o_proj", s->hidden, s->heads * hd, (void)0);
        T("ffn_norm", s->gemma3 ? "pre_feedforward_layernorm" : "post_attention_layernorm", s->hidden, 0, NORM_FIX);
#undef NORM_FIX
        T("ffn_gate", "mlp.gate_proj", s->ffn, s->hidden, (void)0);
        T("ffn_up", "mlp.up_proj", s->ffn, s->hidden, (void)0);
        T("ffn_down", "mlp.down_proj", s->hidden, s->ffn, (void)0);
#undef T
#undef TK
        progress_update(&pr, l + 1, NULL);
    }
    progress_end(&pr, L, NULL);
    char *p = path_join(dir, "model.safetensors");
    if (st_write(p, o.w, o.n)) die(prog, "%s", err_get());
    free(p);
    for (int i = 0; i < o.n; i++) free((void *)o.w[i].data);
    free(o.w);
    free(o.names);
}

static int64_t opt_int(const Gguf *g, const char *key, int64_t def) {
    int64_t v;
    return gguf_get_i64(g, key, &v) ? def : v;
}

/* The id of the token spelled text, or -1. */
static int64_t token_id(const Gguf *g, const char *text) {
    const GgufKV *toks = gguf_find(g, "tokenizer.ggml.tokens");
    const size_t n = strlen(text);
    for (uint64_t i = 0; toks && i < toks->n; i++) {
        const char *t;
        uint64_t len;
        if (!gguf_arr_str(toks, i, &t, &len) && len == n && !memcmp(t, text, n)) return (int64_t)i;
    }
    return -1;
}

static void write_config(const Gguf *g, const Shape *s, const char *dir, DType dt, int tied) {
    cJSON *c = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(s->qwen2    ? "Qwen2ForCausalLM"
                                                   : s->qwen3  ? "Qwen3ForCausalLM"
                                                   : s->gemma3 ? "Gemma3ForCausalLM"
                                                               : "LlamaForCausalLM"));
    cJSON_AddStringToObject(c, "model_type", s->gemma3 ? "gemma3_text" : s->arch);
    cJSON_AddNumberToObject(c, "hidden_size", s->hidden);
    cJSON_AddNumberToObject(c, "intermediate_size", s->ffn);
    cJSON_AddNumberToObject(c, "num_hidden_layers", s->layers);
    cJSON_AddNumberToObject(c, "num_attention_heads", s->heads);
    cJSON_AddNumberToObject(c, "num_key_value_heads", s->kv_heads);
    cJSON_AddNumberToObject(c, "head_dim", s->head_dim);
    cJSON_AddNumberToObject(c, "vocab_size", s->vocab);
    cJSON_AddNumberToObject(c, "max_position_embeddings", s->ctx);
    cJSON_AddNumberToObject(c, "rms_norm_eps", (float)s->eps);
    cJSON_AddNumberToObject(c, "rope_theta", s->rope_theta);
    if (s->rope_factor > 0) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "llama3");
        cJSON_AddNumberToObject(rs, "factor", s->rope_factor);
        cJSON_AddNumberToObject(rs, "low_freq_factor", s->rope_low);
        cJSON_AddNumberToObject(rs, "high_freq_factor", s->rope_high);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", s->rope_orig_ctx);
    } else if (s->rope_linear > 0) {
        cJSON *rs = cJSON_AddObjectToObject(c, "rope_scaling");
        cJSON_AddStringToObject(rs, "rope_type", "linear");
        cJSON_AddNumberToObject(rs, "factor", s->rope_linear);
    } else {
        cJSON_AddNullToObject(c, "rope_scaling");
    }
    if (s->gemma3) {   /* Gemma3TextConfig's keys (the rest are its defaults) */
        cJSON_AddStringToObject(c, "hidden_activation", "gelu_pytorch_tanh");
        cJSON_AddNumberToObject(c, "query_pre_attn_scalar", s->query_pre_attn_scalar);
        cJSON_AddNumberToObject(c, "rope_local_base_freq", s->rope_local_theta);
        if (s->window) cJSON_AddNumberToObject(c, "sliding_window", s->window);
        else cJSON_AddNullToObject(c, "sliding_window");
        if (s->sliding) {
            cJSON *types = cJSON_AddArrayToObject(c, "layer_types");
            for (int l = 0; l < s->layers; l++)
                cJSON_AddItemToArray(types, cJSON_CreateString(s->sliding[l] ? "sliding_attention" : "full_attention"));
        } else {
            cJSON_AddNumberToObject(c, "sliding_window_pattern", s->pattern);
        }
        cJSON_AddNullToObject(c, "final_logit_softcapping");
        cJSON_AddNullToObject(c, "attn_logit_softcapping");
    } else {
        cJSON_AddStringToObject(c, "hidden_act", "silu");
    }
    if (s->qwen2 || s->qwen3) {   /* Qwen2Config: q/k/v biases implied; full attention */
        cJSON_AddBoolToObject(c, "use_sliding_window", 0);
        cJSON_AddNumberToObject(c, "sliding_window", s->ctx);
        cJSON_AddNumberToObject(c, "max_window_layers", s->layers);
        if (s->qwen3) cJSON_AddBoolToObject(c, "attention_bias", 0);   /* Qwen3Config: none */
    } else if (!s->gemma3) {
        cJSON_AddBoolToObject(c, "attention_bias", 0);
        cJSON_AddBoolToObject(c, "mlp_bias", 0);
    }
    cJSON_AddBoolToObject(c, "tie_word_embeddings", tied);
    cJSON_AddNumberToObject(c, "bos_token_id", (double)opt_int(g, "tokenizer.ggml.bos_token_id", 1));
    cJSON_AddNumberToObject(c, "eos_token_id", (double)opt_int(g, "tokenizer.ggml.eos_token_id", 2));
    cJSON_AddStringToObject(c, "torch_dtype", dt == DT_BF16 ? "bfloat16" : dt == DT_F16 ? "float16" : "float32");
    char *p = path_join(dir, "config.json");
    if (write_json(p, c)) die(prog, "%s", err_get());
    free(p);
    cJSON_Delete(c);
    cJSON *gc = cJSON_CreateObject();
    cJSON_AddNumberToObject(gc, "bos_token_id", (double)opt_int(g, "tokenizer.ggml.bos_token_id", 1));
    /* generation stops at the GGUF's eos and at its end of turn and end of
     * message (llama.cpp's eot / eom: LLaMA 3's <|eot_id|>, <|eom_id|>);
     * Qwen2 and Qwen3 publish <|endoftext|> as a stop too, which its GGUF holds only
     * as a token, Gemma 3 its <end_of_turn> */
    int64_t stop[4] = {opt_int(g, "tokenizer.ggml.eos_token_id", 2), opt_int(g, "tokenizer.ggml.eot_token_id", -1),
                       opt_int(g, "tokenizer.ggml.eom_token_id", -1),
                       s->qwen2 || s->qwen3 ? token_id(g, "<|endoftext|>") : s->gemma3 ? token_id(g, "<end_of_turn>") : -1};
    int n_stop = 0;
    for (int i = 0; i < 4; i++) {
        int seen = stop[i] < 0 || stop[i] >= s->vocab;
        for (int k = 0; k < n_stop && !seen; k++) seen = stop[k] == stop[i];
        if (!seen) stop[n_stop++] = stop[i];
    }
    if (n_stop > 1) {
        cJSON *list = cJSON_AddArrayToObject(gc, "eos_token_id");
        for (int i = 0; i < n_stop; i++) cJSON_AddItemToArray(list, cJSON_CreateNumber((double)stop[i]));
    } else {
        cJSON_AddNumberToObject(gc, "eos_token_id", (double)stop[0]);
    }
    cJSON_AddNumberToObject(gc, "pad_token_id", (double)opt_int(g, "tokenizer.ggml.padding_token_id",
                                                                opt_int(g, "tokenizer.ggml.eos_token_id", 2)));
    p = path_join(dir, "generation_config.json");
    if (write_json(p, gc)) die(prog, "%s", err_get());
    free(p);
    cJSON_Delete(gc);
}

static cJSON *byte_level(const char *type, int use_regex) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", type);
    cJSON_AddBoolToObject(b, "add_prefix_space", 0);
    cJSON_AddBoolToObject(b, "trim_offsets", 1);
    cJSON_AddBoolToObject(b, "use_regex", use_regex);
    return b;
}

/* Qwen2's split (its published tokenizer.json; llama.cpp's
 * LLAMA_VOCAB_PRE_TYPE_QWEN2 spells the same with case-folded
 * contractions): each digit alone, letters with at most one leading
 * non-letter, punctuation runs with their newlines, whitespace as GPT-4's. */
static const char QWEN2_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* LLaMA 3's (pre-tokenizer llama-bpe): Qwen2's with digits in runs of up to three */
static const char LLAMA3_SPLIT[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* DeepSeek-Coder's (pre-tokenizer deepseek-coder), as its published
 * tokenizer.json splits: each line break alone, then letter runs and
 * punctuation runs each with at most one leading space, then runs of CJK
 * ideographs and Hangul, each split isolating what it matches; then every
 * digit alone (Digits). */
static const char *const DEEPSEEK_CODER_SPLITS[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"};
/* DeepSeek-LLM's (pre-tokenizer deepseek-llm), as its published
 * tokenizer.json splits: line breaks alone, runs of cased letters (its
 * list of ranges) and of ASCII and fullwidth punctuation each with at most
 * one leading space, trailing whitespace, CJK and Hangul runs, digit runs,
 * each split isolating what it matches. */
static const char *const DEEPSEEK_LLM_SPLITS[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-"
    "\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
    "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
    "\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
    "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    "\\p{N}+"};

static char *token_str(const GgufKV *kv, uint64_t i) {
    const char *s;
    uint64_t n;
    if (gguf_arr_str(kv, i, &s, &n)) die(prog, "%s: element %llu unreadable", kv->key, (unsigned long long)i);
    char *c = xmalloc((size_t)n + 1);
    memcpy(c, s, (size_t)n);
    c[n] = 0;
    if (strlen(c) != n) die(prog, "%s: element %llu holds a NUL byte", kv->key, (unsigned long long)i);
    return c;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The vocabulary's tokens as C strings; a token twice would make it
 * ambiguous, so sorted neighbours must differ. */
static char **token_names(const GgufKV *toks) {
    char **names = xmalloc(sizeof(char *) * (size_t)toks->n), **sorted = xmalloc(sizeof(char *) * (size_t)toks->n);
    for (uint64_t i = 0; i < toks->n; i++) sorted[i] = names[i] = token_str(toks, i);
    qsort(sorted, (size_t)toks->n, sizeof *sorted, cmp_str);
    for (uint64_t i = 1; i < toks->n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) die(prog, "token '%s' appears twice", sorted[i]);
    free(sorted);
    return names;
}

/* token i's GGUF type (llama.cpp's: 1 normal, 2 unknown, 3 control, 4
 * user-defined, 5 unused, 6 byte), 1 where the file gives none */
static int token_type(const GgufKV *types, uint64_t i) {
    double type = 1;
    if (types) gguf_arr_num(types, i, &type);
    return (int)type;
}

/* The user-defined tokens of a GGUF "llama" vocabulary as SentencePiece
 * holds them: llama.cpp's converter writes their U+2581 (▁) as spaces, for
 * its tokenizer matches them in the raw text, where sentencepiece matches
 * them in the text it has normalized (spaces made ▁): Gemma's runs of
 * spaces "▁▁" to 31 of them, which a piece of spaces would never match.
 * Each such name gets its ▁ back (one already in the vocabulary is left as
 * it is: the names stay distinct). */
static void spm_user_spaces(char **names, const GgufKV *types, uint64_t n) {
    char **sorted = NULL, **old = NULL;   /* the GGUF's names sorted (made at the first such token); those replaced */
    size_t n_old = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (token_type(types, i) != 4 || !strchr(names[i], ' ')) continue;
        if (!sorted) {
            sorted = xmalloc(sizeof(char *) * (size_t)n);
            memcpy(sorted, names, sizeof(char *) * (size_t)n);
            qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
        }
        char *u = xmalloc(3 * strlen(names[i]) + 1);
        size_t k = 0;
        for (const char *c = names[i]; *c; c++) {
            if (*c == ' ') { memcpy(u + k, "\xE2\x96\x81", 3); k += 3; }
            else u[k++] = *c;
        }
        u[k] = 0;
        if (bsearch(&u, sorted, (size_t)n, sizeof *sorted, cmp_str)) { free(u); continue; }
        old = xrealloc(old, sizeof(char *) * (n_old + 1));
        old[n_old++] = names[i];
        names[i] = u;
    }
    for (size_t i = 0; i < n_old; i++) free(old[i]);
    free(old);
    free(sorted);
}

/* tokenizer.json for a GGUF "gpt2" BPE: byte-level, merges, the control
 * tokens as special added tokens; pre-tokenizer smollm = each digit alone,
 * then GPT-2's regex (llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM); gpt-2 =
 * GPT-2's regex; qwen2 = NFC, then QWEN2_SPLIT, then bytes, as Qwen2's
 * published tokenizer.json; llama-bpe = LLAMA3_SPLIT, then bytes, as
 * LLaMA 3's; deepseek-coder = DEEPSEEK_CODER_SPLITS, each digit alone,
 * then bytes, as DeepSeek-Coder's; deepseek-llm = DEEPSEEK_LLM_SPLITS, then
 * bytes, as DeepSeek-LLM's. */
static void write_bpe(const Gguf *g, const char *dir, const GgufKV *toks, const GgufKV *types, char *const *names) {
    char *pre = gguf_get_str(g, "tokenizer.ggml.pre");
    if (!pre || (strcmp(pre, "smollm") && strcmp(pre, "gpt-2") && strcmp(pre, "qwen2") && strcmp(pre, "llama-bpe") &&
                 strcmp(pre, "deepseek-coder") && strcmp(pre, "deepseek-llm")))
        die(prog, "pre-tokenizer '%s': only smollm, gpt-2, qwen2, llama-bpe, deepseek-coder and deepseek-llm are supported",
            pre ? pre : "?");
    const GgufKV *merges = gguf_find(g, "tokenizer.ggml.merges");
    if (!merges || merges->type != GGUF_ARRAY || merges->elem_type != GGUF_STRING) die(prog, "no tokenizer.ggml.merges");
    cJSON *j = cJSON_CreateObject(), *added = cJSON_CreateArray(), *vocab = cJSON_CreateObject(), *mg = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "version", "1.0");
    cJSON_AddNullToObject(j, "truncation");
    cJSON_AddNullToObject(j, "padding");
    for (uint64_t i = 0; i < toks->n; i++) {
        const int type = token_type(types, i);
        cJSON_AddNumberToObject(vocab, names[i], (double)i);
        if (type == 3 || type == 4) {   /* control / user-defined: added tokens */
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", names[i]);
            cJSON_AddBoolToObject(a, "single_word", 0);
            cJSON_AddBoolToObject(a, "lstrip", 0);
            cJSON_AddBoolToObject(a, "rstrip", 0);
            cJSON_AddBoolToObject(a, "normalized", 0);
            cJSON_AddBoolToObject(a, "special", type == 3);
            cJSON_AddItemToArray(added, a);
        }
    }
    for (uint64_t i = 0; i < merges->n; i++) {
        char *m = token_str(merges, i);
        cJSON_AddItemToArray(mg, cJSON_CreateString(m));
        free(m);
    }
    cJSON_AddItemToObject(j, "added_tokens", added);
    const int qwen2 = !strcmp(pre, "qwen2");
    /* qwen2 and llama-bpe: their split regex, then bytes to characters alone */
    const char *split = qwen2 ? QWEN2_SPLIT : !strcmp(pre, "llama-bpe") ? LLAMA3_SPLIT : NULL;
    if (qwen2) {
        cJSON *nfc = cJSON_CreateObject();
        cJSON_AddStringToObject(nfc, "type", "NFC");
        cJSON_AddItemToObject(j, "normalizer", nfc);
    } else {
        cJSON_AddNullToObject(j, "normalizer");
    }
    const int coder = !strcmp(pre, "deepseek-coder"), dsllm = !strcmp(pre, "deepseek-llm");
    /* the regex splits, each isolating its matches; then each digit alone (smollm, deepseek-coder) */
    const char *const *splits = split ? &split : coder ? DEEPSEEK_CODER_SPLITS : dsllm ? DEEPSEEK_LLM_SPLITS : NULL;
    const int n_splits = split ? 1
                         : coder ? (int)(sizeof DEEPSEEK_CODER_SPLITS / sizeof *DEEPSEEK_CODER_SPLITS)
                         : dsllm ? (int)(sizeof DEEPSEEK_LLM_SPLITS / sizeof *DEEPSEEK_LLM_SPLITS) : 0;
    const int digits = coder || !strcmp(pre, "smollm");
    cJSON *pt;
    if (n_splits || digits) {
        pt = cJSON_CreateObject();
        cJSON_AddStringToObject(pt, "type", "Sequence");
        cJSON *list = cJSON_AddArrayToObject(pt, "pretokenizers");
        for (int k = 0; k < n_splits; k++) {
            cJSON *sp = cJSON_CreateObject();
            cJSON_AddStringToObject(sp, "type", "Split");
            cJSON *pat = cJSON_AddObjectToObject(sp, "pattern");
            cJSON_AddStringToObject(pat, "Regex", splits[k]);
            cJSON_AddStringToObject(sp, "behavior", "Isolated");
            cJSON_AddBoolToObject(sp, "invert", 0);
            cJSON_AddItemToArray(list, sp);
        }
        if (digits) {
            cJSON *dg = cJSON_CreateObject();
            cJSON_AddStringToObject(dg, "type", "Digits");
            cJSON_AddBoolToObject(dg, "individual_digits", 1);
            cJSON_AddItemToArray(list, dg);
        }
        cJSON_AddItemToArray(list, byte_level("ByteLevel", !n_splits));
    } else {
        pt = byte_level("ByteLevel", 1);
    }
    cJSON_AddItemToObject(j, "pre_tokenizer", pt);
    cJSON_AddItemToObject(j, "post_processor", byte_level("ByteLevel", !n_splits));
    cJSON_AddItemToObject(j, "decoder", byte_level("ByteLevel", !n_splits));
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddNullToObject(m, "dropout");
    cJSON_AddNullToObject(m, "unk_token");
    cJSON_AddNullToObject(m, "continuing_subword_prefix");
    cJSON_AddNullToObject(m, "end_of_word_suffix");
    cJSON_AddBoolToObject(m, "fuse_unk", 0);
    cJSON_AddBoolToObject(m, "byte_fallback", 0);
    /* LLaMA 3's: a piece that is a token is that token, whatever the merges (llama.cpp: llama-bpe) */
    cJSON_AddBoolToObject(m, "ignore_merges", split == LLAMA3_SPLIT);
    cJSON_AddItemToObject(m, "vocab", vocab);
    cJSON_AddItemToObject(m, "merges", mg);
    cJSON_AddItemToObject(j, "model", m);
    char *p = path_join(dir, "tokenizer.json");
    if (write_json(p, j)) die(prog, "%s", err_get());
    free(p);
    cJSON_Delete(j);
    free(pre);
}

/* tokenizer.model for a GGUF "llama" vocabulary (SentencePiece BPE:
 * LLaMA-2, Mistral, TinyLlama, Vicuna): the pieces with their scores and
 * types, byte fallback where the vocabulary has byte pieces, and the dummy
 * space prefix unless tokenizer.ggml.add_space_prefix says no, as llama.cpp
 * tokenizes them.  The unknown piece is tokenizer.ggml.unknown_token_id's,
 * whatever its type says (Phi-3's GGUF calls its <unk> control and its
 * padding unknown); any other piece of type unknown is written as control:
 * SentencePiece has one unknown piece, and neither is ever made from text. */
static void write_spm(const Gguf *g, const char *dir, const GgufKV *toks, const GgufKV *types, char *const *names) {
    const GgufKV *scores = gguf_find(g, "tokenizer.ggml.scores");
    if (!scores || scores->type != GGUF_ARRAY || scores->n != toks->n)
        die(prog, "tokenizer.ggml.scores: missing or not one score per token (%llu tokens)", (unsigned long long)toks->n);
    SpmSpec spec = {(int)opt_int(g, "tokenizer.ggml.unknown_token_id", 0), (int)opt_int(g, "tokenizer.ggml.bos_token_id", 1),
                    (int)opt_int(g, "tokenizer.ggml.eos_token_id", 2), 0, (int)opt_int(g, "tokenizer.ggml.add_space_prefix", 1)};
    if (spec.unk_id < 0 || (uint64_t)spec.unk_id >= toks->n)
        die(prog, "tokenizer.ggml.unknown_token_id %d: outside the %llu tokens", spec.unk_id, (unsigned long long)toks->n);
    SpmPiece *pc = xmalloc(sizeof *pc * (size_t)toks->n);
    for (uint64_t i = 0; i < toks->n; i++) {
        double score;
        if (gguf_arr_num(scores, i, &score)) die(prog, "tokenizer.ggml.scores: element %llu unreadable", (unsigned long long)i);
        int type = token_type(types, i);
        if (type < 1 || type > 6) type = 1;
        if ((int64_t)i == spec.unk_id) type = 2;
        else if (type == 2) type = 3;
        spec.byte_fallback |= type == 6;
        pc[i] = (SpmPiece){names[i], strlen(names[i]), (float)score, type};
    }
    char *p = path_join(dir, "tokenizer.model");
    if (tokenizer_write_spm(p, pc, (size_t)toks->n, &spec)) die(prog, "%s", err_get());
    free(p);
    free(pc);
}

/* tokenizer_config.json: special token names, bos as the GGUF asks (a
 * SentencePiece vocabulary adds one unless it says no, as llama.cpp), the
 * chat template; for SentencePiece the control and user-defined tokens as
 * added tokens (matched in text, as transformers' LlamaTokenizer lists
 * them) and legacy on (every text between special tokens gets the dummy
 * prefix, as llama.cpp's tokenizer gives it). */
static void write_tokenizer_config(const Gguf *g, const char *dir, int ctx, int spm, const GgufKV *toks,
                                   const GgufKV *types, char *const *names) {
    cJSON *tc = cJSON_CreateObject();
    const GgufKV *ab = gguf_find(g, "tokenizer.ggml.add_bos_token");
    cJSON_AddBoolToObject(tc, "add_bos_token", ab && ab->type == GGUF_BOOL ? ab->data[0] : spm);
    cJSON_AddBoolToObject(tc, "add_eos_token", 0);
    static const struct { const char *key, *name; } sp[] = {{"tokenizer.ggml.bos_token_id", "bos_token"},
        {"tokenizer.ggml.eos_token_id", "eos_token"}, {"tokenizer.ggml.unknown_token_id", "unk_token"},
        {"tokenizer.ggml.padding_token_id", "pad_token"}};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) {
        int64_t id = opt_int(g, sp[i].key, -1);
        if (id >= 0 && (uint64_t)id < toks->n) cJSON_AddStringToObject(tc, sp[i].name, names[id]);
    }
    if (spm) {
        cJSON *atd = cJSON_AddObjectToObject(tc, "added_tokens_decoder");
        for (uint64_t i = 0; i < toks->n; i++) {
            const int type = token_type(types, i);
            if (type != 3 && type != 4) continue;
            char id[24];
            snprintf(id, sizeof id, "%llu", (unsigned long long)i);
            cJSON *a = cJSON_AddObjectToObject(atd, id);
            cJSON_AddStringToObject(a, "content", names[i]);
            cJSON_AddBoolToObject(a, "special", type == 3);
        }
        cJSON_AddBoolToObject(tc, "legacy", 1);
    }
    char *tmpl = gguf_get_str(g, "tokenizer.chat_template");
    if (tmpl) cJSON_AddStringToObject(tc, "chat_template", tmpl);
    free(tmpl);
    cJSON_AddBoolToObject(tc, "clean_up_tokenization_spaces", 0);
    cJSON_AddNumberToObject(tc, "model_max_length", (double)ctx);
    cJSON_AddStringToObject(tc, "tokenizer_class", spm ? "LlamaTokenizer" : "GPT2Tokenizer");
    char *p = path_join(dir, "tokenizer_config.json");
    if (write_json(p, tc)) die(prog, "%s", err_get());
    free(p);
    cJSON_Delete(tc);
}

/* The GGUF's tokenizer in OUTDIR: tokenizer.json (gpt2: byte-level BPE)
 * or tokenizer.model (llama: SentencePiece BPE), and tokenizer_config.json. */
static void write_tokenizer(const Gguf *g, const char *dir, int ctx) {
    char *model = gguf_get_str(g, "tokenizer.ggml.model");
    const int spm = model && !strcmp(model, "llama");
    if (!spm && (!model || strcmp(model, "gpt2")))
        die(prog, "tokenizer model '%s': only gpt2 (byte-level BPE) and llama (SentencePiece BPE) are supported",
            model ? model : "?");
    free(model);
    const GgufKV *toks = gguf_find(g, "tokenizer.ggml.tokens"), *types = gguf_find(g, "tokenizer.ggml.token_type");
    if (!toks || toks->type != GGUF_ARRAY || toks->elem_type != GGUF_STRING || !toks->n) die(prog, "no tokenizer.ggml.tokens");
    if (types && (types->type != GGUF_ARRAY || types->n != toks->n))
        die(prog, "tokenizer.ggml.token_type: not one type per token (%llu tokens)", (unsigned long long)toks->n);
    char **names = token_names(toks);
    if (spm) spm_user_spaces(names, types, toks->n);
    if (spm) write_spm(g, dir, toks, types, names);
    else write_bpe(g, dir, toks, types, names);
    write_tokenizer_config(g, dir, ctx, spm, toks, types, names);
    for (uint64_t i = 0; i < toks->n; i++) free(names[i]);
    free(names);
}

/* Every file the writers above make in OUTDIR. */
static const char *const out_files[] = {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                                        "tokenizer.model", "tokenizer_config.json"};

/* Before the GGUF is read: OUTDIR can be made or written into, and none of
 * the files written there is the GGUF itself. */
static void check_out_dir(const char *dir, const char *in) {
    cli_check_folder(prog, "OUTDIR", dir);
    const CliFile gguf = {"IN.gguf", in};
    for (size_t k = 0; k < sizeof out_files / sizeof *out_files; k++) {
        char *p = path_join(dir, out_files[k]);
        cli_check_not_input(prog, "OUTDIR", p, &gguf, 1);
        free(p);
    }
}

int main(int argc, char **argv) {
    const char *dtype = "bf16";
    int tokenizer_only = 0;
    enum { O_DTYPE = 256, O_TOKENIZER_ONLY };
    static const struct option opts[] = {
        {"dtype", 1, 0, O_DTYPE}, {"tokenizer-only", 0, 0, O_TOKENIZER_ONLY}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_DTYPE: dtype = optarg; break;
        case O_TOKENIZER_ONLY: tokenizer_only = 1; break;
        case 'h': usage(stdout); return 0;
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    if (argc - optind != 2) { usage(stderr); die(prog, "expected IN.gguf OUTDIR"); }
    /* keep is DT_COUNT: no one element type */
    DType dt = !strcmp(dtype, "bf16") ? DT_BF16 : !strcmp(dtype, "f16") ? DT_F16 : !strcmp(dtype, "f32") ? DT_F32 : DT_U8;
    if (!strcmp(dtype, "keep")) dt = DT_COUNT;
    if (!strcmp(dtype, "q4_0")) dt = DT_Q4_0;
    if (dt == DT_U8) die(prog, "--dtype: expected bf16, f16, f32, keep or q4_0, got '%s'", dtype);
    const char *in = argv[optind], *dir = argv[optind + 1];
    check_out_dir(dir, in);
    double t0 = now_seconds();
    Gguf *g = gguf_open(in);
    if (!g) die(prog, "%s", err_get());
    if (tokenizer_only) {   /* no shapes asked: a vocabulary-only file of any architecture */
        if (mkdir(dir, 0777) && errno != EEXIST) die(prog, "%s: cannot create: %s", dir, strerror(errno));
        char *arch = gguf_get_str(g, "general.architecture"), key[96];
        snprintf(key, sizeof key, "%s.context_length", arch ? arch : "?");
        write_tokenizer(g, dir, (int)opt_int(g, key, 0));
        free(arch);
        gguf_close(g);
        fprintf(stderr, "spec-convert: %s -> %s (tokenizer only) in %.1f s\n", in, dir, now_seconds() - t0);
        return 0;
    }
    Shape s;
    read_shape(g, &s);
    if (mkdir(dir, 0777) && errno != EEXIST) die(prog, "%s: cannot create: %s", dir, strerror(errno));
    char *st = path_join(dir, "model.safetensors");
    if (file_exists(st)) die(prog, "%s exists; not overwriting it", st);
    free(st);
    /* the tokenizer first: refusing an unsupported one should cost nothing */
    write_tokenizer(g, dir, s.ctx);
    int tied;
    write_weights(g, &s, dir, dt, &tied);
    write_config(g, &s, dir, dt, tied);
    free(s.sliding);
    gguf_close(g);
    fprintf(stderr, "spec-convert: %s -> %s (%d layers, hidden %d, vocab %d, %s%s) in %.1f s\n", in, dir, s.layers,
            s.hidden, s.vocab, dtype, tied ? ", tied embeddings" : "", now_seconds() - t0);
    return 0;
}
