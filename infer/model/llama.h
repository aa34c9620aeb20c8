/* infer/model/: checkpoints (config.c, safetensors.c) and the LLaMA forward
 * (this file, llama.c), over kernels/ only; generate.c decodes plainly. */
/* LLaMA-family forward pass over the kernels/ interface.
 *
 * One call, llama_forward, serves prefill, single-token decode and a whole
 * token tree: it runs n new tokens at explicit positions, writes their K/V
 * into cache slots [n_past, n_past+n), and lets token i attend the whole
 * committed context and new slot n_past + j where mask[i*n + j] is set
 * (NULL: plain causal).  Nothing becomes
 * part of the context until llama_commit keeps a chosen subset (e.g. the
 * accepted path) in order. */
#ifndef C2T_LLAMA_H
#define C2T_LLAMA_H
#include "infer/model/config.h"
#include "infer/model/safetensors.h"
#include "kernels/kernels.h"

typedef struct {
    Weight attn_norm, wq, wk, wv, wo, ffn_norm, gate, up, down;
    Weight bq, bk, bv;   /* q/k/v biases where the config has them (Qwen2); else empty */
    Weight q_norm, k_norm;   /* RMSNorm weights [head_dim] of each head of q and k (Qwen3, Gemma 3); else empty */
    Weight post_attn_norm, post_ffn_norm;   /* norms of the attention's and the MLP's outputs (Gemma 3); else empty */
    int has_attn_norm;   /* EAGLE-1 heads have none on their only layer */
    int window;          /* config_layer_window: a sliding layer's window, 0: none */
    float *norm_host;    /* the norms as applied (1 + w, q's with the attention scale), where they
                            differ from the checkpoint's; NULL where none does */
} LlamaLayer;

typedef struct {
    ModelConfig cfg;
    const Backend *be;
    SafeTensors *st;
    Weight embed, final_norm, lm_head;
    LlamaLayer *layer;
    float *inv_freq;         /* host, head_dim/2 */
    float *inv_freq_local;   /* the sliding layers' (Gemma 3), host; NULL where none slides */
    float *final_norm_host;  /* the final norm as applied, where it differs from the checkpoint's */
    const char *prefix;      /* the decoder's tensor names start so (llama_tensor_names) */
    const char *head_name;   /* the LM head's tensor name, where the checkpoint has one */
    char dir[512];
    char config_hash[17];    /* identity of config.json for reports */
    char weight_types[128];  /* st_weight_types: the weights' types, for reports */
} LlamaModel;

/* Loads config.json + safetensors from a Hugging Face checkpoint dir. */
LlamaModel *llama_load(const char *dir, const Backend *be);
void llama_free(LlamaModel *m);
/* Loads "<prefix>self_attn.q_proj.weight" etc. of one decoder layer whose
 * q/k/v projections read attn_in floats per token: the hidden size, or
 * twice it for an EAGLE-3 head (embedding and feature side by side). */
int llama_load_layer(const Backend *be, const SafeTensors *st, const ModelConfig *c, const char *prefix,
                     int need_attn_norm, int64_t attn_in, LlamaLayer *l);
void llama_release_layer(const Backend *be, LlamaLayer *l);
int llama_load_weight(const Backend *be, const SafeTensors *st, const char *name, int64_t rows,
                      int64_t cols, Weight *w);
/* Rows ids[0..n) of the model's output projection (lm_head, or the
 * embedding when tied) as a new weight of n rows, copied from the
 * checkpoint into *host (the caller frees it after weight_release): a
 * reduced draft vocabulary's LM head. */
int llama_lm_head_rows(const LlamaModel *m, const int *ids, int n, Weight *w, void **host);
/* Bytes of weights one token's decode reads (for bandwidth bounds). */
size_t llama_weight_bytes(const LlamaModel *m);

/* Scratch for n tokens through one decoder layer. */
typedef struct {
    int cap;
    float *xb, *q, *k, *v, *att, *gate, *up;
} LayerScratch;
void layer_scratch_reserve(const Backend *be, const ModelConfig *c, LayerScratch *s, int n);
void layer_scratch_free(const Backend *be, LayerScratch *s);
/* One sequence's share of a forward over several (batched decoding; a
 * single forward is the case of one): its tokens are rows [off, off+n) of
 * the forward, their K/V go to cache kv at slots [n_past, n_past+n) (past:
 * n_past again, in backend memory, where the ops read it), and
 * (AttnSeq's window) token i sees every slot before the last mask_w of
 * [0, n_past+n) and window slot j where mask[i*mask_w + j] is set (NULL:
 * causal). */
