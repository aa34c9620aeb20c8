/* Chat templates and question files.
 *
 * Rendered prompts are compared with tests/golden/tokenizer/chat_golden.json,
 * written by tools/golden/tokenizer_oracle.py from:
 *   llama-2-chat  fastchat 0.2.36 get_conv_template("llama-2") with EAGLE's
 *                 system prompt, + " " (EAGLE gen_ea_answer_llama2chat.py);
 *   vicuna        fastchat 0.2.36 get_conv_template("vicuna_v1.1")
 *                 (EAGLE gen_ea_answer_vicuna.py);
 *   llama-3-instruct  transformers 4.46 apply_chat_template with Meta's
 *                 Llama-3-Instruct chat_template, add_generation_prompt=True
 *                 (EAGLE gen_ea_answer_llama3chat.py).
 * i.e. the formats users run in the EAGLE evaluation scripts; and chatml
 * against transformers with SmolLM2's and Qwen2.5's chat_templates
 * (chat_chatml_golden.json, chat_qwen_golden.json).  Benchmark
 * prompt ids (chat_bench_ids.json.zst) come from transformers' LlamaTokenizer
 * on ../shared's LLaMA-2 tokenizer.model and from the `tokenizers` library on
 * bytelevel_llama3.json; those tests SKIP without ../shared. */
#include "tests/harness.h"
#include "tests/tokenizer_golden.h"
#include "infer/text/chat.h"
#include "infer/text/questions.h"
#include "infer/text/tokenizer.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <zstd.h>


static const char **str_list(const cJSON *arr, int *n) {
    *n = cJSON_GetArraySize(arr);
    const char **v = xcalloc((size_t)*n + 1, sizeof(char *));
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) v[i++] = e->valuestring;
    return v;
}

/* ---------------------------------------------------------------- templates */

/* A golden row's conversation (system, user turns, answers) rendered with
 * template t; *sys is NULL for the template's default system prompt. */
static char *render_row(const cJSON *row, ChatTemplate t, const char **sys, const char ***u, int *nu, const char ***a,
                        int *na) {
    const cJSON *s = cJSON_GetObjectItem(row, "system");
    *sys = cJSON_IsString(s) ? s->valuestring : NULL;
    *u = str_list(cJSON_GetObjectItem(row, "user"), nu);
    *a = str_list(cJSON_GetObjectItem(row, "assistant"), na);
    return chat_render(t, *sys, *u, *a, *nu);
}

static void test_chat_golden_prompts(void) {
    cJSON *g = read_json_file(GOLD "chat_golden.json");
    REQUIRE(g, "%s", err_get());
    CHECK(!strcmp(cJSON_GetObjectItem(g, "eagle_system")->valuestring, chat_default_system(CHAT_LLAMA2)),
          "EAGLE system prompt differs");
    const cJSON *row;
    int n = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(g, "prompts")) {
        ChatTemplate t;
        REQUIRE(chat_template_parse(cJSON_GetObjectItem(row, "template")->valuestring, &t) == 0, "%s", err_get());
        const char *sys, **u, **a;
        int nu, na;
        char *p = render_row(row, t, &sys, &u, &nu, &a, &na);
        const char *exp = cJSON_GetObjectItem(row, "prompt")->valuestring;
        CHECK(!strcmp(p, exp), "%s, %d turns, system %s:\nexpected \"%s\"\n     got \"%s\"", chat_template_name(t), nu,
              sys ? "\"\"" : "default", exp, p);
        /* multi-turn: turn k's prompt holds the answer to turn k-1 */
        for (int k = 0; k < na; k++) {
            char *ans = chat_py_strip(a[k]);
            CHECK(strstr(p, ans) != NULL, "answer %d missing from the prompt", k);
            free(ans);
        }
        free(p); free(u); free(a);
        n++;
    }
    printf("# %d rendered prompts compared\n", n);
    CHECK(n >= 30, "only %d golden prompts", n);
    cJSON_Delete(g);
}

/* chatml against transformers' apply_chat_template with SmolLM2's template
 * (tools/golden/tokenizer_oracle.py chatml): the rendered text always; the ids
 * when the converted SmolLM2 tokenizer is there (make smollm2). */
