#include "infer/model/generate.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>

/* The largest logit minus the runner-up's. */
static float top2_gap(const float *logits, int V) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < V; i++) {
        if (logits[i] > a) { b = a; a = logits[i]; }
        else if (logits[i] > b) b = logits[i];
    }
    return a - b;
}

int greedy_generate(LlamaState *s, const int *prompt, int n_prompt, int max_new, int *out) {
    return greedy_generate_gaps(s, prompt, n_prompt, max_new, out, NULL);
}

int greedy_generate_gaps(LlamaState *s, const int *prompt, int n_prompt, int max_new, int *out, float *gap) {
    const Backend *be = s->m->be;
    const int V = s->m->cfg.vocab;
    float *host = gap ? xmalloc(sizeof(float) * (size_t)V) : NULL;
    int *pos = xmalloc(sizeof(int) * (n_prompt > 0 ? n_prompt : 1));
    for (int i = 0; i < n_prompt; i++) pos[i] = s->n_past + i;
    int rc = llama_forward(s, prompt, pos, n_prompt, NULL, LOGITS_LAST);
    free(pos);
    int n = rc ? -1 : 0;
    if (!rc) llama_commit(s, NULL, n_prompt);
    while (n >= 0 && n < max_new) {
        int next;
        be->argmax(s->logits, 1, V, &next);
        if (gap) {
            be->to_host(host, s->logits, (size_t)V);
            gap[n] = top2_gap(host, V);
        }
        out[n++] = next;
        if (config_is_eos(&s->m->cfg, next) || n == max_new) break;
        int p = s->n_past;
        if (llama_forward(s, &next, &p, 1, NULL, LOGITS_LAST)) n = -1;
        else llama_commit(s, NULL, 1);
    }
    free(host);
    return n;
}
