/* The shared command-line layer (infer/cli.h). */
#include "infer/cli.h"
#include "infer/speculative/classifier.h"
#include "infer/speculative/decode.h"
#include "infer/text/questions.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

long cli_int(const char *prog, const char *opt, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) die(prog, "%s: expected an integer in [%ld, %ld], got '%s'", opt, lo, hi, v);
    return x;
}

double cli_num(const char *prog, const char *opt, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x)) die(prog, "%s: not a number: '%s'", opt, v);
    if (!(x >= lo && x <= hi)) die(prog, "%s: expected a number in [%g, %g], got '%s'", opt, lo, hi, v);
    return x;
}

uint64_t cli_u64(const char *prog, const char *opt, const char *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || *v == '-') die(prog, "%s: expected a non-negative integer, got '%s'", opt, v);
    return (uint64_t)x;
}

static int on_off(const char *prog, const char *opt, const char *arg, int verbose_ok) {
    if (!strcmp(arg, "off")) return 0;
    if (!strcmp(arg, "on")) return 1;
    if (verbose_ok && !strcmp(arg, "verbose")) return 2;
    die(prog, "%s: expected off or on%s, got '%s'", opt, verbose_ok ? " or verbose" : "", arg);
}

int cli_backend_option(const char *prog, int code, const char *arg, BackendOptions *o) {
    switch (code) {
    case CLI_CPU_F32_CACHE: o->cpu_f32_cache_mb = (int)cli_int(prog, "--cpu-f32-cache-mb", arg, 0, 1 << 24); return 1;
    case CLI_CUDA_GRAPHS: o->cuda_graphs = on_off(prog, "--cuda-graphs", arg, 1); return 1;
    case CLI_CUDA_TILED_MAX: o->cuda_tiled_max = cli_int(prog, "--cuda-tiled-max", arg, 0, LONG_MAX); return 1;
    case CLI_CUDA_FAST_GEMM: o->cuda_fast_gemm = on_off(prog, "--cuda-fast-gemm", arg, 0); return 1;
    case CLI_CPU_FAST_GEMM:
        if (!strcmp(arg, "amx")) o->cpu_fast_gemm = CPU_GEMM_AMX;
        else if (!strcmp(arg, "on") || !strcmp(arg, "off")) o->cpu_fast_gemm = on_off(prog, "--cpu-fast-gemm", arg, 0);
        else die(prog, "--cpu-fast-gemm: expected off, on or amx, got '%s'", arg);
        return 1;
    case CLI_KV_DTYPE:
        if (strcmp(arg, "f32") && strcmp(arg, "bf16")) die(prog, "--kv-dtype: expected f32 or bf16, got '%s'", arg);
        o->kv_dtype = strcmp(arg, "bf16") ? DT_F32 : DT_BF16;
        return 1;
    default: return 0;
    }
}

