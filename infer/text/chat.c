/* Chat templates (see chat.h for where each format comes from). */
#include "infer/text/chat.h"
#include "kernels/base/util.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* EAGLE's system prompt (gen_ea_answer_llama2chat.py / _llama3chat.py), which
 * is LLaMA-2's original default system prompt. */
static const char *EAGLE_SYSTEM =
    "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, "
    "while being safe.  Your answers should not include any harmful, unethical, racist, sexist, "
    "toxic, dangerous, or illegal content. Please ensure that your responses are socially unbiased "
    "and positive in nature.\n\nIf a question does not make any sense, or is not factually coherent, "
    "explain why instead of answering something not correct. If you don't know the answer to a "
    "question, please don't share false information.";

/* fastchat vicuna_v1.1 system_message. */
static const char *VICUNA_SYSTEM =
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions.";

/* The system message SmolLM2-Instruct's chat_template inserts when the
 * conversation has none: chatml's default when the tokenizer has no
 * chat_template to read another one from (chat_template_system). */
static const char *SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/* The system text deepseek-coder-*-instruct's chat_template writes when the
 * conversation has none (its trailing newline included). */
static const char *DEEPSEEK_CODER_SYSTEM =
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you "
    "only answer questions related to computer science. For politically sensitive questions, security and privacy "
    "issues, and other non-computer science questions, you will refuse to answer\n";

/* DeepSeek's bos and eos tokens (fullwidth bars, U+2581 for the spaces) */
#define DEEPSEEK_BOS "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DEEPSEEK_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"

typedef struct { char *v; size_t n, cap; } SB;
static void sb_add(SB *b, const char *s) {
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        while (b->n + l + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 256;
        b->v = xrealloc(b->v, b->cap);
    }
    memcpy(b->v + b->n, s, l + 1);
    b->n += l;
}

int chat_template_parse(const char *name, ChatTemplate *out) {
    static const struct { const char *n; ChatTemplate t; } names[] = {
        {"llama-2-chat", CHAT_LLAMA2}, {"llama-2", CHAT_LLAMA2}, {"llama2", CHAT_LLAMA2}, {"llama2-chat", CHAT_LLAMA2},
        {"llama-3-instruct", CHAT_LLAMA3}, {"llama-3", CHAT_LLAMA3}, {"llama3", CHAT_LLAMA3}, {"llama3-instruct", CHAT_LLAMA3},
        {"vicuna", CHAT_VICUNA}, {"vicuna_v1.1", CHAT_VICUNA}, {"vicuna-v1.1", CHAT_VICUNA},
        {"chatml", CHAT_CHATML}, {"none", CHAT_NONE}, {"raw", CHAT_NONE},
        {"llama-3.1", CHAT_LLAMA31}, {"llama3.1", CHAT_LLAMA31}, {"llama-3.1-instruct", CHAT_LLAMA31},
        {"llama-3.2", CHAT_LLAMA31}, {"llama-3.3", CHAT_LLAMA31},
        {"mistral", CHAT_MISTRAL}, {"mistral-instruct", CHAT_MISTRAL}, {"zephyr", CHAT_ZEPHYR},
        {"deepseek-coder", CHAT_DEEPSEEK_CODER}, {"deepseek", CHAT_DEEPSEEK}, {"deepseek-llm", CHAT_DEEPSEEK},
        {"qwen3", CHAT_QWEN3}, {"qwen3-no-think", CHAT_QWEN3_NO_THINK}, {"qwen3-nothink", CHAT_QWEN3_NO_THINK},
        {"gemma3", CHAT_GEMMA3}, {"gemma-3", CHAT_GEMMA3},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcasecmp(name, names[i].n)) { *out = names[i].t; return 0; }
    err_set("unknown chat template '%s' (known: " CHAT_TEMPLATE_NAMES ")", name);
    return -1;
}

