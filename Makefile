# Makefile for specdec, a single-file C reference implementation of
# speculative decoding. Needs GNU make and a C11 compiler.
#
#   make          build ./specdec (the lesson), ./beyond (what the papers add) and the tools
#   make run      build ./specdec, fetch the corpus if needed, then run the demo
#   make test     build everything and run the quick tier of the tests: every proof a reader
#                 relies on, release builds only (test/run_tests.sh; under 3 minutes)
#   make check    build everything and run the whole suite, as .ci/run does: the quick tier and
#                 the sanitizer builds, the planted bugs, fuzzing, valgrind (about 14 minutes)
#   make train    retrain tinyshakespeare/model.bin (tinyshakespeare/train.c)
#   make train-draft  retrain tinyshakespeare/draft.bin, the GPT draft, distilled from model.bin
#   make train-medusa retrain tinyshakespeare/medusa.bin, Medusa heads on the frozen model.bin
#   make train-exit   retrain tinyshakespeare/exit.bin, the early exit after block 1 of model.bin
#   make train-eagle  retrain tinyshakespeare/eagle.bin, the EAGLE-3 draft on model.bin's rows
#   make bench    the speed of both decoders on the shipped model and padded to 34 MB
#                 (test/bench.c, notes/speed.md; about 2 minutes)
#   make bench-full  the same, and the sweep on to 136 MB, where speculation pays; writes
#                 notes/speed.svg (about 8 minutes)
#   make explain  one accept/reject decision worked out exactly (test/explain.c)
#   make picture  redraw notes/round1.svg, the demo's round 1 as a picture (test/picture.c)
#   make early-exit  alpha of the target's own early exits as drafts, beside the GPT draft
#                 (test/early_exit.c, notes/speed.md)
#   make drafts-table  every draft side by side on one command (alpha, tokens per verify pass,
#                 passes, cost per guess, time against plain), at 0.84 and 136 MB of weights
#                 (test/drafts_table.sh, notes/speed.md; about 8 minutes)
#   make valgrind the demo under valgrind memcheck

# Default compiler gcc; override with `make CC=clang` or CC in the environment.
# (A plain `CC ?= gcc` would never apply: make predefines CC as cc.)
ifeq ($(origin CC),default)
CC = gcc
endif
# No fast-math flags of any kind and no FMA contraction by the compiler
# (-ffp-contract=off), so the sum computed for one token never depends on how many
# tokens share a forward pass: verifying k drafted tokens at once must give
# bit-identical logits to running them one by one. -march=native lets the compiler
# use this machine's widest vector instructions for the plain C loops; it changes no
# sum's order, only how many independent sums run at once. (The trainer's backward
# kernel fuses its multiply-adds itself, with fmaf.)
CFLAGS = -std=c11 -O3 -march=native -Wall -Wextra -ffp-contract=off
DEBUG_CFLAGS = -std=c11 -O0 -g3 -ffp-contract=off -fsanitize=address,undefined -fno-omit-frame-pointer -Wall -Wextra
LDLIBS = -lm
# Directory that may already hold a verified tinyshakespeare/input.txt.
SHARED ?= ../shared
CORPUS = tinyshakespeare/input.txt

CORPUS_URL = https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
CORPUS_SIZE = 1115394
CORPUS_SHA256 = 86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed

.PHONY: all debug data run test check train train-draft train-medusa train-exit train-eagle clean valgrind fuzz bench bench-full explain picture early-exit drafts-table

# The tools beside the lesson: each includes specdec.c or beyond.c whole.
TOOLS = tinyshakespeare/train test/bench test/explain test/picture test/ffn_forms test/early_exit

# Build the release binaries ./specdec and ./beyond, and the tools (default target).
all: specdec beyond $(TOOLS)

# Compile ./specdec from specdec.c with the release flags.
specdec: specdec.c
	$(CC) $(CFLAGS) -o $@ specdec.c $(LDFLAGS) $(LDLIBS)

# Compile ./beyond from beyond.c, which includes specdec.c.
beyond: beyond.c specdec.c
	$(CC) $(CFLAGS) -o $@ beyond.c $(LDFLAGS) $(LDLIBS)

