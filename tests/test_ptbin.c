/* PyTorch pytorch_model.bin read natively (infer/model/ptbin.c,
 * torch_pickle.c): files written by torch.save (tools/golden/ptbin_golden.py)
 * give the same bytes as their safetensors twins, a .bin EAGLE head decodes as
 * its safetensors original does, and every hostile file (foreign globals,
 * damaged zips, views past their storage, the legacy format) is one line
 * naming the file and the problem, never a crash. */
#include "tests/harness.h"
#include "infer/model/safetensors.h"
#include "infer/model/torch_pickle.h"
#include "infer/speculative/decode.h"
#include "infer/session/observers.h"
#include "kernels/base/util.h"
#include <sys/stat.h>

#define G "tests/golden/ptbin/"

/* Both checkpoints hold the same names with the same dtype, shape and bytes. */
static void same_tensors(const char *bin, const char *safetensors) {
    SafeTensors *a = st_open(bin), *b = st_open(safetensors);
    CHECK(a, "%s", err_get());
    CHECK(b, "%s", err_get());
    if (a && b) {
        CHECK(a->ntensors == b->ntensors, "%s: %d tensors, %s has %d", bin, a->ntensors, safetensors, b->ntensors);
        for (int i = 0; i < b->ntensors; i++) {
            const StTensor *y = &b->tensors[i], *x = st_find(a, y->name);
            CHECK(x, "%s: no tensor %s", bin, y->name);
            if (!x) continue;
            CHECK(!strcmp(x->dtype_name, y->dtype_name) && x->dtype == y->dtype, "%s: dtype %s vs %s", y->name,
                  x->dtype_name, y->dtype_name);
            CHECK(x->ndim == y->ndim && !memcmp(x->shape, y->shape, sizeof(int64_t) * y->ndim), "%s: shape differs", y->name);
            CHECK(x->nbytes == y->nbytes && !memcmp(x->data, y->data, y->nbytes), "%s: bytes differ", y->name);
        }
    }
    st_close(a);
    st_close(b);
}

/* The published EAGLE-1 layout: fc.*, layers.0.*, an fp32 embed_tokens */
static void test_eagle1_head_equals_safetensors(void) {
    same_tensors(G "eagle1_head.bin", G "eagle1_head.safetensors");
    SafeTensors *st = st_open(G "eagle1_head.bin");
    REQUIRE(st, "%s", err_get());
    CHECK(st_get(st, "fc.weight", 8, 16) && st_get(st, "fc.bias", 8, 0) && st_get(st, "embed_tokens.weight", 32, 8) &&
              st_get(st, "layers.0.self_attn.q_proj.weight", 8, 8),
          "%s", err_get());
    st_close(st);
}

/* shared storages, storage offsets, an nn.Parameter, F16, BF16, a 0-dim view */
static void test_views_equal_safetensors(void) {
    same_tensors(G "views.bin", G "views.safetensors");
    SafeTensors *st = st_open(G "views.bin");
    REQUIRE(st, "%s", err_get());
    const StTensor *whole = st_find(st, "whole"), *slice = st_find(st, "slice"), *rows = st_find(st, "rows");
    REQUIRE(whole && slice && rows, "views missing");
    CHECK((const char *)slice->data == (const char *)whole->data + 5 * 4, "slice is not a view at offset 5");
    CHECK((const char *)rows->data == (const char *)whole->data + 8 * 4, "rows is not a view at offset 8");
    CHECK(!strcmp(st_find(st, "param")->dtype_name, "F16") && !strcmp(st_find(st, "bf_tail")->dtype_name, "BF16"),
          "F16 / BF16 dtypes");
    st_close(st);
}

static void test_sharded_index(void) {
    same_tensors(G "sharded", G "sharded.safetensors");
    same_tensors(G "sharded/pytorch_model.bin.index.json", G "sharded.safetensors");
    SafeTensors *st = st_open(G "sharded");
    REQUIRE(st, "%s", err_get());
    CHECK(st->nfiles == 2, "%d files", st->nfiles);
    const StTensor *c = st_find(st, "c");
    CHECK(c && strstr(st_file_of(st, c), "pytorch_model-00002-of-00002.bin"), "tensor c is not from the second shard");
    st_close(st);
}

static char tmp[] = "/tmp/c2t_ptbinXXXXXX";

static void put(const char *from, const char *name) {
    char *to = path_join(tmp, name);
    CHECK(copy_file(from, to) == 0, "cannot copy %s to %s", from, to);
    free(to);
}

static void drop(const char *name) {
    char *p = path_join(tmp, name);
    unlink(p);
    free(p);
}