static void test_chatml_golden(void) {
    cJSON *g = read_json_file(GOLD "chat_chatml_golden.json");
    REQUIRE(g, "%s", err_get());
    const char *tokp = "models/smollm2-135m-instruct";
    Tokenizer *tok = file_exists("models/smollm2-135m-instruct/tokenizer.json") ? tokenizer_load(tokp) : NULL;
    const cJSON *row;
    int n = 0, n_ids = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(g, "prompts")) {
        const char *sys, **u, **a;
        int nu, na;
        char *p = render_row(row, CHAT_CHATML, &sys, &u, &nu, &a, &na);
        const char *exp = cJSON_GetObjectItem(row, "prompt")->valuestring;
        CHECK(!strcmp(p, exp), "chatml, %d turns:\nexpected \"%s\"\n     got \"%s\"", nu, exp, p);
        if (tok) {
            int32_t *ids;
            size_t k;
            REQUIRE(chat_encode(tok, CHAT_CHATML, sys, u, a, nu, &ids, &k) == 0, "%s", err_get());
            CHECK(same_ids(cJSON_GetObjectItem(row, "ids"), ids, k), "chatml prompt %d: ids differ", n);
            free(ids);
            n_ids++;
        }
        free(p); free(u); free(a);
        n++;
    }
    CHECK(n >= 10, "only %d chatml prompts", n);
    printf("# chatml: %d prompts rendered as transformers does, %d encoded%s\n", n, n_ids,
           tok ? "" : " (no SmolLM2 checkpoint: make smollm2)");
    /* the template is recognised from tokenizer_config.json */
    if (tok) {
        ChatTemplate t;
        char why[200];
        CHECK(chat_template_guess(tok, tokp, &t, why, sizeof why) == 0 && t == CHAT_CHATML, "guess: %s", why);
        int32_t stop[4];
        int ns = chat_stop_ids(tok, CHAT_CHATML, stop, 4), has_im_end = 0;
        for (int i = 0; i < ns; i++) has_im_end |= stop[i] == tokenizer_token_to_id(tok, "<|im_end|>");
        CHECK(has_im_end, "<|im_end|> does not stop a chatml answer");
        tokenizer_free(tok);
    }
    cJSON_Delete(g);
}

/* A checkpoint-like folder: tokenizer.json (a link to tok_json) with the
 * given tokenizer_config.json and generation_config.json (NULL: none). */
static char *tok_dir(const char *tok_json, const cJSON *cfg, const cJSON *gen) {
    char tmpl[] = "/tmp/c2t_chat_XXXXXX";
    if (!mkdtemp(tmpl)) return NULL;
    char *d = xstrdup(tmpl);
    char *src = realpath(tok_json, NULL), *dst = path_join(d, "tokenizer.json");
    if (!src || symlink(src, dst)) { free(src); free(dst); free(d); return NULL; }
    free(src); free(dst);
    const char *names[] = {"tokenizer_config.json", "generation_config.json"};
    const cJSON *objs[] = {cfg, gen};
    for (int i = 0; i < 2; i++) {
        if (!objs[i]) continue;
        char *p = path_join(d, names[i]), *txt = cJSON_Print(objs[i]);
        write_file(p, txt);
        free(p); free(txt);
    }
    return d;
}

static void rm_dir(char *d) {
    const char *names[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 3; i++) { char *p = path_join(d, names[i]); unlink(p); free(p); }
    rmdir(d);
    free(d);
}

static int has_id(const int32_t *v, int n, int32_t id) {
    for (int i = 0; i < n; i++) if (v[i] == id) return 1;
    return 0;
}

/* Qwen2.5's chat_template (tools/golden/tokenizer_oracle.py qwen2): prompts
 * and ids as transformers' apply_chat_template(add_generation_prompt=True)
 * gives them on bytelevel_qwen2.json with Qwen2.5-Instruct's
 * tokenizer_config.json; the default system message read from the template
 * ("You are Qwen, ..."), SmolLM2's still its own; generation stops at
 * <|im_end|> and <|endoftext|> (generation_config.json).  On the converted
 * Qwen2.5-Coder (make qwen), when it is there: the template guessed, its
 * default system message, the prompts' text and the stop ids. */