const char *chat_template_name(ChatTemplate t) {
    switch (t) {
    case CHAT_LLAMA2: return "llama-2-chat";
    case CHAT_LLAMA3: return "llama-3-instruct";
    case CHAT_VICUNA: return "vicuna";
    case CHAT_CHATML: return "chatml";
    case CHAT_LLAMA31: return "llama-3.1";
    case CHAT_MISTRAL: return "mistral";
    case CHAT_ZEPHYR: return "zephyr";
    case CHAT_DEEPSEEK_CODER: return "deepseek-coder";
    case CHAT_DEEPSEEK: return "deepseek";
    case CHAT_QWEN3: return "qwen3";
    case CHAT_QWEN3_NO_THINK: return "qwen3-no-think";
    case CHAT_GEMMA3: return "gemma3";
    default: return "none";
    }
}

const char *chat_default_system(ChatTemplate t) {
    switch (t) {
    case CHAT_LLAMA2: case CHAT_LLAMA3: case CHAT_LLAMA31: return EAGLE_SYSTEM;
    case CHAT_DEEPSEEK_CODER: return DEEPSEEK_CODER_SYSTEM;
    case CHAT_VICUNA: return VICUNA_SYSTEM;
    case CHAT_CHATML: return SMOLLM2_SYSTEM;
    default: return "";
    }
}

/* llama-2, vicuna and zephyr write no bos: the encoder adds it */
int chat_add_special(ChatTemplate t) { return t == CHAT_NONE || t == CHAT_LLAMA2 || t == CHAT_VICUNA || t == CHAT_ZEPHYR; }

/* The system message a chatml chat_template writes when the conversation
 * has none: the text of a string literal '<|im_start|>system\n TEXT
 * <|im_end|>' in the template's source (SmolLM2's "You are a helpful AI
 * assistant named SmolLM, ...", Qwen2.5's "You are Qwen, created by Alibaba
 * Cloud. ..."); a literal that ends before <|im_end|> (Qwen2.5's
 * '<|im_start|>system\n' + messages[0]['content'] + ...) is the
 * conversation's own.  Jinja's escapes \n \t \r \\ \' \" are undone.  NULL
 * when the template has no such literal. */
static char *chatml_template_system(const char *ct) {
    static const char tag[] = "<|im_start|>system";
    for (const char *p = strstr(ct, tag); p; p = strstr(p + 1, tag)) {
        /* the quote that opened the literal: the nearest one before the tag */
        const char *q = p;
        while (q > ct && q[-1] != '\'' && q[-1] != '"') q--;
        if (q == ct) continue;
        char quote = q[-1];
        const char *r = p + sizeof tag - 1;
        if (*r == '\n') r++;
        else if (r[0] == '\\' && r[1] == 'n') r += 2;
        else continue;
        SB b = {0};
        sb_add(&b, "");
        int ok = 0;
        while (*r) {
            if (!strncmp(r, "<|im_end|>", 10)) { ok = 1; break; }
            if (*r == quote) break;
            char c[2] = {*r, 0};
            if (*r == '\\' && r[1]) {
                r++;
                c[0] = *r == 'n' ? '\n' : *r == 't' ? '\t' : *r == 'r' ? '\r' : *r;
                if (!strchr("ntr\\'\"", *r)) { sb_add(&b, "\\"); c[0] = *r; }
            }
            sb_add(&b, c);
            r++;
        }
        if (ok && b.n) return b.v;
        free(b.v);
    }
    return NULL;
}

char *chat_template_system(const Tokenizer *tok, ChatTemplate t) {
    const char *ct = tok ? tokenizer_chat_template(tok) : NULL;
    if (t == CHAT_CHATML && ct) {
        char *s = chatml_template_system(ct);
        return s ? s : xstrdup("");
    }
    return xstrdup(chat_default_system(t));
}

static char *lower_dup(const char *s) {
    char *d = xstrdup(s ? s : "");
    for (char *p = d; *p; p++) *p = (char)tolower((unsigned char)*p);
    return d;
}

