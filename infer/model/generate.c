#include "infer/model/generate.h"
#include "kernels/base/util.h"
#include <stdlib.h>

int greedy_generate(LlamaState *s, const int *prompt, int n_prompt, int max_new, int *out) {
    const Backend *be = s->m->be;
    int *pos = xmalloc(sizeof(int) * (n_prompt > 0 ? n_prompt : 1));
    for (int i = 0; i < n_prompt; i++) pos[i] = s->n_past + i;
    int rc = llama_forward(s, prompt, pos, n_prompt, NULL, LOGITS_LAST);
    free(pos);
    if (rc) return -1;
    llama_commit(s, NULL, n_prompt);
    int n = 0;
    while (n < max_new) {
        int next;
        be->argmax(s->logits, 1, s->m->cfg.vocab, &next);
        out[n++] = next;
        if (config_is_eos(&s->m->cfg, next) || n == max_new) break;
        int p = s->n_past;
        if (llama_forward(s, &next, &p, 1, NULL, LOGITS_LAST)) return -1;
        llama_commit(s, NULL, 1);
    }
    return n;
}
