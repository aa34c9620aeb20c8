/* spec-eval end to end on tiny checkpoints: lossless for every policy and
 * draft kind on multi-turn questions, the JSON report, and bad input. */
#include "tests/harness.h"
#include "kernels/base/util.h"
#include "infer/speculative/classifier.h"
#include "infer/speedup.h"
#include "infer/speculative/cost.h"
#include "infer/eval.h"
#include "kernels/base/rng.h"
#include "infer/model/safetensors.h"
#include <cjson/cJSON.h>
#include <errno.h>

static char qfile[] = "/tmp/c2t_evalqXXXXXX";

static const char *const policies[] = {"--policy ar", "--policy chain --draft-len 4", "--policy static",
                              "--policy eagle2 --topk 4 --depth 3 --total 16", "--policy eagle2",
                              "--policy eagle2 --topk 3 --depth 4 --total all",
                              "--policy chain --draft-len 6 --early-stop dymax --threshold 0.3",
                              "--policy chain --draft-len 6 --early-stop dyjoint --threshold 0.2",
                              "--policy c2t --classifier tests/golden/c2t_hand.json --beta 0.2 --topk 4 --depth 5",
                              "--policy chain --draft-len 6 --early-stop c2t --classifier tests/golden/c2t_hand.json",
                              "--policy chain --draft-len auto",
                              "--policy sage --param sage_theta=0.02 --param sage_nmax=auto",
                              "--policy c2t --classifier tests/golden/c2t_hand.json --beta 0.2 --topk 4 --depth 5 --param total=auto",
                              "--policy c2t --classifier tests/golden/c2t_hand.json --beta 0.1 --topk 4 --depth 5 --param total=6",
                              "--policy sage --param sage_theta=0.02",
                              "--policy wetap --param wetap_wmin=4 --param wetap_wmax=16 --param wetap_budget=24"};
#define N_POLICIES (int)(sizeof policies / sizeof *policies)

/* Sweeps of policies over drafts: make test runs each policy with one draft
 * of the sweep, in turn (policy p with draft p mod n_drafts), so that every
 * policy and every draft is decoded and checked lossless; make test-long
 * runs every pair. */
static int sweep_pair(int p, int d, int n_drafts) { return test_long() || p % n_drafts == d; }

static void test_lossless_every_policy(void) {
    const char *drafts[][2] = {{"lm", "tests/ckpt/tiny_chat"}, {"lm", "tests/ckpt/tiny_chat_draft"},
                               {"eagle", "tests/ckpt/tiny_chat_eagle"}};
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < N_POLICIES; p++) {
            if (!sweep_pair(p, d, 3)) continue;
            char err[4096];
            int rc = run_cmd(err, sizeof err,
                             "%s/spec-eval --target tests/ckpt/tiny_chat --draft %s --draft-kind %s --template none "
                             "--questions %s --max-new-tokens 48 --check-lossless %s",
                             bin_dir(), drafts[d][1], drafts[d][0], qfile, policies[p]);
            CHECK(rc == 0, "%s with %s draft %s: exit %d: %s", policies[p], drafts[d][0], drafts[d][1], rc, err);
        }
    /* EAGLE-3 heads on the 8-layer target: the kind named, and detected */
    const char *heads[][2] = {{"--draft-kind eagle3", "tests/ckpt/eagle3_tiny"}, {"", "tests/ckpt/eagle3_tiny_bin"}};
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < N_POLICIES; p++) {
            if (!sweep_pair(p, d, 2)) continue;
            char err[4096];
            int rc = run_cmd(err, sizeof err,
                             "%s/spec-eval --target tests/ckpt/tiny_chat_l8 --draft %s %s --template none "
                             "--questions %s --max-new-tokens 48 --check-lossless %s",
                             bin_dir(), heads[d][1], heads[d][0], qfile, policies[p]);
            CHECK(rc == 0, "%s with EAGLE-3 head %s: exit %d: %s", policies[p], heads[d][1], rc, err);
        }
    /* Qwen3 (q/k norms, a head size of its own) and Gemma 3 (sliding layers
     * of a 6-token window that every prompt and tree passes, GELU, norms as
     * 1 + w), each converted from its GGUF (a byte-level vocabulary), with
     * its BF16 copy as draft LM; each family every fourth policy, apart */
    static const char *const families[] = {"qwen3", "gemma3"};
    for (int f = 0; f < 2; f++) {
        char dir[64], err[4096];
        snprintf(dir, sizeof dir, "/tmp/c2t_%s_%d", families[f], (int)getpid());
        int rc = run_cmd(err, sizeof err, "rm -rf %s && %s/spec-convert tests/golden/%s_tiny.gguf %s --dtype f32", dir,
                         bin_dir(), families[f], dir);
        REQUIRE(rc == 0, "spec-convert %s_tiny.gguf: %s", families[f], err);
        for (int p = 0; p < N_POLICIES; p++) {
            if (!sweep_pair(p, f, 4)) continue;
            rc = run_cmd(err, sizeof err,
                         "%s/spec-eval --target %s --draft tests/ckpt/%s_bf16 --draft-kind lm --template none "
                         "--questions %s --max-new-tokens 48 --check-lossless %s",
                         bin_dir(), dir, families[f], qfile, policies[p]);
            CHECK(rc == 0, "%s on %s with draft LM %s_bf16: exit %d: %s", policies[p], families[f], families[f], rc, err);
        }
        run_cmd(err, sizeof err, "rm -rf %s", dir);
    }
}

/* Every policy on the shipped demo family (every draft kind), on the first
 * prompt of each demo test set (make test-long: the first two): tokens
 * identical to ar. */
static void test_lossless_demo_family(void) {
    const char *drafts[][2] = {{"eagle", "data/demo/eagle"}, {"lm", "data/demo/draft"}, {"eagle3", "data/demo/eagle3"}};
    for (int d = 0; d < 3; d++)
        for (int p = 0; p < N_POLICIES; p++) {
            if (!sweep_pair(p, d, 3)) continue;
            char err[4096];
            int rc = run_cmd(err, sizeof err,
                             "%s/spec-eval --target data/demo/target --draft %s --draft-kind %s --template none "
                             "--questions data/demo/prompts/code_test.jsonl --questions data/demo/prompts/continue_test.jsonl "
                             "--max-questions %d --max-new-tokens 32 --check-lossless %s",
                             bin_dir(), drafts[d][1], drafts[d][0], TEST_SIZE(1, 2), policies[p]);
            CHECK(rc == 0, "demo %s draft, %s: exit %d: %s", drafts[d][0], policies[p], rc, err);
        }
}

static void test_json_report(void) {
    char err[4096], out[] = "/tmp/c2t_evaljXXXXXX";
    int fd = mkstemp(out);
    close(fd);
    int rc = run_cmd(err, sizeof err,
                     "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat --draft-kind lm "
                     "--template none --questions %s --max-new-tokens 30 --policy chain --draft-len 3 "
                     "--check-lossless --json %s", bin_dir(), qfile, out);
    REQUIRE(rc == 0, "exit %d: %s", rc, err);
    cJSON *j = read_json_file(out);
    REQUIRE(j, "report: %s", err_get());
    cJSON *settings = cJSON_GetObjectItem(j, "settings");
    CHECK(settings && !strcmp(cJSON_GetObjectItem(settings, "policy")->valuestring, "chain"), "settings.policy");
    CHECK(cJSON_GetObjectItem(settings, "target_config_hash") != NULL, "model identity missing");
    cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "benchmarks"), 0);
    cJSON *qs = cJSON_GetObjectItem(b, "questions");
    CHECK(cJSON_GetArraySize(qs) == 2, "2 questions expected");
    cJSON *turns = cJSON_GetObjectItem(cJSON_GetArrayItem(qs, 0), "turns");
    CHECK(cJSON_GetArraySize(turns) == 2, "question 1 has 2 turns");
    cJSON *t0 = cJSON_GetArrayItem(turns, 0);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(t0, "lossless")), "turn marked lossless");
    double tau = cJSON_GetObjectItem(t0, "tau")->valuedouble;
    /* a self-draft chain of 3 accepts everything: 4 tokens per cycle unless
     * the answer ends first */
    CHECK(tau > 3.0 && tau <= 4.0, "self-draft chain tau %g", tau);
    cJSON *tot = cJSON_GetObjectItem(j, "total");
    CHECK(cJSON_GetObjectItem(tot, "speedup") && cJSON_GetObjectItem(tot, "v_ar"), "speedup against ar");
    double gamma = cJSON_GetObjectItem(tot, "gamma")->valuedouble, cycles = cJSON_GetObjectItem(tot, "cycles")->valuedouble;
    CHECK(gamma == 3 * cycles, "chain of 3: gamma %g = 3 x cycles %g", gamma, cycles);
    /* the cycle's account (device_cycle): a chain of 4 nodes gets every row's
     * logits, so each cycle after the first is one unit that walks the tree
     * too, and the host reads once a cycle */
    cJSON *dc = cJSON_GetObjectItem(j, "device_cycle");
    double dcn = cJSON_GetNumberValue(cJSON_GetObjectItem(dc, "cycles"));
    CHECK(dc && dcn == cycles && cJSON_GetNumberValue(cJSON_GetObjectItem(dc, "cycle_units")) == cycles - 1 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(dc, "walked_units")) == cycles - 1 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(dc, "all_logits_nodes")) >= 4 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(dc, "host_reads_per_cycle")) == 1,
          "device_cycle of %g cycles: %s", cycles, dc ? cJSON_PrintUnformatted(dc) : "missing");
    /* the thread tuner's account: with more than one thread its probes run
     * two of each window's first four cycles on one thread, for the policy
     * and for ar alike; with one thread there is nothing to tune */
    const double one = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "one_thread_cycles")),
                 one_ar = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "ar_one_thread_cycles"));
    CHECK(one >= 0 && one <= cycles && one_ar >= 0, "one-thread cycles %g of %g, ar's %g", one, cycles, one_ar);
    if (cpu_threads_max() >= 2)
        CHECK(one >= 2 && one_ar >= 2, "%d threads: the tuner's probes ran %g cycles on one thread, ar's %g",
              cpu_threads_max(), one, one_ar);
    rc = run_cmd(err, sizeof err,
                 "OMP_NUM_THREADS=1 %s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat --draft-kind lm "
                 "--template none --questions %s --max-new-tokens 30 --policy chain --draft-len 3 --quiet --json %s",
                 bin_dir(), qfile, out);
    cJSON *j1 = rc == 0 ? read_json_file(out) : NULL;
    const cJSON *tot1 = cJSON_GetObjectItem(j1, "total");
    CHECK(j1 && cJSON_GetNumberValue(cJSON_GetObjectItem(tot1, "one_thread_cycles")) == 0 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(tot1, "ar_one_thread_cycles")) == 0,
          "one thread: no cycle counted as the tuner's (exit %d: %s)", rc, err);
    cJSON_Delete(j1);
    /* what the report says means what it says: turns count from 1 as the
     * messages do, only the policy's own settings (resolved, no -1 for a
     * default), and the stage times add up to no more than the wall time */
    CHECK(cJSON_GetObjectItem(t0, "turn")->valueint == 1 &&
          cJSON_GetObjectItem(cJSON_GetArrayItem(turns, 1), "turn")->valueint == 2, "turns numbered from 1");
    CHECK(cJSON_GetObjectItem(settings, "draft_len")->valueint == 3 && !cJSON_GetObjectItem(settings, "topk") &&
          !cJSON_GetObjectItem(settings, "depth") && !cJSON_GetObjectItem(settings, "total"),
          "settings: chain's own, not eagle2's");
    for (int k = 0; k < 2; k++) {
        cJSON *t = cJSON_GetArrayItem(turns, k);
        double other = cJSON_GetObjectItem(t, "other_s")->valuedouble, wall = cJSON_GetObjectItem(t, "wall_s")->valuedouble;
        CHECK(other >= -1e-4 && other <= wall, "turn %d: other_s %g of wall %g", k + 1, other, wall);
    }
    cJSON_Delete(j);
    unlink(out);
}

/* A base model (the demo target has no chat template): plain-text prompts
 * with a notice, the same tokens as an explicit --template none. */
static void test_no_template_is_plain_text(void) {
    char err[4096], q[] = "/tmp/c2t_evalnXXXXXX", j1[64], j2[64];
    int fd = mkstemp(q);
    close(fd);
    write_file(q, "{\"question_id\": 1, \"turns\": [\"def fib(n):\"]}\n");
    snprintf(j1, sizeof j1, "%s.a.json", q);
    snprintf(j2, sizeof j2, "%s.b.json", q);
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --policy ar --no-baseline --device cpu "
                     "--max-new-tokens 8 --questions %s --json %s", bin_dir(), q, j1);
    CHECK(rc == 0 && strstr(err, "plain text"), "no template: rc %d, stderr %.300s", rc, err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --template none --policy ar --no-baseline "
                 "--device cpu --max-new-tokens 8 --questions %s --json %s", bin_dir(), q, j2);
    REQUIRE(rc == 0, "--template none: %s", err);
    cJSON *a = read_json_file(j1), *b = read_json_file(j2);
    REQUIRE(a && b, "%s", err_get());
    const cJSON *ta = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                          cJSON_GetArrayItem(cJSON_GetObjectItem(a, "benchmarks"), 0), "questions"), 0), "turns"), 0), "output_ids");
    const cJSON *tb = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
                          cJSON_GetArrayItem(cJSON_GetObjectItem(b, "benchmarks"), 0), "questions"), 0), "turns"), 0), "output_ids");
    CHECK(ta && tb && cJSON_Compare(ta, tb, 1) && cJSON_GetArraySize(ta) > 0, "guessed plain text differs from --template none");
    CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(a, "settings"), "template")->valuestring, "none"), "template in report");
    cJSON_Delete(a); cJSON_Delete(b);
    unlink(q); unlink(j1); unlink(j2);
}

