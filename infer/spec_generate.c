/* spec-generate: greedy generation with the target model alone — the first
 * thing to run on a new checkpoint, and the `ar` baseline in miniature. */
#include "infer/cli.h"
#include "infer/model/generate.h"
#include "infer/text/chat.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/util.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "spec-generate";

static void usage(FILE *f) {
    fprintf(f,
        "usage: spec-generate --target DIR (--ids 1,2,3 | --prompt TEXT) [options]\n"
        "Greedy (temperature 0) generation with a Hugging Face LLaMA-family checkpoint.\n"
        "  --target DIR           checkpoint dir: config.json + model.safetensors[.index.json]\n"
        "  --ids LIST             prompt as comma-separated token ids (no bos added, no template)\n"
        "  --prompt TEXT          a user message in the chat template (as spec-eval applies it), or\n"
        "                         plain text with --template none; the answer is streamed as text\n"
        "  --template NAME        %s (default: guessed, with a\n"
        "                         notice; plain text when the checkpoint has none we recognise)\n"
        "  --system TEXT          system prompt (default: the template's; \"\" for none)\n"
        "  --tokenizer PATH       tokenizer.json / tokenizer.model / dir (default: --target)\n"
        "  --max-new-tokens N     tokens to generate (default 256); stops early at eos\n"
        "  --max-ctx N            KV cache slots (default: prompt + new tokens)\n"
        "  --device D             cpu | cuda | auto (default auto: cuda when a GPU is visible)\n"
        CLI_BACKEND_HELP
        "  --print-ids            print the generated ids as a JSON array (default with --ids)\n"
        "  --print-gaps           then, as a second JSON array, each step's largest logit minus the\n"
        "                         runner-up's (how near a tie each greedy choice was)\n"
        "  -h, --help             this text\n"
        "(--model and --ctx, the old names of --target and --max-ctx, still work)\n", CHAT_TEMPLATE_NAMES);
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
    const char *model_dir, *ids_arg, *prompt_text, *tok_path, *device, *template_name, *system;
    int max_new, ctx, print_ids, print_gaps;
    BackendOptions backend;
} GenArgs;