int chat_template_guess(const Tokenizer *tok, const char *ckpt_path, ChatTemplate *out,
                        char *why, size_t whylen) {
    /* each family by what its published chat_template writes (no newlines:
     * one template spells them as jinja escapes, another as themselves), the
     * more particular first (Llama 3.1's header before Llama 3's); a template
     * none of these matches (a later Mistral's, say) is not guessed at all */
    static const struct { ChatTemplate t; const char *s1, *s2, *s3, *what; } sig[] = {
        {CHAT_LLAMA31, "<|start_header_id|>", "Cutting Knowledge Date: December 2023", "Today Date: ",
         "is Llama 3.1's (its system block's knowledge date)"},
        {CHAT_LLAMA3, "<|start_header_id|>", NULL, NULL, "uses <|start_header_id|>"},
        {CHAT_LLAMA2, "[INST]", "<<SYS>>", NULL, "uses [INST] and <<SYS>>"},
        {CHAT_MISTRAL, "{{ '[INST] ' + message['content'] + ' [/INST]' }}", "{{ message['content'] + eos_token}}", NULL,
         "is Mistral-7B-Instruct-v0.2's"},
        {CHAT_QWEN3, "<|im_start|>", "message.content.split('</think>')[-1].lstrip(", "enable_thinking is false",
         "is Qwen3's (earlier answers without their <think> block)"},
        {CHAT_CHATML, "<|im_start|>", "<|im_end|>", NULL, "uses <|im_start|>/<|im_end|>"},
        {CHAT_VICUNA, "USER:", "ASSISTANT:", NULL, "uses USER:/ASSISTANT:"},
        {CHAT_ZEPHYR, "{{ '<|user|>", "{{ '<|assistant|>", "{{ '<|assistant|>' }}", "is zephyr's (TinyLlama-Chat's)"},
        {CHAT_DEEPSEEK_CODER, "{{'### Instruction:", "{{'### Response:", "<|EOT|>", "is DeepSeek-Coder-Instruct's"},
        {CHAT_DEEPSEEK, "{{ 'User: ' + message['content'] + '", "{{ 'Assistant: ' + message['content'] + eos_token }}",
         "{{ 'Assistant:' }}", "is DeepSeek-LLM chat's"},
        {CHAT_GEMMA3, "{{ '<start_of_turn>' + role + '", "(first_user_prefix if loop.first else \"\") }}",
         "{{ '<end_of_turn>", "is Gemma 3's (a system message opens the first user turn)"},
    };
    const char *ct = tok ? tokenizer_chat_template(tok) : NULL;
    for (size_t i = 0; ct && i < sizeof sig / sizeof *sig; i++) {
        if (!strstr(ct, sig[i].s1) || (sig[i].s2 && !strstr(ct, sig[i].s2)) || (sig[i].s3 && !strstr(ct, sig[i].s3))) continue;
        *out = sig[i].t;
        snprintf(why, whylen, "tokenizer_config.json chat_template %s", sig[i].what);
        return 0;
    }
    if (tok && (tokenizer_token_to_id(tok, "<|start_header_id|>") >= 0 || tokenizer_token_to_id(tok, "<|eot_id|>") >= 0)) {
        *out = CHAT_LLAMA3;
        snprintf(why, whylen, "the vocabulary has <|start_header_id|>/<|eot_id|>");
        return 0;
    }
    char *lp = lower_dup(ckpt_path);
    int rc = -1;
    if (strstr(lp, "vicuna")) {
        *out = CHAT_VICUNA;
        snprintf(why, whylen, "the checkpoint path names vicuna");
        rc = 0;
    } else if ((strstr(lp, "llama-2") || strstr(lp, "llama2")) && strstr(lp, "chat")) {
        *out = CHAT_LLAMA2;
        snprintf(why, whylen, "the checkpoint path names a llama-2 chat model");
        rc = 0;
    } else if ((strstr(lp, "llama-3.") || strstr(lp, "llama3.")) && strstr(lp, "instruct")) {
        *out = CHAT_LLAMA31;
        snprintf(why, whylen, "the checkpoint path names a llama-3.x instruct model");
        rc = 0;
    } else if ((strstr(lp, "llama-3") || strstr(lp, "llama3")) && strstr(lp, "instruct")) {
        *out = CHAT_LLAMA3;
        snprintf(why, whylen, "the checkpoint path names a llama-3 instruct model");
        rc = 0;
    }
    free(lp);
    if (rc) err_set("%s: cannot tell which chat template the model uses (no known chat_template in tokenizer_config.json); "
                    "pass one of " CHAT_TEMPLATE_NAMES, ckpt_path ? ckpt_path : "tokenizer");
    return rc;
}