static void test_bad_input(void) {
    char err[4096], bad[] = "/tmp/c2t_evalbXXXXXX";
    int fd = mkstemp(bad);
    close(fd);
    const char *base = "--target tests/ckpt/tiny_chat --template none --max-new-tokens 8";
    write_file(bad, "{\"question_id\": 1, \"turns\": [\"a\"]}\n{\"question_id\": 2, \"turns\": [\"b\"\n");
    int rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s", bin_dir(), base, bad);
    char where[128];
    snprintf(where, sizeof where, "%s:2", bad);
    CHECK_ONE_LINE_ERROR(rc, err, where);
    write_file(bad, "");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s", bin_dir(), base, bad);
    CHECK_ONE_LINE_ERROR(rc, err, bad);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy beam --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "beam");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --beam-width 3 --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--beam-width");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy sage --param sage_depth=3 --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "sage_depth");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --topk zero --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--topk");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--draft");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --draft tests/ckpt/nonexistent --questions %s",
                 bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "tests/ckpt/nonexistent");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy chain --draft tests/ckpt/v8_draft --draft-kind lm --questions %s",
                 bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "vocabulary");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --draft tests/ckpt/eagle_tiny --questions %s",
                 bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "does not fit the target");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy chain --draft tests/ckpt/tiny_chat_eagle --early-stop dymax "
                 "--param program=wide --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "program must be auto, layers or fixed");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy c2t --draft tests/ckpt/tiny_chat_eagle --classifier %s --questions %s",
                 bin_dir(), base, qfile, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, qfile);   /* not a weights file */
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --check-lossless --temperature 0.7",
                 bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "temperature");
    unlink(bad);
}

/* --device on the three model commands: cpu runs and is recorded; cuda
 * without a usable GPU is one clear line; with a GPU, spec-eval's greedy
 * tokens on cuda equal cpu's for ar, eagle2 and c2t. */
static char *report_tokens(const char *json_path, char *device, size_t len) {
    cJSON *j = read_json_file(json_path);
    if (!j) return NULL;
    snprintf(device, len, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "settings"), "device")));
    cJSON *q = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "benchmarks"), 0), "questions"), 0);
    char *ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(q, "turns"), 0), "output_ids"));
    cJSON_Delete(j);
    return ids;
}

static void test_device_option(void) {
    char err[4096], out[] = "/tmp/c2t_evaldXXXXXX", dev[32];
    int fd = mkstemp(out);
    close(fd);
    const char *base = "--target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle --template none "
                       "--max-new-tokens 24";
    int rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --device cpu --questions %s --json %s",
                     bin_dir(), base, qfile, out);
    REQUIRE(rc == 0, "--device cpu: exit %d: %s", rc, err);
    char *cpu_ids = report_tokens(out, dev, sizeof dev);
    REQUIRE(cpu_ids && strlen(cpu_ids) > 2, "report without output_ids: %s", err_get());
    CHECK(!strcmp(dev, "cpu"), "settings.device '%s'", dev);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --device tpu --questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--device");
    rc = run_cmd(err, sizeof err, "%s/spec-generate --target tests/ckpt/tiny_chat --ids 1,2 --device tpu", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--device");
    const int gpu = gpu_visible();
    if (!gpu) {
        const char *cmds[] = {"spec-eval %s --no-baseline --policy ar --questions %s --device cuda",
                              "spec-collect %s --questions %s --out /tmp/c2t_never.h5 --device cuda"};
        for (int i = 0; i < 2; i++) {
            char cmd[1024];
            snprintf(cmd, sizeof cmd, cmds[i], base, qfile);
            rc = run_cmd(err, sizeof err, "%s/%s", bin_dir(), cmd);
            CHECK_ONE_LINE_ERROR(rc, err, "--device cuda");
        }
        CHECK(access("/tmp/c2t_never.h5", F_OK) != 0, "spec-collect created its output before refusing the device");
    } else {
        const char *policies[] = {"--policy ar", "--policy eagle2",
                                  "--policy c2t --classifier tests/golden/c2t_hand.json --beta 0.2"};
        for (int p = 0; p < 3; p++) {
            rc = run_cmd(err, sizeof err, "%s/spec-eval %s %s --device cpu --questions %s --json %s",
                         bin_dir(), base, policies[p], qfile, out);
            REQUIRE(rc == 0, "cpu %s: %s", policies[p], err);
            char *a = report_tokens(out, dev, sizeof dev);
            rc = run_cmd(err, sizeof err, "%s/spec-eval %s %s --device cuda --questions %s --json %s",
                         bin_dir(), base, policies[p], qfile, out);
            REQUIRE(rc == 0, "cuda %s: %s", policies[p], err);
            char *b = report_tokens(out, dev, sizeof dev);
            CHECK(!strcmp(dev, "cuda"), "settings.device '%s'", dev);
            CHECK(a && b && !strcmp(a, b), "%s: cuda tokens %s differ from cpu %s", policies[p], b, a);
            free(a);
            free(b);
        }
    }
    free(cpu_ids);
    unlink(out);
}

static void test_sampling_runs_and_is_seeded(void) {
    char a[] = "/tmp/c2t_evalsXXXXXX", b[] = "/tmp/c2t_evaltXXXXXX", err[4096];
    close(mkstemp(a));
    close(mkstemp(b));
    for (int i = 0; i < 2; i++) {
        int rc = run_cmd(err, sizeof err,
                         "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_draft --draft-kind lm "
                         "--template none --questions %s --max-new-tokens 20 --policy eagle2 --topk 3 --depth 2 "
                         "--temperature 0.8 --top-p 0.9 --seed 5 --no-baseline --json %s", bin_dir(), qfile, i ? b : a);
        REQUIRE(rc == 0, "exit %d: %s", rc, err);
    }
    cJSON *ja = read_json_file(a), *jb = read_json_file(b);
    REQUIRE(ja && jb, "reports");
    double na = cJSON_GetObjectItem(cJSON_GetObjectItem(ja, "total"), "gamma")->valuedouble;
    double nb = cJSON_GetObjectItem(cJSON_GetObjectItem(jb, "total"), "gamma")->valuedouble;
    CHECK(na == nb, "same seed, different runs: gamma %g vs %g", na, nb);
    cJSON_Delete(ja); cJSON_Delete(jb);
    unlink(a); unlink(b);
}

/* What a user meets first: no classifier borrowed from another model, an
 * unwritable report refused before the run, --label without --csv refused,
 * and a passed --check-lossless saying so. */
static void test_first_hour_messages(void) {
    char err[4096], dir[] = "/tmp/c2t_evalwXXXXXX", path[128];
    const char *base = "--target tests/ckpt/tiny_chat --template none --max-new-tokens 8";
    /* run from the repo root, where data/demo/classifier.json exists: still an error */
    int rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy c2t --draft tests/ckpt/tiny_chat_eagle --questions %s",
                     bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--classifier");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy chain --draft tests/ckpt/tiny_chat_eagle --early-stop c2t "
                 "--questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--classifier");
    /* a setting the policy does not have is named, not ignored */
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy chain --draft tests/ckpt/tiny_chat_eagle --topk 4 --questions %s",
                 bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--topk does not apply to policy chain");
    /* the wrong EAGLE kind names the layout it found */
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy eagle2 --draft tests/ckpt/tiny_chat_eagle --draft-kind eagle3 "
                 "--questions %s", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--draft-kind eagle");
    REQUIRE(mkdtemp(dir), "mkdtemp");
    snprintf(path, sizeof path, "%s/no/such/folder/r.json", dir);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --json %s", bin_dir(), base, qfile, path);
    CHECK_ONE_LINE_ERROR(rc, err, path);
    CHECK(strstr(err, "No such file"), "the reason is given: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --json %s", bin_dir(), base, qfile, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "is a directory");
    snprintf(path, sizeof path, "%s/x/r.csv", dir);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --csv %s", bin_dir(), base, qfile, path);
    CHECK_ONE_LINE_ERROR(rc, err, path);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --label total=1", bin_dir(), base, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--csv");
    rc = run_cmd(err, sizeof err, "sh -c '%s/spec-eval %s --policy chain --draft tests/ckpt/tiny_chat_draft --draft-kind lm "
                 "--questions %s --check-lossless 2>/dev/null | grep -q \"^lossless: 3/3 turns identical to ar\"'",
                 bin_dir(), base, qfile);
    CHECK(rc == 0, "a passed --check-lossless prints lossless: 3/3 (exit %d)", rc);
    /* progress into a file: whole lines, no carriage returns; --quiet: none */
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --no-baseline --questions %s", bin_dir(), base, qfile);
    CHECK(rc == 0 && strstr(err, "spec-eval turns 3/3") && !strchr(err, '\r'), "progress into a file: %s", err);
    CHECK(strstr(err, " turns/s ") && !strstr(strstr(err, "spec-eval turns 3/3") + 1, "spec-eval turns 3/3"),
          "the rate names its unit and the last line comes once: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --no-baseline --quiet --questions %s", bin_dir(), base, qfile);
    CHECK(rc == 0 && !strstr(err, "spec-eval turns"), "--quiet still shows progress: %s", err);
    /* --csv: a speedup column (empty without the baseline); a file of another header refused */
    char csv[160];
    snprintf(csv, sizeof csv, "%s/r.csv", dir);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --csv %s --label k=1", bin_dir(), base,
                 qfile, csv);
    REQUIRE(rc == 0, "--csv with the baseline: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --no-baseline --questions %s --csv %s", bin_dir(), base,
                 qfile, csv);
    REQUIRE(rc == 0, "--csv without the baseline: %s", err);
    char *text = read_text_file(csv, NULL);
    REQUIRE(text, "%s", err_get());
    char h[128], r1[256], r2[256];
    int got = sscanf(text, "%127[^\n]\n%255[^\n]\n%255[^\n]", h, r1, r2);
    double sp = 0, lo = 0, hi = 0, tau, v;
    long long gamma;
    CHECK(got == 3 && !strcmp(h, "policy,param,value,tau,gamma,v,speedup,speedup_lo,speedup_hi"), "header: %s", text);
    CHECK(got == 3 && sscanf(r1, "ar,k,1,%lf,%lld,%lf,%lf,%lf,%lf", &tau, &gamma, &v, &sp, &lo, &hi) == 6 && sp > 0 &&
          lo <= sp && sp <= hi, "speedup and its interval with the baseline: %s", r1);
    const size_t l2 = strlen(r2);
    CHECK(got == 3 && l2 > 3 && !strcmp(r2 + l2 - 3, ",,,") && !strncmp(r2, "ar,-,-,", 7),
          "empty speedup columns without it: %s", r2);
    free(text);
    write_file(csv, "policy,param,value,tau,gamma,v\nar,-,-,1.0,0,10\n");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --csv %s", bin_dir(), base, qfile, csv);
    CHECK_ONE_LINE_ERROR(rc, err, "header");
    unlink(csv);
    /* a bad --draft-kind is named before any model loads (this target does not exist) */
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/nonexistent --draft-kind eagel --questions %s",
                 bin_dir(), qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "eagle | eagle3 | lm | auto");
    /* hints where the fix is known */
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s", bin_dir(), base, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "is a directory");
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --template none --policy chain --draft "
                 "data/demo/draft --draft-kind eagle --questions %s", bin_dir(), qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--draft-kind lm");
    /* without --draft-kind, a draft of several layers is taken as the LM it is */
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --template none --policy chain --draft "
                 "data/demo/draft --draft-len 2 --max-new-tokens 4 --no-baseline --questions %s", bin_dir(), qfile);
    CHECK(rc == 0, "a draft LM without --draft-kind: %s", err);
    rmdir(dir);
    /* spec-generate speaks the other commands' names; the old ones still work, with a notice */
    rc = run_cmd(err, sizeof err, "%s/spec-generate --model tests/ckpt/tiny_chat --ctx 32 --ids 1,2 --max-new-tokens 2 "
                 "--device cpu", bin_dir());
    CHECK(rc == 0 && strstr(err, "--model is now --target") && strstr(err, "--ctx is now --max-ctx"), "old names: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-generate --target tests/ckpt/tiny_chat --prompt hi --template chatml "
                 "--max-new-tokens 2 --device cpu --template nonesuch", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "nonesuch");
}

/* cmd's stdout (a new string; "" when it printed nothing), its exit status
 * in *rc and its stderr in err. */
static char *run_stdout(int *rc, char *err, size_t errlen, const char *cmd) {
    char path[] = "/tmp/c2t_stdoutXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    *rc = run_cmd(err, errlen, "{ %s > %s; }", cmd, path);
    char *text = read_text_file(path, NULL);
    unlink(path);
    return text ? text : xstrdup("");
}

/* spec-generate --prompt-file reads the prompt's bytes as they are, from a
 * file or from standard input: the same ids as --prompt with that text;
 * a missing, empty or NUL-holding file, or two prompts, one line each. */
