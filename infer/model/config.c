#include "infer/model/config.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Integer key: required (def < 0 signals required) or defaulted. */
static int get_int(const cJSON *j, const char *path, const char *key, int def, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (def == -1) { err_set("%s: missing key %s", path, key); return -1; }
        *out = def;
        return 0;
    }
    int64_t x;
    if (json_int(v, path, key, INT32_MIN, INT32_MAX, &x)) return -1;
    *out = (int)x;
    return 0;
}

static int get_float(const cJSON *j, const char *path, const char *key, double def, float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) { *out = (float)def; return 0; }
    if (!cJSON_IsNumber(v)) { err_set("%s: key %s must be a number", path, key); return -1; }
    *out = (float)v->valuedouble;
    return 0;
}

static int parse_rope_scaling(const cJSON *rs, const char *path, ModelConfig *c) {
    if (!rs || cJSON_IsNull(rs)) { c->rope_type = ROPE_DEFAULT; return 0; }
    if (!cJSON_IsObject(rs)) { err_set("%s: rope_scaling must be an object or null", path); return -1; }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!t) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(t)) { err_set("%s: rope_scaling has no rope_type", path); return -1; }
    if (get_float(rs, path, "factor", 1.0, &c->rope_factor)) return -1;
    if (!strcmp(t->valuestring, "default")) { c->rope_type = ROPE_DEFAULT; return 0; }
    if (!strcmp(t->valuestring, "linear")) { c->rope_type = ROPE_LINEAR; return 0; }
    if (strcmp(t->valuestring, "llama3")) {
        err_set("%s: rope_scaling type %s is not supported (default, linear, llama3)", path, t->valuestring);
        return -1;
    }
    c->rope_type = ROPE_LLAMA3;
    if (get_float(rs, path, "low_freq_factor", 1.0, &c->rope_low_freq) ||
        get_float(rs, path, "high_freq_factor", 4.0, &c->rope_high_freq) ||
        get_int(rs, path, "original_max_position_embeddings", -1, &c->rope_orig_max_pos))
        return -1;
    if (c->rope_high_freq <= c->rope_low_freq || c->rope_factor <= 0) {
        err_set("%s: rope_scaling llama3 needs high_freq_factor > low_freq_factor and factor > 0", path);
        return -1;
    }
    return 0;
}

static int parse_eos(const cJSON *v, const char *path, ModelConfig *c) {
    c->n_eos = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    int64_t id;
    if (cJSON_IsNumber(v)) {
        if (json_int(v, path, "eos_token_id", 0, INT32_MAX, &id)) return -1;
        c->eos_ids[c->n_eos++] = (int)id;
        return 0;
    }
    if (!cJSON_IsArray(v)) { err_set("%s: eos_token_id must be an integer or a list", path); return -1; }
    for (const cJSON *e = v->child; e; e = e->next) {
        if (json_int(e, path, "eos_token_id[]", 0, INT32_MAX, &id)) return -1;
        if (c->n_eos == MAX_EOS) { err_set("%s: more than %d eos ids", path, MAX_EOS); return -1; }
        c->eos_ids[c->n_eos++] = (int)id;
    }
    return 0;
}

/* eagle_aux_hidden_state_layer_ids: absent, null, or three layer ids */
static int parse_aux_layers(const cJSON *v, const char *path, ModelConfig *c) {
    c->n_aux_layers = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != EAGLE3_FEAT_LAYERS) {
        err_set("%s: eagle_aux_hidden_state_layer_ids must be a list of %d layer ids", path, EAGLE3_FEAT_LAYERS);
        return -1;
    }
    for (const cJSON *e = v->child; e; e = e->next) {
        int64_t id;
        if (json_int(e, path, "eagle_aux_hidden_state_layer_ids[]", 0, INT32_MAX, &id)) return -1;
        c->aux_layers[c->n_aux_layers++] = (int)id;
    }
    return 0;
}

/* layer_types (newer transformers' spelling of Gemma 3's layers): a list of
 * "sliding_attention" / "full_attention", read into the period it follows */
