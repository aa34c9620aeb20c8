/* Chat templates: the prompt formats the EAGLE evaluation scripts
 * (eagle/evaluation/gen_ea_answer_*.py) feed the target model.
 *
 *   llama-2-chat      fastchat conversation "llama-2" (what
 *                     get_conversation_template("llama-2-chat") returns) with
 *                     EAGLE's system prompt, plus the " " EAGLE appends;
 *                     encoded with bos (add_special_tokens=True).
 *   llama-3-instruct  Meta-Llama-3-Instruct's tokenizer_config chat_template
 *                     (apply_chat_template, add_generation_prompt=True) with
 *                     EAGLE's system message; encoded without adding
 *                     specials (the template writes <|begin_of_text|>).
 *   vicuna            fastchat conversation "vicuna_v1.1" with its default
 *                     system prompt; encoded with bos.
 *   chatml            <|im_start|>role\n...<|im_end|>\n per message and
 *                     <|im_start|>assistant\n to answer, as SmolLM2-Instruct's
 *                     and Qwen2.5-Instruct's tokenizer_config chat_templates
 *                     render it, including the default system message the
 *                     template writes when none is given (read from the
 *                     template: chat_template_system); encoded without adding
 *                     specials (the template writes them).
 *
 *
 * and the templates of the other families spec-convert reads, each as
 * transformers' apply_chat_template renders its published chat_template
 * (tests/golden/tokenizer/chat_families_golden.json):
 *   llama-3.1         Llama 3.1 / 3.2 / 3.3 Instruct: a system block that
 *                     always opens with "Cutting Knowledge Date: December
 *                     2023\nToday Date: 26 Jul 2024\n\n" (3.2's template
 *                     writes today's date where the renderer supplies one;
 *                     this is its fallback, so a run's prompts do not depend
 *                     on the day), EAGLE's system message; contents trimmed.
 *   mistral           Mistral-7B-Instruct-v0.2 and Mixtral-8x7B-Instruct:
 *                     <s>[INST] user [/INST]answer</s>...; the template has
 *                     no system role, so a system message opens the first
 *                     user turn, followed by a blank line (as Mistral's later
 *                     templates place it); none by default.
 *   zephyr            zephyr-7b-beta and TinyLlama-1.1B-Chat:
 *                     <|system|>\n...</s>\n<|user|>\n...</s>\n<|assistant|>\n;
 *                     none by default; encoded with bos (the template writes
 *                     none; EAGLE's scripts and llama.cpp add it).
 *   deepseek-coder    deepseek-coder-*-instruct: ### Instruction:\n...\n
 *                     ### Response:\n...\n<|EOT|>\n, after the model's own
 *                     default system text.
 *   deepseek          DeepSeek-LLM chat and DeepSeek-V2: User: ...\n\n
 *                     Assistant: ...<｜end▁of▁sentence｜>; none by default.
 *   qwen3             Qwen3 (0.6B to 32B): chatml with no default system
 *                     message, where an earlier answer is written without
 *                     its <think>...</think> block (what follows the last
 *                     </think>, leading newlines dropped), unless it follows
 *                     the last user turn that is not a <tool_response>; the
 *                     model thinks first (enable_thinking left as it is).
 *   qwen3-no-think    the same with enable_thinking false: the generation
 *                     prompt ends in an empty <think>\n\n</think>\n\n, so the
 *                     model answers at once.
 *   gemma3            Gemma 3 (270M to 27B, -it): <bos>, then
 *                     <start_of_turn>user|model\n + content + <end_of_turn>\n
 *                     per message, contents trimmed, <start_of_turn>model\n to
 *                     answer; no system role: a system message (none by
 *                     default), untrimmed, and a blank line open the first
 *                     user turn.
 * Those that write their bos token are encoded without adding specials.
 *
 * Multi-turn as in EAGLE: the prompt for turn k holds user turns 1..k and the
 * model's own answers to turns 1..k-1. */
#ifndef C2T_CHAT_H
#define C2T_CHAT_H
#include <stddef.h>
#include <stdint.h>
#include "infer/text/tokenizer.h"