typedef struct {
    KVCache *kv;
    int n_past, off, n;
    const uint8_t *mask;
    int mask_w;
    const int *past;
} SeqView;
/* A forward's control arrays in backend memory, where the ops read them
 * (kernels.h): token ids, positions, masks and row lists, staged on the
 * host and uploaded in one copy per forward.  forward_ctl_begin, then
 * forward_ctl_add per array (each returns its offset), forward_ctl_send,
 * then forward_ctl_at(offset) gives each array's copy, valid until the
 * next begin.  forward_ctl_add_dev stages an array that is in backend
 * memory already (several sequences' device inputs packed side by side):
 * send copies it there after the upload, on the backend. */
typedef struct {
    const Backend *be;
    int *dev, *host;            /* dev_cap / host_cap ints */
    size_t dev_cap, host_cap, used;
    struct { size_t at, words; const int *src; } *copies;   /* forward_ctl_add_dev's */
    int n_copies, copies_cap;
} ForwardCtl;
void forward_ctl_begin(ForwardCtl *c);
size_t forward_ctl_add(ForwardCtl *c, const void *host, size_t bytes);
size_t forward_ctl_add_dev(ForwardCtl *c, const int *dev, size_t n);
void forward_ctl_send(ForwardCtl *c, const Backend *be);
const void *forward_ctl_at(const ForwardCtl *c, size_t off);
/* The usual set: tokens[n], pos[n] and every seqs[i].mask (seqs[i].n rows
 * of mask_w bytes; NULL stays NULL), staged (between begin and send)
 * with seqs[i].mask left for forward_ctl_masks to point at the copies. */
void forward_ctl_add_inputs(ForwardCtl *c, const int *tokens, const int *pos, int n, const SeqView *seqs, int n_seq,
                            size_t *at_tokens, size_t *at_pos, size_t *at_masks);
void forward_ctl_masks(const ForwardCtl *c, SeqView *seqs, int n_seq, size_t at_masks);
/* Every seqs[i].n_past staged (between begin and send); after send,
 * forward_ctl_pasts points each seqs[i].past at its copy. */
size_t forward_ctl_add_pasts(ForwardCtl *c, const SeqView *seqs, int n_seq);
void forward_ctl_pasts(const ForwardCtl *c, SeqView *seqs, int n_seq, size_t at_pasts);
void forward_ctl_free(ForwardCtl *c);
/* x[n][hidden] += attention block; x += MLP block, over the n tokens of
 * sequences seqs[0..n_seq): the products over all of them, K/V into each
 * sequence's cache layer kv_layer, attention within each sequence. */
void llama_layer_forward(const Backend *be, const ModelConfig *c, const LlamaLayer *l, const float *inv_freq,
                         int kv_layer, LayerScratch *s, float *x, int n, const int *pos, const SeqView *seqs,
                         int n_seq);
/* The two halves of llama_layer_forward, for a layer whose attention input
 * is not norm(x) (EAGLE-3): the attention over in[n][l->wq.cols], the
 * already normalised input (it may be s->xb), left in s->xb; then x += that
 * and x += MLP block (the residual add fused with the MLP's norm). */
void llama_attention_block(const Backend *be, const ModelConfig *c, const LlamaLayer *l, const float *inv_freq,
                           int kv_layer, LayerScratch *s, const float *in, int n, const int *pos,
                           const SeqView *seqs, int n_seq);
void llama_mlp_block(const Backend *be, const ModelConfig *c, const LlamaLayer *l, LayerScratch *s, float *x, int n);

#define LLAMA_MAX_CAPTURE 4

typedef enum { LOGITS_ALL, LOGITS_LAST, LOGITS_NONE } LogitsMode;

typedef struct LlamaBatch LlamaBatch;

typedef struct {
    const LlamaModel *m;
    KVCache *kv;
    int slots;          /* cache capacity */
    int n_past;         /* committed context length */
    int n_new;          /* tokens of the last forward (uncommitted) */
    /* Where the next forward reads n_past (SeqView.past): one int in
     * backend memory that its caller keeps equal to n_past (a device
     * cycle's draft step: tree_inputs' first slot), so that the forward
     * uploads nothing; NULL: staged with the forward's control arrays. */
    const int *past_dev;
    int cap;            /* token capacity of the buffers below */
    LlamaBatch *solo;   /* llama_forward's scratch (made at its first call) */
    float *hidden;      /* [cap][hidden] final-norm output (what EAGLE-1 heads read) */
    float *logits;      /* [cap][vocab], or one row for LOGITS_LAST */
    int capture[LLAMA_MAX_CAPTURE];   /* layers whose inputs go to aux (llama_capture) */
    int n_capture;
    float *aux;         /* [cap][n_capture*hidden]: per token the inputs of the captured layers,
                           side by side in capture order (EAGLE-3's features); NULL when none */
    int *aux_rows;      /* backend memory, [n_capture][cap]: list j holds t * n_capture + j, the
                           aux rows of capture j (copy_rows' destination lists) */
} LlamaState;