/* ---- Python str.isspace() / str.strip() ---- */
static int py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

static int dec_char(const unsigned char *s, size_t n, uint32_t *cp) {
    if (!n) return 0;
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    int len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    if ((size_t)len > n || len == 1) { *cp = 0xFFFD; return 1; }
    uint32_t c = s[0] & (0x3F >> (len - 1));
    for (int i = 1; i < len; i++) c = (c << 6) | (s[i] & 0x3F);
    *cp = c;
    return len;
}

char *chat_py_strip(const char *s) {
    size_t n = strlen(s), a = 0, e = n;
    uint32_t cp;
    while (a < n) {
        int k = dec_char((const unsigned char *)s + a, n - a, &cp);
        if (!py_isspace(cp)) break;
        a += (size_t)k;
    }
    while (e > a) {
        size_t j = e - 1;
        while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        dec_char((const unsigned char *)s + j, e - j, &cp);
        if (!py_isspace(cp)) break;
        e = j;
    }
    char *d = xmalloc(e - a + 1);
    memcpy(d, s + a, e - a);
    d[e - a] = 0;
    return d;
}

/* ---- rendering ---- */

/* s without the leading (lead) or trailing newlines, as Python's
 * lstrip('\n') / rstrip('\n'); a fresh string of len bytes of s from at. */
static char *cut_newlines(const char *s, size_t len, int lead, int trail) {
    size_t a = 0, e = len;
    while (lead && a < e && s[a] == '\n') a++;
    while (trail && e > a && s[e - 1] == '\n') e--;
    char *d = xmalloc(e - a + 1);
    memcpy(d, s + a, e - a);
    d[e - a] = 0;
    return d;
}

static const char *last_of(const char *s, const char *what) {
    const char *last = NULL;
    for (const char *p = s; (p = strstr(p, what)); p++) last = p;
    return last;
}

/* A Qwen3 answer as its template writes it: with a </think>, its content is
 * what follows the last one (newlines first dropped) and its reasoning what
 * precedes the first, after that part's last <think> (trailing, then
 * leading newlines dropped); without, the content is the answer and the
 * reasoning empty.  The block is kept (newlines round both parts trimmed)
 * where the answer follows the last real user turn (keep) and has
 * reasoning. */
static void qwen3_answer(SB *b, const char *m, int keep) {
    const char *close = strstr(m, "</think>");
    if (!close) { sb_add(b, m); return; }
    const char *after = last_of(m, "</think>") + 8;
    char *content = cut_newlines(after, strlen(after), 1, 0);
    char *head = cut_newlines(m, (size_t)(close - m), 0, 1);
    const char *open = last_of(head, "<think>");
    const char *r = open ? open + 7 : head;
    char *reasoning = cut_newlines(r, strlen(r), 1, 0);
    if (keep && *reasoning) {
        char *inner = cut_newlines(reasoning, strlen(reasoning), 1, 1);
        sb_add(b, "<think>\n"); sb_add(b, inner); sb_add(b, "\n</think>\n\n"); sb_add(b, content);
        free(inner);
    } else {
        sb_add(b, content);
    }
    free(content); free(head); free(reasoning);
}

/* Whether a Qwen3 user turn is a tool's response, which the template's
 * "last query" skips. */
static int qwen3_tool_response(const char *u) {
    const size_t n = strlen(u), o = strlen("<tool_response>"), c = strlen("</tool_response>");
    return n >= o && n >= c && !strncmp(u, "<tool_response>", o) && !strcmp(u + n - c, "</tool_response>");
}