#define QWEN_DIR "models/qwen2.5-coder-1.5b-instruct"
static void test_chat_qwen(void) {
    cJSON *g = read_json_file(GOLD "chat_qwen_golden.json");
    REQUIRE(g, "%s", err_get());
    const char *qsys = cJSON_GetObjectItem(g, "default_system")->valuestring;
    char *d = tok_dir(GOLD "bytelevel_qwen2.json", cJSON_GetObjectItem(g, "tokenizer_config"),
                      cJSON_GetObjectItem(g, "generation_config"));
    REQUIRE(d, "temporary checkpoint folder");
    Tokenizer *tok = tokenizer_load(d);
    REQUIRE(tok, "%s", err_get());
    ChatTemplate t;
    char why[256];
    CHECK(chat_template_guess(tok, d, &t, why, sizeof why) == 0 && t == CHAT_CHATML, "Qwen2.5's template not guessed as chatml: %s", why);
    char *sys = chat_template_system(tok, CHAT_CHATML);
    CHECK(!strcmp(sys, qsys), "default system from Qwen2.5's template: \"%s\"", sys);
    free(sys);
    const cJSON *row;
    int n = 0;
    long nids = 0;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(g, "prompts")) {
        const char *s, **u, **a;
        int nu, na;
        free(render_row(row, CHAT_CHATML, &s, &u, &nu, &a, &na));
        char *p = chat_render_tok(tok, CHAT_CHATML, s, u, a, nu);
        const char *exp = cJSON_GetObjectItem(row, "prompt")->valuestring;
        CHECK(!strcmp(p, exp), "qwen prompt %d (%d turns, system %s):\nexpected \"%s\"\n     got \"%s\"", n, nu,
              s ? "given" : "default", exp, p);
        int32_t *ids;
        size_t k;
        REQUIRE(chat_encode(tok, CHAT_CHATML, s, u, a, nu, &ids, &k) == 0, "%s", err_get());
        CHECK(same_ids(cJSON_GetObjectItem(row, "ids"), ids, k), "qwen prompt %d: ids differ (%zu ids, expected %d)", n, k,
              cJSON_GetArraySize(cJSON_GetObjectItem(row, "ids")));
        nids += (long)k;
        free(ids); free(p); free(u); free(a);
        n++;
    }
    CHECK(n >= 10, "only %d qwen prompts", n);
    int32_t stop[8];
    int ns = chat_stop_ids(tok, CHAT_CHATML, stop, 8);
    CHECK(has_id(stop, ns, tokenizer_token_to_id(tok, "<|im_end|>")) && has_id(stop, ns, tokenizer_token_to_id(tok, "<|endoftext|>")),
          "qwen stop ids: %d ids, <|im_end|> and <|endoftext|> expected", ns);
    tokenizer_free(tok);
    rm_dir(d);
    /* SmolLM2's template keeps its own default; a chatml template that writes
     * none has none; without a template chatml's default is SmolLM2's */
    cJSON *sg = read_json_file(GOLD "chat_chatml_golden.json");
    REQUIRE(sg, "%s", err_get());
    const char *tmpls[] = {cJSON_GetObjectItem(sg, "chat_template")->valuestring,
                           "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
                           NULL};
    const char *want[] = {chat_default_system(CHAT_CHATML), "", chat_default_system(CHAT_CHATML)};
    for (int i = 0; i < 3; i++) {
        cJSON *cfg = cJSON_CreateObject();
        cJSON_AddStringToObject(cfg, "eos_token", "<|im_end|>");
        if (tmpls[i]) cJSON_AddStringToObject(cfg, "chat_template", tmpls[i]);
        d = tok_dir(GOLD "bytelevel_qwen2.json", cfg, NULL);
        REQUIRE(d, "temporary checkpoint folder");
        tok = tokenizer_load(d);
        REQUIRE(tok, "%s", err_get());
        sys = chat_template_system(tok, CHAT_CHATML);
        CHECK(!strcmp(sys, want[i]), "template %d: default system \"%s\", expected \"%s\"", i, sys, want[i]);
        free(sys);
        int32_t st[8];
        CHECK(chat_stop_ids(tok, CHAT_CHATML, st, 8) == 1, "no generation_config.json: <|im_end|> alone stops");
        tokenizer_free(tok);
        rm_dir(d);
        cJSON_Delete(cfg);
    }
    CHECK(!strcmp(chat_default_system(CHAT_CHATML), "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
          "chatml's own default changed");
    cJSON_Delete(sg);
    printf("# qwen chat template: %d prompts (%ld ids) as transformers renders them\n", n, nids);
    /* the converted Qwen2.5-Coder */
    if (file_exists(QWEN_DIR "/tokenizer.json")) {
        tok = tokenizer_load(QWEN_DIR);
        REQUIRE(tok, "%s", err_get());
        CHECK(chat_template_guess(tok, QWEN_DIR, &t, why, sizeof why) == 0 && t == CHAT_CHATML, QWEN_DIR ": %s", why);
        sys = chat_template_system(tok, CHAT_CHATML);
        CHECK(!strcmp(sys, qsys), QWEN_DIR ": default system \"%s\"", sys);
        free(sys);
        int k = 0;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(g, "prompts")) {
            const char *s, **u, **a;
            int nu, na;
            free(render_row(row, CHAT_CHATML, &s, &u, &nu, &a, &na));
            char *p = chat_render_tok(tok, CHAT_CHATML, s, u, a, nu);
            CHECK(!strcmp(p, cJSON_GetObjectItem(row, "prompt")->valuestring), QWEN_DIR ": prompt %d differs", k);
            free(p); free(u); free(a);
            k++;
        }
        int32_t st[8];
        ns = chat_stop_ids(tok, CHAT_CHATML, st, 8);
        CHECK(has_id(st, ns, 151645) && has_id(st, ns, 151643),
              QWEN_DIR ": generation must stop at <|im_end|> 151645 and <|endoftext|> 151643 (generation_config.json "
              "eos_token_id [151645, 151643], as Qwen publishes it); stop ids here: %d", ns);
        tokenizer_free(tok);
        printf("# %s: template, default system, %d prompts and stop ids checked\n", QWEN_DIR, k);
    } else printf("# %s absent (make qwen): the converted model's template not checked\n", QWEN_DIR);
    cJSON_Delete(g);
}

/* The other families' templates (tools/golden/chat_families_golden.py):
 * each published chat_template guessed as its template from
 * tokenizer_config.json, every conversation rendered as transformers'
 * apply_chat_template renders it (Qwen3's with and without thinking,
 * earlier answers' <think> blocks dropped or kept; Gemma 3's system message
 * in its first user turn), bos written by the template exactly where the
 * encoder adds none; Gemma 3's prompts also encoded as apply_chat_template
 * tokenizes them with the Gemma-style vocabulary of tokenizer/gemma
 * (<bos> and the turn markers one id each); templates of llama.cpp's tests
 * that share their markers but render otherwise (later Mistrals, Phi-3,
 * OpenChat, Gemma 1's and 2's without a system role) guessed as none of them. */
