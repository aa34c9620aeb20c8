/* spec-generate: one prompt's answer, streamed as text.  With the target
 * alone it decodes greedily (the first thing to run on a new checkpoint,
 * the `ar` baseline in miniature, and the steps' logit gaps for exactness
 * studies); with --draft (or --policy, or --temperature) it decodes with a
 * policy through a session, as spec-eval's turns do, each cycle's tokens
 * printed as they are committed.  --chat holds a conversation read from
 * standard input through that session, turn after turn. */
#include "infer/cli.h"
#include "infer/model/generate.h"
#include "infer/text/chat.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/util.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog = "spec-generate";

static void usage(FILE *f) {
    fprintf(f,
        "usage: spec-generate --target DIR (--ids 1,2,3 | --prompt TEXT | --chat) [--draft DIR] [options]\n"
        "One prompt's answer, streamed as text: greedy with the target alone, or speculative with\n"
        "--draft (a policy's trees verified by the target: at --temperature 0 the same tokens as\n"
        "the target alone with the same options) and a summary line on stderr (tokens, cycles, tau,\n"
        "gamma, tok/s).  Both compute as a plain run does unless --cpu-fast-gemm or --kv-dtype is\n"
        "given (--kv-dtype f32 --cpu-fast-gemm off: F32 throughout).\n"
        "  --ids LIST             prompt as comma-separated token ids (no bos added, no template)\n"
        "  --prompt TEXT          a user message in the chat template (as spec-eval applies it), or\n"
        "                         plain text with --template none; the answer is streamed as text\n"
        "  --prompt-file PATH     --prompt's text read from a file, every byte as it is (a final\n"
        "                         newline too); - reads standard input\n"
        "  --chat                 a conversation: each line of standard input a user turn (a line\n"
        "                         ending in \\ goes on into the next), its answer streamed, every\n"
        "                         turn's prompt the whole conversation in the chat template with\n"
        "                         the model's earlier answers, as spec-eval's later turns; ends at\n"
        "                         end of input (with or without --draft; --print-ids: each turn's\n"
        "                         ids after its text)\n"
        "  --fresh-turns          --chat: forward each turn's whole prompt, as spec-eval does; by\n"
        "                         default a turn keeps the cache entries of the conversation so far\n"
        "                         and forwards only what follows them (a near tie may then fall\n"
        "                         otherwise than after a whole prefill: docs/commands.md)\n"
        "  --max-new-tokens N     tokens to generate (default 256); stops early at eos\n"
        "  --max-ctx N            KV cache slots (default: prompt + new tokens; speculative: new\n"
        "                         tokens + 4096)\n"
        "  --print-ids            print the generated ids as a JSON array (default with --ids)\n"
        "  --print-gaps           then, as a second JSON array, each step's largest logit minus the\n"
        "                         runner-up's (how near a tie each greedy choice was; target alone)\n"
        "  --force                use a --classifier trained for another target or draft\n"
        "  -h, --help             this text\n"
        "(--model and --ctx, the old names of --target and --max-ctx, still work)\n"
        "models\n"
        CLI_MODELS_HELP
        CLI_BACKEND_HELP
        CLI_POLICY_HELP
        "  (the policy: eagle2 with --draft, ar without; a plain run as spec-eval's for one sequence,\n"
        "  but with the full draft vocabulary unless --draft-vocab: auto explores the full one for\n"
        "  its first 64 cycles, more than most single answers take)\n"
        "sampling (a policy's: with a draft exact in distribution; without one, ar)\n"
        CLI_SAMPLING_HELP,
        draft_kind_help(), CHAT_TEMPLATE_NAMES, policy_names());
}

static int parse_ids(const char *s, int **ids) {
    int n = 0, cap = 16;
    *ids = xmalloc(sizeof(int) * cap);
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 0x7fffffff) die(prog, "--ids: not a list of token ids: %s", s);
        if (n == cap) { cap *= 2; *ids = xrealloc(*ids, sizeof(int) * cap); }
        (*ids)[n++] = (int)v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    if (!n) die(prog, "--ids: empty prompt");
    return n;
}

