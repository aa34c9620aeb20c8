#include "infer/session/session.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void session_config_default(SessionConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->max_new = 256;
    cfg->draft_temperature = 1.0f;
    cfg->sp.top_p = 1.0f;
    policy_params_default(&cfg->prm);
    backend_options_default(&cfg->backend);
    static char cache[1024];
    cfg->cost_cache = cost_cache_default_path(cache, sizeof cache);
}

void session_arith_text(const Session *s, char *buf, size_t size) {
    const LlamaModel *m = s->target;
    const int cpu = !strcmp(m->be->name, "cpu"), bf16 = m->cfg.layers > 0 && m->layer[0].wq.dtype == DT_BF16;
    const int gemm = s->cfg.backend.cpu_fast_gemm;
    const char *how = !cpu ? "on the GPU"
                      : gemm == CPU_GEMM_AMX ? "amx: BF16 weights times BF16 activations on AMX tiles"
                      : gemm == CPU_GEMM_BF16 ? "bf16: BF16 weights times BF16 activations (AVX512-BF16 dot products)"
                      : !bf16 ? "f32: the weights are not BF16"
                      : !s->cfg.arith_auto ? "f32: BF16 weights widened to F32, as the options ask"
                      : !backend_cpu_gemm_runs(CPU_GEMM_BF16) ? "f32: BF16 weights widened to F32, since this build has "
                                                                "no AVX512-BF16 (its CPU or ARCH lacks it)"
                      : "f32: BF16 weights widened to F32";
    snprintf(buf, size, "arithmetic %s, KV cache %s, kernels built for %s, OpenBLAS %s", how,
             s->cfg.backend.kv_dtype == DT_BF16 ? "bf16" : "f32", backend_cpu_isa(), backend_cpu_blas());
}

LlamaModel *session_load_target(SessionConfig *cfg) {
    /* fast products are set before the weights load (they keep BF16
     * weights as they are); kept for a BF16 target on the CPU, else undone
     * before anything computes.  The KV cache goes to BF16 for a BF16 or
     * block-type target on the CPU with any build (llama.cpp keeps its
     * cache in 16 bits on every CPU; attention then reads half the bytes);
     * an F32 or F16 target keeps F32. */
    const int given = cfg->backend.cpu_fast_gemm;
    const int fast = !cfg->arith_auto ? CPU_GEMM_F32
                     : cfg->arith_tiles && backend_cpu_gemm_runs(CPU_GEMM_AMX) ? CPU_GEMM_AMX
                     : backend_cpu_gemm_runs(CPU_GEMM_BF16) ? CPU_GEMM_BF16 : CPU_GEMM_F32;
    if (fast) cfg->backend.cpu_fast_gemm = fast;
    if (backend_configure(&cfg->backend)) return NULL;
    const Backend *be = backend_by_name(cfg->device ? cfg->device : "auto");
    if (!be) return NULL;
    LlamaModel *m = llama_load(cfg->target_dir, be);
    if (!m || !cfg->arith_auto) return m;
    const int cpu = !strcmp(be->name, "cpu") && m->cfg.layers > 0;
    const DType wt = cpu ? m->layer[0].wq.dtype : DT_F32;
    cfg->backend.cpu_fast_gemm = wt == DT_BF16 ? fast : given;
    if (wt == DT_BF16 || dtype_is_quant(wt)) cfg->backend.kv_dtype = DT_BF16;
    if (backend_configure(&cfg->backend)) {
        llama_free(m);
        return NULL;
    }
    return m;
}

int session_open(Session *s, const SessionConfig *cfg, const char *prog) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    if (!cfg->target_dir) { err_set("--target is required"); return -1; }
    if (cfg->verify != VERIFY_TREE && cfg->sp.temperature > 0) {
        err_set("--verify %s: greedy decoding only (temperature 0); sampling verifies the whole tree", verify_mode_name(cfg->verify));
        return -1;
    }
    s->target = session_load_target(&s->cfg);
    if (!s->target) return -1;
    if (llama_warm(s->target)) return -1;
    s->tok = tokenizer_load(cfg->tokenizer_path ? cfg->tokenizer_path : cfg->target_dir);
    if (!s->tok) return -1;
    if (tokenizer_vocab_size(s->tok) > s->target->cfg.vocab) {
        err_set("%s: tokenizer has %d ids but the target's vocabulary is %d", tokenizer_path(s->tok),
                tokenizer_vocab_size(s->tok), s->target->cfg.vocab);
        return -1;
    }
    /* a guessed template is said once, and only when the session opened */
    char guessed[1024] = "";
    if (cfg->template_name) {
        if (chat_template_parse(cfg->template_name, &s->tmpl)) return -1;
    } else {
        char why[256];
        if (chat_template_guess(s->tok, cfg->target_dir, &s->tmpl, why, sizeof why) == 0) {
            snprintf(guessed, sizeof guessed, "%s: chat template %s (%s; set --template to choose)\n", prog,
                     chat_template_name(s->tmpl), why);
        } else {   /* a base model: its prompts are plain text */
            s->tmpl = CHAT_NONE;
            snprintf(guessed, sizeof guessed, "%s: no chat template recognised for %s; prompts are plain text, as "
                     "--template none (set --template to choose)\n", prog, cfg->target_dir);
        }
    }
    s->slots = cfg->max_ctx > 0 ? cfg->max_ctx : 4096;
    if (cfg->draft_dir) {
        s->draft = draft_load(cfg->draft_kind, cfg->draft_dir, s->target, s->slots + 2048);
        if (!s->draft) return -1;
        if (cfg->draft_vocab == DRAFT_VOCAB_AUTO_IF_ABLE) {
            char *counts = path_join(s->draft->dir, DRAFT_COUNTS_FILE);
            const int able = !strcmp(s->target->be->name, "cpu") && s->draft->ops->set_vocab && file_exists(counts);
            free(counts);
            s->cfg.draft_vocab = able ? DRAFT_VOCAB_AUTO : 0;
        }
        if (s->cfg.draft_vocab == DRAFT_VOCAB_AUTO ? vocab_auto_init(&s->vocab_auto, s->draft)
                                                 : draft_set_vocab(s->draft, s->cfg.draft_vocab))
            return -1;
        s->draft->temperature = cfg->draft_temperature;
    }
    fputs(guessed, stderr);
    return 0;
}

