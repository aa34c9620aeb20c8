/* spec-tokenize: encode / decode with a checkpoint's tokenizer, token for
 * token what Hugging Face produces.  Lines in, lines out (see --help). */
#include "infer/cli.h"
#include "infer/text/chat.h"
#include "infer/text/questions.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *PROG = "spec-tokenize";

static void usage(FILE *f) {
    fprintf(f,
        "usage: spec-tokenize --tokenizer PATH [options] < input > output\n"
        "\n"
        "PATH is a checkpoint directory (tokenizer.json preferred, else tokenizer.model),\n"
        "a tokenizer.json (Hugging Face tokenizers, BPE) or a tokenizer.model\n"
        "(SentencePiece BPE).  A tokenizer_config.json next to it is read when present.\n"
        "\n"
        "Modes (one input line -> one output line):\n"
        "  (default)            encode: each line is a JSON string; prints a JSON array of ids\n"
        "  --decode             each line is a JSON array of ids; prints a JSON string\n"
        "  --template NAME      each line is a question.jsonl object {question_id, turns, ...};\n"
        "                       prints the ids of each turn's prompt, one line per turn.\n"
        "                       NAME: " CHAT_TEMPLATE_NAMES ", or auto (guessed from\n"
        "                       the checkpoint, with a notice on stderr).  Turn k>1 needs the\n"
        "                       model's answers to the earlier turns in an \"answers\" list on\n"
        "                       the line; turns without them are not printed.\n"
        "  --info               print kind, vocabulary size, bos/eos ids and exit\n"
        "\n"
        "Options:\n"
        "  --tokenizer PATH     the tokenizer (required; PATH as above)\n"
        "  --no-bos             do not add bos/eos (add_special_tokens=False); --template keeps\n"
        "                       each template's own setting unless this is given\n"
        "                       (--no-special: the same)\n"
        "  --split-special      special-token text in the input is plain text\n"
        "                       (split_special_tokens=True)\n"
        "  --system TEXT        --template: system prompt (default: the template's; \"\" for none)\n"
        "  --text               --template: print the rendered prompt as a JSON string, not ids\n"
        "  --skip-special       --decode: leave special tokens out (skip_special_tokens=True)\n"
        "  --stream             --decode: use the incremental (streaming) decoder\n"
        "  --help               this text\n");
}

static void print_ids(const int32_t *ids, size_t n) {
    putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    puts("]");
}

/* A JSON string of n bytes (NUL bytes included), UTF-8 kept as is. */
static void print_json_string_len(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", stdout); break;
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\b': fputs("\\b", stdout); break;
        case '\f': fputs("\\f", stdout); break;
        default:
            if (c < 0x20 || c == 0x7F) printf("\\u%04x", c);
            else putchar(c);
        }
    }
    fputs("\"\n", stdout);
}
static void print_json_string(const char *s) { print_json_string_len(s, strlen(s)); }

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void put_utf8(char **o, uint32_t cp) {
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) { *u++ = (unsigned char)cp; }
    else if (cp < 0x800) { *u++ = (unsigned char)(0xC0 | (cp >> 6)); *u++ = (unsigned char)(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { *u++ = (unsigned char)(0xE0 | (cp >> 12)); *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); *u++ = (unsigned char)(0x80 | (cp & 0x3F)); }
    else { *u++ = (unsigned char)(0xF0 | (cp >> 18)); *u++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F)); *u++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); *u++ = (unsigned char)(0x80 | (cp & 0x3F)); }
    *o = (char *)u;
}

static int read_u4(const char *p, uint32_t *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) { int h = hexval(p[i]); if (h < 0) return -1; *v = *v * 16 + (uint32_t)h; }
    return 0;
}

/* Parses a line holding one JSON string (surrounding whitespace allowed)
 * into a fresh buffer; keeps \u0000.  Returns 0 / -1 with *why set. */