int cli_session_option(const char *prog, int code, const char *arg, SessionConfig *cfg, CliQuestions *q) {
    if (code == CLI_CPU_FAST_GEMM || code == CLI_KV_DTYPE) cfg->arith_given = 1;
    if (cli_backend_option(prog, code, arg, &cfg->backend)) return 1;
    switch (code) {
    case CLI_TARGET: cfg->target_dir = arg; return 1;
    case CLI_DRAFT: cfg->draft_dir = arg; return 1;
    case CLI_DRAFT_KIND:   /* before any model loads */
        if (!draft_kind_known(arg)) die(prog, "--draft-kind: unknown kind '%s' (%s)", arg, draft_kind_names());
        cfg->draft_kind = arg;
        return 1;
    case CLI_DRAFT_VOCAB:
        cfg->draft_vocab_given = 1;
        cfg->draft_vocab = !strcmp(arg, "full")   ? 0
                           : !strcmp(arg, "auto") ? DRAFT_VOCAB_AUTO
                                                  : (int)cli_int(prog, "--draft-vocab", arg, 1, INT_MAX);
        return 1;
    case CLI_TOKENIZER: cfg->tokenizer_path = arg; return 1;
    case CLI_TEMPLATE: cfg->template_name = arg; return 1;
    case CLI_SYSTEM: cfg->system = arg; return 1;
    case CLI_DEVICE: cfg->device = arg; return 1;
    case CLI_QUESTIONS:
        if (q->n == CLI_MAX_FILES) die(prog, "at most %d --questions files", CLI_MAX_FILES);
        q->files[q->n++] = arg;
        return 1;
    case CLI_MAX_QUESTIONS: q->max_questions = (int)cli_int(prog, "--max-questions", arg, 1, 1 << 30); return 1;
    case CLI_MAX_TURNS: q->max_turns = (int)cli_int(prog, "--max-turns", arg, 1, 1 << 30); return 1;
    case CLI_MAX_NEW: cfg->max_new = (int)cli_int(prog, "--max-new-tokens", arg, 1, 1 << 20); return 1;
    case CLI_MAX_CTX: cfg->max_ctx = (int)cli_int(prog, "--max-ctx", arg, 16, 1 << 22); return 1;
    case CLI_PARAM: if (policy_params_set(&cfg->prm, arg, NULL)) die_err(prog); return 1;
    case CLI_TOPM: cfg->prm.topm = (int)cli_int(prog, "--entropy-topm", arg, 0, 1 << 30); return 1;
    case CLI_QUIET: progress_quiet(1); return 1;
    case CLI_DRAFT_TEMP:
        cfg->draft_temperature = (float)cli_num(prog, "--draft-temperature", arg, 1e-3, 1e3);
        return 1;
    case CLI_VERIFY:
        if (strcmp(arg, "tree") && strcmp(arg, "walk")) die(prog, "--verify: expected tree or walk, got '%s'", arg);
        cfg->verify = !strcmp(arg, "walk") ? VERIFY_WALK : VERIFY_TREE;
        return 1;
    case CLI_POLICY: snprintf(cfg->prm.name, sizeof cfg->prm.name, "%s", arg); return 1;
    case CLI_TEMPERATURE: cfg->sp.temperature = (float)cli_num(prog, "--temperature", arg, 0, 100); return 1;
    case CLI_TOP_K: cfg->sp.top_k = (int)cli_int(prog, "--top-k", arg, 0, 1 << 30); return 1;
    case CLI_TOP_P: cfg->sp.top_p = (float)cli_num(prog, "--top-p", arg, 0, 1); return 1;
    case CLI_SEED: cfg->sp.seed = cli_u64(prog, "--seed", arg); return 1;
    case CLI_COST_CACHE: cfg->cost_cache = strcmp(arg, "none") ? arg : NULL; return 1;
    default: break;
    }
    static const char *const policy_flags[] = {"--topk", "--depth", "--total", "--draft-len", "--classifier",
                                               "--beta", "--early-stop", "--threshold", "--static-tree"};
    int i = code - CLI_POLICY_FLAG;
    if (i < 0 || i >= (int)(sizeof policy_flags / sizeof *policy_flags)) return 0;
    if (policy_params_set(&cfg->prm, policy_flags[i], arg)) die_err(prog);
    return 1;
}

int cli_plain_run(const SessionConfig *cfg) { return cfg->sp.temperature == 0 && cfg->verify == VERIFY_TREE; }

void cli_plain_arith(SessionConfig *cfg, int slots) {
    cfg->arith_auto = cli_plain_run(cfg) && !cfg->arith_given;
    cfg->arith_tiles = slots > 1 || strcmp(cfg->prm.name, "ar") != 0;
}

Policy *cli_default_sizes(const char *prog, Policy *policy, SessionConfig *cfg, const Session *s) {
    if (!cli_plain_run(cfg) || strcmp(s->target->be->name, "cpu")) return policy;
    const char *name = cfg->prm.name, *key = NULL;
    if (!strcmp(name, "eagle2") || !strcmp(name, "c2t")) key = "total";
    else if (!strcmp(name, "sage")) key = "sage_nmax";
    else if (!strcmp(name, "chain") && !policy_params_given(&cfg->prm, "early_stop")) key = "draft_len";
    if (!key || policy_params_given(&cfg->prm, key)) return policy;
    if (policy_params_set(&cfg->prm, key, "auto")) die_err(prog);
    Policy *p = policy_new(&cfg->prm);
    if (!p) die_err(prog);
    policy_free(policy);
    return p;
}

void cli_check_classifier(const char *prog, const Policy *policy, const Session *s, int force) {
    const char *key, *path = NULL;
    double num;
    for (int i = 0; !path && policy_param_get(policy, i, &key, &num, &path) == 0; i++)
        if (strcmp(key, "classifier")) path = NULL;
    if (!path || !*path) return;
    int unknown;
    if (classifier_check_trained_for(path, s->cfg.target_dir, s->target->config_hash, s->cfg.draft_dir, &unknown)) {
        if (!force) die_err(prog);
        fprintf(stderr, "%s: --force: %s\n", prog, err_get());
    } else if (unknown) {
        fprintf(stderr, "%s: note: %s does not record the target and draft it was trained for; not checked\n", prog, path);
    }
}

/* What cli_on_interrupt's handler writes: composed beforehand, since a
 * signal handler may only call async-signal-safe functions (write,
 * access, _exit). */
static char interrupt_head[256], interrupt_kept[1024], interrupt_none[512];
static const char *interrupt_file;

static void put(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w; n -= (size_t)w;
    }
}

static void on_interrupt(int sig) {
    put(interrupt_head);
    put(sig == SIGINT ? "SIGINT" : "SIGTERM");
    put(interrupt_file && access(interrupt_file, F_OK) == 0 ? interrupt_kept : interrupt_none);
    _exit(128 + sig);
}

