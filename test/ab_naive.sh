#!/usr/bin/env bash
# What going from tuned kernels to textbook loops cost, measured in one binary.
#
#   bash test/ab_naive.sh [REV]     # REV: the tuned version, default 491b1f0
#
# REV is the last commit before specdec.c became the lesson: register-tiled matmuls,
# keys cached by feature, 64-byte alignment. This script takes its specdec.c from git
# history, and this checkout's specdec.c, beyond.c and trainer, and links both into one
# program: each is compiled with a small shim (ab_setup, ab_forward, ab_decode, ab_train,
# written to each version's API: AB_NAIVE marks this checkout's) and every other symbol is
# made local with objcopy, so the two never meet. Both decoders are specdec.c's: its plain
# generate and its bigram speculative_generate. The program then
# alternates the two versions call by call and reports medians, so a machine that speeds
# up or slows down meanwhile moves both sides alike:
#   - one forward over T = 1, 2, 5 new tokens (12 cached) and T = 16 (a refill);
#   - tokens/s of plain and speculative (K = 4) decoding, t = 1 and t = 0, 2,000 tokens
#     of the blog's prompt, seeds 1..15;
#   - one training step (16 windows of 32 tokens: forward, backward, AdamW).
# Both load tinyshakespeare/model.bin. The tuned version scaled attention by C^-0.5; its
# copy here is given head_size^-0.5, so both compute the same function (their sums run
# in different orders, so a rare token may still differ).
# Not part of make test: it measures, it does not check. notes/speed.md quotes it.

set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REV=${1:-491b1f0}
CC=${CC:-gcc}
FLAGS=(-std=c11 -O3 -march=native -ffp-contract=off -w)
T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_ab.XXXXXX")
trap 'rm -rf "$T"' EXIT
make -s data

# the tuned version scaled attention by C^-0.5; give it head_size^-0.5, as this one has,
# so both compute the same function and the texts (and the acceptance) agree
git show "$REV:specdec.c" | sed 's|float scale = 1.0f / sqrtf((float)C);|float scale = 1.0f / sqrtf((float)HS);|' >"$T/tuned.c"
grep -q 'sqrtf((float)HS)' "$T/tuned.c" || { echo "ab: could not set the tuned version's attention scale" >&2; exit 1; }
cp specdec.c beyond.c "$T/"
sed 's|#define BEYOND_C "../beyond.c"|#define BEYOND_C "beyond.c"|' tinyshakespeare/train.c >"$T/naive.c"
grep -q '#define BEYOND_C "beyond.c"' "$T/naive.c" || { echo "ab: could not point the trainer at its beyond.c" >&2; exit 1; }

# The shim: the same four functions over either version (they share the names of the
# model, the decoders and the training pass; where this checkout's API differs, AB_NAIVE).
cat >"$T/shim.h" <<'EOF'
static GPT G; static Vocab Vb; static Corpus Cp; static BigramDraft D; static SpecBuffers SB;
static TrainState TS; static TrainProgress TP;
int ab_setup(const char *model, const char *corpus) {
    char err[512];
    memset(&G, 0, sizeof G);
    if (load_checkpoint(model, &G, &Vb, err, sizeof err) || load_corpus(&Cp, corpus, &Vb, err, sizeof err)) {
        fprintf(stderr, "ab: %s\n", err);
        return -1;
    }
    BigramDraftModel(&D, Cp.tokens, Cp.n_train, Vb.size);
    return build_spec_buffers(&SB, 8, Vb.size);
}
double ab_forward(int kv, int T, int reps) {
    int tok[32];
    for (int i = 0; i < 32; i++) tok[i] = (i * 7 + 3) % Vb.size;
    double t0 = now_seconds();
#ifdef AB_NAIVE
    for (int r = 0; r < reps; r++) { G.state.cache_len = kv; forward(&G, tok, T); }
#else
    for (int r = 0; r < reps; r++) { G.state.kv_len = kv; forward(&G, tok, T); }
#endif
    return (now_seconds() - t0) / reps;
}
double ab_decode(int spec, int K, float t, int n, unsigned long long seed) {
    const char *ps = "To be or not to be, that is the ";
    int np = (int)strlen(ps), prompt[64], *seq = malloc((size_t)(np + n) * sizeof(int));
    float p[256];
    encode(&Vb, (const unsigned char *)ps, (size_t)np, prompt);
    Stats st; memset(&st, 0, sizeof st);
    Rng r; rng_seed(&r, seed);
#ifdef AB_NAIVE
    DecodeOptions o = {.max_new_tokens = n, .K = K, .temperature = t, .vocab = &Vb, .rng = &r, .st = &st};
    if (spec) speculative_generate(&G, &D, &SB, &(Tokens){prompt, np}, &o, seq);
    else generate(&G, &(Tokens){prompt, np}, &o, seq, p);
#else
    DecodeOptions o = {.temperature = t, .K = K, .vocab = &Vb};
    if (spec) speculative_generate(&G, &D, &SB, prompt, np, n, &o, &r, seq, &st);
    else generate(&G, prompt, np, n, &o, &r, seq, p, &st);
#endif
    free(seq);
    return st.seconds;
}
double ab_train(int steps) {
    static int built = 0;
    if (!built) { build_train_state(&TS, &G.config, 16); build_train_progress(&TP, G.n_params, 16, 1); built = 1; }
    int in[16 * 32], tg[16 * 32];
    double t0 = now_seconds();
    for (int i = 0; i < steps; i++) {
        get_batch(&Cp, 16, 32, &TP.rng, in, tg);
        train_forward(&G, &TS, in, tg);
        train_backward(&G, &TS, in, tg);
        adamw_update(&TP.opt, G.params, TS.grads, G.n_params);
    }
    return (now_seconds() - t0) / steps;
}
EOF
for v in tuned naive; do
    naive=$([[ $v == naive ]] && echo '#define AB_NAIVE' || true)
    printf '#define TESTING\n%s\n#include "%s.c"\n#include "shim.h"\n' "$naive" "$v" >"$T/shim_$v.c"
    (cd "$T" && "$CC" "${FLAGS[@]}" -c "shim_$v.c" -o "$v.o")
    syms=()
    for f in ab_setup ab_forward ab_decode ab_train; do syms+=(--redefine-sym "$f=${v}_$f"); done
    objcopy "${syms[@]}" "$T/$v.o" "$T/${v}_r.o"
    objcopy -G "${v}_ab_setup" -G "${v}_ab_forward" -G "${v}_ab_decode" -G "${v}_ab_train" \
        "$T/${v}_r.o" "$T/${v}_l.o"