void session_close(Session *s) {
    const Backend *be = s->target ? s->target->be : NULL;
    vocab_auto_free(&s->vocab_auto);
    draft_free(s->draft);
    tokenizer_free(s->tok);
    llama_free(s->target);
    if (be) backend_shutdown(be);   /* scratch and handles are made again if another session follows */
    memset(s, 0, sizeof *s);
}

Draft *session_draft_new(Session *s) {
    if (!s->draft) { err_set("no draft model (--draft)"); return NULL; }
    return draft_clone(s->draft);
}

Decoder *session_decoder(Session *s, Policy *p) { return session_decoder_with(s, p, s->draft); }

Decoder *session_decoder_with(Session *s, Policy *p, Draft *draft) {
    Decoder *dec = decoder_new(s->target, p->needs_draft ? draft : NULL, p,
                               s->slots + policy_max_nodes(p), s->cfg.sp);
    if (!dec) return NULL;
    decoder_watch_threads(dec);
    if (p->wants_cost) decoder_watch_costs(dec);
    dec->walk = s->cfg.verify != VERIFY_TREE;
    if (s->cfg.draft_vocab == DRAFT_VOCAB_AUTO && dec->draft == s->draft) decoder_watch_vocab(dec, &s->vocab_auto);
    if (decoder_cost_watch(dec)) decoder_cost_watch(dec)->cache = s->cfg.cost_cache;
    dec->walk_root_only = s->cfg.verify == VERIFY_ROOT;
    if (dec->walk && p->wants_cost) {   /* its curve would time tree forwards a walk never runs */
        decoder_free(dec);
        err_set("--verify %s: tree sizes from measured costs (--total auto) need the tree forward they time",
                verify_mode_name(s->cfg.verify));
        return NULL;
    }
    int32_t stop[8];
    int n = chat_stop_ids(s->tok, s->tmpl, stop, 8);
    for (int i = 0; i < n; i++) dec->stop_ids[i] = stop[i];
    dec->n_stop = n;
    return dec;
}

int session_prompt(const Session *s, const Question *q, const char *const *answers, int turn, int32_t **ids,
                   size_t *n_ids) {
    if (chat_encode(s->tok, s->tmpl, s->cfg.system, (const char *const *)q->turns, answers, turn + 1,
                    ids, n_ids))
        return -1;
    if ((int)*n_ids + s->cfg.max_new + 1 > s->slots) {
        err_set("question %s turn %d: prompt of %zu tokens + %d new exceeds the context (%d); raise --max-ctx", q->id,
                turn + 1, *n_ids, s->cfg.max_new, s->slots);
        free(*ids);
        *ids = NULL;
        return -1;
    }
    return 0;
}

char *session_answer(const Session *s, const int *out, int n) {
    int32_t *o32 = xmalloc(sizeof(int32_t) * (n ? n : 1));
    for (int i = 0; i < n; i++) o32[i] = out[i];
    char *text = chat_answer_text(s->tok, s->tmpl, o32, n);
    free(o32);
    return text ? text : xstrdup("");
}

int session_question(Session *s, Decoder *dec, const Question *q, TurnFn fn, void *ctx) {
    const char **answers = xcalloc(q->n_turns, sizeof(char *));
    int *out = xmalloc(sizeof(int) * (s->cfg.max_new + 1));
    int rc = 0;
    for (int turn = 0; turn < q->n_turns && !rc; turn++) {
        int32_t *ids = NULL;
        size_t n_ids = 0;
        rc = session_prompt(s, q, answers, turn, &ids, &n_ids);
        if (rc) break;
        DecodeStats st;
        int *prompt = xmalloc(sizeof(int) * n_ids);
        for (size_t i = 0; i < n_ids; i++) prompt[i] = ids[i];
        int n = decoder_run(dec, prompt, (int)n_ids, s->cfg.max_new, out, &st);
        free(prompt);
        const char *failure = backend_failure(s->target->be);
        if (failure) {
            err_set("question %s turn %d: %s backend failed: %s", q->id, turn + 1, s->target->be->name, failure);
            n = -1;
        }
        if (n < 0) { free(ids); rc = -1; break; }
        answers[turn] = session_answer(s, out, n);
        if (fn) rc = fn(ctx, q, turn, ids, n_ids, out, n, &st);
        free(ids);
    }
    for (int i = 0; i < q->n_turns; i++) free((char *)answers[i]);
    free(answers);
    free(out);
    return rc;
}

void benchmark_name(const char *path, char *out, size_t len) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!strcmp(base, "question.jsonl") && base > path) {
        const char *end = base - 1, *start = end;
        while (start > path && start[-1] != '/') start--;
        snprintf(out, len, "%.*s", (int)(end - start), start);
        return;
    }
    const char *dot = strrchr(base, '.');
    snprintf(out, len, "%.*s", (int)(dot ? dot - base : (long)strlen(base)), base);
}