# The trainer, the bench, explain, picture, ffn_forms and early_exit: one C file each, with
# specdec.c (explain, picture) or beyond.c (the others, which need what it adds) included.
tinyshakespeare/train: tinyshakespeare/train.c beyond.c specdec.c
	$(CC) $(CFLAGS) -o $@ tinyshakespeare/train.c $(LDFLAGS) $(LDLIBS)
test/bench: test/bench.c beyond.c specdec.c
	$(CC) $(CFLAGS) -o $@ test/bench.c $(LDFLAGS) $(LDLIBS)
test/explain: test/explain.c specdec.c
	$(CC) $(CFLAGS) -o $@ test/explain.c $(LDFLAGS) $(LDLIBS)
test/picture: test/picture.c specdec.c
	$(CC) $(CFLAGS) -o $@ test/picture.c $(LDFLAGS) $(LDLIBS)
test/ffn_forms: test/ffn_forms.c test/bench.c beyond.c specdec.c
	$(CC) $(CFLAGS) -o $@ test/ffn_forms.c $(LDFLAGS) $(LDLIBS)
test/early_exit: test/early_exit.c beyond.c specdec.c
	$(CC) $(CFLAGS) -o $@ test/early_exit.c $(LDFLAGS) $(LDLIBS)

# Build ./specdec_debug and ./beyond_debug with AddressSanitizer and UBSan, no optimisation.
debug: specdec_debug beyond_debug

# Compile ./specdec_debug from specdec.c with the debug/sanitizer flags.
specdec_debug: specdec.c
	$(CC) $(DEBUG_CFLAGS) -o $@ specdec.c $(LDFLAGS) $(LDLIBS)

# Build ./beyond_debug the same way: step through a draft's round (break exit_verify,
# eagle_rows, cascade_round, ...) with every function where the source puts it.
beyond_debug: beyond.c specdec.c
	$(CC) $(DEBUG_CFLAGS) -o $@ beyond.c $(LDFLAGS) $(LDLIBS)

# Shell script run by `make data`. It checks an existing corpus by size and
# sha256; if there is none, it copies $(SHARED)/$(CORPUS) or downloads the
# char-rnn copy into a temporary file, checks that, and only then renames it
# to $(CORPUS). Every failure is one line on stderr. (Shell variables are
# written $$name because make expands this text before the shell sees it.)
define FETCH_CORPUS
dest='$(CORPUS)'
shared='$(SHARED)/$(CORPUS)'
fix="fix: place the canonical tinyshakespeare input.txt ($(CORPUS_SIZE) bytes, sha256 $(CORPUS_SHA256)) at $$dest"
die() { echo "make data: $$*; $$fix" >&2; exit 1; }

# check FILE WHAT: fail unless FILE has the expected size and sha256.
check() {
    size=$$(wc -c < "$$1" | tr -d ' ')
    [ "$$size" = '$(CORPUS_SIZE)' ] ||
        die "$$2 has wrong size $$size bytes (expected $(CORPUS_SIZE))"
    if command -v sha256sum >/dev/null 2>&1; then
        sum=$$(sha256sum "$$1" | cut -d' ' -f1)
    elif command -v shasum >/dev/null 2>&1; then
        sum=$$(shasum -a 256 "$$1" | cut -d' ' -f1)
    else
        die "cannot verify $$2: neither sha256sum nor shasum is installed"
    fi
    [ "$$sum" = '$(CORPUS_SHA256)' ] ||
        die "$$2 has wrong sha256 $$sum (expected $(CORPUS_SHA256))"
}

if [ -e "$$dest" ]; then
    fix="fix: delete $$dest and run make data again, or put the canonical file ($(CORPUS_SIZE) bytes, sha256 $(CORPUS_SHA256)) there"
    check "$$dest" "existing $$dest"
    echo "$$dest: ok ($(CORPUS_SIZE) bytes, sha256 verified)"
    exit 0
fi

mkdir -p "$$(dirname "$$dest")" || die "cannot create directory for $$dest"
tmp="$$dest.tmp.$$$$"
trap 'rm -f "$$tmp"' EXIT
trap 'exit 1' HUP INT TERM