static int parse_layer_types(const cJSON *v, const char *path, ModelConfig *c) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != c->layers) {
        err_set("%s: layer_types must list num_hidden_layers (%d) layer types", path, c->layers);
        return -1;
    }
    for (int p = 1; p <= c->layers; p++) {
        int l = 0, ok = 1;
        for (const cJSON *e = v->child; e && ok; e = e->next, l++) {
            const int sliding = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
            if (!sliding && !(cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention"))) {
                err_set("%s: layer_types[%d] is not sliding_attention or full_attention", path, l);
                return -1;
            }
            ok = sliding == ((l + 1) % p != 0);
        }
        if (ok) { c->sliding_pattern = p; return 0; }
    }
    err_set("%s: layer_types does not repeat with a period (every p-th layer full attention)", path);
    return -1;
}

/* Gemma 3's keys (model_type gemma3_text): its GELU, norms, scales and
 * sliding layers; soft-capping (Gemma 2) is refused, not ignored */
static int parse_gemma3(const cJSON *j, const char *path, ModelConfig *c) {
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "hidden_activation");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_pytorch_tanh")) {
        err_set("%s: hidden_activation %s is not supported (gelu_pytorch_tanh)", path, act->valuestring);
        return -1;
    }
    static const char *const caps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, caps[i]);
        if (v && !cJSON_IsNull(v)) { err_set("%s: %s is not supported (Gemma 3 has none)", path, caps[i]); return -1; }
    }
    c->act = ACT_GELU_TANH;
    c->qk_norm = c->norm_plus_one = c->sandwich_norms = 1;
    c->embed_scale = sqrtf((float)c->hidden);
    float qpas;
    if (get_float(j, path, "query_pre_attn_scalar", 256, &qpas) ||
        get_float(j, path, "rope_local_base_freq", 10000.0, &c->rope_local_theta) ||
        get_int(j, path, "sliding_window", 0, &c->sliding_window) ||
        get_int(j, path, "sliding_window_pattern", 6, &c->sliding_pattern))
        return -1;
    if (!(qpas > 0) || c->sliding_window < 0 || c->sliding_pattern < 1 || !(c->rope_local_theta > 0)) {
        err_set("%s: query_pre_attn_scalar, rope_local_base_freq and sliding_window_pattern must be positive, "
                "sliding_window not negative", path);
        return -1;
    }
    c->query_scale = 1.0f / sqrtf(qpas);
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(j, "layer_types");
    if (types && !cJSON_IsNull(types) && parse_layer_types(types, path, c)) return -1;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
    c->tie_embeddings = !cJSON_IsFalse(tie);   /* Gemma's default: tied */
    return 0;
}

/* Gemma3TextConfig's defaults (transformers 4.50-4.51), which a
 * multimodal Gemma 3's text_config leaves out */
static const char GEMMA3_TEXT_DEFAULTS[] =
    "{\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216, \"num_hidden_layers\": 26,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256,"
    " \"hidden_activation\": \"gelu_pytorch_tanh\", \"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6,"
    " \"eos_token_id\": 1, \"bos_token_id\": 2, \"tie_word_embeddings\": true, \"rope_theta\": 1000000.0,"
    " \"query_pre_attn_scalar\": 256, \"sliding_window\": 4096, \"rope_local_base_freq\": 10000.0,"
    " \"sliding_window_pattern\": 6}";

/* Gemma 3 4B-27B as Google publishes them (model_type gemma3,
 * Gemma3ForConditionalGeneration): the text decoder's config is text_config
 * over Gemma3TextConfig's defaults, with the top level's eos ids where it
 * names none (what transformers' generate stops at); the vision tower is
 * not read (text in, text out).  A new object, or NULL with err_set. */