static void test_chat_families(void) {
    cJSON *g = read_json_file(GOLD "chat_families_golden.json");
    REQUIRE(g, "%s", err_get());
    Tokenizer *gemma = tokenizer_load(GOLD "gemma");
    REQUIRE(gemma, "%s", err_get());
    int nf = 0, np = 0, nids = 0;
    const cJSON *fam;
    cJSON_ArrayForEach(fam, cJSON_GetObjectItem(g, "families")) {
        const char *name = cJSON_GetObjectItem(fam, "template")->valuestring,
                   *model = cJSON_GetObjectItem(fam, "model")->valuestring,
                   *bos = cJSON_GetObjectItem(fam, "bos_token")->valuestring;
        ChatTemplate t, want;   /* want: the guess (qwen3 for both ways to call Qwen3's template) */
        REQUIRE(chat_template_parse(name, &t) == 0, "%s: %s", name, err_get());
        REQUIRE(chat_template_parse(cJSON_GetObjectItem(fam, "guess")->valuestring, &want) == 0, "%s: %s", name, err_get());
        CHECK(!strcmp(chat_template_name(t), name), "%s named %s", name, chat_template_name(t));
        /* guessed whether its newlines are themselves or jinja escapes:
         * forms 2 (every newline escaped), 1 (every escape a newline), 0 (as
         * published) */
        const char *src = cJSON_GetObjectItem(fam, "chat_template")->valuestring;
        char *escaped = xmalloc(2 * strlen(src) + 1), *plain = xmalloc(strlen(src) + 1), *e = escaped, *q = plain;
        for (const char *c = src; *c; c++) {
            if (*c == '\n') { *e++ = '\\'; *e++ = 'n'; }
            else *e++ = *c;
        }
        for (const char *c = src; *c; c++) {
            if (c[0] == '\\' && c[1] == 'n') { *q++ = '\n'; c++; }
            else *q++ = *c;
        }
        *e = *q = 0;
        Tokenizer *tok = NULL;
        char *d = NULL;
        for (int form = 2; form >= 0; form--) {
            cJSON *cfg = cJSON_CreateObject();
            cJSON_AddStringToObject(cfg, "chat_template", form == 2 ? escaped : form ? plain : src);
            d = tok_dir(GOLD "sp_bytefallback.json", cfg, NULL);
            cJSON_Delete(cfg);
            REQUIRE(d, "temporary checkpoint folder");
            tok = tokenizer_load(d);
            REQUIRE(tok, "%s", err_get());
            char why[256] = "";
            ChatTemplate guessed = CHAT_NONE;
            CHECK(chat_template_guess(tok, d, &guessed, why, sizeof why) == 0 && guessed == want,
                  "%s's template%s guessed as %s (%s)", model, form == 2 ? " (newlines as \\n)" : form ? " (\\n as newlines)" : "",
                  chat_template_name(guessed), why);
            if (form) { tokenizer_free(tok); rm_dir(d); }
        }
        free(escaped); free(plain);
        const cJSON *row;
        cJSON_ArrayForEach(row, cJSON_GetObjectItem(fam, "prompts")) {
            const char *s, **u, **a;
            int nu, na;
            free(render_row(row, t, &s, &u, &nu, &a, &na));
            char *p = chat_render_tok(tok, t, s, u, a, nu);
            const char *exp = cJSON_GetObjectItem(row, "prompt")->valuestring;
            CHECK(!strcmp(p, exp), "%s, %d turns, system %s:\nexpected \"%s\"\n     got \"%s\"", model, nu,
                  s ? (*s ? "given" : "none") : "default", exp, p);
            CHECK(chat_add_special(t) == (strncmp(exp, bos, strlen(bos)) != 0), "%s: the template %s bos, add_special %d",
                  model, strncmp(exp, bos, strlen(bos)) ? "writes no" : "writes its", chat_add_special(t));
            const cJSON *want = cJSON_GetObjectItem(row, "ids");
            if (want) {
                int32_t *ids;
                size_t n;
                REQUIRE(chat_encode(gemma, t, s, u, a, nu, &ids, &n) == 0, "%s", err_get());
                CHECK(same_ids(want, ids, n), "%s, %d turns, system %s: ids differ (%zu, expected %d)", model, nu,
                      s ? (*s ? "given" : "none") : "default", n, cJSON_GetArraySize(want));
                CHECK(n && ids[0] == tokenizer_bos_id(gemma), "%s: the prompt does not open with one bos", model);
                free(ids);
                nids++;
            }
            free(p); free(u); free(a);
            np++;
        }
        tokenizer_free(tok);
        rm_dir(d);
        nf++;
    }
    CHECK(nf >= 10 && np >= 10 * 20 && nids >= 20, "only %d templates, %d prompts, %d encoded", nf, np, nids);
    tokenizer_free(gemma);
    int nn = 0;
    cJSON_ArrayForEach(fam, cJSON_GetObjectItem(g, "not_ours")) {
        cJSON *cfg = cJSON_CreateObject();
        cJSON_AddStringToObject(cfg, "chat_template", cJSON_GetObjectItem(fam, "chat_template")->valuestring);
        char *d = tok_dir(GOLD "sp_bytefallback.json", cfg, NULL);
        REQUIRE(d, "temporary checkpoint folder");
        Tokenizer *tok = tokenizer_load(d);
        REQUIRE(tok, "%s", err_get());
        ChatTemplate t = CHAT_NONE;
        char why[256] = "";
        CHECK(chat_template_guess(tok, d, &t, why, sizeof why) == -1, "%s's template guessed as %s (%s)",
              cJSON_GetObjectItem(fam, "model")->valuestring, chat_template_name(t), why);
        tokenizer_free(tok);
        rm_dir(d);
        cJSON_Delete(cfg);
        nn++;
    }
    CHECK(nn >= 8, "only %d templates that are none of ours", nn);
    printf("# %d published templates, %d prompts as transformers renders them (%d of them encoded as it does); "
           "%d others not guessed\n", nf, np, nids, nn);
    cJSON_Delete(g);
}