/* The first signal of a command that stops cleanly: only the flag. */
static volatile sig_atomic_t *stop_flag;

static void on_stop(int sig) {
    if (stop_flag && !*stop_flag) {
        *stop_flag = sig;
        return;
    }
    on_interrupt(sig);
}

/* handler for SIGINT and SIGTERM, each blocked while it runs */
static void set_handler(void (*handler)(int), int flags) {
    struct sigaction sa = {.sa_handler = handler, .sa_flags = flags};
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void interrupt_texts(const char *prog, const char *file, const char *kept, const char *none) {
    snprintf(interrupt_head, sizeof interrupt_head, "%s%s: interrupted by ", isatty(2) ? "\n" : "", prog);
    snprintf(interrupt_kept, sizeof interrupt_kept, ": %s\n", kept ? kept : "");
    snprintf(interrupt_none, sizeof interrupt_none, ": %s\n", none);
    interrupt_file = file;
}

void cli_on_interrupt(const char *prog, const char *file, const char *kept, const char *none) {
    interrupt_texts(prog, file, kept, none);
    stop_flag = NULL;
    set_handler(on_interrupt, 0);
}

void cli_on_interrupt_stop(const char *prog, volatile sig_atomic_t *flag, const char *none) {
    interrupt_texts(prog, NULL, NULL, none);
    stop_flag = flag;
    set_handler(on_stop, SA_RESTART);
}

const char *cli_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

void cli_unknown_option(const char *prog, const char *arg) {
    die(prog, "unknown option or missing value '%s' (see %s --help)", arg, prog);
}

QuestionSet *cli_questions_load(const char *prog, const CliQuestions *q, int i) {
    QuestionSet *qs = questions_load(q->files[i]);
    if (!qs) die(prog, "%s", err_get());
    questions_keep_first(qs, q->max_questions);
    questions_keep_turns(qs, q->max_turns);
    return qs;
}

/* The folder path names its file in ("." for a bare name, "/" at the
 * root) into dir; returns the file's last component, within path. */
static const char *path_folder(const char *path, char *dir, size_t n) {
    snprintf(dir, n, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (!slash) snprintf(dir, n, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return base;
}

void cli_check_writable(const char *prog, const char *opt, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) die(prog, "%s %s: is a directory, not a file", opt, path);
        if (access(path, W_OK) != 0) die(prog, "%s %s: cannot write it: %s", opt, path, strerror(errno));
        return;
    }
    char dir[4096];
    path_folder(path, dir, sizeof dir);
    if (stat(dir, &st) != 0) die(prog, "%s %s: its folder %s: %s", opt, path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) die(prog, "%s %s: %s is not a folder", opt, path, dir);
    if (access(dir, W_OK | X_OK) != 0) die(prog, "%s %s: cannot create it in %s: %s", opt, path, dir, strerror(errno));
}

void cli_check_folder(const char *prog, const char *opt, const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) die(prog, "%s %s: exists and is not a folder", opt, dir);
        if (access(dir, W_OK | X_OK) != 0) die(prog, "%s %s: cannot write into it: %s", opt, dir, strerror(errno));
        return;
    }
    char d[4096];   /* a missing folder: its parent, as for a new file ("out/" as "out") */
    snprintf(d, sizeof d, "%s", dir);
    for (size_t n = strlen(d); n > 1 && d[n - 1] == '/'; n--) d[n - 1] = 0;
    cli_check_writable(prog, opt, d);
}

/* path's folder, resolved, and its last component: "/real/folder/name" into
 * buf; -1 when the folder cannot be resolved (missing). */
static int resolved_name(const char *path, char *buf, size_t n) {
    char dir[PATH_MAX], real[PATH_MAX];
    const char *base = path_folder(path, dir, sizeof dir);
    if (!realpath(dir, real)) return -1;
    snprintf(buf, n, "%s/%s", real, base);
    return 0;
}

int cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea || eb) return ea && eb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char ra[2 * PATH_MAX], rb[2 * PATH_MAX];
    if (resolved_name(a, ra, sizeof ra) || resolved_name(b, rb, sizeof rb)) return strcmp(a, b) == 0;
    return strcmp(ra, rb) == 0;
}

void cli_check_not_input(const char *prog, const char *opt, const char *out, const CliFile *in, int n) {
    if (!out) return;
    for (int i = 0; i < n; i++)
        if (in[i].path && cli_same_file(out, in[i].path))
            die(prog, "%s %s: is one of its inputs (%s %s); refusing to write over it", opt, out, in[i].opt, in[i].path);
}

void cli_check_distinct_outputs(const char *prog, const CliFile *out, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (out[i].path && out[j].path && cli_same_file(out[i].path, out[j].path))
                die(prog, "%s %s: the same file as %s %s; one would overwrite the other", out[i].opt, out[i].path,
                    out[j].opt, out[j].path);
}