char *chat_render(ChatTemplate t, const char *system, const char *const *user,
                  const char *const *assistant, int n_user) {
    SB b = {0};
    sb_add(&b, "");
    if (!system) system = chat_default_system(t);
    /* messages: user0, asst0, user1, ..., user(n-1), then the open reply */
    int n_msg = 2 * n_user;
#define MSG(i) ((i) % 2 == 0 ? user[(i) / 2] : ((i) / 2 < n_user - 1 && assistant ? assistant[(i) / 2] : NULL))
    switch (t) {
    case CHAT_LLAMA2: {
        /* fastchat SeparatorStyle.LLAMA2, roles [INST] / [/INST], seps " " and " </s><s>" */
        if (*system) { sb_add(&b, "[INST] <<SYS>>\n"); sb_add(&b, system); sb_add(&b, "\n<</SYS>>\n\n"); }
        else sb_add(&b, "[INST] ");
        for (int i = 0; i < n_msg; i++) {
            const char *m = MSG(i);
            const char *tag = i % 2 == 0 ? "[INST]" : "[/INST]";
            if (m && *m) {
                if (i == 0) { sb_add(&b, m); sb_add(&b, " "); }
                else { sb_add(&b, tag); sb_add(&b, " "); sb_add(&b, m); sb_add(&b, i % 2 == 0 ? " " : " </s><s>"); }
            } else sb_add(&b, tag);
        }
        sb_add(&b, " ");  /* EAGLE: prompt = conv.get_prompt() + " " */
        break;
    }
    case CHAT_VICUNA: {
        /* fastchat SeparatorStyle.ADD_COLON_TWO, roles USER / ASSISTANT, seps " " and "</s>" */
        sb_add(&b, system);
        sb_add(&b, " ");
        for (int i = 0; i < n_msg; i++) {
            const char *m = MSG(i);
            const char *role = i % 2 == 0 ? "USER" : "ASSISTANT";
            sb_add(&b, role);
            if (m && *m) { sb_add(&b, ": "); sb_add(&b, m); sb_add(&b, i % 2 == 0 ? " " : "</s>"); }
            else sb_add(&b, ":");
        }
        break;
    }
    case CHAT_LLAMA3: {
        /* {% set content = '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + content | trim + '<|eot_id|>' %}
         * bos_token before the first message; generation prompt at the end. */
        int first = 1;
        if (*system) {
            char *c = chat_py_strip(system);
            sb_add(&b, "<|begin_of_text|>");
            sb_add(&b, "<|start_header_id|>system<|end_header_id|>\n\n"); sb_add(&b, c); sb_add(&b, "<|eot_id|>");
            free(c);
            first = 0;
        }
        for (int i = 0; i < n_msg - 1; i++) {
            const char *m = MSG(i);
            char *c = chat_py_strip(m ? m : "");
            if (first) { sb_add(&b, "<|begin_of_text|>"); first = 0; }
            sb_add(&b, "<|start_header_id|>");
            sb_add(&b, i % 2 == 0 ? "user" : "assistant");
            sb_add(&b, "<|end_header_id|>\n\n"); sb_add(&b, c); sb_add(&b, "<|eot_id|>");
            free(c);
        }
        sb_add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    }
    case CHAT_CHATML: {
        /* {'<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n'} per
         * message, contents as given; the generation prompt at the end */
        if (*system) { sb_add(&b, "<|im_start|>system\n"); sb_add(&b, system); sb_add(&b, "<|im_end|>\n"); }
        for (int i = 0; i < n_msg - 1; i++) {
            const char *m = MSG(i);
            sb_add(&b, i % 2 == 0 ? "<|im_start|>user\n" : "<|im_start|>assistant\n");
            sb_add(&b, m ? m : "");
            sb_add(&b, "<|im_end|>\n");
        }
        sb_add(&b, "<|im_start|>assistant\n");
        break;
    }
    case CHAT_QWEN3:
    case CHAT_QWEN3_NO_THINK: {
        /* chatml's messages, each answer as qwen3_answer writes it: its
         * block kept only after the last user turn that is not a tool's
         * response (message index last_query; none such: the last message) */
        if (*system) { sb_add(&b, "<|im_start|>system\n"); sb_add(&b, system); sb_add(&b, "<|im_end|>\n"); }
        int last_query = n_msg - 2;
        for (int i = n_msg - 2; i >= 0; i -= 2)
            if (!qwen3_tool_response(MSG(i))) { last_query = i; break; }
        for (int i = 0; i < n_msg - 1; i++) {
            const char *m = MSG(i);
            if (i % 2 == 0) {
                sb_add(&b, "<|im_start|>user\n"); sb_add(&b, m);
            } else {
                sb_add(&b, "<|im_start|>assistant\n");
                qwen3_answer(&b, m ? m : "", i > last_query);
            }
            sb_add(&b, "<|im_end|>\n");
        }
        sb_add(&b, "<|im_start|>assistant\n");
        if (t == CHAT_QWEN3_NO_THINK) sb_add(&b, "<think>\n\n</think>\n\n");
        break;
    }
    case CHAT_LLAMA31: {
        /* the system block always, its header before the (trimmed) system
         * message; then each message as llama-3's, trimmed */
        char *c = chat_py_strip(system);
        sb_add(&b, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                   "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
        sb_add(&b, c);
        sb_add(&b, "<|eot_id|>");
        free(c);
        for (int i = 0; i < n_msg - 1; i++) {
            c = chat_py_strip(MSG(i) ? MSG(i) : "");
            sb_add(&b, i % 2 == 0 ? "<|start_header_id|>user<|end_header_id|>\n\n" : "<|start_header_id|>assistant<|end_header_id|>\n\n");
            sb_add(&b, c);
            sb_add(&b, "<|eot_id|>");
            free(c);
        }
        sb_add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    }
    case CHAT_MISTRAL:
        /* [INST] user [/INST]answer</s>; a system message opens the first user turn */
        sb_add(&b, "<s>");
        for (int i = 0; i < n_msg - 1; i++) {
            if (i % 2) { sb_add(&b, MSG(i) ? MSG(i) : ""); sb_add(&b, "</s>"); continue; }
            sb_add(&b, "[INST] ");
            if (i == 0 && *system) { sb_add(&b, system); sb_add(&b, "\n\n"); }
            sb_add(&b, MSG(i));
            sb_add(&b, " [/INST]");
        }
        break;
    case CHAT_ZEPHYR:
        if (*system) { sb_add(&b, "<|system|>\n"); sb_add(&b, system); sb_add(&b, "</s>\n"); }
        for (int i = 0; i < n_msg - 1; i++) {
            sb_add(&b, i % 2 == 0 ? "<|user|>\n" : "<|assistant|>\n");
            sb_add(&b, MSG(i) ? MSG(i) : "");
            sb_add(&b, "</s>\n");
        }
        sb_add(&b, "<|assistant|>\n");
        break;
    case CHAT_DEEPSEEK_CODER:
        /* the system text as given (the template's default ends in a newline;
         * one given does not get one) */
        sb_add(&b, DEEPSEEK_BOS);
        sb_add(&b, system);
        for (int i = 0; i < n_msg - 1; i++) {
            sb_add(&b, i % 2 == 0 ? "### Instruction:\n" : "### Response:\n");
            sb_add(&b, MSG(i) ? MSG(i) : "");
            sb_add(&b, i % 2 == 0 ? "\n" : "\n<|EOT|>\n");
        }
        sb_add(&b, "### Response:\n");
        break;
    case CHAT_GEMMA3:
        /* '<start_of_turn>' + role + '\n' + content | trim + '<end_of_turn>\n',
         * assistant as "model"; the system message (untrimmed) and '\n\n'
         * before the first user turn's content */
        sb_add(&b, "<bos>");
        for (int i = 0; i < n_msg - 1; i++) {
            char *c = chat_py_strip(MSG(i) ? MSG(i) : "");
            sb_add(&b, i % 2 == 0 ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
            if (i == 0 && *system) { sb_add(&b, system); sb_add(&b, "\n\n"); }
            sb_add(&b, c);
            sb_add(&b, "<end_of_turn>\n");
            free(c);
        }
        sb_add(&b, "<start_of_turn>model\n");
        break;
    case CHAT_DEEPSEEK:
        sb_add(&b, DEEPSEEK_BOS);
        if (*system) { sb_add(&b, system); sb_add(&b, "\n\n"); }
        for (int i = 0; i < n_msg - 1; i++) {
            sb_add(&b, i % 2 == 0 ? "User: " : "Assistant: ");
            sb_add(&b, MSG(i) ? MSG(i) : "");
            sb_add(&b, i % 2 == 0 ? "\n\n" : DEEPSEEK_EOS);
        }
        sb_add(&b, "Assistant:");
        break;
    default:
        for (int i = 0; i < n_user; i++) {
            if (i) sb_add(&b, "\n");
            sb_add(&b, user[i]);
        }
        break;
    }
#undef MSG
    return b.v;
}

char *chat_render_tok(const Tokenizer *tok, ChatTemplate t, const char *system, const char *const *user,
                      const char *const *assistant, int n_user) {
    if (system) return chat_render(t, system, user, assistant, n_user);
    char *sys = chat_template_system(tok, t);
    char *p = chat_render(t, sys, user, assistant, n_user);
    free(sys);
    return p;
}

int chat_encode(const Tokenizer *tok, ChatTemplate t, const char *system, const char *const *user,
                const char *const *assistant, int n_user, int32_t **ids, size_t *n) {
    char *p = chat_render_tok(tok, t, system, user, assistant, n_user);
    int rc = tokenizer_encode(tok, p, chat_add_special(t), ids, n);
    free(p);
    return rc;
}

int chat_stop_ids(const Tokenizer *tok, ChatTemplate t, int32_t *out, int max) {
    int32_t cand[3 + 8];
    for (int i = 0; i < 3 + 8; i++) cand[i] = -1;
    cand[0] = tokenizer_eos_id(tok);
    if (t == CHAT_LLAMA3 || t == CHAT_LLAMA31) {
        cand[1] = tokenizer_token_to_id(tok, "<|eot_id|>");
        cand[2] = tokenizer_token_to_id(tok, "<|end_of_text|>");
    }
    if (t == CHAT_CHATML || t == CHAT_QWEN3 || t == CHAT_QWEN3_NO_THINK) cand[1] = tokenizer_token_to_id(tok, "<|im_end|>");
    if (t == CHAT_DEEPSEEK_CODER) cand[1] = tokenizer_token_to_id(tok, "<|EOT|>");
    if (t == CHAT_GEMMA3) cand[1] = tokenizer_token_to_id(tok, "<end_of_turn>");
    const int32_t *gen;
    int ng = tokenizer_generation_eos(tok, &gen);
    for (int i = 0; i < ng && i < 8; i++) cand[3 + i] = gen[i];
    int k = 0;
    for (int i = 0; i < 3 + 8; i++) {
        if (cand[i] < 0) continue;
        int dup = 0;
        for (int j = 0; j < k; j++) if (out[j] == cand[i]) dup = 1;
        if (!dup && k < max) out[k++] = cand[i];
    }
    return k;
}

static void replace_all(char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to);
    if (!fl || tl > fl) return;  /* only shrinking replacements, in place */
    char *r = s, *w = s;
    while (*r) {
        if (!strncmp(r, from, fl)) { memcpy(w, to, tl); w += tl; r += fl; }
        else *w++ = *r++;
    }
    *w = 0;
}

char *chat_answer_text(const Tokenizer *tok, ChatTemplate t, const int32_t *ids, size_t n) {
    int32_t stop[4];
    int ns = chat_stop_ids(tok, t, stop, 4);
    size_t cut = n;
    for (size_t i = 0; i < n && cut == n; i++)
        for (int k = 0; k < ns; k++) if (ids[i] == stop[k]) { cut = i; break; }
    char *s = tokenizer_decode(tok, ids, cut, 0);
    if (!s) return NULL;
    if (t == CHAT_LLAMA2 || t == CHAT_VICUNA) {
        char *f = strstr(s, "</s>");
        if (f && f > s) *f = 0;
    }
    const char *which[] = {"bos", "eos", "unk", "pad"};
    for (int i = 0; i < 4; i++) {
        const char *name = tokenizer_special_name(tok, which[i]);
        if (name && *name) replace_all(s, name, "");
    }
    if (tokenizer_clean_up_spaces(tok)) {
        static const char *pairs[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
                                         {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) replace_all(s, pairs[i][0], pairs[i][1]);
    }
    char *r = chat_py_strip(s);
    free(s);
    return r;
}
