/* Encode throughput (MB/s of UTF-8 text) on the concatenated benchmark turns
 * of ../shared/benchmarks, ours next to the reference library's on the same
 * text in the same run: the `tokenizers` library for tokenizer.json files,
 * sentencepiece for tokenizer.model (via tools/golden/tokenizer_oracle.py
 * speed, when python3 and the libraries are present).  Both sides encode turn by
 * turn on one thread, without special tokens; best of 3 runs (both keep
 * their word caches warm across runs; "cold" is our first pass after
 * loading, with an empty cache). */
#include "infer/text/questions.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHARED "../shared"

typedef struct { const char *name; char *path; } Entry;

static char **texts;
static int n_texts;
static size_t n_bytes;

static void add_text(const char *s) {
    texts = xrealloc(texts, sizeof(char *) * (size_t)(n_texts + 1));
    texts[n_texts++] = xstrdup(s);
    n_bytes += strlen(s);
}

static int have_python(void) {
    return system("python3 -c 'import tokenizers, sentencepiece' >/dev/null 2>&1") == 0;
}

/* Library MB/s from the oracle, or < 0. */
static double lib_speed(const char *tokpath, const char *textfile, char *lib, size_t liblen) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 tools/golden/tokenizer_oracle.py speed --tokenizer '%s' --text '%s' 2>/dev/null", tokpath, textfile);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[1024] = "";
    char *ok = fgets(line, sizeof line, p);
    int rc = pclose(p);
    if (!ok || rc != 0) return -1;
    cJSON *j = cJSON_Parse(line);
    double v = -1;
    if (j) {
        const cJSON *m = cJSON_GetObjectItem(j, "mbps"), *l = cJSON_GetObjectItem(j, "library");
        if (cJSON_IsNumber(m)) v = m->valuedouble;
        if (cJSON_IsString(l)) snprintf(lib, liblen, "%s", l->valuestring);
        cJSON_Delete(j);
    }
    return v;
}

static double our_speed(const char *path, size_t *n_ids, double *load_s, double *cold) {
    double best = 0;
    *cold = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_seconds();
        Tokenizer *t = tokenizer_load(path);
        if (!t) return -1;
        double t1 = now_seconds();
        if (r == 0) *load_s = t1 - t0;
        size_t ids_total = 0;
        for (int rep = 0; rep < 2; rep++) {  /* second pass sees a warm word cache, as the library's does */
            double a = now_seconds();
            ids_total = 0;
            for (int i = 0; i < n_texts; i++) {
                int32_t *ids; size_t n;
                if (tokenizer_encode_ex(t, texts[i], strlen(texts[i]), 0, &ids, &n)) { tokenizer_free(t); return -1; }
                ids_total += n;
                free(ids);
            }
            double mbps = (double)n_bytes / (now_seconds() - a) / 1e6;
            if (mbps > best) best = mbps;
            if (rep == 0 && mbps > *cold) *cold = mbps;  /* first pass after loading: empty word cache */
        }
        *n_ids = ids_total;
        tokenizer_free(t);
    }
    return best;
}

