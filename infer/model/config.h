/* config.json of LLaMA-family checkpoints (LLaMA-2, Vicuna, LLaMA-3.x,
 * Qwen2 / Qwen2.5) and of EAGLE heads, which use the same keys (EAGLE-3
 * heads add a few).  Qwen2 is LLaMA with a bias on the q, k and v
 * projections (model_type qwen2; transformers' Qwen2Attention), rotated
 * the same way (rotate_half over the two halves of each head). */
#ifndef C2T_CONFIG_H
#define C2T_CONFIG_H

#define MAX_EOS 8
#define EAGLE3_FEAT_LAYERS 3   /* target layers an EAGLE-3 head reads */

typedef enum { ROPE_DEFAULT = 0, ROPE_LLAMA3, ROPE_LINEAR } RopeType;

typedef struct {
    int hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_pos;
    float rms_eps, rope_theta;
    RopeType rope_type;
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_max_pos;
    int tie_embeddings;
    int qkv_bias;             /* q/k/v projections carry a bias (Qwen2) */
    int qk_norm;              /* each head of q and k RMS-normalised before RoPE (Qwen3) */
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
int config_is_eos(const ModelConfig *c, int token);
#endif