static cJSON *gemma3_text_config(const cJSON *j, const char *path) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
    if (!cJSON_IsObject(tc)) {
        err_set("%s: model_type gemma3 needs a text_config object (the text decoder's)", path);
        return NULL;
    }
    const cJSON *tmt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");
    if (tmt && !(cJSON_IsString(tmt) && !strcmp(tmt->valuestring, "gemma3_text"))) {
        err_set("%s: text_config's model_type is not gemma3_text", path);
        return NULL;
    }
    cJSON *t = cJSON_Parse(GEMMA3_TEXT_DEFAULTS);
    for (const cJSON *e = tc->child; e; e = e->next) {
        cJSON_DeleteItemFromObjectCaseSensitive(t, e->string);
        cJSON_AddItemToObject(t, e->string, cJSON_Duplicate(e, 1));
    }
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
    if (eos && !cJSON_GetObjectItemCaseSensitive(tc, "eos_token_id")) {
        cJSON_DeleteItemFromObjectCaseSensitive(t, "eos_token_id");
        cJSON_AddItemToObject(t, "eos_token_id", cJSON_Duplicate(eos, 1));
    }
    cJSON_DeleteItemFromObjectCaseSensitive(t, "model_type");
    cJSON_AddStringToObject(t, "model_type", "gemma3_text");
    return t;
}