int main(void) {
    const char *names[] = {"alpaca", "gsm8k", "humaneval", "mt_bench", "qa", "sum"};
    int from_shared = 1;
    for (int b = 0; b < 6; b++) {
        char path[256];
        snprintf(path, sizeof path, SHARED "/benchmarks/%s/question.jsonl", names[b]);
        if (!file_exists(path)) { from_shared = 0; break; }
        QuestionSet *qs = questions_load(path);
        if (!qs) die("bench_tokenizer", "%s", err_get());
        for (int i = 0; i < qs->n; i++)
            for (int k = 0; k < qs->q[i].n_turns; k++) add_text(qs->q[i].turns[k]);
        questions_free(qs);
    }
    if (!from_shared) {
        printf("../shared/benchmarks absent: timing the project's hard strings x50 instead\n");
        cJSON *h = read_json_file("tests/golden/tokenizer/hard_strings.json");
        if (!h) die("bench_tokenizer", "%s", err_get());
        for (int r = 0; r < 50; r++) { const cJSON *e; cJSON_ArrayForEach(e, h) add_text(e->valuestring); }
        cJSON_Delete(h);
    }
    char textfile[] = "/tmp/c2t_bench_tok_XXXXXX";
    int fd = mkstemp(textfile);
    if (fd < 0) die("bench_tokenizer", "mkstemp failed");
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < n_texts; i++) {
        cJSON *s = cJSON_CreateString(texts[i]);
        char *p = cJSON_PrintUnformatted(s);
        fprintf(f, "%s\n", p);
        free(p);
        cJSON_Delete(s);
    }
    fclose(f);

    int py = have_python();
    /* A real 32000-piece LLaMA-2 tokenizer.json, converted by transformers
     * from ../shared's tokenizer.model (needs protobuf); skipped otherwise. */
    char l2dir[] = "/tmp/c2t_bench_l2_XXXXXX";
    char *l2json = NULL;
    if (py && file_exists(SHARED "/tokenizers/llama2/tokenizer.model") && mkdtemp(l2dir)) {
        char cmd[2048];
        char *model = realpath(SHARED "/tokenizers/llama2/tokenizer.model", NULL);
        snprintf(cmd, sizeof cmd,
                 "ln -s '%s' '%s/tokenizer.model' && python3 -c \"import sys; from transformers import LlamaTokenizerFast as T; "
                 "T.from_pretrained(sys.argv[1], legacy=True).backend_tokenizer.save(sys.argv[1] + '/tokenizer.json')\" '%s' >/dev/null 2>&1",
                 model, l2dir, l2dir);
        free(model);
        if (system(cmd) == 0) l2json = path_join(l2dir, "tokenizer.json");
    }

    Entry entries[] = {
        {"llama2 tokenizer.model", xstrdup(SHARED "/tokenizers/llama2/tokenizer.model")},
        {"llama2 tokenizer.json", l2json},
        {"sp_bytefallback.json", xstrdup("tests/golden/tokenizer/sp_bytefallback.json")},
        {"bytelevel_llama3.json", xstrdup("tests/golden/tokenizer/bytelevel_llama3.json")},
        {"demo tokenizer.json", xstrdup("data/demo/target/tokenizer.json")},
    };
    printf("encode throughput on %d texts, %.2f MB (%s), one thread, best of 3\n", n_texts, n_bytes / 1e6,
           from_shared ? "all turns of ../shared/benchmarks" : "hard strings");
    printf("%-24s %8s %10s %10s %12s %7s  %s\n", "tokenizer", "ids", "ours MB/s", "(cold)", "library MB/s", "ratio", "library");
    for (size_t e = 0; e < sizeof entries / sizeof *entries; e++) {
        if (!entries[e].path || !file_exists(entries[e].path)) {
            printf("%-24s (absent, skipped)\n", entries[e].name);
            continue;
        }
        size_t nids = 0;
        double load_s = 0, cold = 0;
        double ours = our_speed(entries[e].path, &nids, &load_s, &cold);
        if (ours < 0) die("bench_tokenizer", "%s: %s", entries[e].path, err_get());
        char lib[128] = "";
        double theirs = py ? lib_speed(entries[e].path, textfile, lib, sizeof lib) : -1;
        if (theirs > 0)
            printf("%-24s %8zu %10.2f %10.2f %12.2f %6.2fx  %s (our load %.0f ms)\n", entries[e].name, nids, ours, cold, theirs,
                   ours / theirs, lib, load_s * 1e3);
        else
            printf("%-24s %8zu %10.2f %10.2f %12s %7s  comparison skipped (python3 with tokenizers/sentencepiece not available)\n",
                   entries[e].name, nids, ours, cold, "-", "-");
        free(entries[e].path);
    }
    unlink(textfile);
    if (l2json) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", l2dir);
        if (system(cmd) != 0) { /* best effort */ }
    }
    for (int i = 0; i < n_texts; i++) free(texts[i]);
    free(texts);
    return 0;
}