static void test_generate_prompt_file(void) {
    char err[4096], cmd[1024], path[] = "/tmp/c2t_promptXXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0 && write(fd, "static int\n", 11) == 11, "writing %s", path);
    close(fd);
    const char *gen = "%s/spec-generate --target tests/ckpt/tiny_chat --device cpu --template none --max-new-tokens 8 "
                      "--print-ids %s";
    int rc;
    snprintf(cmd, sizeof cmd, gen, bin_dir(), "--prompt 'static int\n'");
    char *want = run_stdout(&rc, err, sizeof err, cmd);
    REQUIRE(rc == 0 && strchr(want, '['), "--prompt: rc %d, %s", rc, err);
    char args[256];
    snprintf(args, sizeof args, "--prompt-file %s", path);
    snprintf(cmd, sizeof cmd, gen, bin_dir(), args);
    char *got = run_stdout(&rc, err, sizeof err, cmd);
    CHECK(rc == 0 && !strcmp(got, want), "--prompt-file: rc %d, %s against --prompt's %s (%s)", rc, got, want, err);
    free(got);
    snprintf(args, sizeof args, "--prompt-file - < %s", path);
    snprintf(cmd, sizeof cmd, gen, bin_dir(), args);
    got = run_stdout(&rc, err, sizeof err, cmd);
    CHECK(rc == 0 && !strcmp(got, want), "--prompt-file -: rc %d, %s against --prompt's %s (%s)", rc, got, want, err);
    free(got); free(want);
    snprintf(args, sizeof args, "--prompt-file %s --ids 1,2", path);
    rc = run_cmd(err, sizeof err, gen, bin_dir(), args);
    CHECK_ONE_LINE_ERROR(rc, err, "not two");
    rc = run_cmd(err, sizeof err, gen, bin_dir(), "--prompt-file /nonexistent/prompt.txt");
    CHECK_ONE_LINE_ERROR(rc, err, "/nonexistent/prompt.txt");
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite("a\0b", 1, 3, f) == 3 && fclose(f) == 0, "rewriting %s", path);
    rc = run_cmd(err, sizeof err, gen, bin_dir(), "--prompt-file /dev/null");
    CHECK_ONE_LINE_ERROR(rc, err, "empty");
    snprintf(args, sizeof args, "--prompt-file %s", path);
    rc = run_cmd(err, sizeof err, gen, bin_dir(), args);
    CHECK_ONE_LINE_ERROR(rc, err, "NUL");
    unlink(path);
}

/* spec-generate with a draft decodes one prompt as spec-eval's turns do:
 * at temperature 0 its ids and its streamed text equal the target alone's
 * with the same options (an EAGLE head under eagle2 at a fixed size and in
 * a plain run, a draft LM under chain; and with no arithmetic options on a
 * block-type target, where the plain run's BF16 cache applies to both),
 * with the cycles on stderr; a seed
 * repeats a sampled answer; the combinations that make no sense are one
 * line each. */
static void test_generate_with_draft(void) {
    char err[4096], cmd[1024];
    const char *gen = "%s/spec-generate --target tests/ckpt/tiny_chat --device cpu --kv-dtype f32 --cost-cache none "
                      "--max-new-tokens 24 %s";
    int rc;
    snprintf(cmd, sizeof cmd, gen, bin_dir(), "--ids 1,2,3");
    char *alone = run_stdout(&rc, err, sizeof err, cmd);
    REQUIRE(rc == 0 && alone[0] == '[', "the target alone: rc %d, %s", rc, err);
    static const char *const drafts[] = {"--draft tests/ckpt/tiny_chat_eagle --total 10",
                                         "--draft tests/ckpt/tiny_chat --draft-kind lm --policy chain --draft-len 3",
                                         "--draft tests/ckpt/tiny_chat_eagle"};
    for (int i = 0; i < 3; i++) {
        char args[256];
        snprintf(args, sizeof args, "--ids 1,2,3 %s", drafts[i]);
        snprintf(cmd, sizeof cmd, gen, bin_dir(), args);
        char *got = run_stdout(&rc, err, sizeof err, cmd);
        CHECK(rc == 0 && !strcmp(got, alone), "%s: rc %d, ids %s against the target alone's %s (%s)", drafts[i], rc, got,
              alone, err);
        int tokens = 0;
        long long cycles = 0, gamma = -1;
        double tau = 0;
        CHECK(sscanf(err, "spec-generate: %*[a-z0-9]: %d tokens, %lld cycles, tau %lf, gamma %lld", &tokens, &cycles, &tau,
                     &gamma) == 4 && tokens == 24 && cycles > 0 && tau >= 1,
              "%s: no summary line of 24 tokens, cycles, tau and gamma: %s", drafts[i], err);
        if (i < 2) CHECK(gamma > 0, "%s: a fixed size verified no drafted token (gamma %lld)", drafts[i], gamma);
        free(got);
    }
    free(alone);
    /* with no arithmetic options both compute as a plain run: a block-type
     * target's KV cache in BF16 for the target alone too (F32 there once gave
     * other ids than the draft's run on this checkpoint) */
    const char *quant = "%s/spec-generate --target tests/ckpt/qwen2_quant --device cpu --cost-cache none "
                        "--max-new-tokens 48 --ids 1,2,3 %s";
    snprintf(cmd, sizeof cmd, quant, bin_dir(), "");
    char *qalone = run_stdout(&rc, err, sizeof err, cmd);
    REQUIRE(rc == 0 && qalone[0] == '[', "qwen2_quant alone: rc %d, %s", rc, err);
    snprintf(cmd, sizeof cmd, quant, bin_dir(), "--draft tests/ckpt/qwen2_quant --draft-kind lm --policy chain --draft-len 3");
    char *qdraft = run_stdout(&rc, err, sizeof err, cmd);
    CHECK(rc == 0 && !strcmp(qdraft, qalone), "qwen2_quant with its own draft: rc %d, ids %s against the target alone's %s (%s)",
          rc, qdraft, qalone, err);
    free(qalone); free(qdraft);
    /* the text streamed a cycle at a time is the text the target alone prints */
    snprintf(cmd, sizeof cmd, gen, bin_dir(), "--template none --prompt 'static int'");
    char *text = run_stdout(&rc, err, sizeof err, cmd);
    REQUIRE(rc == 0 && !strncmp(text, "static int", 10), "the target alone's text: rc %d, %s", rc, err);
    snprintf(cmd, sizeof cmd, gen, bin_dir(), "--template none --prompt 'static int' --draft tests/ckpt/tiny_chat_eagle --total 6");
    char *streamed = run_stdout(&rc, err, sizeof err, cmd);
    CHECK(rc == 0 && !strcmp(streamed, text), "streamed with a draft: %s, alone: %s (%s)", streamed, text, err);
    free(text); free(streamed);
    /* a seeded sampled answer repeats */
    snprintf(cmd, sizeof cmd, gen, bin_dir(), "--ids 1,2,3 --draft tests/ckpt/tiny_chat_eagle --total 6 --temperature 0.9 --seed 5");
    char *s1 = run_stdout(&rc, err, sizeof err, cmd);
    CHECK(rc == 0 && s1[0] == '[', "sampled: rc %d, %s", rc, err);
    char *s2 = run_stdout(&rc, err, sizeof err, cmd);
    CHECK(rc == 0 && !strcmp(s1, s2), "the same seed drew %s, then %s", s1, s2);
    free(s1); free(s2);
    static const char *const bad[][2] = {
        {"--ids 1,2 --draft tests/ckpt/tiny_chat_eagle --print-gaps", "--print-gaps"},
        {"--ids 1,2 --policy chain", "needs --draft"},
        {"--ids 1,2 --policy ar --draft tests/ckpt/tiny_chat_eagle", "drop --draft"},
        {"--ids 1,2 --prompt hi", "not two"},
        {"--ids 1,2 --draft tests/ckpt/tiny_chat_eagle --beta 0.5", "beta"},
        {"--ids 1,2,3 --draft tests/ckpt/tiny_chat_eagle --max-ctx 16 --max-new-tokens 20", "raise --max-ctx"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rc = run_cmd(err, sizeof err, gen, bin_dir(), bad[i][0]);
        CHECK_ONE_LINE_ERROR(rc, err, bad[i][1]);
    }
}

/* The output ids of every turn of a report, "id/turn" -> ids text; each
 * question must appear once with each of its turns. */
static cJSON *ids_by_turn(const char *path, int *n_turns) {
    cJSON *j = read_json_file(path), *map = cJSON_CreateObject();
    *n_turns = 0;
    if (!j) return map;
    const cJSON *b, *q, *t;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(j, "benchmarks")) cJSON_ArrayForEach(q, cJSON_GetObjectItem(b, "questions")) {
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(q, "turns")) {
            char key[64];
            snprintf(key, sizeof key, "%s/%d", cJSON_GetObjectItem(q, "question_id")->valuestring,
                     cJSON_GetObjectItem(t, "turn")->valueint);
            if (cJSON_GetObjectItem(map, key)) { (*n_turns) = -1000; continue; }   /* twice: wrong */
            char *ids = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "output_ids"));
            cJSON_AddStringToObject(map, key, ids);
            free(ids);
            (*n_turns)++;
        }
    }
    cJSON_Delete(j);
    return map;
}

/* The JSON id arrays among a command's stdout lines, in order, one per
 * line ("[1,2,3]": a line of digits and commas in brackets). */
static int id_lines(const char *text, char lines[][512], int max) {
    int n = 0;
    for (const char *p = text; *p && n < max;) {
        const char *e = strchr(p, '\n');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len >= 2 && len < 512 && p[0] == '[' && p[len - 1] == ']' && strspn(p + 1, "0123456789,") == len - 2) {
            memcpy(lines[n], p, len);
            lines[n++][len] = 0;
        }
        p += len + (e != NULL);
    }
    return n;
}

/* spec-generate --chat --fresh-turns: a conversation on standard input is
 * one question of spec-eval's, turn after turn: each turn's ids equal spec-eval's
 * output_ids for that question (its later turn's prompt holding the
 * model's first answer), with the target alone and with a draft LM under
 * chain; a line ending in a backslash goes on into the next; no template,
 * a prompt beside it or --print-gaps is one line. */