done

cat >"$T/ab.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#define DECL(v) int v##_ab_setup(const char *, const char *); double v##_ab_forward(int, int, int); \
    double v##_ab_decode(int, int, float, int, unsigned long long); double v##_ab_train(int);
DECL(tuned)
DECL(naive)
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double med(double *x, int n) { qsort(x, n, sizeof(double), cmp); return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2; }
int main(void) {
    const char *m = "tinyshakespeare/model.bin", *c = "tinyshakespeare/input.txt";
    if (tuned_ab_setup(m, c) || naive_ab_setup(m, c)) return 1;
    enum { R = 15 };
    double a[R], b[R], q[R];
    int Ts[] = {1, 2, 5, 16};
    printf("one forward pass, medians of %d alternated timings:\n", R);
    for (int i = 0; i < 4; i++) {
        int T = Ts[i], kv = T == 16 ? 0 : 12;
        for (int r = 0; r < R; r++) {
            a[r] = tuned_ab_forward(kv, T, 2000 / T);
            b[r] = naive_ab_forward(kv, T, 2000 / T);
            q[r] = b[r] / a[r];
        }
        printf("  T = %2d (%2d cached)  tuned %7.1f us  naive %7.1f us  naive/tuned %.2f\n", T, kv,
               1e6 * med(a, R), 1e6 * med(b, R), med(q, R));
    }
    struct { int spec, K; float t; const char *what; } cfg[] = {
        {0, 1, 1.0f, "plain, t = 1      "}, {1, 4, 1.0f, "K = 4, t = 1      "},
        {0, 1, 0.0f, "plain, t = 0      "}, {1, 4, 0.0f, "K = 4, t = 0      "}};
    printf("tokens/s, 2,000 tokens of the blog's prompt, seeds 1..%d alternated, medians:\n", R);
    for (int i = 0; i < 4; i++) {
        for (int r = 0; r < R; r++) {
            a[r] = 2000 / tuned_ab_decode(cfg[i].spec, cfg[i].K, cfg[i].t, 2000, r + 1);
            b[r] = 2000 / naive_ab_decode(cfg[i].spec, cfg[i].K, cfg[i].t, 2000, r + 1);
            q[r] = b[r] / a[r];
        }
        printf("  %s tuned %6.0f  naive %6.0f  naive/tuned %.2f\n", cfg[i].what, med(a, R),
               med(b, R), med(q, R));
    }
    enum { RT = 7 };
    for (int r = 0; r < RT; r++) { a[r] = tuned_ab_train(20); b[r] = naive_ab_train(20); q[r] = b[r] / a[r]; }
    printf("one training step (16 x 32 tokens), medians of %d x 20 steps alternated:\n"
           "  tuned %.1f ms  naive %.1f ms  naive/tuned %.2f\n", RT, 1e3 * med(a, RT),
           1e3 * med(b, RT), med(q, RT));
    return 0;
}
EOF
"$CC" "${FLAGS[@]}" "$T/ab.c" "$T/tuned_l.o" "$T/naive_l.o" -lm -o "$T/ab"
"$T/ab"