if [ -f "$$shared" ]; then
    what="$$shared"
    cat "$$shared" > "$$tmp" || die "copying $$shared failed"
elif command -v curl >/dev/null 2>&1; then
    what='download of $(CORPUS_URL)'
    err=$$(curl -fsSL --connect-timeout 30 -o "$$tmp" '$(CORPUS_URL)' 2>&1) ||
        die "$$shared not found and curl could not download $(CORPUS_URL) ($$(echo "$$err" | head -n 1))"
elif command -v wget >/dev/null 2>&1; then
    what='download of $(CORPUS_URL)'
    wget -q -T 30 -t 2 -O "$$tmp" '$(CORPUS_URL)' ||
        die "$$shared not found and wget could not download $(CORPUS_URL) (no network?)"
else
    die "$$shared not found and neither curl nor wget is installed to download $(CORPUS_URL)"
fi

check "$$tmp" "$$what"
mv -f "$$tmp" "$$dest" || die "cannot rename $$tmp to $$dest"
echo "$$dest: installed from $$what (size and sha256 verified)"
endef
export FETCH_CORPUS

# Make sure tinyshakespeare/input.txt exists and is the verified corpus.
data:
	@sh -c "$$FETCH_CORPUS"

# Build ./specdec alone, fetch the corpus, then run the demo: a traced decode and a comparison.
run: specdec data
	./specdec --trace -n 10 -s 277 -p "To be or not to be, "
	./specdec --compare -t 0 -n 200

# Train the target with the lecture's recipe and write tinyshakespeare/model.bin
# (about 3.5 minutes on one core; see notes/training.md).
train: tinyshakespeare/train data
	@echo "make train: retrains the model and replaces tinyshakespeare/model.bin, the shipped one, at steps 500, 1000, ... and on Ctrl-C (git checkout tinyshakespeare/model.bin restores it)"
	tinyshakespeare/train -o tinyshakespeare/model.bin

# Train the draft that ./specdec --draft gpt loads: 1 layer, 4 heads, 64 wide (60,353
# parameters), distilled from the shipped target (--teacher: it learns model.bin's whole
# next-character distribution), and write tinyshakespeare/draft.bin (notes/training.md,
# "The draft"). A distillation cannot be resumed: a Ctrl-C leaves the last checkpoint.
train-draft: tinyshakespeare/train data
	@echo "make train-draft: retrains the draft and replaces tinyshakespeare/draft.bin, the shipped one, at steps 500, 1000, ... and on Ctrl-C (git checkout tinyshakespeare/draft.bin restores it)"
	tinyshakespeare/train --layers 1 --heads 4 --embd 64 --teacher tinyshakespeare/model.bin -o tinyshakespeare/draft.bin

# Train 4 Medusa heads on the shipped target, which stays frozen: each head reads the
# target's last hidden row and guesses 2, 3, 4 or 5 tokens ahead (notes/training.md,
# "Medusa heads"). Writes tinyshakespeare/medusa.bin at the end only: a Ctrl-C writes nothing.
train-medusa: tinyshakespeare/train data
	@echo "make train-medusa: retrains the Medusa heads and replaces tinyshakespeare/medusa.bin, the shipped one, at the end (git checkout tinyshakespeare/medusa.bin restores it)"
	tinyshakespeare/train medusa --heads 4 -m tinyshakespeare/model.bin -o tinyshakespeare/medusa.bin

# Train the early exit after block 1 of the shipped target, which stays frozen: a LayerNorm
# and a Linear(C, V) of its own, distilled from the target's own rows (notes/training.md,
# "The trained early exit"). Writes tinyshakespeare/exit.bin at the end only.
train-exit: tinyshakespeare/train data
	@echo "make train-exit: retrains the exit and replaces tinyshakespeare/exit.bin, the shipped one, at the end (git checkout tinyshakespeare/exit.bin restores it)"
	tinyshakespeare/train exit --layer 1 -m tinyshakespeare/model.bin -o tinyshakespeare/exit.bin