static int parse_json_string_line(const char *line, size_t len, char **out, size_t *out_len, const char **why) {
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i >= len || line[i] != '"') { *why = "expected a JSON string (one per line)"; return -1; }
    i++;
    char *buf = xmalloc(len + 1), *o = buf;
    for (;;) {
        if (i >= len) { free(buf); *why = "unterminated JSON string"; return -1; }
        unsigned char c = (unsigned char)line[i++];
        if (c == '"') break;
        if (c < 0x20) { free(buf); *why = "control character inside a JSON string"; return -1; }
        if (c != '\\') { *o++ = (char)c; continue; }
        if (i >= len) { free(buf); *why = "unterminated JSON string"; return -1; }
        char e = line[i++];
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (i + 4 > len || read_u4(line + i, &cp)) { free(buf); *why = "bad \\u escape"; return -1; }
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (i + 6 > len || line[i] != '\\' || line[i + 1] != 'u' || read_u4(line + i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    free(buf); *why = "lone UTF-16 surrogate in a \\u escape (not valid text)"; return -1;
                }
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(buf); *why = "lone UTF-16 surrogate in a \\u escape (not valid text)"; return -1;
            }
            put_utf8(&o, cp);
            break;
        }
        default: free(buf); *why = "bad escape in a JSON string"; return -1;
        }
    }
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) i++;
    if (i != len) { free(buf); *why = "characters after the JSON string"; return -1; }
    *o = 0;
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
}

typedef struct {
    const char *path, *chat, *system;
    int decode, no_bos, split_special, skip_special, stream, text_out, info;
} TokArgs;

static void parse_args(int argc, char **argv, TokArgs *a) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const int has_value = i + 1 < argc;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) { usage(stdout); exit(0); }
        else if (!strcmp(o, "--tokenizer") && has_value) a->path = argv[++i];
        else if (!strcmp(o, "--template") && has_value) a->chat = argv[++i];
        else if (!strcmp(o, "--chat") && has_value) {   /* the old spelling */
            a->chat = argv[++i];
            fprintf(stderr, "%s: --chat is now spelled --template (as in spec-eval and spec-generate)\n", PROG);
        } else if (!strcmp(o, "--system") && has_value) a->system = argv[++i];
        else if (!strcmp(o, "--decode")) a->decode = 1;
        else if (!strcmp(o, "--no-bos") || !strcmp(o, "--no-special")) a->no_bos = 1;
        else if (!strcmp(o, "--split-special")) a->split_special = 1;
        else if (!strcmp(o, "--skip-special")) a->skip_special = 1;
        else if (!strcmp(o, "--stream")) a->stream = 1;
        else if (!strcmp(o, "--text")) a->text_out = 1;
        else if (!strcmp(o, "--info")) a->info = 1;
        else cli_unknown_option(PROG, o);   /* unknown, or one of the above without its value */
    }
    if (!a->path) die(PROG, "--tokenizer PATH is required (see --help)");
    if (a->decode && a->chat) die(PROG, "--decode and --template do not go together");
    if (a->text_out && !a->chat) die(PROG, "--text only applies to --template");
}

static void print_info(const Tokenizer *tok) {
    cJSON *j = cJSON_CreateString(tokenizer_path(tok));
    char *p = cJSON_PrintUnformatted(j);
    printf("{\"path\": %s, \"kind\": \"%s\", \"vocab_size\": %d, \"bos_id\": %d, \"eos_id\": %d, \"adds_bos\": %s, "
           "\"adds_eos\": %s}\n",
           p, tokenizer_kind(tok) == TOK_KIND_SPM_BPE ? "sentencepiece-bpe" : "tokenizers-bpe",
           tokenizer_vocab_size(tok), tokenizer_bos_id(tok), tokenizer_eos_id(tok),
           tokenizer_adds_bos(tok) ? "true" : "false", tokenizer_adds_eos(tok) ? "true" : "false");
    free(p);
    cJSON_Delete(j);
}

/* --template: one question line -> the ids (or text) of each turn's prompt
 * whose earlier answers the line gives. */
static void chat_line(const TokArgs *a, const Tokenizer *tok, ChatTemplate tpl, const char *line, size_t len, int lineno) {
    int blank = 1;
    for (size_t k = 0; k < len; k++) if (line[k] != ' ' && line[k] != '\t') blank = 0;
    if (blank) return;
    Question q;
    if (question_parse(line, len, "stdin", lineno, &q)) die_err(PROG);
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *ans = cJSON_GetObjectItemCaseSensitive(j, "answers"), *e;
    int n_ans = 0;
    const char **answers = xcalloc((size_t)q.n_turns + 1, sizeof(char *));
    if (ans && !cJSON_IsArray(ans)) die(PROG, "stdin:%d: answers must be a list of strings", lineno);
    cJSON_ArrayForEach(e, ans) {
        if (!cJSON_IsString(e)) die(PROG, "stdin:%d: answers must be a list of strings", lineno);
        if (n_ans < q.n_turns) answers[n_ans++] = e->valuestring;
    }
    for (int k = 1; k <= q.n_turns && k <= n_ans + 1; k++) {
        char *prompt = chat_render_tok(tok, tpl, a->system, (const char *const *)q.turns, answers, k);
        if (a->text_out) print_json_string(prompt);
        else {
            int32_t *ids;
            size_t n;
            int flags = (chat_add_special(tpl) && !a->no_bos ? TOK_ADD_SPECIAL : 0) | (a->split_special ? TOK_SPLIT_SPECIAL : 0);
            if (tokenizer_encode_ex(tok, prompt, strlen(prompt), flags, &ids, &n)) die(PROG, "stdin:%d: %s", lineno, err_get());
            print_ids(ids, n);
            free(ids);
        }
        free(prompt);
    }
    free(answers);
    cJSON_Delete(j);
    question_clear(&q);
}