static void test_chat_bench_ids(void) {
    if (!file_exists(LLAMA2_MODEL) || !file_exists(SHARED "/benchmarks/mt_bench/question.jsonl")) SKIP("../shared absent");
    cJSON *g = load_zst_json(GOLD "chat_bench_ids.json.zst");
    REQUIRE(g, "chat_bench_ids.json.zst unreadable");
    cJSON *gold = read_json_file(GOLD "chat_golden.json");
    REQUIRE(gold, "%s", err_get());
    const char *answer = cJSON_GetObjectItem(gold, "answer")->valuestring;
    Tokenizer *l2 = tokenizer_load(LLAMA2_MODEL), *l3 = tokenizer_load(GOLD "bytelevel_llama3.json");
    REQUIRE(l2 && l3, "%s", err_get());
    const char *benches[] = {"mt_bench", "humaneval"};
    int compared = 0;
    long nids = 0;
    for (int b = 0; b < 2; b++) {
        char path[256];
        snprintf(path, sizeof path, SHARED "/benchmarks/%s/question.jsonl", benches[b]);
        QuestionSet *qs = questions_load(path);
        REQUIRE(qs, "%s", err_get());
        for (int i = 0; i < qs->n; i++) {
            const Question *q = &qs->q[i];
            const char *ans[16];
            for (int k = 0; k < q->n_turns && k < 16; k++) ans[k] = answer;
            for (int k = 1; k <= q->n_turns; k++) {
                char key[128];
                snprintf(key, sizeof key, "%s/%s/%d", benches[b], q->id, k - 1);
                const cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(g, "ids"), key);
                if (!e) { CHECK(0, "no golden for %s", key); continue; }
                static const ChatTemplate tpls[] = {CHAT_LLAMA2, CHAT_VICUNA, CHAT_LLAMA3};
                for (int m = 0; m < 3; m++) {
                    int32_t *ids; size_t n;
                    const Tokenizer *tok = tpls[m] == CHAT_LLAMA3 ? l3 : l2;
                    REQUIRE(chat_encode(tok, tpls[m], NULL, (const char *const *)q->turns, ans, k, &ids, &n) == 0, "%s", err_get());
                    const cJSON *exp = cJSON_GetObjectItem(e, chat_template_name(tpls[m]));
                    CHECK(same_ids(exp, ids, n), "%s %s: ids differ (%zu vs %d)", key, chat_template_name(tpls[m]), n, cJSON_GetArraySize(exp));
                    nids += (long)n;
                    compared++;
                    free(ids);
                }
            }
        }
        questions_free(qs);
    }
    printf("# %d benchmark prompts (%ld ids) compared\n", compared, nids);
    tokenizer_free(l2); tokenizer_free(l3);
    cJSON_Delete(g); cJSON_Delete(gold);
}

static void test_chat_names(void) {
    ChatTemplate t;
    CHECK(chat_template_parse("llama-2-chat", &t) == 0 && t == CHAT_LLAMA2, "llama-2-chat");
    CHECK(chat_template_parse("LLaMA-3-Instruct", &t) == 0 && t == CHAT_LLAMA3, "case");
    CHECK(chat_template_parse("vicuna_v1.1", &t) == 0 && t == CHAT_VICUNA, "vicuna_v1.1");
    CHECK(chat_template_parse("ChatML", &t) == 0 && t == CHAT_CHATML, "chatml");
    CHECK(chat_template_parse("alpaca-chat", &t) == -1 && strstr(err_get(), "llama-3-instruct") && strstr(err_get(), "chatml"),
          "unknown name: %s", err_get());
    CHECK(chat_template_parse("Gemma-3", &t) == 0 && t == CHAT_GEMMA3 && !strcmp(chat_template_name(t), "gemma3"), "gemma3");
    CHECK(chat_template_parse("gemma-2", &t) == -1 && strstr(err_get(), "gemma3"), "gemma-2: %s", err_get());
    CHECK(chat_add_special(CHAT_LLAMA2) && chat_add_special(CHAT_VICUNA) && !chat_add_special(CHAT_LLAMA3) &&
          !chat_add_special(CHAT_CHATML) && !chat_add_special(CHAT_GEMMA3), "add_special");
}