# Train the EAGLE-3 draft on the shipped target's rows: a Linear (3C -> C) fuses the residual
# rows after blocks 1, 2 and 4, then a Linear (2C -> C) and one block, read out by the target's
# own frozen ln_f and lm_head, trained on its own guesses unrolled 3 deep with the
# cross-entropy alone (notes/training.md, "EAGLE-3": it passed more often than EAGLE's, which
# `tinyshakespeare/train eagle` without --eagle3 still trains). Writes tinyshakespeare/eagle.bin
# at the end only (about 4 minutes on a quiet core).
train-eagle: tinyshakespeare/train data
	@echo "make train-eagle: retrains the EAGLE-3 draft and replaces tinyshakespeare/eagle.bin, the shipped one, at the end (git checkout tinyshakespeare/eagle.bin restores it)"
	tinyshakespeare/train eagle --eagle3 --taps 1,2 --steps 3 --iters 6000 -m tinyshakespeare/model.bin -o tinyshakespeare/eagle.bin

# `make test` or `make check` alone builds its prerequisites on every core: each is one
# compile of a few seconds (11 s instead of 22 on two cores, a newcomer's wait). The tests
# get no jobserver of make's (MAKEFLAGS= below): run_tests.sh runs its own TEST_JOBS.
ifeq ($(words $(MAKECMDGOALS)),1)
ifneq ($(filter test check,$(MAKECMDGOALS)),)
MAKEFLAGS += -j$(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
endif
endif

# Build release and debug binaries, fetch the corpus, run the quick tier of the tests (the
# units test/run_tests.sh lists in QUICK_UNITS; notes/testing.md says which and why).
test: all debug data
	CC="$(CC)" TEST_TIER=quick MAKEFLAGS= bash test/run_tests.sh

# The same builds, then every test: the full tier (.ci/run runs this).
check: all debug data
	CC="$(CC)" TEST_TIER=full MAKEFLAGS= bash test/run_tests.sh

# Measure speed: c(T), the K sweep beside both speedup models, --draft-p-min, trees, then the
# same model padded with zeros from 0.84 to 34.1 MB of weights against this machine's
# bandwidth limit (notes/speed.md); each headline figure beside its ./beyond command, which
# the bench runs too (so it needs ./beyond).
bench: beyond test/bench data
	test/bench

# The same, with the sweep on to 136 MB (the GPT draft's crossover, the targets, the trees'
# wall time there) and its chart written to notes/speed.svg.
bench-full: beyond test/bench data
	test/bench --full --svg notes/speed.svg

# Nain's A/B/C/D example: the exact chance of each token beside 200,000 real rounds.
explain: test/explain
	test/explain

# Redraw the demo's round 1 (notes/round1.svg, which README.md shows); test/picture_test.sh
# fails when the committed picture differs from what this draws.
picture: test/picture data
	test/picture -n 10 -s 277 -p "To be or not to be, " -o notes/round1.svg

# alpha and greedy agreement of the exit after each of the target's blocks (its first l blocks,
# then ln_f and lm_head), of the GPT draft and of the bigram, over the validation split (~10 s).
early-exit: test/early_exit data
	test/early_exit

# Every draft on one command: ./beyond --compare -t 1 -n 400 -k 4 on the default prompt, the
# median of seeds 1, 2, 3, on the shipped model and at --ffn-width 65536; prints the machine,
# the date, the commit and each command, then one markdown table (a draft whose trained file
# is missing gets a row saying so). About 8 minutes on 2 cores, nearly all at 136 MB.
drafts-table: beyond data
	bash test/drafts_table.sh

# Run the demo's two commands under valgrind memcheck (0 errors, 0 leaks required),
# on a build for x86-64-v3, since valgrind 3.19 cannot decode AVX-512.
valgrind: data
	bash test/valgrind_test.sh

# Replay the fuzz regressions, then fuzz each libFuzzer target FUZZ_SECONDS s (needs clang).
FUZZ_SECONDS = 300
fuzz:
	bash test/fuzz_test.sh $(FUZZ_SECONDS)

# Remove build outputs and temp files (keeps the corpus and model.bin).
clean:
	rm -f specdec specdec_debug beyond $(TOOLS) *.o vgcore.* core
	rm -rf test/build
	rm -f tinyshakespeare/*.tmp*