static void test_generate_chat(void) {
    char err[4096], cmd[1024], dir[] = "/tmp/c2t_chatXXXXXX", qfile[128], report[128];
    REQUIRE(mkdtemp(dir), "mkdtemp");
    snprintf(qfile, sizeof qfile, "%s/q.jsonl", dir);
    snprintf(report, sizeof report, "%s/r.json", dir);
    write_file(qfile, "{\"question_id\": 7, \"category\": \"chat\", \"turns\": [\"def add(a, b):\", \"class Stack:\\n  pass\"]}\n");
    const char *opts = "--target data/demo/target --template chatml --device cpu --kv-dtype f32 --cost-cache none "
                       "--max-new-tokens 12";
    static const char *const policies[] = {"--policy ar", "--policy chain --draft data/demo/draft --draft-kind lm --draft-len 3"};
    int rc;
    for (int i = 0; i < 2; i++) {
        rc = run_cmd(err, sizeof err, "%s/spec-eval %s %s --no-baseline --questions %s --json %s", bin_dir(), opts,
                     policies[i], qfile, report);
        REQUIRE(rc == 0, "spec-eval %s: %s", policies[i], err);
        int n_turns;
        cJSON *want = ids_by_turn(report, &n_turns);
        REQUIRE(n_turns == 2, "spec-eval %s: %d turns", policies[i], n_turns);
        snprintf(cmd, sizeof cmd, "printf 'def add(a, b):\\n\\nclass Stack:\\\\\\n  pass\\n' | %s/spec-generate %s %s --chat --fresh-turns --print-ids",
                 bin_dir(), opts, policies[i]);
        char *out = run_stdout(&rc, err, sizeof err, cmd), got[4][512];
        const int n = id_lines(out, got, 4);
        CHECK(rc == 0 && n == 2, "--chat %s: rc %d, %d id lines in %s (%s)", policies[i], rc, n, out, err);
        CHECK(n < 2 || strcmp(got[0], got[1]), "--chat %s: both turns answered %s (the test cannot tell them apart)",
              policies[i], got[0]);
        for (int t = 0; t < 2 && n == 2; t++) {
            char key[16];
            snprintf(key, sizeof key, "7/%d", t + 1);   /* spec-eval's turns count from 1 */
            const cJSON *w = cJSON_GetObjectItem(want, key);
            CHECK(w && !strcmp(w->valuestring, got[t]), "--chat %s, turn %d: %s, spec-eval's %s", policies[i], t + 1, got[t],
                  w ? w->valuestring : "(none)");
        }
        free(out);
        cJSON_Delete(want);
    }
    unlink(qfile); unlink(report); rmdir(dir);
    static const char *const bad[][2] = {
        {"--chat --prompt hi", "not with"},
        {"--chat --template none", "chat template"},
        {"--chat --print-gaps", "--print-gaps"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rc = run_cmd(err, sizeof err, "echo hi | %s/spec-generate --target tests/ckpt/tiny_chat --device cpu --max-new-tokens 4 %s",
                     bin_dir(), bad[i][0]);
        CHECK_ONE_LINE_ERROR(rc, err, bad[i][1]);
    }
    rc = run_cmd(err, sizeof err, "%s/spec-generate %s --chat < /dev/null", bin_dir(), opts);
    CHECK(rc == 0, "--chat on an empty input: rc %d, %s", rc, err);
    rc = run_cmd(err, sizeof err, "printf 'a\\000b\\n' | %s/spec-generate %s --chat", bin_dir(), opts);
    CHECK_ONE_LINE_ERROR(rc, err, "NUL");
    rc = run_cmd(err, sizeof err, "printf 'def add(a, b):\\n' | %s/spec-generate %s --chat --max-ctx 20", bin_dir(), opts);
    CHECK_ONE_LINE_ERROR(rc, err, "raise --max-ctx");
}

/* --chat keeps the cache entries a turn's prompt shares with the turn
 * before (Decoder.cache) and forwards only the rest; the later turns say
 * how much they kept.  Three turns: every greedy policy's ids equal the
 * target alone's keeping the same entries (lossless: the cycle's rows sum
 * as decode does), and on these checkpoints the ids, cycles, τ and γ of
 * each turn equal --fresh-turns' (each prompt forwarded whole), which
 * checks the bookkeeping of both caches (a position or a draft entry off
 * by one fails it); where eagle2 sizes its trees from measured times (no
 * --total: the cost model and its draft switch, which a sanitized build on
 * a slow CPU can turn off in one run and not the other) the ids and token
 * counts alone.  The two need not agree on a real model: a prompt of more
 * than 8 rows sums its attention through sgemm, in another order than
 * decode's rows, and a near tie can fall either way (docs). */
static void test_chat_keeps_prefix(void) {
    static const char *const setups[][2] = {   /* the target; the policy (ar first: the others' reference) */
        {"tests/ckpt/tiny_chat", "--policy ar"},
        {"tests/ckpt/tiny_chat", "--draft tests/ckpt/tiny_chat_eagle --total 10"},
        {"tests/ckpt/tiny_chat", "--draft tests/ckpt/tiny_chat_eagle"},
        {"tests/ckpt/tiny_chat", "--draft tests/ckpt/tiny_chat_draft --draft-kind lm --policy chain --draft-len 3"},
        {"tests/ckpt/tiny_chat", "--draft tests/ckpt/tiny_chat_eagle --total 8 --temperature 0.9 --seed 5"},
        {"tests/ckpt/qwen2_quant", "--policy ar"},
        {"tests/ckpt/qwen2_quant", "--draft tests/ckpt/qwen2_quant --draft-kind lm --policy chain --draft-len 3"},
    };
    char alone[3][512] = {{0}};
    for (size_t i = 0; i < sizeof setups / sizeof *setups; i++) {
        char err[4096], cmd[1024], got[2][4][512], sums[2][4][128];
        int rc, n[2], n_sums[2] = {0, 0};
        for (int fresh = 0; fresh < 2; fresh++) {
            snprintf(cmd, sizeof cmd, "printf 'static int\\nint main(void) {\\nreturn\\n' | %s/spec-generate --target %s %s "
                     "--device cpu --template chatml --cost-cache none --max-new-tokens 16 --chat --print-ids%s", bin_dir(),
                     setups[i][0], setups[i][1], fresh ? " --fresh-turns" : "");
            char *out = run_stdout(&rc, err, sizeof err, cmd);
            n[fresh] = id_lines(out, got[fresh], 4);
            CHECK(rc == 0 && n[fresh] == 3, "%s %s%s: rc %d, %d id lines (%s)", setups[i][0], setups[i][1],
                  fresh ? " --fresh-turns" : "", rc, n[fresh], err);
            int kept = 0;
            for (const char *p = err; (p = strstr(p, " tokens kept)")); p++) kept++;
            CHECK(kept == (fresh ? 0 : 2), "%s %s%s: %d turns kept cache entries: %s", setups[i][0], setups[i][1],
                  fresh ? " --fresh-turns" : "", kept, err);
            for (const char *p = err; (p = strstr(p, "spec-generate: ")) && n_sums[fresh] < 4; p++) {
                const size_t len = strcspn(p, ";\n");   /* tokens, cycles, tau, gamma */
                snprintf(sums[fresh][n_sums[fresh]++], sizeof sums[0][0], "%.*s", (int)len, p);
            }
            free(out);
        }
        if (n[0] != 3 || n[1] != 3) continue;
        const int greedy = !strstr(setups[i][1], "--temperature");
        for (int t = 0; t < 3; t++) {
            if (!strcmp(setups[i][1], "--policy ar")) snprintf(alone[t], sizeof alone[t], "%.511s", got[0][t]);
            else if (greedy)
                CHECK(!strcmp(got[0][t], alone[t]), "%s %s, turn %d: %s, the target alone's %s keeping the same entries",
                      setups[i][0], setups[i][1], t + 1, got[0][t], alone[t]);
            CHECK(!strcmp(got[0][t], got[1][t]), "%s %s, turn %d: %s keeping the prefix, %s forwarding it again",
                  setups[i][0], setups[i][1], t + 1, got[0][t], got[1][t]);
        }
        CHECK(n_sums[0] == 3 && n_sums[1] == 3, "%s %s: %d and %d summary lines", setups[i][0], setups[i][1], n_sums[0],
              n_sums[1]);
        const int timed = strstr(setups[i][1], "tiny_chat_eagle") && !strstr(setups[i][1], "--total");
        for (int t = 0; t < 3 && n_sums[0] == 3 && n_sums[1] == 3; t++) {
            if (timed) {   /* the same tokens; cycles, τ and γ follow the measured sizes */
                const char *g0 = strstr(sums[0][t], ", "), *g1 = strstr(sums[1][t], ", ");
                CHECK(g0 && g1 && g0 - sums[0][t] == g1 - sums[1][t] && !strncmp(sums[0][t], sums[1][t], (size_t)(g0 - sums[0][t])),
                      "%s %s, turn %d: '%s' keeping the prefix, '%s' forwarding it again", setups[i][0], setups[i][1],
                      t + 1, sums[0][t], sums[1][t]);
                continue;
            }
            CHECK(!strcmp(sums[0][t], sums[1][t]), "%s %s, turn %d: '%s' keeping the prefix, '%s' forwarding it again",
                  setups[i][0], setups[i][1], t + 1, sums[0][t], sums[1][t]);
        }
    }
    char err[4096];
    const int rc = run_cmd(err, sizeof err, "%s/spec-generate --target tests/ckpt/tiny_chat --prompt hi --fresh-turns", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--fresh-turns");
}

/* --batch N: lossless for every policy; every question decoded exactly
 * once, each turn's tokens those of decoding it alone (continuous and
 * static batches); a prompt that cannot fit the cache is one line. */
static void test_batched_decoding(void) {
    char qs[] = "/tmp/c2t_evalbXXXXXX", err[4096];
    close(mkstemp(qs));
    write_file(qs, "{\"question_id\": 1, \"turns\": [\"static int x = 1;\", \"int main(void) {\"]}\n"
                   "{\"question_id\": 2, \"turns\": [\"const char *name\"]}\n"
                   "{\"question_id\": 3, \"turns\": [\"for (int i = 0;\"]}\n"
                   "{\"question_id\": 4, \"turns\": [\"return\", \"while (1)\"]}\n"
                   "{\"question_id\": 5, \"turns\": [\"#include\"]}\n"
                   "{\"question_id\": 6, \"turns\": [\"if (x)\"]}\n"
                   "{\"question_id\": 7, \"turns\": [\"struct\", \"typedef\"]}\n");
    const char *base = "--target tests/ckpt/tiny_chat --template none --max-new-tokens 24 --quiet";
    for (int p = 0; p < N_POLICIES; p++) {   /* auto sizes too: the round's cost model (batch.c) */
        int rc = run_cmd(err, sizeof err, "%s/spec-eval %s --draft tests/ckpt/tiny_chat_eagle --questions %s --batch 3 "
                         "--check-lossless %s", bin_dir(), base, qs, policies[p]);
        CHECK(rc == 0, "--batch 3 %s: exit %d: %s", policies[p], rc, err);
    }
    /* one benchmark, batched: one row, with its speed and speedup, no "all" */
    char table[128];
    snprintf(table, sizeof table, "%s.table", qs);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/spec-eval %s --policy ar --questions %s --batch 3 > %s 2>/dev/null", bin_dir(), base, qs, table);
    const int rc0 = system(cmd);
    char *t = read_text_file(table, NULL);
    REQUIRE(rc0 == 0 && t, "batched table run failed");
    const char *row = strstr(t, "\nc2t_evalb");
    CHECK(row && !strstr(t, "\nall ") && count_lines(t) == 3, "one benchmark, batched: %s", t);
    if (row) {
        double g, tau, v, sp;
        CHECK(sscanf(strchr(row + 1, ' '), "%lf %lf %lf %lfx", &g, &tau, &v, &sp) == 4 && v > 0 && sp > 0,
              "the row lacks speed or speedup: %s", row + 1);
    }
    free(t);
    unlink(table);
    const char *runs[] = {"--policy eagle2 --topk 4 --depth 3 --total 16 --draft tests/ckpt/tiny_chat_eagle",
                          "--policy chain --draft-len 4 --draft tests/ckpt/tiny_chat_draft --draft-kind lm"};
    const char *modes[] = {"--batch 1", "--batch 3", "--batch 3 --static-batches", "--batch 16"};
    for (int r = 0; r < 2; r++) {
        cJSON *ref = NULL;
        for (int m = 0; m < 4; m++) {
            char out[64];
            snprintf(out, sizeof out, "%s.%d.json", qs, m);
            int rc = run_cmd(err, sizeof err, "%s/spec-eval %s %s --questions %s --no-baseline %s --json %s", bin_dir(),
                             base, runs[r], qs, modes[m], out);
            REQUIRE(rc == 0, "%s %s: %s", runs[r], modes[m], err);
            int n_turns;
            cJSON *got = ids_by_turn(out, &n_turns);
            CHECK(n_turns == 10, "%s %s: %d turns reported (10, each once)", runs[r], modes[m], n_turns);
            if (!ref) ref = got;
            else {
                CHECK(cJSON_Compare(ref, got, 1), "%s %s: tokens differ from --batch 1", runs[r], modes[m]);
                cJSON_Delete(got);
            }
            unlink(out);
        }
        cJSON_Delete(ref);
    }
    int rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --batch 3 --max-ctx 16", bin_dir(),
                     base, qs);
    CHECK_ONE_LINE_ERROR(rc, err, "exceeds the context");
    rc = run_cmd(err, sizeof err, "%s/spec-eval %s --policy ar --questions %s --static-batches", bin_dir(), base, qs);
    CHECK_ONE_LINE_ERROR(rc, err, "--batch");
    unlink(qs);
}

/* --batch 3 (each slot runs its policy's program, the slots' forwards
 * batched with their inputs in backend memory, their tree ops batched at
 * the gates), for every policy on the demo family: greedy, ar's tokens
 * batched alike (--check-lossless); greedy and (two) sampled, the report
 * says how many tree ops ran a batch and how many reads a transfer made;
 * sampled, the same tokens, tau and gamma run after run from one seed
 * (test_decode.c checks the distribution). */
static void test_batched_cycle(void) {
    char out[] = "/tmp/c2t_bcycleXXXXXX", err[4096];
    close(mkstemp(out));
    const char *base = "--target data/demo/target --template none --questions data/demo/prompts/code_test.jsonl "
                       "--max-questions 5 --max-new-tokens 24 --quiet --batch 3";
    const char *runs[] = {"--policy eagle2 --draft data/demo/eagle --topk 4 --depth 4 --total 12",
                          "--policy c2t --draft data/demo/eagle --classifier data/demo/classifier.json --total 10",
                          "--policy static --draft data/demo/eagle",
                          /* thresholds on P, in f32 arithmetic (a plain run's
                           * default is BF16 products) */
                          "--policy sage --draft data/demo/eagle --param sage_theta=0.02 --param sage_nmax=24 "
                          "--param sage_window=2 --param sage_lower=1.5 --cpu-fast-gemm off --kv-dtype f32",
                          "--policy wetap --draft data/demo/eagle --param wetap_wmin=4 --param wetap_wmax=16 "
                          "--param wetap_budget=24 --cpu-fast-gemm off --kv-dtype f32",
                          "--policy chain --draft data/demo/draft --draft-kind lm --draft-len 4",
                          "--policy chain --draft data/demo/draft --draft-kind lm --draft-len 6 --early-stop dymax --threshold 0.05",
                          "--policy ar",
                          /* sampled: each slot's stream gives both runs the same keys */
                          "--policy eagle2 --draft data/demo/eagle --topk 4 --depth 4 --total 12 --temperature 0.8 --seed 5",
                          "--policy chain --draft data/demo/draft --draft-kind lm --draft-len 4 --temperature 1 --top-k 20 "
                          "--top-p 0.9 --seed 6"};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        cJSON *ids[2] = {NULL, NULL};
        double tau[2] = {0, 0}, gamma[2] = {0, 0};
        const int sampled = strstr(runs[r], "--temperature") != NULL;
        for (int c = 0; c < 1 + sampled; c++) {
            int rc = run_cmd(err, sizeof err, "%s/spec-eval %s %s %s --json %s", bin_dir(), base, runs[r],
                             sampled ? "--no-baseline" : "--check-lossless", out);
            CHECK(rc == 0, "%s: exit %d: %s", runs[r], rc, err);
            if (rc) continue;
            cJSON *j = read_json_file(out);
            REQUIRE(j, "%s: no JSON report", out);
            cJSON *tot = cJSON_GetObjectItem(j, "total");
            tau[c] = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "tau"));
            gamma[c] = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "gamma"));
            /* the slots' tree ops wait at their gates and run together:
             * three slots, the last questions' rounds with fewer */
            cJSON *dcy = cJSON_GetObjectItem(j, "device_cycle");
            const double ops = cJSON_GetNumberValue(cJSON_GetObjectItem(dcy, "tree_ops")),
                         per = cJSON_GetNumberValue(cJSON_GetObjectItem(dcy, "tree_ops_per_batch")),
                         reads = cJSON_GetNumberValue(cJSON_GetObjectItem(dcy, "reads")),
                         reads_per = cJSON_GetNumberValue(cJSON_GetObjectItem(dcy, "reads_per_batch"));
            CHECK(ops > 0 && per >= 1.8 && per <= 3 && reads > 0 && reads_per >= 1.5 && reads_per <= 3,
                  "%s: %.0f tree ops, %.2f a batch; %.0f reads, %.2f a transfer at --batch 3", runs[r], ops, per, reads,
                  reads_per);
            if (c == 0) printf("# --batch 3 %s: %.0f tree ops, %.2f a batch; %.0f reads, %.2f a transfer\n", runs[r], ops, per,
                          reads, reads_per);
            cJSON_Delete(j);
            int n;
            ids[c] = ids_by_turn(out, &n);
        }
        if (ids[0] && ids[1]) {
            CHECK(cJSON_Compare(ids[0], ids[1], 1), "%s: another run decodes other tokens at --batch 3", runs[r]);
            CHECK(tau[0] == tau[1] && gamma[0] == gamma[1], "%s: tau %.4f / %.4f, gamma %.0f / %.0f", runs[r], tau[0],
                  tau[1], gamma[0], gamma[1]);
        }
        printf("# --batch 3 %s: tau %.3f, gamma %.0f\n", runs[r], tau[0], gamma[0]);
        cJSON_Delete(ids[0]); cJSON_Delete(ids[1]);
    }
    /* sizes from measured costs, batched too: lossless, the tree ops read
     * (their sizes follow timings: not compared) */
    const char *autos[] = {"--policy eagle2 --draft data/demo/eagle --topk 4 --depth 4 --total auto",
                           "--policy c2t --draft data/demo/eagle --classifier data/demo/classifier.json --total auto",
                           "--policy sage --draft data/demo/eagle --param sage_nmax=auto",
                           "--policy chain --draft data/demo/draft --draft-kind lm --draft-len auto"};
    for (size_t r = 0; r < sizeof autos / sizeof *autos; r++) {
        int rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --template none --questions "
                         "data/demo/prompts/code_test.jsonl --max-questions 3 --max-new-tokens 16 --quiet --batch 3 "
                         "--check-lossless %s --json %s", bin_dir(), autos[r], out);
        CHECK(rc == 0, "%s --batch 3: exit %d: %s", autos[r], rc, err);
        cJSON *j = rc ? NULL : read_json_file(out);
        const cJSON *dcy = cJSON_GetObjectItem(j, "device_cycle");
        CHECK(!rc && cJSON_GetNumberValue(cJSON_GetObjectItem(dcy, "reads")) > 0, "%s --batch 3: no device_cycle reads",
              autos[r]);
        cJSON_Delete(j);
    }
    unlink(out);
}