static void test_chat_guess(void) {
    char why[256];
    ChatTemplate t;
    Tokenizer *l3 = tokenizer_load(GOLD "bytelevel_llama3.json");
    REQUIRE(l3, "%s", err_get());
    CHECK(chat_template_guess(l3, GOLD "bytelevel_llama3.json", &t, why, sizeof why) == 0 && t == CHAT_LLAMA3, "llama-3 vocab");
    Tokenizer *sp = tokenizer_load(GOLD "sp_bytefallback.json");
    REQUIRE(sp, "%s", err_get());
    CHECK(chat_template_guess(sp, "/models/vicuna-7b-v1.3", &t, why, sizeof why) == 0 && t == CHAT_VICUNA, "vicuna path");
    CHECK(chat_template_guess(sp, "/models/Llama-2-7b-chat-hf", &t, why, sizeof why) == 0 && t == CHAT_LLAMA2, "llama-2 path");
    CHECK(chat_template_guess(sp, "/models/Meta-Llama-3-8B-Instruct", &t, why, sizeof why) == 0 && t == CHAT_LLAMA3, "llama-3 path");
    CHECK(chat_template_guess(sp, "/models/Llama-3.2-1B-Instruct", &t, why, sizeof why) == 0 && t == CHAT_LLAMA31, "llama-3.2 path");
    CHECK(chat_template_guess(sp, "/models/mystery", &t, why, sizeof why) == -1 && strstr(err_get(), "llama-2-chat"), "unknown: %s", err_get());
    /* tokenizer_config.json chat_template wins */
    char d[] = "/tmp/c2t_chat_XXXXXX";
    REQUIRE(mkdtemp(d), "mkdtemp");
    char *src = realpath(GOLD "sp_bytefallback.json", NULL), *dst = path_join(d, "tokenizer.json"), *cfg = path_join(d, "tokenizer_config.json");
    CHECK(symlink(src, dst) == 0, "symlink");
    write_file(cfg, "{\"chat_template\": \"{% for m in messages %}[INST] <<SYS>> {{ m['content'] }}{% endfor %}\"}");
    Tokenizer *c = tokenizer_load(d);
    REQUIRE(c, "%s", err_get());
    CHECK(chat_template_guess(c, "/models/vicuna-but-llama2-template", &t, why, sizeof why) == 0 && t == CHAT_LLAMA2 &&
          strstr(why, "chat_template"), "config chat_template: %s", why);
    tokenizer_free(c);
    unlink(dst); unlink(cfg); rmdir(d);
    free(src); free(dst); free(cfg);
    tokenizer_free(l3); tokenizer_free(sp);
}

/* EAGLE's answer post-processing: cut at the stop id, decode, strip. */
static void test_chat_answer_text(void) {
    Tokenizer *l3 = tokenizer_load(GOLD "bytelevel_llama3.json");
    REQUIRE(l3, "%s", err_get());
    int32_t *ids; size_t n;
    REQUIRE(tokenizer_encode(l3, "  The answer is 42.  ", 0, &ids, &n) == 0, "%s", err_get());
    int32_t buf[256];
    REQUIRE(n + 3 < 256, "short");
    memcpy(buf, ids, n * sizeof(int32_t));
    buf[n] = tokenizer_token_to_id(l3, "<|eot_id|>");
    buf[n + 1] = 5; buf[n + 2] = 6;
    char *a = chat_answer_text(l3, CHAT_LLAMA3, buf, n + 3);
    CHECK(a && !strcmp(a, "The answer is 42."), "llama-3 answer: \"%s\"", a ? a : err_get());
    free(a); free(ids);
    int32_t stop[4];
    int ns = chat_stop_ids(l3, CHAT_LLAMA3, stop, 4);
    CHECK(ns >= 2, "llama-3 stop ids: %d", ns);
    tokenizer_free(l3);
    Tokenizer *sp = tokenizer_load(GOLD "sp_bytefallback.json");
    REQUIRE(sp, "%s", err_get());
    REQUIRE(tokenizer_encode(sp, "Sure thing</s>trailing", 0, &ids, &n) == 0, "%s", err_get());
    a = chat_answer_text(sp, CHAT_VICUNA, ids, n);
    CHECK(a && !strcmp(a, "Sure thing"), "vicuna answer: \"%s\"", a ? a : err_get());
    free(a); free(ids);
    tokenizer_free(sp);
    /* Gemma 3's turn ends at <end_of_turn> (106 in Gemma's vocabulary), its
     * text ends at <eos>: both stop it */
    Tokenizer *gm = tokenizer_load(GOLD "gemma");
    REQUIRE(gm, "%s", err_get());
    const int32_t eot = tokenizer_token_to_id(gm, "<end_of_turn>");
    ns = chat_stop_ids(gm, CHAT_GEMMA3, stop, 4);
    CHECK(eot >= 0 && has_id(stop, ns, eot) && has_id(stop, ns, tokenizer_token_to_id(gm, "<eos>")),
          "gemma3 stop ids: %d ids, <end_of_turn> %d and <eos> expected", ns, eot);
    CHECK(!has_id(stop, chat_stop_ids(gm, CHAT_NONE, stop, 4), eot), "<end_of_turn> stops text outside gemma3's template");
    REQUIRE(tokenizer_encode(gm, "  Arr, 42.  <end_of_turn>\n<start_of_turn>user\nMore", 0, &ids, &n) == 0, "%s", err_get());
    a = chat_answer_text(gm, CHAT_GEMMA3, ids, n);
    CHECK(a && !strcmp(a, "Arr, 42."), "gemma3 answer: \"%s\"", a ? a : err_get());
    free(a); free(ids);
    tokenizer_free(gm);
}

/* ---------------------------------------------------------------- questions */