/* a folder with both formats loads the safetensors one; with only .bin, the .bin */
static void test_safetensors_preferred(void) {
    put(G "eagle1_head.safetensors", "model.safetensors");
    put(G "views.bin", "pytorch_model.bin");
    SafeTensors *st = st_open(tmp);
    REQUIRE(st, "%s", err_get());
    CHECK(st_find(st, "fc.weight") && !st_find(st, "whole"), "picked pytorch_model.bin over model.safetensors");
    st_close(st);
    drop("model.safetensors");
    st = st_open(tmp);
    REQUIRE(st, "%s", err_get());
    CHECK(st_find(st, "whole") != NULL, "pytorch_model.bin alone not loaded");
    st_close(st);
    drop("pytorch_model.bin");
    CHECK(st_open(tmp) == NULL && strstr(err_get(), "pytorch_model.bin"), "empty folder: %s", err_get());
}

/* F64 is read (as safetensors reads it) and refused where a weight is asked for */
static void test_f64_refused_as_weight(void) {
    SafeTensors *st = st_open(G "f64.bin");
    REQUIRE(st, "%s", err_get());
    CHECK(st_get(st, "w", 4, 0) == NULL && strstr(err_get(), "F64") && strstr(err_get(), "f64.bin"), "%s", err_get());
    st_close(st);
}

static const struct { const char *file, *needle; } hostile[] = {
    {"transposed.bin", "tensor t is not contiguous"},
    {"os_system.bin", "pickle imports posix.system; refusing"},
    {"eval.bin", "pickle imports builtins.eval; refusing"},
    {"truncated.bin", "not a readable zip archive"},
    {"bad_crc.bin", "CRC error"},
    {"past_storage.bin", "tensor too_long: elements [0, 8) run past the end of storage 0"},
    {"past_offset.bin", "tensor off_end: elements [3, 5) run past the end"},
    {"legacy.bin", "legacy (non-zip) torch file"},
    {"big_endian.bin", "not little-endian"},
};

/* Each hostile file: through the library, one line naming the file and the
 * problem; through a command that loads it as a model, the same line and a
 * clean exit. */
static void test_hostile_files(void) {
    put("tests/ckpt/llama2_f32/config.json", "config.json");
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        char path[256];
        snprintf(path, sizeof path, G "%s", hostile[i].file);
        SafeTensors *st = st_open(path);
        CHECK(st == NULL, "%s loaded", path);
        st_close(st);
        const char *e = err_get();
        CHECK(strstr(e, path) && strstr(e, hostile[i].needle) && !strchr(e, '\n'), "%s: %s", path, e);
        put(path, "pytorch_model.bin");
        char err[2048];
        int rc = run_cmd(err, sizeof err, "%s/spec-generate --target %s --ids 1,2 --max-new-tokens 2", bin_dir(), tmp);
        CHECK_ONE_LINE_ERROR(rc, err, hostile[i].needle);
    }
    drop("pytorch_model.bin");
    drop("config.json");
}

/* A pickle as torch writes it for {"w": FloatStorage "0" of 4, offset 1, size [2]} */
static const uint8_t small_pkl[] =
    "\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01(X\x01\x00\x00\x00w"
    "ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
    "X\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x04tQK\x01K\x02\x85K\x01\x85\x89h\x00)RtRu}b.";