typedef enum {
    CHAT_NONE = 0,       /* the text as is, encoded with add_special */
    CHAT_LLAMA2 = 1,
    CHAT_LLAMA3 = 2,
    CHAT_VICUNA = 3,
    CHAT_CHATML = 4,
    CHAT_LLAMA31 = 5,
    CHAT_MISTRAL = 6,
    CHAT_ZEPHYR = 7,
    CHAT_DEEPSEEK_CODER = 8,
    CHAT_DEEPSEEK = 9,
    CHAT_QWEN3 = 10,
    CHAT_QWEN3_NO_THINK = 11,
    CHAT_GEMMA3 = 12,
} ChatTemplate;

/* Accepts llama-2-chat (llama2, llama-2), llama-3-instruct (llama3, llama-3),
 * llama-3.1 (llama-3.2, llama-3.3), vicuna (vicuna_v1.1), chatml, mistral,
 * zephyr, deepseek-coder, deepseek (deepseek-llm), qwen3, qwen3-no-think,
 * gemma3 (gemma-3), none.  Returns 0, or -1 with an error listing the
 * names. */
int chat_template_parse(const char *name, ChatTemplate *out);
const char *chat_template_name(ChatTemplate t);
#define CHAT_TEMPLATE_NAMES \
    "llama-2-chat, llama-3-instruct, llama-3.1, vicuna, chatml, mistral, zephyr, deepseek-coder, deepseek, qwen3, " \
    "qwen3-no-think, gemma3, none"

/* Guesses the template of a checkpoint from tokenizer_config.json's
 * chat_template, the special tokens of the vocabulary and the checkpoint's
 * path (e.g. "vicuna" in the name).  Fills why with a one-line reason.
 * Returns 0, or -1 (error says to pass the template explicitly). */
int chat_template_guess(const Tokenizer *tok, const char *ckpt_path, ChatTemplate *out,
                        char *why, size_t whylen);

/* EAGLE's system prompt for llama-2/3/3.1, fastchat's for vicuna, SmolLM2's
 * for chatml, DeepSeek-Coder's own text for deepseek-coder, "" for the
 * others: the defaults when there is no tokenizer to ask. */
const char *chat_default_system(ChatTemplate t);
/* The default system prompt of template t for this tokenizer: for chatml,
 * the system message its tokenizer_config chat_template writes when the
 * conversation has none (SmolLM2's, Qwen2.5's "You are Qwen, created by
 * Alibaba Cloud. You are a helpful assistant.", "" when the template writes
 * none); chat_default_system(t) otherwise and when tok has no
 * chat_template.  A fresh string (free it). */
char *chat_template_system(const Tokenizer *tok, ChatTemplate t);

/* Renders the prompt for turn n_user: user[0..n_user) and the model's
 * answers assistant[0..n_user-1).  system NULL = the template's default,
 * "" = no system prompt.  Returns a fresh string (free it). */
char *chat_render(ChatTemplate t, const char *system, const char *const *user,
                  const char *const *assistant, int n_user);
/* chat_render with system NULL meaning chat_template_system(tok, t). */
char *chat_render_tok(const Tokenizer *tok, ChatTemplate t, const char *system, const char *const *user,
                      const char *const *assistant, int n_user);
/* Whether the rendered prompt is encoded with add_special_tokens. */
int chat_add_special(ChatTemplate t);
/* Renders (chat_render_tok) and encodes; *ids fresh (free it).  Returns 0 / -1. */
int chat_encode(const Tokenizer *tok, ChatTemplate t, const char *system, const char *const *user,
                const char *const *assistant, int n_user, int32_t **ids, size_t *n);

/* Token ids that end the model's answer: eos, <|eot_id|> for llama-3 and
 * 3.1, <|im_end|> for chatml and qwen3, <|EOT|> for deepseek-coder,
 * <end_of_turn> for gemma3, and generation_config.json's eos_token_id(s)
 * (Qwen2.5-Instruct: <|im_end|> and <|endoftext|>).
 * Returns how many were written to out (at most max). */
int chat_stop_ids(const Tokenizer *tok, ChatTemplate t, int32_t *out, int max);

/* The answer text EAGLE feeds into the next turn: generated ids cut at the
 * first stop id, decoded, cut at "</s>" (llama-2/vicuna), special-token
 * names (bos/eos/unk/pad) removed, clean-up of tokenization spaces when the
 * tokenizer_config asks for it, whitespace stripped.  Fresh string or NULL. */
char *chat_answer_text(const Tokenizer *tok, ChatTemplate t, const int32_t *ids, size_t n);

/* Python's str.strip(): leading/trailing characters with str.isspace(). */
char *chat_py_strip(const char *s);

#endif