static void test_questions_shared(void) {
    static const char *names[] = {"mt_bench", "humaneval", "gsm8k", "alpaca", "sum", "qa"};
    int total_q = 0, total_t = 0;
    for (int b = 0; b < 6; b++) {
        char path[256];
        snprintf(path, sizeof path, SHARED "/benchmarks/%s/question.jsonl", names[b]);
        if (!file_exists(path)) SKIP("%s absent", path);
        QuestionSet *qs = questions_load(path);
        REQUIRE(qs, "%s", err_get());
        CHECK(qs->n >= 79 && qs->n <= 80, "%s: %d questions", names[b], qs->n);
        for (int i = 0; i < qs->n; i++) {
            CHECK(qs->q[i].n_turns >= 1 && qs->q[i].id && qs->q[i].category, "%s question %d", names[b], i);
        }
        total_q += qs->n;
        total_t += questions_total_turns(qs);
        if (!strcmp(names[b], "mt_bench")) {
            CHECK(qs->q[0].id_is_int && qs->q[0].id_int == 81 && qs->q[0].n_turns == 2, "mt_bench first question");
            CHECK(!strcmp(qs->q[0].category, "writing"), "mt_bench category");
        }
        questions_free(qs);
    }
    printf("# %d questions, %d turns in ../shared/benchmarks\n", total_q, total_t);
}

static void expect_q_error(const char *name, const char *content, const char *needle) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/c2t_q_%d_%s.jsonl", (int)getpid(), name);
    write_file(path, content);
    QuestionSet *qs = questions_load(path);
    CHECK(!qs, "%s: loaded, expected an error", name);
    if (!qs) {
        char where[300];
        snprintf(where, sizeof where, "%s%s", path, needle);
        CHECK(strstr(err_get(), needle[0] == ':' ? where : needle) != NULL, "%s: error does not say '%s': %s", name, needle, err_get());
        CHECK(strchr(err_get(), '\n') == NULL, "multi-line error");
    }
    questions_free(qs);
    unlink(path);
}

static void test_questions_errors(void) {
    const char *good = "{\"question_id\": 1, \"category\": \"c\", \"turns\": [\"a\"]}\n";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%s{\"question_id\": 3, \"turns\": [\"x\"\n%s", good, good, good);
    expect_q_error("malformed", buf, ":3:");
    snprintf(buf, sizeof buf, "%s\n\n{\"question_id\": 2, \"category\": \"c\"}\n", good);
    expect_q_error("noturns", buf, ":4: turns missing");
    expect_q_error("emptyturns", "{\"question_id\": 2, \"turns\": []}\n", ":1: turns must be");
    expect_q_error("turnint", "{\"question_id\": 2, \"turns\": [\"a\", 3]}\n", ":1: turns must be");
    expect_q_error("floatid", "{\"question_id\": 2.5, \"turns\": [\"a\"]}\n", ":1: question_id");
    expect_q_error("noid", "{\"turns\": [\"a\"]}\n", ":1: question_id missing");
    expect_q_error("array", "[1, 2]\n", ":1: a question line must be a JSON object");
    expect_q_error("trailing", "{\"question_id\": 1, \"turns\": [\"a\"]} x\n", ":1: trailing");
    expect_q_error("empty", "", "no questions");
    expect_q_error("blank", "\n  \n\n", "no questions");
    QuestionSet *qs = questions_load("/nonexistent/question.jsonl");
    CHECK(!qs && strstr(err_get(), "/nonexistent/question.jsonl"), "missing file: %s", err_get());
}

static void test_questions_formats(void) {
    char path[256];
    snprintf(path, sizeof path, "/tmp/c2t_q_%d_ok.jsonl", (int)getpid());
    write_file(path, "\xEF\xBB\xBF{\"question_id\": \"spec-bench-7\", \"category\": \"qa\", \"turns\": [\"t1\", \"t2 \\u4e2d\"], \"reference\": \"r\"}\r\n"
                     "\n"
                     "{\"question_id\": 12, \"turns\": [\"only\"], \"reference\": [\"a\", \"b\"]}\n"
                     /* a RAG benchmark's reference: a list of lists; decoding never reads it */
                     "{\"question_id\": 13, \"turns\": [\"q\"], \"reference\": [[\"doc 1\", \"doc 2\"], [\"doc 3\"]]}\n"
                     "{\"question_id\": 14, \"turns\": [\"q\"]}");
    QuestionSet *qs = questions_load(path);
    REQUIRE(qs, "%s", err_get());
    CHECK(qs->n == 4, "n=%d (a question whose reference is a list of lists refused?)", qs->n);
    CHECK(!strcmp(qs->q[0].id, "spec-bench-7") && !qs->q[0].id_is_int, "string id");
    CHECK(qs->q[0].n_turns == 2 && !strcmp(qs->q[0].turns[1], "t2 \xE4\xB8\xAD"), "turns");
    CHECK(!strcmp(qs->q[0].reference, "\"r\"") && !strcmp(qs->q[1].reference, "[\"a\",\"b\"]") &&
          !strcmp(qs->q[2].reference, "[[\"doc 1\",\"doc 2\"],[\"doc 3\"]]") && !qs->q[3].reference,
          "references kept as they are");
    CHECK(qs->q[1].id_is_int && qs->q[1].id_int == 12 && !strcmp(qs->q[1].category, "") && qs->q[1].line == 3, "int id / line");
    CHECK(questions_total_turns(qs) == 5, "turn count");
    questions_keep_turns(qs, 1);     /* --max-turns 1: first turns only */
    CHECK(questions_total_turns(qs) == 4 && !strcmp(qs->q[0].turns[0], "t1"), "keep_turns 1: %d turns", questions_total_turns(qs));
    questions_keep_turns(qs, 0);     /* 0 keeps what is there */
    CHECK(questions_total_turns(qs) == 4, "keep_turns 0");
    questions_free(qs);
    unlink(path);
}