typedef struct {
    SessionConfig cfg;   /* the models, text, lengths, backend, policy and sampling */
    const char *ids_arg, *prompt_text;
    char *prompt_read;   /* --prompt-file's text (prompt_text points at it) */
    int print_ids, print_gaps, force;
    int policy_given;    /* --policy on the command line */
    int chat;            /* --chat: turns from standard input */
    int fresh_turns;     /* --fresh-turns: no turn keeps the conversation's cache entries */
} GenArgs;

/* Whether the answer is decoded with a policy (a session) rather than by
 * the target alone. */
static int speculative(const GenArgs *a) {
    return a->cfg.draft_dir || a->policy_given || a->cfg.sp.temperature > 0;
}

static void parse_args(int argc, char **argv, GenArgs *a) {
    enum { O_MODEL = CLI_OWN, O_CTX, O_IDS, O_PROMPT, O_PROMPT_FILE, O_PRINT_IDS, O_PRINT_GAPS, O_FORCE, O_CHAT, O_FRESH };
    static const struct option opts[] = {
        {"target", 1, 0, CLI_TARGET}, {"draft", 1, 0, CLI_DRAFT}, {"draft-kind", 1, 0, CLI_DRAFT_KIND},
        {"draft-vocab", 1, 0, CLI_DRAFT_VOCAB}, {"draft-temperature", 1, 0, CLI_DRAFT_TEMP},
        {"tokenizer", 1, 0, CLI_TOKENIZER}, {"template", 1, 0, CLI_TEMPLATE}, {"system", 1, 0, CLI_SYSTEM},
        {"device", 1, 0, CLI_DEVICE}, {"max-new-tokens", 1, 0, CLI_MAX_NEW}, {"max-ctx", 1, 0, CLI_MAX_CTX},
        CLI_POLICY_OPTIONS, CLI_BACKEND_OPTIONS, CLI_DECODE_OPTIONS,
        {"model", 1, 0, O_MODEL}, {"ctx", 1, 0, O_CTX}, {"ids", 1, 0, O_IDS}, {"prompt", 1, 0, O_PROMPT},
        {"prompt-file", 1, 0, O_PROMPT_FILE}, {"chat", 0, 0, O_CHAT}, {"fresh-turns", 0, 0, O_FRESH},
        {"print-ids", 0, 0, O_PRINT_IDS}, {"print-gaps", 0, 0, O_PRINT_GAPS}, {"force", 0, 0, O_FORCE},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    session_config_default(&a->cfg);
    CliQuestions none = {0};
    const char *prompt_file = NULL;
    int c, prompts = 0;
    opterr = 0;   /* one-line errors of our own */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        a->policy_given |= c == CLI_POLICY;
        if (cli_session_option(prog, c, optarg, &a->cfg, &none)) continue;
        switch (c) {
        case O_MODEL:
            fprintf(stderr, "%s: --model is now --target (still accepted)\n", prog);
            a->cfg.target_dir = optarg;
            break;
        case O_CTX:
            fprintf(stderr, "%s: --ctx is now --max-ctx (still accepted)\n", prog);
            cli_session_option(prog, CLI_MAX_CTX, optarg, &a->cfg, &none);
            break;
        case O_IDS: a->ids_arg = optarg; prompts++; break;
        case O_PROMPT: a->prompt_text = optarg; prompts++; break;
        case O_PROMPT_FILE: prompt_file = optarg; prompts++; break;
        case O_PRINT_IDS: a->print_ids = 1; break;
        case O_PRINT_GAPS: a->print_gaps = 1; break;
        case O_FORCE: a->force = 1; break;
        case O_CHAT: a->chat = 1; break;
        case O_FRESH: a->fresh_turns = 1; break;
        case 'h': usage(stdout); exit(0);
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    if (optind < argc) die(prog, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!a->cfg.target_dir) die(prog, "--target is required (see --help)");
    if (a->chat && prompts) die(prog, "--chat reads its turns from standard input: not with --ids, --prompt or --prompt-file");
    if (a->fresh_turns && !a->chat) die(prog, "--fresh-turns: how --chat's turns are prefilled; give --chat");
    if (a->chat && a->print_gaps) die(prog, "--print-gaps: the target alone's greedy steps for one prompt; not with --chat");
    if (!prompts && !a->chat) die(prog, "give a prompt with --ids, --prompt or --prompt-file, or --chat");
    if (prompts > 1) die(prog, "give one prompt: --ids, --prompt or --prompt-file, not two");
    if (prompt_file) {
        const char *path = strcmp(prompt_file, "-") ? prompt_file : "/dev/stdin";
        size_t n;
        if (!(a->prompt_read = read_text_file(path, &n))) die_err(prog);
        if (strlen(a->prompt_read) != n) die(prog, "--prompt-file %s: the text holds a NUL byte", prompt_file);
        if (!n) die(prog, "--prompt-file %s: empty", prompt_file);
        a->prompt_text = a->prompt_read;
    }
    if (a->ids_arg) a->print_ids = 1;
    if (speculative(a) && a->print_gaps)
        die(prog, "--print-gaps: the target alone's greedy steps; not with --draft, --policy or --temperature");
    if (!a->policy_given && !a->cfg.draft_dir) snprintf(a->cfg.prm.name, sizeof a->cfg.prm.name, "ar");
}

/* The prompt as token ids: --ids as given, --prompt in the chat template
 * tmpl (plain text for CHAT_NONE). */
static int prompt_ids(const GenArgs *a, const Tokenizer *tok, ChatTemplate tmpl, int **prompt) {
    if (a->ids_arg) return parse_ids(a->ids_arg, prompt);
    int32_t *ids;
    size_t n;
    const char *user[1] = {a->prompt_text};
    if (chat_encode(tok, tmpl, a->cfg.system, user, NULL, 1, &ids, &n)) die_err(prog);
    if (!n) die(prog, "--prompt: the prompt encodes to no tokens");
    *prompt = xmalloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) (*prompt)[i] = ids[i];
    free(ids);
    return (int)n;
}

static void check_vocab(const int *prompt, int n, int vocab) {
    for (int i = 0; i < n; i++)
        if (prompt[i] >= vocab) die(prog, "--ids: token %d outside the vocabulary (%d)", prompt[i], vocab);
}

/* The answer's text as it grows, never splitting a character; a
 * continuation (no template) is printed after its prompt. */
typedef struct {
    TokenizerStream *ts;   /* NULL: --ids, the answer is printed as ids only */
    int printed;           /* tokens of the answer printed so far */
} TextOut;

static void text_begin(TextOut *o, const GenArgs *a, const Tokenizer *tok, ChatTemplate tmpl) {
    o->printed = 0;
    o->ts = a->prompt_text || a->chat ? tokenizer_stream_new(tok, 1) : NULL;
    if (o->ts && tmpl == CHAT_NONE) fputs(a->prompt_text, stdout);
}

/* Prints out[o->printed .. n); -1 with err_set on an id the tokenizer
 * does not have. */
static int text_push(TextOut *o, const int *out, int n) {
    for (; o->ts && o->printed < n; o->printed++) {
        const char *piece = tokenizer_stream_push(o->ts, out[o->printed]);
        if (!piece) { err_set("generated id %d is outside the tokenizer's vocabulary", out[o->printed]); return -1; }
        fputs(piece, stdout);
    }
    fflush(stdout);
    return 0;
}

static void text_end(TextOut *o, const Tokenizer *tok, ChatTemplate tmpl, const int *out, int n) {
    if (!o->ts) return;
    if (text_push(o, out, n)) die_err(prog);
    fputs(tokenizer_stream_flush(o->ts), stdout);
    fputs("\n", stdout);
    tokenizer_stream_free(o->ts);
    o->ts = NULL;
    int32_t stop[8];
    int n_stop = chat_stop_ids(tok, tmpl, stop, 8), at_once = n == 0;
    for (int k = 0; k < n_stop && n > 0; k++) at_once |= out[0] == stop[k];
    if (at_once) fprintf(stderr, "%s: the model ended its answer at once (end-of-sequence first)\n", prog);
}

static void print_json_ids(const int *out, int n) {
    printf("[");
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", out[i]);
    printf("]\n");
}

/* The target alone, greedy, in the arithmetic a speculative run of the
 * same options computes in (a plain run's, chosen for the weights, unless
 * --cpu-fast-gemm or --kv-dtype is given), so that --draft changes how
 * fast the answer comes, never what it is. */
static void generate_alone(GenArgs *a) {
    SessionConfig *cfg = &a->cfg;
    Tokenizer *tok = NULL;
    ChatTemplate tmpl = CHAT_NONE;
    if (cfg->template_name && chat_template_parse(cfg->template_name, &tmpl)) die_err(prog);
    if (a->prompt_text) {
        if (!(tok = tokenizer_load(cfg->tokenizer_path ? cfg->tokenizer_path : cfg->target_dir))) die_err(prog);
        char why[256];
        if (!cfg->template_name && chat_template_guess(tok, cfg->target_dir, &tmpl, why, sizeof why) == 0) {
            fprintf(stderr, "%s: chat template %s (%s; set --template to choose)\n", prog, chat_template_name(tmpl), why);
        } else if (!cfg->template_name) {   /* a base model: the prompt is plain text */
            tmpl = CHAT_NONE;
            fprintf(stderr, "%s: no chat template recognised for %s; the prompt is plain text, as --template none\n",
                    prog, cfg->target_dir);
        }
    }
    int *prompt, n_prompt = prompt_ids(a, tok, tmpl, &prompt);
    cli_plain_arith(cfg, 1);
    cfg->arith_tiles = 1;   /* a tree policy's choice (AMX tiles where the CPU has them), as with --draft */
    LlamaModel *m = session_load_target(cfg);
    if (!m) die_err(prog);
    const Backend *be = m->be;
    check_vocab(prompt, n_prompt, m->cfg.vocab);
    LlamaState *s = llama_state_new(m, cfg->max_ctx ? cfg->max_ctx : n_prompt + cfg->max_new);
    if (!s) die_err(prog);
    int *out = xmalloc(sizeof(int) * cfg->max_new);
    float *gap = a->print_gaps ? xmalloc(sizeof(float) * cfg->max_new) : NULL;
    int n = greedy_generate_gaps(s, prompt, n_prompt, cfg->max_new, out, gap);
    if (n < 0) die_err(prog);
    if (backend_failure(be)) die(prog, "%s backend failed: %s", be->name, backend_failure(be));
    TextOut o;
    text_begin(&o, a, tok, tmpl);
    text_end(&o, tok, tmpl, out, n);
    if (a->print_ids) print_json_ids(out, n);
    if (gap) {   /* after the ids: how near a tie each step's choice was */
        printf("[");
        for (int i = 0; i < n; i++) printf("%s%.6g", i ? "," : "", gap[i]);
        printf("]\n");
    }
    free(gap);
    tokenizer_free(tok);
    free(out);
    free(prompt);
    llama_state_free(s);
    llama_free(m);
}

/* Prints each cycle's committed tokens as the decoder reports them: an
 * observer of the cycle (observer.h), after the prefill's token and after
 * every cycle. */
typedef struct {
    Observer base;
    TextOut *text;
} StreamWatch;

static int stream_turn_begin(Observer *o, Decoder *dec) {
    return text_push(((StreamWatch *)o)->text, dec->turn.out, dec->turn.n_out);
}
static int stream_cycle_end(Observer *o, Decoder *dec, const CycleReport *r) {
    (void)r;
    return text_push(((StreamWatch *)o)->text, dec->turn.out, dec->turn.n_out);
}
static void stream_destroy(Observer *o) { free(o); }

/* A policy's run: the session's target, draft and defaults, its decoder
 * with the watcher that streams each turn's text. */
typedef struct {
    Session s;
    Policy *policy;
    Decoder *dec;
    TextOut text;
} PolicyRun;

static void run_open(GenArgs *a, PolicyRun *r) {
    SessionConfig *cfg = &a->cfg;
    if (!cfg->max_ctx) cfg->max_ctx = cfg->max_new + 4096;
    if (a->ids_arg && !cfg->template_name) cfg->template_name = "none";   /* the ids are the whole prompt */
    cli_plain_arith(cfg, 1);
    Policy *policy = policy_new(&cfg->prm);
    if (!policy) die_err(prog);
    if (policy->needs_draft != (cfg->draft_dir != NULL)) {   /* freed first: nothing left for a leak check */
        const int needs = policy->needs_draft;
        policy_free(policy);
        if (needs) die(prog, "policy %s needs --draft", cfg->prm.name);
        die(prog, "policy %s decodes without a draft: drop --draft", cfg->prm.name);
    }
    if (session_open(&r->s, cfg, prog)) die_err(prog);
    r->policy = cli_default_sizes(prog, policy, cfg, &r->s);
    cli_check_classifier(prog, r->policy, &r->s, a->force);
    if (!(r->dec = session_decoder(&r->s, r->policy))) die_err(prog);
    StreamWatch *w = xcalloc(1, sizeof *w);
    w->base = (Observer){.name = "stream", .turn_begin = stream_turn_begin, .cycle_end = stream_cycle_end,
                         .destroy = stream_destroy};
    w->text = &r->text;
    decoder_watch(r->dec, &w->base);
}

/* One answer to prompt, streamed, with its summary line on stderr; its ids
 * into out (max_new + 1 of them), their count returned. */
static int run_turn(GenArgs *a, PolicyRun *r, const int *prompt, int n_prompt, int *out) {
    const SessionConfig *cfg = &a->cfg;
    check_vocab(prompt, n_prompt, r->s.target->cfg.vocab);
    if (n_prompt + cfg->max_new + 1 > r->s.slots)
        die(prog, "the prompt's %d tokens + %d new exceed the context (%d); raise --max-ctx", n_prompt, cfg->max_new,
            r->s.slots);
    text_begin(&r->text, a, r->s.tok, r->s.tmpl);
    DecodeStats st;
    int n = decoder_run(r->dec, prompt, n_prompt, cfg->max_new, out, &st);
    if (n < 0) die_err(prog);
    const Backend *be = r->s.target->be;
    if (backend_failure(be)) die(prog, "%s backend failed: %s", be->name, backend_failure(be));
    text_end(&r->text, r->s.tok, r->s.tmpl, out, n);
    if (a->print_ids) print_json_ids(out, n);
    const double secs = stage_decode_s(&st.t);
    fprintf(stderr, "%s: %s: %d tokens", prog, r->policy->name, n);
    if (r->policy->needs_draft)
        fprintf(stderr, ", %lld cycles, tau %.2f, gamma %lld", (long long)st.cycles, decode_stats_tau(&st), (long long)st.gamma);
    fprintf(stderr, "; %.1f tok/s after a %.2f s prefill", secs > 0 ? n / secs : 0, st.t.prefill);
    if (st.prompt_kept) fprintf(stderr, " (%lld of the prompt's %d tokens kept)", (long long)st.prompt_kept, n_prompt);
    if (st.t.calibrate > 0) fprintf(stderr, " (calibration %.2f s left out)", st.t.calibrate);
    fputs("\n", stderr);
    return n;
}

static void run_close(PolicyRun *r) {
    decoder_free(r->dec);
    policy_free(r->policy);
    session_close(&r->s);
}

/* With a policy: one prompt, as one turn of spec-eval decodes. */
static void generate_with_policy(GenArgs *a) {
    PolicyRun r;
    run_open(a, &r);
    int *prompt, n_prompt = prompt_ids(a, r.s.tok, r.s.tmpl, &prompt);
    int *out = xmalloc(sizeof(int) * (a->cfg.max_new + 1));
    run_turn(a, &r, prompt, n_prompt, out);
    free(out);
    free(prompt);
    run_close(&r);
}

/* The next user turn from f: a line without its newline, a line ending in
 * a backslash joined to the next by a newline; blank turns skipped.  NULL
 * at the end of input (a turn cut off by it still counts). */
static char *read_turn(FILE *f, int prompt_tty) {
    char *turn = NULL, *line = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (prompt_tty) fputs(turn ? "... " : "> ", stderr);
        ssize_t n = getline(&line, &cap, f);
        if (n < 0) break;
        if (memchr(line, 0, (size_t)n)) die(prog, "--chat: standard input holds a NUL byte (turns are text)");
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        const int more = n > 0 && line[n - 1] == '\\';
        if (more) line[--n] = 0;
        turn = xrealloc(turn, len + (size_t)n + 2);
        memcpy(turn + len, line, (size_t)n);
        len += (size_t)n;
        if (more) { turn[len++] = '\n'; turn[len] = 0; continue; }
        turn[len] = 0;
        if (strspn(turn, " \t\r\n") == len) { len = 0; continue; }   /* blank: not a turn */
        break;
    }
    free(line);
    if (turn && strspn(turn, " \t\r\n") == len) { free(turn); turn = NULL; }
    return turn;
}