/* The settings that change the arithmetic (--kv-dtype bf16, --cpu-fast-gemm
 * on or amx) change it for ar and the speculative run alike, so decoding stays
 * lossless, batched too, on the BF16 demo family; they are recorded in the
 * report.  With --cpu-fast-gemm every product sums each token alone, so
 * batch 1 and batch 4 (verification forwards beyond FEW_TOKENS) decode the
 * same tokens.  The CUDA backend refuses a BF16 KV cache. */
static void test_arithmetic_options_lossless(void) {
    char out[] = "/tmp/c2t_arithXXXXXX", err[4096], base[256];
    close(mkstemp(out));
    /* 16 new tokens: several cycles of 21- and 61-node trees a question
     * (make test-long: 24) */
    snprintf(base, sizeof base, "--target data/demo/target --template none --questions data/demo/prompts/code_test.jsonl "
             "--max-questions 4 --max-new-tokens %d --quiet", TEST_SIZE(16, 24));
    const char *opts[4] = {"--kv-dtype bf16"};
    int n_opts = 1;
    if (backend_cpu_gemm_runs(CPU_GEMM_BF16)) {
        opts[n_opts++] = "--cpu-fast-gemm on";
        opts[n_opts++] = "--cpu-fast-gemm on --kv-dtype bf16";
    } else {
        int rc0 = run_cmd(err, sizeof err, "%s/spec-eval %s --cpu-fast-gemm on --policy ar", bin_dir(), base);
        CHECK_ONE_LINE_ERROR(rc0, err, "AVX512-BF16");
    }
    if (backend_cpu_gemm_runs(CPU_GEMM_AMX)) {
        opts[n_opts++] = "--cpu-fast-gemm amx --kv-dtype bf16";
    } else {
        int rc0 = run_cmd(err, sizeof err, "%s/spec-eval %s --cpu-fast-gemm amx --policy ar", bin_dir(), base);
        CHECK_ONE_LINE_ERROR(rc0, err, "AMX-BF16");
    }
    const char *runs[] = {"--policy eagle2 --draft data/demo/eagle --batch 1", "--policy eagle2 --draft data/demo/eagle --batch 4",
                          "--policy chain --draft-len 4 --draft data/demo/draft --draft-kind lm --batch 3",
                          /* 21 nodes: every node's logits under amx, the path's under on and off; 61: the path's */
                          "--policy eagle2 --draft data/demo/eagle --total 20", "--policy eagle2 --draft data/demo/eagle --total 60"};
    for (int o = 0; o < n_opts; o++) {
        cJSON *ids[2] = {NULL, NULL};
        for (int r = 0; r < (int)(sizeof runs / sizeof *runs); r++) {
            int rc = run_cmd(err, sizeof err, "%s/spec-eval %s %s %s --check-lossless --json %s", bin_dir(), base,
                             opts[o], runs[r], out);
            CHECK(rc == 0, "%s %s: exit %d: %s", opts[o], runs[r], rc, err);
            if (rc) continue;
            cJSON *j = read_json_file(out);
            REQUIRE(j, "%s: no JSON report", out);
            cJSON *set = cJSON_GetObjectItem(j, "settings");
            const char *kv = cJSON_GetStringValue(cJSON_GetObjectItem(set, "kv_dtype"));
            const char *fg = cJSON_GetStringValue(cJSON_GetObjectItem(set, "cpu_fast_gemm"));
            const char *want_fg = strstr(opts[o], "fast-gemm amx") ? "amx" : strstr(opts[o], "fast-gemm on") ? "on" : "off";
            CHECK(kv && fg && !strcmp(kv, strstr(opts[o], "bf16") ? "bf16" : "f32") && !strcmp(fg, want_fg),
                  "%s: settings kv_dtype %s, cpu_fast_gemm %s", opts[o], kv ? kv : "(absent)", fg ? fg : "(absent)");
            cJSON_Delete(j);
            if (r < 2) { int n; ids[r] = ids_by_turn(out, &n); }
        }
        if (strstr(opts[o], "fast-gemm") && ids[0] && ids[1])
            CHECK(cJSON_Compare(ids[0], ids[1], 1), "%s: --batch 4 decodes other tokens than --batch 1", opts[o]);
        cJSON_Delete(ids[0]); cJSON_Delete(ids[1]);
    }
    unlink(out);
    int rc = run_cmd(err, sizeof err, "%s/spec-eval %s --kv-dtype bf16 --device cuda --policy ar", bin_dir(), base);
    CHECK(rc != 0 && (strstr(err, "--kv-dtype") || strstr(err, "no CUDA backend")), "--device cuda --kv-dtype bf16: %s", err);
}

/* --draft-temperature T divides the draft's logits before p, P and H: the
 * trees change (τ here), verification does not (lossless), and the report
 * records T. The tree's size is fixed: an auto size follows step times, and a
 * slow build (sanitizers) may choose no draft at all. */
static void test_draft_temperature(void) {
    char out[] = "/tmp/c2t_dtempXXXXXX", err[4096];
    close(mkstemp(out));
    double tau[2] = {0, 0};
    const char *temps[] = {"1", "2"};
    for (int i = 0; i < 2; i++) {
        int rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --draft data/demo/eagle --template none "
                         "--questions data/demo/prompts/code_test.jsonl --max-questions 3 --max-new-tokens 32 --quiet "
                         "--total 60 --check-lossless --draft-temperature %s --json %s", bin_dir(), temps[i], out);
        REQUIRE(rc == 0, "--draft-temperature %s: exit %d: %s", temps[i], rc, err);
        cJSON *j = read_json_file(out);
        REQUIRE(j, "%s: no JSON report", out);
        cJSON *t = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "settings"), "draft_temperature");
        CHECK(cJSON_IsNumber(t) && t->valuedouble == atof(temps[i]), "settings.draft_temperature is not %s", temps[i]);
        tau[i] = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "total"), "tau"));
        cJSON_Delete(j);
    }
    CHECK(tau[0] > 1 && tau[1] > 1 && tau[0] != tau[1], "tau %.3f at T 1 and %.3f at T 2: the trees did not change",
          tau[0], tau[1]);
    unlink(out);
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --questions x.jsonl --draft-temperature 0",
                     bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "--draft-temperature");
}

/* Every command words an unknown option, and one missing its value, alike:
 * one line naming it and pointing at the command's --help. */
static void test_usage_errors_worded_alike(void) {
    static const char *cmds[] = {"spec-eval", "spec-collect", "spec-train", "spec-analyze", "spec-generate",
                                 "spec-convert", "spec-tokenize"};
    char err[1024], want[128];
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        int rc = run_cmd(err, sizeof err, "%s/%s --frobnicate", bin_dir(), cmds[i]);
        snprintf(want, sizeof want, "%s: unknown option or missing value '--frobnicate' (see %s --help)", cmds[i], cmds[i]);
        CHECK_ONE_LINE_ERROR(rc, err, want);
    }
    int rc = run_cmd(err, sizeof err, "%s/spec-train x.h5 --out", bin_dir());
    CHECK_ONE_LINE_ERROR(rc, err, "unknown option or missing value '--out' (see spec-train --help)");
}

/* --repeats N: N A/B pairs per question (the report counts them), the
 * same tokens as one pair, the setting recorded; refused with sampling. */
static void test_repeats(void) {
    char err[4096], out[2][64];
    cJSON *ids[2] = {NULL, NULL};
    const int reps[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        snprintf(out[i], sizeof out[i], "%s.rep%d.json", qfile, reps[i]);
        int rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                         "--template none --questions %s --max-new-tokens 16 --policy eagle2 --topk 4 --depth 3 "
                         "--check-lossless --quiet --repeats %d --json %s", bin_dir(), qfile, reps[i], out[i]);
        REQUIRE(rc == 0, "--repeats %d: exit %d: %s", reps[i], rc, err);
        int n_turns;
        ids[i] = ids_by_turn(out[i], &n_turns);
        cJSON *j = read_json_file(out[i]);
        REQUIRE(j, "%s", err_get());
        const cJSON *t = cJSON_GetObjectItem(j, "total"), *ci = cJSON_GetObjectItem(t, "speedup_ci95");
        const double sp = cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup"));
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup_pairs")) == 2 * reps[i],
              "--repeats %d: %g pairs over 2 questions", reps[i], cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup_pairs")));
        CHECK(cJSON_GetArraySize(ci) == 2 && cJSON_GetArrayItem(ci, 0)->valuedouble <= sp &&
              sp <= cJSON_GetArrayItem(ci, 1)->valuedouble, "--repeats %d: speedup %g outside its interval", reps[i], sp);
        double level;
        speedup_sign_rank((int)cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup_blocks")), SPEEDUP_LEVEL, &level);
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup_ci_level")) == level,
              "--repeats %d: the interval's coverage %g, want %g for its blocks", reps[i],
              cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup_ci_level")), level);
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "settings"), "repeats")) == reps[i],
              "--repeats %d not recorded", reps[i]);
        cJSON_Delete(j);
        unlink(out[i]);
    }
    CHECK(ids[0] && ids[1] && cJSON_Compare(ids[0], ids[1], 1), "--repeats 3 changed the tokens");
    cJSON_Delete(ids[0]);
    cJSON_Delete(ids[1]);
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --template none --questions %s "
                     "--policy ar --repeats 2 --temperature 0.7", bin_dir(), qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--repeats needs --temperature 0");
}

/* eagle2 --total auto: lossless against ar, the report holds the calibrated
 * cost curve (ascending token counts, positive times), the cycles it saw and
 * the sizes it chose (within the pool), the setting is recorded as "auto";
 * with --batch > 1 the curve is the round's (token counts of all the
 * sequences' chains together, so multiples of the sequences timed). */