static void parse_args(int argc, char **argv, GenArgs *a) {
    static const struct option opts[] = {
        {"target", required_argument, 0, 'm'}, {"model", required_argument, 0, 'M'}, {"ids", required_argument, 0, 'i'},
        {"prompt", required_argument, 0, 'p'}, {"max-new-tokens", required_argument, 0, 'n'},
        {"max-ctx", required_argument, 0, 'c'}, {"ctx", required_argument, 0, 'C'}, {"print-ids", no_argument, 0, 'P'},
        {"print-gaps", no_argument, 0, 'G'},
        {"template", required_argument, 0, 'T'}, {"system", required_argument, 0, 'S'},
        {"tokenizer", required_argument, 0, 't'}, {"device", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'},
        CLI_BACKEND_OPTIONS, {0, 0, 0, 0}};
    a->device = "auto";
    backend_options_default(&a->backend);
    a->max_new = 256;
    int c;
    opterr = 0;   /* one-line errors of our own */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_backend_option(prog, c, optarg, &a->backend)) continue;
        switch (c) {
        case 'M': fprintf(stderr, "%s: --model is now --target (still accepted)\n", prog); /* fall through */
        case 'm': a->model_dir = optarg; break;
        case 'T': a->template_name = optarg; break;
        case 'S': a->system = optarg; break;
        case 'i': a->ids_arg = optarg; break;
        case 'p': a->prompt_text = optarg; break;
        case 'n': a->max_new = (int)cli_int(prog, "--max-new-tokens", optarg, 1, 1 << 20); break;
        case 'C': fprintf(stderr, "%s: --ctx is now --max-ctx (still accepted)\n", prog); /* fall through */
        case 'c': a->ctx = (int)cli_int(prog, "--max-ctx", optarg, 0, 1 << 22); break;
        case 'P': a->print_ids = 1; break;
        case 'G': a->print_gaps = 1; break;
        case 't': a->tok_path = optarg; break;
        case 'd': a->device = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    if (optind < argc) die(prog, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!a->model_dir) die(prog, "--target is required (see --help)");
    if (!a->ids_arg && !a->prompt_text) die(prog, "give a prompt with --ids or --prompt");
}

/* --prompt: the text in the chat template (given, or guessed with a
 * notice; plain text for a checkpoint without one) as token ids. */
static int prompt_from_text(const GenArgs *a, const Tokenizer *tok, ChatTemplate *tmpl, int **prompt) {
    char why[256];
    if (!a->template_name && chat_template_guess(tok, a->model_dir, tmpl, why, sizeof why) == 0) {
        fprintf(stderr, "%s: chat template %s (%s; set --template to choose)\n", prog, chat_template_name(*tmpl), why);
    } else if (!a->template_name) {   /* a base model: the prompt is plain text */
        *tmpl = CHAT_NONE;
        fprintf(stderr, "%s: no chat template recognised for %s; the prompt is plain text, as --template none\n", prog,
                a->model_dir);
    }
    int32_t *ids;
    size_t n;
    const char *user[1] = {a->prompt_text};
    if (*tmpl == CHAT_NONE ? tokenizer_encode(tok, a->prompt_text, 1, &ids, &n)
                           : chat_encode(tok, *tmpl, a->system, user, NULL, 1, &ids, &n))
        die_err(prog);
    if (!n) die(prog, "--prompt: the prompt encodes to no tokens");
    *prompt = xmalloc(sizeof(int) * n);
    for (size_t i = 0; i < n; i++) (*prompt)[i] = ids[i];
    free(ids);
    return (int)n;
}

/* The answer streamed as text, never splitting a character; a
 * continuation (no template) is printed after its prompt. */
static void print_answer(const GenArgs *a, const Tokenizer *tok, ChatTemplate tmpl, const int *out, int n) {
    TokenizerStream *ts = tokenizer_stream_new(tok, 1);
    if (tmpl == CHAT_NONE) fputs(a->prompt_text, stdout);
    int32_t stop[8];
    int n_stop = chat_stop_ids(tok, tmpl, stop, 8), at_once = n == 0;
    for (int k = 0; k < n_stop && n > 0; k++) at_once |= out[0] == stop[k];
    if (at_once) fprintf(stderr, "%s: the model ended its answer at once (end-of-sequence first)\n", prog);
    for (int i = 0; i < n; i++) {
        const char *piece = tokenizer_stream_push(ts, out[i]);
        if (!piece) die(prog, "generated id %d is outside the tokenizer's vocabulary", out[i]);
        fputs(piece, stdout);
    }
    fputs(tokenizer_stream_flush(ts), stdout);
    fputs("\n", stdout);
    tokenizer_stream_free(ts);
}

int main(int argc, char **argv) {
    GenArgs a = {0};
    parse_args(argc, argv, &a);
    int *prompt, n_prompt;
    Tokenizer *tok = NULL;
    ChatTemplate tmpl = CHAT_NONE;
    if (a.template_name && chat_template_parse(a.template_name, &tmpl)) die_err(prog);
    if (a.prompt_text) {
        if (!(tok = tokenizer_load(a.tok_path ? a.tok_path : a.model_dir))) die_err(prog);
        n_prompt = prompt_from_text(&a, tok, &tmpl, &prompt);
    } else {
        n_prompt = parse_ids(a.ids_arg, &prompt);
        a.print_ids = 1;
    }
    if (backend_configure(&a.backend)) die_err(prog);
    const Backend *be = backend_by_name(a.device);
    if (!be) die_err(prog);
    LlamaModel *m = llama_load(a.model_dir, be);
    if (!m) die_err(prog);
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= m->cfg.vocab) die(prog, "--ids: token %d outside the vocabulary (%d)", prompt[i], m->cfg.vocab);
    LlamaState *s = llama_state_new(m, a.ctx ? a.ctx : n_prompt + a.max_new);
    if (!s) die_err(prog);
    int *out = xmalloc(sizeof(int) * a.max_new);
    float *gap = a.print_gaps ? xmalloc(sizeof(float) * a.max_new) : NULL;
    int n = greedy_generate_gaps(s, prompt, n_prompt, a.max_new, out, gap);
    if (n < 0) die_err(prog);
    if (backend_failure(be)) die(prog, "%s backend failed: %s", be->name, backend_failure(be));
    if (tok) print_answer(&a, tok, tmpl, out, n);
    if (a.print_ids) {
        printf("[");
        for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", out[i]);
        printf("]\n");
    }
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
    return 0;
}