/* The text of n ids through the streaming decoder, piece by piece. */
static char *decode_streaming(const Tokenizer *tok, const int32_t *ids, size_t n, int skip_special, size_t *len, int lineno) {
    TokenizerStream *st = tokenizer_stream_new(tok, skip_special);
    size_t cap = 64, sn = 0;
    char *s = xmalloc(cap);
    s[0] = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece = i < n ? tokenizer_stream_push(st, ids[i]) : tokenizer_stream_flush(st);
        if (!piece) die(PROG, "stdin:%d: %s", lineno, err_get());
        size_t pl = tokenizer_stream_len(st);
        while (sn + pl + 1 > cap) cap *= 2;
        s = xrealloc(s, cap);
        memcpy(s + sn, piece, pl);
        sn += pl;
        s[sn] = 0;
    }
    tokenizer_stream_free(st);
    *len = sn;
    return s;
}

/* --decode: one JSON array of ids -> one JSON string. */
static void decode_line(const TokArgs *a, const Tokenizer *tok, const char *line, size_t len, int lineno) {
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsArray(j)) die(PROG, "stdin:%d: expected a JSON array of token ids", lineno);
    size_t n = (size_t)cJSON_GetArraySize(j), k = 0, sn = 0;
    int32_t *ids = xmalloc(sizeof(int32_t) * (n + 1));
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
        if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int32_t)e->valuedouble)
            die(PROG, "stdin:%d: element %zu is not an integer token id", lineno, k);
        ids[k++] = (int32_t)e->valuedouble;
    }
    char *s = a->stream ? decode_streaming(tok, ids, n, a->skip_special, &sn, lineno)
                        : tokenizer_decode_len(tok, ids, n, a->skip_special, &sn);
    if (!s) die(PROG, "stdin:%d: %s", lineno, err_get());
    print_json_string_len(s, sn);
    free(s);
    free(ids);
    cJSON_Delete(j);
}

/* encode: one JSON string -> one JSON array of ids. */
static void encode_line(const TokArgs *a, const Tokenizer *tok, const char *line, size_t len, int lineno) {
    char *text;
    size_t tl, n;
    const char *why;
    if (parse_json_string_line(line, len, &text, &tl, &why)) die(PROG, "stdin:%d: %s", lineno, why);
    int32_t *ids;
    int flags = (a->no_bos ? 0 : TOK_ADD_SPECIAL) | (a->split_special ? TOK_SPLIT_SPECIAL : 0);
    if (tokenizer_encode_ex(tok, text, tl, flags, &ids, &n)) die(PROG, "stdin:%d: %s", lineno, err_get());
    print_ids(ids, n);
    free(ids);
    free(text);
}

int main(int argc, char **argv) {
    TokArgs a = {0};
    parse_args(argc, argv, &a);
    Tokenizer *tok = tokenizer_load(a.path);
    if (!tok) die_err(PROG);
    if (a.info) {
        print_info(tok);
        tokenizer_free(tok);
        return 0;
    }
    ChatTemplate tpl = CHAT_NONE;
    if (a.chat && !strcmp(a.chat, "auto")) {
        char why[256];
        if (chat_template_guess(tok, a.path, &tpl, why, sizeof why)) die_err(PROG);
        fprintf(stderr, "%s: chat template %s (guessed: %s; pass --template NAME to choose)\n", PROG,
                chat_template_name(tpl), why);
    } else if (a.chat && chat_template_parse(a.chat, &tpl)) {
        die_err(PROG);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (a.chat) chat_line(&a, tok, tpl, line, (size_t)len, lineno);
        else if (a.decode) decode_line(&a, tok, line, (size_t)len, lineno);
        else encode_line(&a, tok, line, (size_t)len, lineno);
    }
    free(line);
    tokenizer_free(tok);
    if (fflush(stdout) != 0) die(PROG, "cannot write output");
    return 0;
}