int config_load(const char *path, ModelConfig *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    cJSON *j = read_json_file(path);
    if (!j) return -1;
    int rc = -1;
    if (!cJSON_IsObject(j)) { err_set("%s: not a JSON object", path); goto out; }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "gemma3")) {
        cJSON *t = gemma3_text_config(j, path);
        if (!t) goto out;
        cJSON_Delete(j);
        j = t;
        mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    }
    if (cJSON_IsString(mt) && strcmp(mt->valuestring, "llama") && strcmp(mt->valuestring, "mistral") &&
        strcmp(mt->valuestring, "qwen2") && strcmp(mt->valuestring, "qwen3") &&
        strcmp(mt->valuestring, "gemma3_text")) {
        err_set("%s: model_type %s is not a supported decoder (llama, mistral, qwen2, qwen3, gemma3_text, gemma3)",
                path, mt->valuestring);
        goto out;
    }
    const int gemma3 = cJSON_IsString(mt) && !strcmp(mt->valuestring, "gemma3_text");
    c->qkv_bias = cJSON_IsString(mt) && !strcmp(mt->valuestring, "qwen2");
    c->qk_norm = cJSON_IsString(mt) && !strcmp(mt->valuestring, "qwen3");
    /* Qwen2's and Qwen3's sliding window applies only when use_sliding_window is true
     * (Qwen2.5 ships it false); this runtime attends the whole context */
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "use_sliding_window"))) {
        err_set("%s: use_sliding_window true is not supported (full attention only)", path);
        goto out;
    }
    /* Mistral's window (v0.1: 4096) limits each position's attention; a
     * context past it would be attended whole here, without a word */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "sliding_window");
    if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "mistral") && sw && !cJSON_IsNull(sw)) {
        err_set("%s: sliding_window %g is not supported (full attention only; Mistral from v0.2 on has none)", path,
                cJSON_IsNumber(sw) ? sw->valuedouble : -1.0);
        goto out;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "mlp_bias"))) {
        err_set("%s: mlp_bias true (biases on gate, up and down) is not supported", path);
        goto out;
    }
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "hidden_act");
    const char *want_act = gemma3 ? "gelu_pytorch_tanh" : "silu";
    if (cJSON_IsString(act) && strcmp(act->valuestring, want_act)) {
        err_set("%s: hidden_act %s is not supported (%s)", path, act->valuestring, want_act);
        goto out;
    }
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(j, "attention_bias");
    if (cJSON_IsTrue(ab)) {
        err_set("%s: attention_bias true (a bias on q, k, v and o) is not supported; model_type qwen2 has q/k/v bias", path);
        goto out;
    }
    if (get_int(j, path, "hidden_size", -1, &c->hidden) ||
        get_int(j, path, "intermediate_size", -1, &c->intermediate) ||
        get_int(j, path, "num_hidden_layers", -1, &c->layers) ||
        get_int(j, path, "num_attention_heads", -1, &c->heads) ||
        get_int(j, path, "vocab_size", -1, &c->vocab) ||
        get_int(j, path, "max_position_embeddings", 2048, &c->max_pos) ||
        get_int(j, path, "bos_token_id", -2, &c->bos_id) ||
        get_float(j, path, "rms_norm_eps", 1e-6, &c->rms_eps) ||
        get_float(j, path, "rope_theta", 10000.0, &c->rope_theta))
        goto out;
    if (c->bos_id == -2) c->bos_id = -1;
    if (get_int(j, path, "num_key_value_heads", c->heads, &c->kv_heads)) goto out;
    if (c->heads <= 0 || c->hidden <= 0) { err_set("%s: hidden_size and num_attention_heads must be positive", path); goto out; }
    if (get_int(j, path, "head_dim", c->hidden / c->heads, &c->head_dim)) goto out;
    if (c->layers <= 0 || c->vocab <= 0 || c->intermediate <= 0 || c->kv_heads <= 0 || c->head_dim <= 0 ||
        c->head_dim % 2) {
        err_set("%s: sizes must be positive and head_dim even", path);
        goto out;
    }
    if (c->heads % c->kv_heads) {
        err_set("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, c->heads, c->kv_heads);
        goto out;
    }
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
    c->tie_embeddings = cJSON_IsTrue(tie);
    if (gemma3 && parse_gemma3(j, path, c)) goto out;
    if (parse_eos(cJSON_GetObjectItemCaseSensitive(j, "eos_token_id"), path, c)) goto out;
    if (parse_rope_scaling(cJSON_GetObjectItemCaseSensitive(j, "rope_scaling"), path, c)) goto out;
    /* -2: absent (get_int's -1 would mean required) */
    if (get_int(j, path, "draft_vocab_size", -2, &c->draft_vocab) ||
        get_int(j, path, "target_hidden_size", -2, &c->target_hidden) ||
        parse_aux_layers(cJSON_GetObjectItemCaseSensitive(j, "eagle_aux_hidden_state_layer_ids"), path, c))
        goto out;
    if (c->draft_vocab != -2 && (c->draft_vocab < 1 || c->draft_vocab > c->vocab)) {
        err_set("%s: draft_vocab_size %d outside [1, vocab_size %d]", path, c->draft_vocab, c->vocab);
        goto out;
    }
    if (c->target_hidden != -2 && c->target_hidden < 1) {
        err_set("%s: target_hidden_size must be positive", path);
        goto out;
    }
    if (c->draft_vocab == -2) c->draft_vocab = 0;
    if (c->target_hidden == -2) c->target_hidden = 0;
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

void config_inv_freq(const ModelConfig *c, float *inv_freq) {
    const int half = c->head_dim / 2;
    for (int i = 0; i < half; i++) {
        float f = (float)(1.0 / pow((double)c->rope_theta, (double)(2 * i) / c->head_dim));
        if (c->rope_type == ROPE_LINEAR) {
            f /= c->rope_factor;
        } else if (c->rope_type == ROPE_LLAMA3) {
            /* LLaMA-3.1 scaling: long wavelengths are divided by factor,
             * short ones kept, the band between interpolated. */
            double wavelen = 2 * M_PI / f;
            double low_wl = c->rope_orig_max_pos / c->rope_low_freq;
            double high_wl = c->rope_orig_max_pos / c->rope_high_freq;
            if (wavelen > low_wl) {
                f = f / c->rope_factor;
            } else if (wavelen >= high_wl) {
                double s = (c->rope_orig_max_pos / wavelen - c->rope_low_freq) /
                           (c->rope_high_freq - c->rope_low_freq);
                f = (float)((1 - s) * f / c->rope_factor + s * f);
            }
        }
        inv_freq[i] = f;
    }
}

void config_inv_freq_local(const ModelConfig *c, float *inv_freq) {
    ModelConfig local = *c;
    local.rope_theta = c->rope_local_theta;
    local.rope_type = ROPE_DEFAULT;
    config_inv_freq(&local, inv_freq);
}

int config_layer_window(const ModelConfig *c, int l) {
    return c->sliding_window && (l + 1) % c->sliding_pattern ? c->sliding_window : 0;
}

int config_is_eos(const ModelConfig *c, int token) {
    for (int i = 0; i < c->n_eos; i++) if (c->eos_ids[i] == token) return 1;
    return 0;
}