static void test_total_auto(void) {
    char err[4096], out[64], second[64];
    snprintf(out, sizeof out, "%s.auto.json", qfile);
    snprintf(second, sizeof second, "%s.second.jsonl", qfile);   /* a second benchmark */
    write_file(second, "{\"question_id\": 1, \"turns\": [\"for (int i = 0;\"]}\n");
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                     "--template none --questions %s --questions %s --max-new-tokens 16 --policy eagle2 --topk 4 --depth 3 "
                     "--total auto --check-lossless --quiet --json %s", bin_dir(), qfile, second, out);
    unlink(second);
    REQUIRE(rc == 0, "--total auto: exit %d: %s", rc, err);
    CHECK(strstr(err, "sized its trees from measured costs"), "no summary line: %s", err);
    cJSON *j = read_json_file(out);
    REQUIRE(j, "%s", err_get());
    const cJSON *cm = cJSON_GetObjectItem(j, "cost_model"), *vn = cJSON_GetObjectItem(cm, "verify_n"),
                *vs = cJSON_GetObjectItem(cm, "verify_s");
    const int pool = 1 + 4 + 3 * 16, np = cJSON_GetArraySize(vn);
    int ok = np >= 8 && np == cJSON_GetArraySize(vs);
    for (int i = 0; ok && i < np; i++)
        ok = cJSON_GetArrayItem(vs, i)->valuedouble > 0 && cJSON_GetArrayItem(vn, i)->valueint <= pool &&
             (i == 0 || cJSON_GetArrayItem(vn, i)->valueint > cJSON_GetArrayItem(vn, i - 1)->valueint);
    CHECK(ok, "the cost curve: %d points", np);
    const double mean = cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "chosen_mean"));
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "cycles")) > 0 && mean >= 0 && mean < pool &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "chosen_p90")) < pool &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "verify_scale")) > 0,
          "cycles / chosen sizes / scale out of range (mean %g)", mean);
    /* the estimates' promise: 1 + the kept estimates a cycle, at least 1 and at most 1 + the mean size */
    const double ptau = cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "predicted_tau"));
    CHECK(ptau >= 1 && ptau <= 1 + mean + 1e-9, "predicted_tau %g outside [1, 1 + %g]", ptau, mean);
    const cJSON *total = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "settings"), "total");
    CHECK(cJSON_IsString(total) && !strcmp(total->valuestring, "auto"), "settings.total is not \"auto\"");
    /* per benchmark: its own choices, adding up to the run's, and its predicted τ */
    const cJSON *b, *benches = cJSON_GetObjectItem(j, "benchmarks");
    double choices = 0;
    int nb = 0;
    cJSON_ArrayForEach(b, benches) {
        const cJSON *bc = cJSON_GetObjectItem(b, "cost_model");
        const double bt = cJSON_GetNumberValue(cJSON_GetObjectItem(bc, "predicted_tau")),
                     bm = cJSON_GetNumberValue(cJSON_GetObjectItem(bc, "chosen_mean")),
                     bn = cJSON_GetNumberValue(cJSON_GetObjectItem(bc, "choices"));
        /* a benchmark the draft switch ran without drafting (this target is
         * so small that it may) chose nothing and promised nothing */
        CHECK(bc && (bn > 0 ? bt >= 1 && bt <= 1 + bm + 1e-9 : bn == 0 && bt == 0 && bm == 0),
              "benchmark %d: %g choices, predicted_tau %g, chosen mean %g", nb, bn, bt, bm);
        choices += bn;
        nb++;
    }
    CHECK(nb >= 2 && choices == cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "choices")) && choices > 0,
          "%d benchmarks' choices add up to %g, the run's are %g", nb, choices,
          cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "choices")));
    cJSON_Delete(j);
    unlink(out);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                 "--template none --questions %s --max-new-tokens 16 --policy eagle2 --topk 4 --depth 3 --total auto "
                 "--batch 2 --check-lossless --quiet --json %s", bin_dir(), qfile, out);
    REQUIRE(rc == 0, "--total auto --batch 2: exit %d: %s", rc, err);
    j = read_json_file(out);
    REQUIRE(j, "%s", err_get());
    cm = cJSON_GetObjectItem(j, "cost_model");
    vn = cJSON_GetObjectItem(cm, "verify_n");
    ok = cJSON_GetArraySize(vn) >= 2;
    for (int i = 0; ok && i < cJSON_GetArraySize(vn); i++) ok = cJSON_GetArrayItem(vn, i)->valueint % 2 == 0;
    CHECK(ok && cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "cycles")) > 0 &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "choices")) > 0 &&
          cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "calibration_s")) > 0,
          "batched: the round's curve (%d points, each of 2 chains), rounds and choices", cJSON_GetArraySize(vn));
    cJSON_Delete(j);
    unlink(out);
    /* chain's draft length and c2t's cap: the same model, reported the same way */
    const char *others[][2] = {{"--policy chain --draft-len auto", "draft_len"},
                               {"--policy c2t --classifier tests/golden/c2t_hand.json --beta 0.1 --topk 4 --param total=auto",
                                "total"}};
    for (int k = 0; k < 2; k++) {
        rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                     "--template none --questions %s --max-new-tokens 16 %s --check-lossless --quiet --json %s",
                     bin_dir(), qfile, others[k][0], out);
        REQUIRE(rc == 0, "%s: exit %d: %s", others[k][0], rc, err);
        j = read_json_file(out);
        REQUIRE(j, "%s", err_get());
        cm = cJSON_GetObjectItem(j, "cost_model");
        const cJSON *size = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "settings"), others[k][1]);
        CHECK(cm && cJSON_GetArraySize(cJSON_GetObjectItem(cm, "verify_n")) >= 4 &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "cycles")) > 0 && cJSON_IsString(size) &&
              !strcmp(size->valuestring, "auto"), "%s: no cost model or settings.%s is not \"auto\"", others[k][0],
              others[k][1]);
        cJSON_Delete(j);
        unlink(out);
    }
}

/* --draft-vocab auto from the command line: lossless, its candidates,
 * timings and choice in the report; refused with --batch > 1 and by
 * spec-collect, one line each. */
static void test_draft_vocab_auto(void) {
    char dir[] = "/tmp/c2t_vocabXXXXXX", err[4096], out[96];
    REQUIRE(mkdtemp(dir), "mkdtemp");
    const char *files[] = {"config.json", "model.safetensors"};
    char *src = realpath("tests/ckpt/tiny_chat_eagle", NULL), *p;
    for (int i = 0; i < 2; i++) {
        char *a = path_join(src, files[i]), *b = path_join(dir, files[i]);
        REQUIRE(symlink(a, b) == 0, "symlink %s", b);
        free(a); free(b);
    }
    free(src);
    enum { V = 384 };
    int64_t counts[V];
    for (int i = 0; i < V; i++) counts[i] = i < 300 ? V - i : 0;   /* 300 ids seen */
    StWrite w = {"token_counts", DT_I64, 1, {V}, counts};
    p = path_join(dir, "token_counts.safetensors");
    REQUIRE(st_write(p, &w, 1) == 0, "%s", err_get());
    free(p);
    snprintf(out, sizeof out, "%s/run.json", dir);
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft %s --template none "
                     "--questions %s --max-new-tokens 120 --policy eagle2 --topk 4 --depth 3 --total 8 "
                     "--draft-vocab auto --check-lossless --quiet --json %s", bin_dir(), dir, qfile, out);
    REQUIRE(rc == 0, "--draft-vocab auto: exit %d: %s", rc, err);
    CHECK(strstr(err, "chosen from costs"), "no summary line: %s", err);
    cJSON *j = read_json_file(out);
    REQUIRE(j, "%s", err_get());
    const cJSON *va = cJSON_GetObjectItem(j, "draft_vocab_auto"), *c = cJSON_GetObjectItem(va, "candidates");
    const int nc = cJSON_GetArraySize(c);
    int ok = nc == 5;   /* 64, 128, 256, the 300 seen, then all 384 (explored) */
    const int want[] = {64, 128, 256, 300, V};
    for (int i = 0; ok && i < nc; i++) {
        const cJSON *x = cJSON_GetArrayItem(c, i);
        ok = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "vocab")) == want[i] &&
             cJSON_GetNumberValue(cJSON_GetObjectItem(x, "step_s")) > 0 &&
             cJSON_GetNumberValue(cJSON_GetObjectItem(x, "predicted_tokens_per_s")) > 0;
    }
    CHECK(ok && cJSON_GetNumberValue(cJSON_GetObjectItem(va, "explored")) == V,
          "candidates: %d, want 64 128 256 300 %d with times and rates, %d explored", nc, V, V);
    const double chosen = cJSON_GetNumberValue(cJSON_GetObjectItem(va, "chosen"));
    double drafted = 0;   /* every cycle but the turns' last ones drafted from some candidate */
    for (int i = 0; i < nc; i++) drafted += cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetArrayItem(c, i), "cycles"));
    CHECK((chosen == 64 || chosen == 128 || chosen == 256 || chosen == 300 || chosen == V) &&
              cJSON_GetNumberValue(cJSON_GetObjectItem(va, "choices")) >= 1 && drafted >= 64,
          "chosen %g after %g choices, %g cycles drafted", chosen, cJSON_GetNumberValue(cJSON_GetObjectItem(va, "choices")),
          drafted);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "settings"), "draft_vocab_auto")),
          "settings.draft_vocab_auto is not true");
    cJSON_Delete(j);
    unlink(out);
    /* a plain run sizes itself: every size not given, and the vocabulary auto for one sequence; not with sampling */
    const char *runs[][2] = {{"", "auto"}, {"--batch 2", "auto"}, {"--temperature 0.7 --no-baseline", "60"},
                             {"--total 12", "12"}};
    for (int k = 0; k < 4; k++) {
        rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft %s --template none "
                     "--questions %s --max-new-tokens 8 --policy eagle2 --topk 4 --depth 3 %s --quiet --json %s",
                     bin_dir(), dir, qfile, runs[k][0], out);
        REQUIRE(rc == 0, "plain run '%s': exit %d: %s", runs[k][0], rc, err);
        j = read_json_file(out);
        REQUIRE(j, "%s", err_get());
        const cJSON *set = cJSON_GetObjectItem(j, "settings"), *total = cJSON_GetObjectItem(set, "total");
        char got[32];
        if (cJSON_IsString(total)) snprintf(got, sizeof got, "%s", total->valuestring);
        else snprintf(got, sizeof got, "%g", cJSON_GetNumberValue(total));
        const int vocab_auto = cJSON_IsTrue(cJSON_GetObjectItem(set, "draft_vocab_auto"));
        CHECK(!strcmp(got, runs[k][1]) && vocab_auto == (k == 0 || k == 3),
              "plain run '%s': total %s (want %s), draft_vocab_auto %d", runs[k][0], got, runs[k][1], vocab_auto);
        cJSON_Delete(j);
        unlink(out);
    }
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft %s --template none "
                 "--questions %s --max-new-tokens 8 --policy eagle2 --draft-vocab auto --batch 2 --quiet",
                 bin_dir(), dir, qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "--draft-vocab auto is not available with --batch > 1");
    rc = run_cmd(err, sizeof err, "%s/spec-collect --target tests/ckpt/tiny_chat --draft %s --template none "
                 "--questions %s --max-new-tokens 8 --draft-vocab auto --out %s/t.h5", bin_dir(), dir, qfile, dir);
    CHECK_ONE_LINE_ERROR(rc, err, "--draft-vocab auto: a collection drafts from one vocabulary");
    const char *made[] = {"config.json", "model.safetensors", "token_counts.safetensors", "t.h5"};
    for (int i = 0; i < 4; i++) {
        p = path_join(dir, made[i]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

/* A plain run's arithmetic for a BF16 target: the tile multiply where the
 * CPU has AMX-BF16 and the run's products take many tokens (a speculative
 * policy, or several sequences), else llama.cpp's where the build has
 * AVX512-BF16 (plain ar at batch 1 among them), the KV cache in BF16 on
 * every build; a target of GGUF block types: its own products, the KV cache
 * in BF16; F32 for an F32 target, and never when an arithmetic option is
 * given or the run is not a plain one (here: walk verification); the report
 * records it. */
static void test_plain_arithmetic(void) {
    const int fast = backend_cpu_gemm_runs(CPU_GEMM_BF16), amx = backend_cpu_gemm_runs(CPU_GEMM_AMX);
    const char *tiles = amx ? "amx" : fast ? "on" : "off";
    const struct { const char *target, *extra; int auto_rule; const char *gemm, *kv; } runs[] = {
        {"data/demo/target", "--policy eagle2 --topk 4 --depth 3", 1, tiles, "bf16"},
        {"data/demo/target", "--policy ar", 1, fast ? "on" : "off", "bf16"},
        {"data/demo/target", "--policy ar --batch 2", 1, tiles, "bf16"},
        {"data/demo/target", "--policy eagle2 --topk 4 --depth 3 --kv-dtype f32", 0, "off", "f32"},
        {"data/demo/target", "--policy eagle2 --topk 4 --depth 3 --batch 2", 1, tiles, "bf16"},
        {"data/demo/target", "--policy eagle2 --topk 4 --depth 3 --verify walk", 0, "off", "f32"},
        {"tests/ckpt/qwen2_quant", "--policy eagle2 --topk 4 --depth 3", 1, "off", "bf16"},
        {"tests/ckpt/tiny_chat", "--policy eagle2 --topk 4 --depth 3", 1, "off", "f32"}};
    char err[4096], out[96];
    snprintf(out, sizeof out, "%s.arith.json", qfile);
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        const char *draft = strstr(runs[i].target, "demo")    ? "data/demo/eagle"
                            : strstr(runs[i].target, "qwen2") ? "tests/ckpt/qwen2_quant_bf16"
                                                              : "tests/ckpt/tiny_chat_eagle";
        int rc = run_cmd(err, sizeof err, "%s/spec-eval --target %s --draft %s --template none --questions %s "
                         "--max-new-tokens 8 --check-lossless %s --quiet --json %s",
                         bin_dir(), runs[i].target, draft, qfile, runs[i].extra, out);
        REQUIRE(rc == 0, "%s %s: exit %d: %s", runs[i].target, runs[i].extra, rc, err);
        cJSON *j = read_json_file(out);
        REQUIRE(j, "%s", err_get());
        const cJSON *s = cJSON_GetObjectItem(j, "settings");
        const char *gemm = cJSON_GetStringValue(cJSON_GetObjectItem(s, "cpu_fast_gemm")),
                   *kv = cJSON_GetStringValue(cJSON_GetObjectItem(s, "kv_dtype"));
        const int rule = cJSON_IsTrue(cJSON_GetObjectItem(s, "arithmetic_auto"));
        CHECK(rule == runs[i].auto_rule && gemm && kv && !strcmp(gemm, runs[i].gemm) && !strcmp(kv, runs[i].kv),
              "%s %s: arithmetic_auto %d, cpu_fast_gemm %s, kv_dtype %s; want %d %s %s", runs[i].target,
              runs[i].extra, rule, gemm ? gemm : "?", kv ? kv : "?", runs[i].auto_rule, runs[i].gemm, runs[i].kv);
        const char *isa = cJSON_GetStringValue(cJSON_GetObjectItem(s, "cpu_isa"));
        CHECK(isa && !strcmp(isa, backend_cpu_isa()), "%s %s: cpu_isa %s, the build's %s", runs[i].target,
              runs[i].extra, isa ? isa : "(absent)", backend_cpu_isa());
        const char *blas = cJSON_GetStringValue(cJSON_GetObjectItem(s, "cpu_blas"));
        CHECK(blas && !strcmp(blas, backend_cpu_blas()), "%s %s: cpu_blas %s, OpenBLAS's %s", runs[i].target,
              runs[i].extra, blas ? blas : "(absent)", backend_cpu_blas());
        /* where measured costs kept the trees tiny or drafting off, one
         * line says why: the arithmetic as recorded, and the tau a tree
         * would need; elsewhere no such line */
        const cJSON *cm = cJSON_GetObjectItem(j, "cost_model"), *tot = cJSON_GetObjectItem(j, "total");
        if (cm) {
            /* the share without a draft over every cycle, the switch's or not */
            const double mean = cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "chosen_mean")),
                         all = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "cycles")),
                         on = cJSON_GetNumberValue(cJSON_GetObjectItem(tot, "drafted_cycles")), off = all - on;
            CHECK(on >= 0 && on <= all, "%s %s: %.0f of %.0f cycles drafted", runs[i].target, runs[i].extra, on, all);
            const int little = mean < EVAL_TINY_TREE || off >= EVAL_MOSTLY_OFF * all;
            const char *why = strstr(err, "why so little drafting: arithmetic ");
            char arith[64];
            snprintf(arith, sizeof arith, "arithmetic %s", !strcmp(gemm, "amx") ? "amx" : !strcmp(gemm, "on") ? "bf16" : "f32");
            CHECK(little ? why && strstr(why, arith) && strstr(why, isa ? isa : "?") && strstr(why, "pays only at tau >= ")
                         : !why,
                  "%s %s: %.1f nodes a tree, %.0f of %.0f cycles without a draft, and the why line: %s", runs[i].target,
                  runs[i].extra, mean, off, all, why ? why : "(none)");
        }
        cJSON_Delete(j);
    }
    unlink(out);
}