/* ---------------------------------------------------------------- spec-tokenize --template */

static void test_cli_chat(void) {
    char bin[256], err[2048], cmd[2048];
    snprintf(bin, sizeof bin, "%s/spec-tokenize", bin_dir());
    if (!file_exists(bin)) SKIP("%s not built", bin);
    /* rendered text equals the golden (first conversation, both turns, vicuna) */
    cJSON *g = read_json_file(GOLD "chat_golden.json");
    REQUIRE(g, "%s", err_get());
    const char *exp = NULL;
    const cJSON *row;
    cJSON_ArrayForEach(row, cJSON_GetObjectItem(g, "prompts")) {
        if (!strcmp(cJSON_GetObjectItem(row, "template")->valuestring, "vicuna") &&
            cJSON_IsNull(cJSON_GetObjectItem(row, "system")) && cJSON_GetArraySize(cJSON_GetObjectItem(row, "user")) == 2) {
            exp = cJSON_GetObjectItem(row, "prompt")->valuestring;
            break;
        }
    }
    REQUIRE(exp, "no vicuna two-turn golden");
    const cJSON *u = cJSON_GetObjectItem(row, "user"), *a = cJSON_GetObjectItem(row, "assistant");
    cJSON *line = cJSON_CreateObject();
    cJSON_AddNumberToObject(line, "question_id", 1);
    cJSON_AddItemToObject(line, "turns", cJSON_Duplicate(u, 1));
    cJSON_AddItemToObject(line, "answers", cJSON_Duplicate(a, 1));
    char *ls = cJSON_PrintUnformatted(line);
    char inpath[256];
    snprintf(inpath, sizeof inpath, "/tmp/c2t_chat_%d.jsonl", (int)getpid());
    write_file(inpath, ls);
    snprintf(cmd, sizeof cmd, "%s --tokenizer " GOLD "sp_bytefallback.json --template vicuna --text < %s", bin, inpath);
    FILE *p = popen(cmd, "r");
    REQUIRE(p, "popen");
    char out[8192] = "", out2[8192] = "";
    CHECK(fgets(out, sizeof out, p) != NULL && fgets(out2, sizeof out2, p) != NULL, "expected two lines (two turns)");
    pclose(p);
    cJSON *got = cJSON_Parse(out2);
    CHECK(got && cJSON_IsString(got) && !strcmp(got->valuestring, exp), "CLI --template turn 2: %s", out2);
    cJSON_Delete(got);
    /* auto: guessed with a notice */
    int rc = run_cmd(err, sizeof err, "%s --tokenizer " GOLD "bytelevel_llama3.json --template auto < %s", bin, inpath);
    CHECK(rc == 0 && strstr(err, "llama-3-instruct") && strstr(err, "guessed"), "auto: rc %d, %s", rc, err);
    /* the old spelling still works, with a notice naming the new one */
    rc = run_cmd(err, sizeof err, "%s --tokenizer " GOLD "bytelevel_llama3.json --chat llama-3-instruct < %s", bin, inpath);
    CHECK(rc == 0 && strstr(err, "--template"), "--chat: rc %d, %s", rc, err);
    /* malformed question line: one-line error naming the line */
    write_file(inpath, "{\"question_id\": 1, \"turns\": [\"a\"]}\n{\"question_id\": 2, \"turns\": 5}\n");
    rc = run_cmd(err, sizeof err, "%s --tokenizer " GOLD "bytelevel_llama3.json --template llama-3-instruct < %s", bin, inpath);
    CHECK_ONE_LINE_ERROR(rc, err, "stdin:2");
    rc = run_cmd(err, sizeof err, "%s --tokenizer " GOLD "bytelevel_llama3.json --template alpaca-chat < %s", bin, inpath);
    CHECK_ONE_LINE_ERROR(rc, err, "alpaca-chat");
    rc = run_cmd(err, sizeof err, "%s --tokenizer " GOLD "sp_bytefallback.json --template auto < %s", bin, inpath);
    CHECK_ONE_LINE_ERROR(rc, err, "chat template");
    unlink(inpath);
    free(ls);
    cJSON_Delete(line);
    cJSON_Delete(g);
}

int main(void) {
    RUN(test_chat_golden_prompts);
    RUN(test_chatml_golden);
    RUN(test_chat_qwen);
    RUN(test_chat_families);
    RUN(test_chat_bench_ids);
    RUN(test_chat_names);
    RUN(test_chat_guess);
    RUN(test_chat_answer_text);
    RUN(test_questions_shared);
    RUN(test_questions_errors);
    RUN(test_questions_formats);
    RUN(test_cli_chat);
    return h_done();
}