/* --chat: each turn's prompt is the whole conversation in the template,
 * the model's earlier answers as spec-eval's later turns hold them (one
 * question of spec-eval's, its turns as they come: session_prompt,
 * session_answer), decoded from its start; the cache entries of the
 * prefix it shares with the turn before are kept (Decoder.cache) unless
 * --fresh-turns. */
static void generate_chat(GenArgs *a) {
    PolicyRun r;
    run_open(a, &r);
    if (r.s.tmpl == CHAT_NONE) {
        run_close(&r);
        die(prog, "--chat: a conversation needs a chat template (%s has none recognised; give --template)",
            a->cfg.target_dir);
    }
    r.dec->cache.keep_prefix = !a->fresh_turns;
    int *out = xmalloc(sizeof(int) * (a->cfg.max_new + 1));
    Question q = {.id = "chat"};
    const char **answer = NULL;
    const int tty = isatty(0) && isatty(2);
    for (char *turn; (turn = read_turn(stdin, tty)); q.n_turns++) {
        q.turns = xrealloc(q.turns, sizeof(char *) * (size_t)(q.n_turns + 1));
        answer = xrealloc(answer, sizeof(char *) * (size_t)(q.n_turns + 1));
        q.turns[q.n_turns] = turn;
        int32_t *ids;
        size_t n_ids;
        if (session_prompt(&r.s, &q, answer, q.n_turns, &ids, &n_ids)) die_err(prog);
        int *prompt = xmalloc(sizeof(int) * n_ids);
        for (size_t i = 0; i < n_ids; i++) prompt[i] = ids[i];
        free(ids);
        answer[q.n_turns] = session_answer(&r.s, out, run_turn(a, &r, prompt, (int)n_ids, out));
        free(prompt);
        if (tty) fputs("\n", stdout);
    }
    for (int i = 0; i < q.n_turns; i++) { free(q.turns[i]); free((char *)answer[i]); }
    free(q.turns); free(answer); free(out);
    run_close(&r);
}

int main(int argc, char **argv) {
    GenArgs a = {0};
    parse_args(argc, argv, &a);
    if (a.chat) generate_chat(&a);
    else if (speculative(&a)) generate_with_policy(&a);
    else generate_alone(&a);
    free(a.prompt_read);
    return 0;
}