LlamaState *llama_state_new(const LlamaModel *m, int slots);
void llama_state_free(LlamaState *s);
/* One forward of one token on a scratch state: the one-time work a
 * backend does at a matrix's first product (the CPU's copy of a block-type
 * matrix in its product layout: seconds for a 0.5B) is done now, at load,
 * instead of inside the first timed forward (a prefill, a draft's first
 * cycle).  0, or -1 with err_set. */
int llama_warm(LlamaModel *m);
/* From the next forward on, also keeps the inputs of decoder layers
 * layers[0..n) (the residual stream before each; 0 = the embeddings) in
 * s->aux.  Nothing is captured, and nothing costs, unless asked. */
int llama_capture(LlamaState *s, const int *layers, int n);
/* Room in s's buffers for forwards of up to n tokens, so that they stay
 * where later forwards of fewer tokens use them (a recorded forward is
 * signed by its buffers' addresses). */
void llama_reserve(LlamaState *s, int n);
/* Returns 0, or -1 with err_set when the cache would overflow. */
int llama_forward(LlamaState *s, const int *tokens, const int *pos, int n, const uint8_t *mask,
                  LogitsMode mode);
/* llama_forward with tokens, pos and mask already in backend memory (the
 * device cycle makes them there): nothing is read on the host, so token
 * ids are the caller's to vouch for (an id outside the vocabulary embeds
 * as zeros, kernels.h). */
int llama_forward_dev(LlamaState *s, const int *tokens, const int *pos, int n, const uint8_t *mask,
                      LogitsMode mode);
/* The logits of row `row` of the last forward (its final-norm output through
 * the LM head), written to the first row of s->logits, which it returns.
 * After a LOGITS_NONE forward a caller that needs only some rows pays only
 * for those (tree verification: the path it walks). */
const float *llama_row_logits(LlamaState *s, int row);
/* llama_row_logits of row rows[i] of each states[i] (one row each), the LM
 * head read once for all of them; b is the scratch (llama_batch_new). */
void llama_rows_logits(LlamaBatch *b, LlamaState *const *states, const int *rows, int n);
/* Several sequences in one forward (batched decoding).  Sequence i brings
 * tokens[off[i] .. off[i+1]) at positions pos[same], seen through masks[i]
 * over its own cache (NULL: causal) and the window of its last mask_w[i]
 * slots (SeqView; mask_w NULL: each window is the sequence's new tokens, as
 * llama_forward's), its logits by
 * modes[i] (masks NULL: all causal; modes NULL: all LOGITS_ALL); the products
 * run once over all the tokens (the LM head once over every row wanted),
 * attention per sequence.  llama_forward is the case of one.  Afterwards each
 * states[i] holds its rows as after its own llama_forward (hidden, logits
 * by mode, captured inputs), ready for llama_row_logits and llama_commit.
 * The batch's scratch lives in b (llama_batch_new), one per model. */
struct LlamaBatch {
    const LlamaModel *m;
    int cap;            /* token capacity */
    LayerScratch ls;
    float *x, *hidden;  /* [cap][hidden]: the residual stream, the final norm's output */
    float *head_in;     /* [cap][hidden]: the rows the LM head reads, gathered */
    float *logits;      /* [logits_cap][vocab]: their logits, before each goes to its state */
    int logits_cap;
    int *logit_rows;    /* host: the rows some sequence wants logits of */
    SeqView *seqs;
    int seq_cap;
    ForwardCtl ctl;     /* the forward's control arrays, uploaded */
};
LlamaBatch *llama_batch_new(const LlamaModel *m);
void llama_batch_free(LlamaBatch *b);
/* 0, or -1 with err_set (a cache that would overflow names its sequence). */
int llama_forward_batch(LlamaBatch *b, LlamaState *const *states, int n_seq, const int *tokens, const int *pos,
                        const int *off, const uint8_t *const *masks, const int *mask_w, const LogitsMode *modes);
/* llama_forward_batch with tokens, pos and the masks in backend memory (as
 * llama_forward_dev). */
int llama_forward_batch_dev(LlamaBatch *b, LlamaState *const *states, int n_seq, const int *tokens, const int *pos,
                            const int *off, const uint8_t *const *masks, const int *mask_w,
                            const LogitsMode *modes);

/* Keeps tokens keep[0..m) (ascending indices into the last forward, in
 * backend memory: kv_keep reads them there; NULL keeps the first m, with
 * no cache compaction) as context; the rest of that forward is dropped. */
void llama_commit(LlamaState *s, const int *keep, int m);
/* Forgets the context after its first n_past tokens. */
void llama_truncate(LlamaState *s, int n_past);
#endif