static void test_pickle_directly(void) {
    TpStateDict sd;
    size_t n = sizeof small_pkl - 1;
    REQUIRE(tp_parse("x.pkl", small_pkl, n, &sd) == 0, "%s", err_get());
    CHECK(sd.ntensors == 1 && sd.nstorages == 1 && !strcmp(sd.tensors[0].name, "w") && sd.tensors[0].offset == 1 &&
              sd.tensors[0].ndim == 1 && sd.tensors[0].shape[0] == 2 && sd.storages[0].numel == 4 &&
              !strcmp(sd.storages[0].dtype_name, "F32"),
          "parsed wrong");
    tp_free(&sd);
    /* every truncation fails cleanly */
    for (size_t k = 0; k < n; k++) {
        uint8_t *b = xmalloc(k + 1);
        memcpy(b, small_pkl, k);
        CHECK(tp_parse("x.pkl", b, k, &sd) != 0 && strstr(err_get(), "x.pkl: "), "prefix of %zu bytes accepted", k);
        free(b);
    }
#define PKL(s) (const uint8_t *)s, sizeof s - 1
    struct { const uint8_t *pkl; size_t n; const char *needle; } bad[] = {
        {PKL("\x80\x02h\x05."), "memo 5, never stored"},
        {PKL("\x80\x02X\xff\xff\xff\x7f" "abc"), "past the end of the pickle"},
        {PKL("\x80\x02\x8a\x09" "123456789."), "integer of 9 bytes"},
        {PKL("\x80\x02s."), "stack underflow"},
        {PKL("\x80\x02)\x81."), "opcode 0x81"},
        {PKL("\x80\x02}K\x01."), "top object"},
        {PKL("\x80\x02}X\x01\x00\x00\x00" "aK\x01s."), "entry a is not a tensor"},
        {PKL("\x80\x02" "cposix\nsys\x01tem\n)R."), "posix.sys?tem"},
        {PKL("\x80\x02" "ctorch\nFloatStorage\n)R."), "not a call a state dict makes"},
        {PKL("\x80\x02t."), "no MARK"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(tp_parse("x.pkl", bad[i].pkl, bad[i].n, &sd) != 0 && strstr(err_get(), bad[i].needle),
              "case %zu: %s", i, err_get());
    }
}

static int decode(const LlamaModel *target, Draft *d, int *out, DecodeStats *st) {
    PolicyParams prm;
    policy_params_default(&prm);
    snprintf(prm.name, sizeof prm.name, "eagle2");
    policy_params_set(&prm, "topk", "4");
    policy_params_set(&prm, "depth", "4");
    policy_params_set(&prm, "total", "16");
    Policy *p = policy_new(&prm);
    if (!p) return -1;
    SampleParams sp = {0};
    int prompt[8] = {1, 21, 208, 255, 244, 151, 37, 9};
    Decoder *dec = decoder_new(target, d, p, 8 + 40 + policy_max_nodes(p) + 8, sp);
    if (dec && p->wants_cost) decoder_watch_costs(dec);
    int n = dec ? decoder_run(dec, prompt, 8, 40, out, st) : -1;
    decoder_free(dec);
    policy_free(p);
    return n;
}

enum { K = 10 };

/* The head's top-K under the root after a prefill of the prompt. */
static int root_topk(const LlamaModel *m, Draft *d, int *top, float *p) {
    int ids[8] = {1, 21, 208, 255, 244, 151, 37, 9}, pos[8] = {0, 1, 2, 3, 4, 5, 6, 7}, next, root = 0;
    LlamaState *s = llama_state_new(m, 8);
    int rc = llama_forward(s, ids, pos, 8, NULL, LOGITS_LAST);
    if (!rc) {
        cpu_backend.argmax(s->logits, 1, m->cfg.vocab, &next);
        rc = draft_catch_up(d, ids, s->hidden, 8, next);
    }
    Tree t;
    tree_init(&t);
    tree_reset(&t, rc ? 0 : next);
    float ent;
    if (!rc) rc = draft_expand(d, &t, &root, 1, K, 0, top, p, &ent);
    tree_free(&t);
    llama_state_free(s);
    return rc;
}

/* tests/ckpt/eagle_tiny as a folder holding only pytorch_model.bin: same
 * weights, the same root distribution to the bit, and decoding with the same
 * drafts (γ, cycles) and tokens */
static void test_bin_head_decodes_like_safetensors(void) {
    same_tensors(G "eagle_tiny/pytorch_model.bin", "tests/ckpt/eagle_tiny/model.safetensors");
    LlamaModel *m = llama_load("tests/ckpt/llama3_f32", &cpu_backend);
    REQUIRE(m, "%s", err_get());
    const char *dirs[2] = {"tests/ckpt/eagle_tiny", G "eagle_tiny"};
    int out[2][64], n[2], top[2][K];
    float p[2][K];
    DecodeStats st[2];
    for (int i = 0; i < 2; i++) {
        Draft *d = draft_load("eagle", dirs[i], m, 256);
        REQUIRE(d, "%s", err_get());
        REQUIRE(root_topk(m, d, top[i], p[i]) == 0, "%s: %s", dirs[i], err_get());
        draft_free(d);
        d = draft_load("eagle", dirs[i], m, 256);
        REQUIRE(d, "%s", err_get());
        n[i] = decode(m, d, out[i], &st[i]);
        draft_free(d);
        REQUIRE(n[i] > 0, "%s: %s", dirs[i], err_get());
    }
    CHECK(!memcmp(top[0], top[1], sizeof top[0]) && !memcmp(p[0], p[1], sizeof p[0]), "root top-%d differs", K);
    CHECK(n[0] == n[1] && !memcmp(out[0], out[1], sizeof(int) * n[0]), "tokens differ");
    CHECK(st[0].cycles == st[1].cycles && st[0].gamma == st[1].gamma, "cycles %lld/%lld gamma %lld/%lld", (long long)st[0].cycles,
          (long long)st[1].cycles, (long long)st[0].gamma, (long long)st[1].gamma);
    printf("# .bin EAGLE head: %d tokens in %lld cycles, gamma %lld (safetensors: %lld cycles, gamma %lld)\n", n[1],
           (long long)st[1].cycles, (long long)st[1].gamma, (long long)st[0].cycles, (long long)st[0].gamma);
    llama_free(m);
}

int main(void) {
    if (!mkdtemp(tmp)) { perror("mkdtemp"); return 1; }
    RUN(test_eagle1_head_equals_safetensors);
    RUN(test_views_equal_safetensors);
    RUN(test_sharded_index);
    RUN(test_safetensors_preferred);
    RUN(test_f64_refused_as_weight);
    RUN(test_hostile_files);
    RUN(test_pickle_directly);
    RUN(test_bin_head_decodes_like_safetensors);
    rmdir(tmp);
    return h_done();
}