/* The calibration cache of auto sizes: the first run measures its curve and
 * files it under its key (in $XDG_CACHE_HOME/c2t/cost.json by default), the
 * next reads it, a run in other arithmetic measures and files its own; a
 * file that is not a cost cache, or a malformed curve, is one line and left
 * as it was; --cost-cache none leaves no file. */
static char cache_home[] = "/tmp/c2t_cacheXXXXXX";

static cJSON *auto_run(const char *cache_opt, const char *extra, char *err, size_t n, int *rc) {
    char out[96];
    snprintf(out, sizeof out, "%s/run.json", cache_home);
    *rc = run_cmd(err, n, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle --template none "
                  "--questions %s --max-new-tokens 8 --policy eagle2 --topk 4 --depth 3 --total auto --quiet %s %s "
                  "--json %s", bin_dir(), qfile, cache_opt, extra, out);
    cJSON *j = *rc ? NULL : read_json_file(out);
    unlink(out);
    return j;
}

static void test_cost_cache(void) {
    char err[4096], path[96], other[96];
    snprintf(path, sizeof path, "%s/c2t/cost.json", cache_home);
    snprintf(other, sizeof other, "%s/other.json", cache_home);
    unlink(path);
    const char *how[3] = {"measured", "cache", "measured"}, *extra[3] = {"", "", "--kv-dtype bf16"};
    char first_key[1024] = "";
    for (int k = 0; k < 3; k++) {
        int rc;
        cJSON *j = auto_run("", extra[k], err, sizeof err, &rc);
        REQUIRE(j, "run %d: exit %d: %s", k, rc, err);
        const cJSON *cm = cJSON_GetObjectItem(j, "cost_model");
        const char *cal = cJSON_GetStringValue(cJSON_GetObjectItem(cm, "calibration")),
                   *file = cJSON_GetStringValue(cJSON_GetObjectItem(cm, "cache")),
                   *key = cJSON_GetStringValue(cJSON_GetObjectItem(cm, "cache_key"));
        CHECK(cal && !strcmp(cal, how[k]), "run %d: calibration %s, expected %s", k, cal ? cal : "(none)", how[k]);
        CHECK(file && !strcmp(file, path), "run %d: cache %s, expected the default %s", k, file ? file : "(none)", path);
        cJSON *c = read_json_file(path);
        REQUIRE(c, "the cache: %s", err_get());
        const cJSON *curves = cJSON_GetObjectItem(c, "curves"), *e;
        int has = 0;
        cJSON_ArrayForEach(e, curves) has += key && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "key")), key);
        CHECK(has == 1 && cJSON_GetArraySize(curves) == (k < 2 ? 1 : 2), "run %d: %d curves, %d under the run's key", k,
              cJSON_GetArraySize(curves), has);
        /* the one-row LM-head time travels with the curve (measured where the pool passes lazy_logits_nodes) */
        const double row = cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "row_s"));
        cJSON_ArrayForEach(e, curves) if (key && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "key")), key))
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "row_s")) == row &&
                      (cJSON_GetNumberValue(cJSON_GetObjectItem(cm, "lazy_nodes")) >= 8) && row > 0,
                  "run %d: row_s %g in the report, %g in the cache", k, row,
                  cJSON_GetNumberValue(cJSON_GetObjectItem(e, "row_s")));
        CHECK(!key || strstr(key, extra[k][0] ? "kv_dtype bf16" : "kv_dtype f32"), "run %d: the key lacks the arithmetic: %s",
              k, key ? key : "(none)");
        if (k == 0 && key) snprintf(first_key, sizeof first_key, "%s", key);
        /* a calibration is a one-time cost: the first turn's, left out of
         * the decode time speeds are measured by, as prefill is */
        const cJSON *b0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "benchmarks"), 0), *q, *t;
        double decode = 0, first_cal = -1;
        cJSON_ArrayForEach(q, cJSON_GetObjectItem(b0, "questions")) cJSON_ArrayForEach(t, cJSON_GetObjectItem(q, "turns")) {
            const double cal = cJSON_GetNumberValue(cJSON_GetObjectItem(t, "calibration_s"));
            if (first_cal < 0) first_cal = cal;
            else CHECK(cal == 0, "run %d: a later turn calibrated too (%g s)", k, cal);
            decode += cJSON_GetNumberValue(cJSON_GetObjectItem(t, "wall_s")) -
                      cJSON_GetNumberValue(cJSON_GetObjectItem(t, "prefill_s")) - cal;
        }
        const double total_decode = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(b0, "total"), "decode_s"));
        CHECK(first_cal > 0 && fabs(decode - total_decode) <= 1e-6 * (1 + total_decode),
              "run %d: first turn's calibration %g s; turns' decode %g s against the total's %g s", k, first_cal, decode,
              total_decode);
        cJSON_Delete(c);
        cJSON_Delete(j);
    }
    /* not a cost cache, a malformed curve: one line, the file untouched */
    char bad[3][1400];
    snprintf(bad[0], sizeof bad[0], "{\"colour\": \"blue\"}\n");
    snprintf(bad[1], sizeof bad[1], "{\"format\": \"c2t-cost-cache\", \"version\": 1, \"curves\": [{\"key\": \"%s\", "
             "\"verify_n\": [4, 2], \"verify_s\": [0.1, 0.2]}]}\n", first_key);
    snprintf(bad[2], sizeof bad[2], "{\"format\": \"c2t-cost-cache\", \"version\": 1, \"curves\": [{\"key\": \"%s\", "
             "\"verify_n\": [1, 2], \"verify_s\": [0.1, 0.2], \"row_s\": -0.01}]}\n", first_key);
    const char *says[3] = {"not a cost cache", "must ascend", "row_s must be"};
    for (int k = 0; k < 3; k++) {
        write_file(other, bad[k]);
        char opt[128];
        snprintf(opt, sizeof opt, "--cost-cache %s", other);
        int rc;
        cJSON *j = auto_run(opt, "", err, sizeof err, &rc);
        cJSON_Delete(j);
        CHECK_ONE_LINE_ERROR(rc, err, says[k]);
        CHECK(strstr(err, other) != NULL, "%s: the error does not name the file: %s", says[k], err);
        char *text = read_text_file(other, NULL);
        CHECK(text && !strcmp(text, bad[k]), "%s: the file was changed", says[k]);
        free(text);
    }
    /* a full cache drops its oldest curves: 40 written before, the newest 31 kept beside the run's */
    FILE *f = fopen(path, "w");
    REQUIRE(f, "%s: %s", path, strerror(errno));
    fprintf(f, "{\"format\": \"c2t-cost-cache\", \"version\": 1, \"curves\": [");
    for (int i = 0; i < 40; i++)
        fprintf(f, "%s{\"key\": \"old %d\", \"verify_n\": [1, 2], \"verify_s\": [0.1, 0.2]}", i ? ", " : "", i);
    fprintf(f, "]}\n");
    fclose(f);
    int rc;
    cJSON *j = auto_run("", "--kv-dtype bf16", err, sizeof err, &rc);
    REQUIRE(j, "a full cache: exit %d: %s", rc, err);
    cJSON_Delete(j);
    cJSON *c = read_json_file(path);
    REQUIRE(c, "the cache: %s", err_get());
    const cJSON *curves = cJSON_GetObjectItem(c, "curves");
    const char *first = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(curves, 0), "key")),
               *last = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(curves, COST_CACHE_CURVES - 1), "key"));
    CHECK(cJSON_GetArraySize(curves) == COST_CACHE_CURVES && first && !strcmp(first, "old 9") && last &&
          strstr(last, "kv_dtype bf16"), "a full cache: %d curves, first %s, last %s", cJSON_GetArraySize(curves),
          first ? first : "(none)", last ? last : "(none)");
    cJSON_Delete(c);
    j = auto_run("--cost-cache none", "", err, sizeof err, &rc);
    REQUIRE(j, "--cost-cache none: exit %d: %s", rc, err);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "cost_model"), "cache")), "--cost-cache none: a cache is reported");
    cJSON_Delete(j);
}

/* The guessed-template notice comes once, and only from a run that opened
 * its models: a failed run says its one error line and nothing else. */
static void test_template_notice_once_on_success(void) {
    char err[4096];
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --questions %s --max-new-tokens 4 "
                     "--policy eagle2 --draft /nonexistent --quiet", bin_dir(), qfile);
    CHECK_ONE_LINE_ERROR(rc, err, "/nonexistent");
    CHECK(!strstr(err, "template"), "a failed run speaks of the template: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --questions %s --max-new-tokens 4 "
                 "--policy ar --quiet", bin_dir(), qfile);
    REQUIRE(rc == 0, "spec-eval: %s", err);
    const char *first = strstr(err, "chat template");
    CHECK(first && !strstr(first + 1, "chat template"), "the notice should appear once: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --questions %s --max-new-tokens 4 "
                 "--policy ar --quiet --template none", bin_dir(), qfile);
    CHECK(rc == 0 && !strstr(err, "chat template"), "a chosen template is not announced: %d %s", rc, err);
}

/* A classifier records the target and draft whose traces trained it
 * (spec-train copies them from the traces); spec-eval refuses it for
 * another pair in one line naming both, unless --force; a file that does
 * not record them is used with a note. */
