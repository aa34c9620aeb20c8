/* config.json of LLaMA-family checkpoints (LLaMA-2, Vicuna, LLaMA-3.x,
 * Qwen2 / Qwen2.5, Qwen3, Gemma 3's text models) and of EAGLE heads, which
 * use the same keys (EAGLE-3 heads add a few).  Qwen2 is LLaMA with a bias
 * on the q, k and v projections (model_type qwen2; transformers'
 * Qwen2Attention), rotated the same way (rotate_half over the two halves of
 * each head).  Gemma 3 (model_type gemma3_text) adds what its fields below
 * say: norms applied as 1 + w, a norm after attention and after the MLP,
 * GELU, scaled embeddings, its own attention scale, and sliding-window
 * layers with a RoPE base of their own. */
#ifndef C2T_CONFIG_H
#define C2T_CONFIG_H

#define MAX_EOS 8
#define EAGLE3_FEAT_LAYERS 3   /* target layers an EAGLE-3 head reads */

typedef enum { ROPE_DEFAULT = 0, ROPE_LLAMA3, ROPE_LINEAR } RopeType;
typedef enum { ACT_SILU = 0, ACT_GELU_TANH } Activation;   /* the MLP's gate activation */

typedef struct {
    int hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_pos;
    float rms_eps, rope_theta;
    RopeType rope_type;
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_max_pos;
    int tie_embeddings;
    int qkv_bias;             /* q/k/v projections carry a bias (Qwen2) */
    int qk_norm;              /* each head of q and k RMS-normalised before RoPE (Qwen3, Gemma 3) */
    Activation act;
    int norm_plus_one;        /* RMSNorm weights stored as w, applied as 1 + w (Gemma 3) */
    int sandwich_norms;       /* a norm on the attention's and on the MLP's output (Gemma 3) */
    float embed_scale;        /* embeddings multiplied by it, sqrt(hidden) (Gemma 3); 0: not scaled */
    float query_scale;        /* scores scaled by it, query_pre_attn_scalar^-1/2 (Gemma 3); 0: head_dim^-1/2 */
    int sliding_window;       /* tokens a sliding layer sees, itself included; 0: no sliding layers */
    int sliding_pattern;      /* layer l slides unless (l + 1) % sliding_pattern == 0 */
    float rope_local_theta;   /* the sliding layers' RoPE base, unscaled */
    int bos_id;               /* -1 when absent */
    int eos_ids[MAX_EOS];
    int n_eos;
    /* EAGLE-3 heads (0 when absent): draft_vocab_size, the rows of the
     * head's own lm_head; target_hidden_size; eagle_aux_hidden_state_layer_ids,
     * the target layers whose inputs the head reads (vLLM's key; without it
     * EAGLE's rule 2, L/2, L-3 applies) */
    int draft_vocab, target_hidden;
    int aux_layers[EAGLE3_FEAT_LAYERS];
    int n_aux_layers;
    char path[512];
} ModelConfig;

/* Reads and checks a config.json; -1 with a one-line error naming the file
 * and the key. */
int config_load(const char *path, ModelConfig *c);
/* The rotary inverse frequencies (head_dim/2 floats), scaling applied. */
void config_inv_freq(const ModelConfig *c, float *inv_freq);
/* The sliding layers' (config_layer_window), base rope_local_theta, unscaled. */
void config_inv_freq_local(const ModelConfig *c, float *inv_freq);
/* Tokens layer l's attention sees, itself included; 0: the whole context. */
int config_layer_window(const ModelConfig *c, int l);
int config_is_eos(const ModelConfig *c, int token);
#endif
