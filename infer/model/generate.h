/* Plain greedy decoding with the target alone: the reference every
 * speculative policy must reproduce token for token. */
#ifndef C2T_GENERATE_H
#define C2T_GENERATE_H
#include "infer/model/llama.h"

/* Continues the committed context of s with the prompt, then greedily up to
 * max_new tokens (stopping after an eos).  out receives the new ids; returns
 * how many, or -1 with err_set. */
int greedy_generate(LlamaState *s, const int *prompt, int n_prompt, int max_new, int *out);
/* The same, with gap[i] = the largest logit minus the runner-up's at step i
 * (how near a tie each choice was; gap may be NULL). */
int greedy_generate_gaps(LlamaState *s, const int *prompt, int n_prompt, int max_new, int *out, float *gap);
#endif