static void test_classifier_provenance(void) {
    char err[4096], dir[] = "/tmp/c2t_provXXXXXX", trace[160], cls[160], bad[160];
    REQUIRE(mkdtemp(dir), "mkdtemp");
    const char *run = "--template none --max-new-tokens 8 --policy c2t --no-baseline --quiet";
    /* the demo's classifier on another target and draft */
    int rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                     "--classifier data/demo/classifier.json --questions %s %s", bin_dir(), qfile, run);
    CHECK_ONE_LINE_ERROR(rc, err, "data/demo/classifier.json was trained for target data/demo/target");
    CHECK(strstr(err, "not for target tests/ckpt/tiny_chat") && strstr(err, "--force"), "names both pairs: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                 "--classifier data/demo/classifier.json --questions %s %s --force", bin_dir(), qfile, run);
    CHECK(rc == 0 && strstr(err, "--force: data/demo/classifier.json was trained for"), "--force: %d %s", rc, err);
    /* on its own pair: no word */
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --draft data/demo/eagle "
                 "--classifier data/demo/classifier.json --questions %s %s", bin_dir(), qfile, run);
    CHECK(rc == 0 && !strstr(err, "trained for"), "its own pair: %d %s", rc, err);
    /* a file that does not say: a note */
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                 "--classifier tests/golden/c2t_hand.json --questions %s %s", bin_dir(), qfile, run);
    CHECK(rc == 0 && strstr(err, "does not record the target and draft"), "no provenance: %d %s", rc, err);
    /* spec-train copies the pair from real traces */
    snprintf(trace, sizeof trace, "%s/t.h5", dir);
    snprintf(cls, sizeof cls, "%s/c.json", dir);
    rc = run_cmd(err, sizeof err, "%s/spec-collect --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                 "--template none --questions %s --max-new-tokens 24 --out %s --quiet", bin_dir(), qfile, trace);
    REQUIRE(rc == 0, "spec-collect: %s", err);
    rc = run_cmd(err, sizeof err, "%s/spec-train %s --out %s --quiet --epochs 20 --beta 0.05 --eval-frac 0.3", bin_dir(),
                 trace, cls);
    REQUIRE(rc == 0, "spec-train: %s", err);
    Classifier *c = classifier_load(cls);
    REQUIRE(c, "%s", err_get());
    CHECK(!strcmp(c->trained_for.target, "tests/ckpt/tiny_chat") && !strcmp(c->trained_for.draft, "tests/ckpt/tiny_chat_eagle") &&
          strlen(c->trained_for.target_config_hash) == 16 && strlen(c->trained_for.draft_weights_hash) == 16,
          "trained_for not copied from the trace: '%s' '%s'", c->trained_for.target, c->trained_for.draft);
    classifier_free(c);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target tests/ckpt/tiny_chat --draft tests/ckpt/tiny_chat_eagle "
                 "--classifier %s --questions %s %s", bin_dir(), cls, qfile, run);
    CHECK(rc == 0 && !strstr(err, "trained for"), "trained on this pair: %d %s", rc, err);
    rc = run_cmd(err, sizeof err, "%s/spec-eval --target data/demo/target --draft data/demo/eagle "
                 "--classifier %s --questions %s %s", bin_dir(), cls, qfile, run);
    CHECK_ONE_LINE_ERROR(rc, err, "was trained for target tests/ckpt/tiny_chat");
    /* a lying trained_for is refused at load */
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    char *text = read_text_file(cls, NULL);
    REQUIRE(text, "%s", err_get());
    char *h = strstr(text, "\"target_config_hash\"");
    REQUIRE(h && (h = strchr(h + 21, '"')), "no target_config_hash in %s", cls);
    h[1] = 'Z';
    write_file(bad, text);
    free(text);
    c = classifier_load(bad);
    CHECK(!c && strstr(err_get(), "trained_for.target_config_hash must be 16 hex digits"), "bad hash loaded: %s", err_get());
    classifier_free(c);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
}

/* Progress lines into a file: the unit is the label's last word, a line
 * is written when 10 s have passed (here: made to have passed), and the
 * end is not written again when the last line already said it. */
static void test_progress_lines(void) {
    char path[] = "/tmp/c2t_progressXXXXXX";
    const int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    Progress p;
    progress_start(&p, "reading traces (nodes)", 100);
    p.last -= 11;
    progress_update(&p, 100, "x");
    progress_end(&p, 100, "x");   /* said already */
    progress_start(&p, "spec-eval turns", 4);
    progress_update(&p, 1, NULL);  /* within 10 s: nothing */
    progress_end(&p, 4, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *t = read_text_file(path, NULL);
    unlink(path);
    REQUIRE(t, "no progress file");
    CHECK(count_lines(t) == 2, "want 2 lines (one per bar), got: %s", t);
    CHECK(strstr(t, "reading traces (nodes) 100/100  ") && strstr(t, " nodes/s "), "unit nodes/s: %s", t);
    CHECK(strstr(t, "spec-eval turns 4/4  ") && strstr(t, " turns/s ") && !strstr(t, "turns 1/4"), "turns: %s", t);
    free(t);
}

/* A synthetic timer: a machine whose speed halves over the run, the policy
 * truly 1.3x ar.  Pairs run in the order ab_ar_first gives (ABBA): the
 * median lands on 1.3 and its interval covers it.  The same pairs always
 * run policy first: every pair's second side runs on a slower machine, and
 * the interval excludes the truth — what alternating is for.  Identical
 * pairs give a zero-width interval; no pairs, no speedup. */
static double machine_speed(double t) { return 1.0 / (1.0 + t / 4000.0); }   /* work units per second */
static void synthetic_pairs(AbPair *p, int n, int alternate, double truth) {
    double t = 0;
    for (int i = 0; i < n; i++) {
        const double ar_work = 1.0, policy_work = 1.0 / truth;   /* per token: the policy does less */
        const int ar_first = alternate ? ab_ar_first(i) : 0;
        for (int side = 0; side < 2; side++) {
            const int is_ar = (side == 0) == (ar_first != 0);
            const double s = (is_ar ? ar_work : policy_work) * 100 / machine_speed(t);
            t += s;
            if (is_ar) { p[i].ar_s = s; p[i].ar_tokens = 100; }
            else { p[i].policy_s = s; p[i].policy_tokens = 100; }
        }
    }
}

static void test_speedup_ab_synthetic(void) {
    enum { N = 40 };
    AbPair p[N];
    synthetic_pairs(p, N, 1, 1.3);
    Speedup s = speedup_estimate(p, N);
    /* noise-free: every ABBA block gives the same ratio, off the truth only by
     * the drift's curvature within a block */
    CHECK(s.n == N && fabs(s.median - 1.3) < 0.005 && s.lo <= s.median && s.hi >= s.median,
          "ABBA: %.4f [%.4f, %.4f] over %d pairs, want within 0.005 of 1.3", s.median, s.lo, s.hi, s.n);
    synthetic_pairs(p, N, 0, 1.3);
    Speedup b = speedup_estimate(p, N);
    CHECK(b.hi < 1.3 || b.lo > 1.3, "policy always first: %.4f [%.4f, %.4f] should be biased off 1.3", b.median, b.lo, b.hi);
    printf("# truth 1.3 on a machine slowing 3x over the run: ABBA %.3f [%.3f, %.3f], policy always first %.3f [%.3f, %.3f]\n",
           s.median, s.lo, s.hi, b.median, b.lo, b.hi);
    for (int i = 0; i < N; i++) p[i] = (AbPair){2.0, 1.0, 100, 100};
    Speedup c = speedup_estimate(p, N);
    CHECK(c.median == 0.5 && c.lo == 0.5 && c.hi == 0.5 && !speedup_unstable(&c), "identical pairs: %g [%g, %g]",
          c.median, c.lo, c.hi);
    p[0] = (AbPair){0, 1.0, 100, 100};
    CHECK(speedup_estimate(p, 1).n == 0, "a pair without a time counts");
    CHECK(s.blocks == N / 2 && !speedup_few_blocks(&s, NULL), "%d pairs: %d blocks, enough", N, s.blocks);
    double most;
    Speedup f = speedup_estimate(p, 10);
    CHECK(f.blocks == 5 && speedup_few_blocks(&f, &most) && fabs(most - 0.9375) < 1e-12,
          "10 pairs: %d blocks, at most %g covered", f.blocks, most);
    Speedup e = speedup_estimate(p, 11);
    CHECK(e.blocks == 6 && !speedup_few_blocks(&e, &most) && fabs(most - (1 - 2 / 64.0)) < 1e-12,
          "11 pairs: %d blocks (the odd pair alone), covered with %g", e.blocks, most);
    Speedup w = {10, 1.0, 0.85, 1.02, 5, 0.9375};
    CHECK(speedup_unstable(&w), "an interval reaching 15%% below is unstable");
    /* whichever side runs second is 8% faster (warm caches), with noise:
     * the ABBA blocks cancel it; the median of single pairs lands on either
     * biased side */
    Rng rng;
    rng_seed(&rng, 77);
    double pr[N];
    for (int i = 0; i < N; i++) {
        const double noise = 1 + 0.01 * (rng_uniform(&rng) - 0.5), second = 1 / 1.08;
        const int ar_first = ab_ar_first(i);
        p[i] = (AbPair){(ar_first ? second : 1.0) / 1.1 * noise, ar_first ? 1.0 : second, 100, 100};
        pr[i] = 1.1 * (ar_first ? 1.08 : 1 / 1.08) / noise;
    }
    Speedup o = speedup_estimate(p, N);
    double single = 0;
    for (int i = 0; i < N; i++) single += pr[i] > 1.1 ? 1 : 0;   /* half the pairs above the truth, half below */
    CHECK(o.n == N && fabs(o.median - 1.1) < 0.01 && o.lo <= 1.1 && o.hi >= 1.1 && o.hi - o.lo < 0.02,
          "order effect: %.4f [%.4f, %.4f], want 1.1 inside a narrow interval (%g of %d single pairs above 1.1)",
          o.median, o.lo, o.hi, single, N);
}

/* The interval's stated coverage holds: runs of blocks whose ratios have a
 * skewed distribution with median 1 (exp(0.05 (E - ln 2)), E exponential),
 * 4,000 runs at each size; their intervals cover 1 as often as the level
 * says, and at least 95% of the time from SPEEDUP_MIN_BLOCKS blocks.  (A
 * percentile bootstrap of the median covered 92-94% here.)  The rank
 * itself against the binomial's table: 10 blocks give the 2nd smallest and
 * largest (97.9%), 20 the 6th (95.9%). */
static void test_speedup_interval_coverage(void) {
    double level;
    CHECK(speedup_sign_rank(10, 0.95, &level) == 2 && fabs(level - (1 - 2 * 11 / 1024.0)) < 1e-12,
          "10 blocks: rank %d, level %g", speedup_sign_rank(10, 0.95, NULL), level);
    CHECK(speedup_sign_rank(20, 0.95, &level) == 6 && fabs(level - (1 - 2 * 21700 / 1048576.0)) < 1e-12,
          "20 blocks: rank %d, level %g", speedup_sign_rank(20, 0.95, NULL), level);
    CHECK(speedup_sign_rank(1, 0.95, &level) == 1 && level == 0, "1 block: the value itself, no coverage");
    CHECK(speedup_sign_rank(5000, 0.95, &level) > 2400 && level >= 0.95 && level < 0.96,
          "5000 blocks: rank %d (no underflow)", speedup_sign_rank(5000, 0.95, NULL));
    enum { RUNS = 4000, MAXB = 40 };
    const int sizes[] = {4, 6, 10, 20, 40};
    Rng rng;
    rng_seed(&rng, 2024);
    AbPair p[2 * MAXB];
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        const int nb = sizes[z];
        int covered = 0;
        Speedup s = {0};
        for (int run = 0; run < RUNS; run++) {
            for (int b = 0; b < nb; b++) {
                const double r = exp(0.05 * (-log(1 - rng_uniform(&rng)) - log(2.0)));
                p[2 * b] = p[2 * b + 1] = (AbPair){1.0 / r, 1.0, 100, 100};
            }
            s = speedup_estimate(p, 2 * nb);
            covered += s.lo <= 1 && s.hi >= 1;
        }
        const double seen = (double)covered / RUNS;
        CHECK(s.blocks == nb && fabs(seen - s.level) < 0.015 && (nb < SPEEDUP_MIN_BLOCKS || seen >= 0.945),
              "%d blocks: covered %.4f of %d runs, stated %.4f", nb, seen, RUNS, s.level);
        printf("# %d blocks: the interval covered the median in %.1f%% of %d runs (stated %.1f%%)\n", nb, 100 * seen,
               RUNS, 100 * s.level);
    }
}

int main(void) {
    int fd = mkstemp(qfile);
    close(fd);
    /* auto sizes' calibration cache goes to a directory of this run's, not the user's */
    if (!mkdtemp(cache_home)) { perror("mkdtemp"); return 1; }
    setenv("XDG_CACHE_HOME", cache_home, 1);
    write_file(qfile, "{\"question_id\": 1, \"category\": \"t\", \"turns\": [\"static int x = 1;\", \"int main(void) {\"]}\n"
                      "{\"question_id\": \"b2\", \"category\": \"t\", \"turns\": [\"const char *name\"]}\n");
    RUN(test_usage_errors_worded_alike);
    RUN(test_template_notice_once_on_success);
    RUN(test_progress_lines);
    RUN(test_speedup_ab_synthetic);
    RUN(test_speedup_interval_coverage);
    RUN(test_repeats);
    RUN(test_total_auto);
    RUN(test_cost_cache);
    RUN(test_draft_vocab_auto);
    RUN(test_plain_arithmetic);
    RUN(test_classifier_provenance);
    RUN(test_lossless_every_policy);
    RUN(test_lossless_demo_family);
    RUN(test_json_report);
    RUN(test_batched_decoding);
    RUN(test_batched_cycle);
    RUN(test_arithmetic_options_lossless);
    RUN(test_no_template_is_plain_text);
    RUN(test_bad_input);
    RUN(test_first_hour_messages);
    RUN(test_sampling_runs_and_is_seeded);
    RUN(test_device_option);
    RUN(test_draft_temperature);
    RUN(test_generate_with_draft);
    RUN(test_generate_prompt_file);
    RUN(test_generate_chat);
    RUN(test_chat_keeps_prefix);
    unlink(qfile);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", cache_home);
    if (system(rm)) {}
    return h_done();
}
