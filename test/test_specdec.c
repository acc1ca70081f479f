/*
 * test/test_specdec.c: unit tests of specdec.c, the core (the blog's lesson).
 *
 * specdec.c is included whole with TESTING defined (its main is left out), so
 * every function, static or not, can be called directly. Each check prints one
 * line, "PASS ..." or "FAIL ...", with the numbers it measured; the program exits
 * 1 if any check failed. Expected values are computed here, independently of the
 * code under test: parameter counts from the lecture's module list, bigram counts
 * from the raw bytes, logits from a naive double-precision forward, speculative
 * statistics from the test's own driver loop, and so on.
 *
 * Run from the repository root (test/run_tests.sh does) with the corpus at
 * tinyshakespeare/input.txt (make data).
 *
 * The file included is tinyshakespeare/train.c, which includes beyond.c (and so specdec.c)
 * whole and adds the checkpoint writer (save_checkpoint) that the checkpoint tests
 * round-trip through; with TESTING defined, no main but this file's is compiled. Only
 * specdec.c's functions are under test here: what beyond.c adds (the served distribution,
 * the other drafts, trees, the folded refill, colours, --draft-p-min, --ffn-width, and the
 * model draft's cache with its broken builds) is tested in test/test_beyond.c.
 */
#define TESTING
#include "../tinyshakespeare/train.c"

#include <dirent.h>
#include <stdarg.h>

#define CORPUS_PATH "tinyshakespeare/input.txt"
#define CORPUS_BYTES 1115394 // the canonical file's size (Makefile: CORPUS_SIZE)
#define U_BELOW_1 0x1.fffffffffffffp-1 // the largest double below 1

#include "check.h"

// ----------------------------------------------------------------------------
// Small helpers

// Inputs shared by the tests: the corpus, its vocabulary, the default random model
// (init seed 1337, as the CLI uses) and the Tiny Shakespeare bigram draft (draft.bigram).
typedef struct {
    Corpus corpus;
    Vocab vocab;
    GPT model;
    BigramDraft draft;
} Fixture;

static int contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

// Largest |a[i] - b[i]| over n floats.
static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

// Empties the KV cache: cache_len 0 and every cached key and value zeroed (both caches
// are (L, S, C)).
static void reset_cache(GPT *g) {
    size_t n = (size_t)g->config.n_layer * g->config.block_size * g->config.n_embd;
    memset(g->state.key_cache, 0, n * sizeof(float));
    memset(g->state.value_cache, 0, n * sizeof(float));
    g->state.cache_len = 0;
}

// Reads a whole file with stdio (not specdec's read_file); NULL on failure.
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    *n = len;
    return buf;
}

// Writes n bytes to path; 0 on success.
static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

// Encodes a C string with the vocabulary; returns its length, or -1 if a byte is missing.
static int encode_str(const Vocab *v, const char *s, int *out) {
    size_t n = strlen(s);
    return encode(v, (const unsigned char *)s, n, out) >= 0 ? -1 : (int)n;
}

// Index of the largest entry, lowest on ties: the test's own argmax.
static int ref_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// Writes a row that is 1 at index i and 0 elsewhere.
static void set_one_hot(float *row, int n, int i) {
    for (int j = 0; j < n; j++) row[j] = 0.0f;
    row[i] = 1.0f;
}

// Gives every LayerNorm a random weight and bias, so that swapping ln1/ln2/ln_f or a
// weight with its bias changes the output (the default init makes them all 1 and 0).
static void perturb_layernorms(GPT *g, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    size_t LC = (size_t)g->config.n_layer * g->config.n_embd, C = g->config.n_embd;
    for (size_t i = 0; i < LC; i++) {
        g->w.ln1_weight[i] = (float)(1.0 + 0.3 * rng_normal(&r));
        g->w.ln1_bias[i] = (float)(0.3 * rng_normal(&r));
        g->w.ln2_weight[i] = (float)(1.0 + 0.3 * rng_normal(&r));
        g->w.ln2_bias[i] = (float)(0.3 * rng_normal(&r));
    }
    for (size_t i = 0; i < C; i++) {
        g->w.ln_f_weight[i] = (float)(1.0 + 0.3 * rng_normal(&r));
        g->w.ln_f_bias[i] = (float)(0.3 * rng_normal(&r));
    }
}

// ----------------------------------------------------------------------------
// 1. Parameter count

// The lecture's parameter count, module by module (independent of weight_sizes).
static size_t lecture_param_count(const Config *c) {
    size_t L = c->n_layer, NH = c->n_head, C = c->n_embd, S = c->block_size;
    size_t V = c->vocab_size, HS = C / NH;
    size_t layernorm = 2 * C;                     // nn.LayerNorm(C): weight and bias
    size_t heads = NH * 3 * (C * HS);             // per head key, query, value: Linear(C, HS, bias=False)
    size_t proj = C * C + C;                      // Linear(C, C)
    size_t ffwd = (C * 4 * C + 4 * C) + (4 * C * C + C); // Linear(C, 4C), Linear(4C, C)
    size_t block = layernorm + heads + proj + layernorm + ffwd;
    return L * block + V * C + S * C + layernorm + (C * V + V); // + embeddings, ln_f, lm_head
}

// weight_sizes and build_gpt count the lecture's parameters, for the default config
// (209,729, the number the blog quotes) and an odd one that catches swapped sizes.
static void test_param_count(void) {
    Config configs[2] = {{4, 4, 64, 32, 65, 256}, {2, 2, 6, 5, 7, 24}};
    for (int i = 0; i < 2; i++) {
        const Config *c = &configs[i];
        size_t expect = lecture_param_count(c), sizes[N_TENSORS], sum = 0;
        size_t total = weight_sizes(c, sizes);
        for (int t = 0; t < N_TENSORS; t++) sum += sizes[t];
        GPT g;
        int built = build_gpt(&g, c) == 0;
        size_t np = built ? g.n_params : 0;
        // the last tensor (lm_head bias, V floats) must end exactly at the end of the block
        int ends = built && g.w.lm_head_bias + c->vocab_size == g.params + g.n_params &&
                   g.w.token_embedding == g.params;
        int ok = total == expect && sum == expect && np == expect && ends &&
                 (i != 0 || expect == 209729);
        check(ok, "parameter count L=%d NH=%d C=%d S=%d V=%d: lecture modules %zu, "
              "weight_sizes %zu (sum of tensors %zu), build_gpt n_params %zu, layout spans "
              "the block: %s", c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab_size,
              expect, total, sum, np, ends ? "yes" : "no");
        free_gpt(&g); // also safe on a half-built GPT
    }
}

// ----------------------------------------------------------------------------
// 2. Tokenizer and corpus

// load_corpus builds the 65-char vocabulary (sorted distinct bytes), encode/decode
// round-trip every byte, and the split is the lecture's int(0.9 * N).
static void test_tokenizer_corpus(const Fixture *fx) {
    const Corpus *c = &fx->corpus;
    const Vocab *v = &fx->vocab;
    size_t n = 0;
    unsigned char *raw = slurp(CORPUS_PATH, &n);
    if (!check(raw != NULL, "read %s independently with stdio (%zu bytes)", CORPUS_PATH, n))
        return;
    check(n == CORPUS_BYTES && c->n == n, "corpus size: load_corpus %zu bytes, stdio %zu, "
          "expected %d", c->n, n, CORPUS_BYTES);
    // the distinct bytes, counted here
    int seen[256] = {0}, distinct = 0;
    for (size_t i = 0; i < n; i++) seen[raw[i]] = 1;
    for (int b = 0; b < 256; b++) distinct += seen[b];
    int ascending = 1, consistent = 1, members = 0;
    for (int i = 1; i < v->size; i++) ascending &= v->chars[i] > v->chars[i - 1];
    for (int i = 0; i < v->size; i++) consistent &= v->id[v->chars[i]] == i;
    for (int b = 0; b < 256; b++) {
        if (v->id[b] >= 0) members++;
        consistent &= (v->id[b] >= 0) == (seen[b] == 1);
        if (v->id[b] >= 0) consistent &= v->id[b] < v->size && v->chars[v->id[b]] == b;
    }
    check(v->size == 65 && distinct == 65 && ascending && consistent && members == 65,
          "vocabulary: %d tokens (distinct bytes counted here: %d), chars strictly ascending: "
          "%s, id[] consistent with chars[] for all 256 bytes: %s", v->size, distinct,
          ascending ? "yes" : "no", consistent ? "yes" : "no");
    // encode afresh, decode every token, compare with the bytes read by stdio
    int *toks = malloc(n * sizeof(int));
    unsigned char *back = malloc(n);
    long bad = toks ? encode(v, raw, n, toks) : 0;
    size_t mismatch = 0, tok_mismatch = 0;
    if (toks && back && bad < 0) {
        for (size_t i = 0; i < n; i++) back[i] = decode(v, toks[i]);
        for (size_t i = 0; i < n; i++) mismatch += back[i] != raw[i];
        for (size_t i = 0; i < n && i < c->n; i++) tok_mismatch += toks[i] != c->tokens[i];
    }
    check(toks && back && bad < 0 && mismatch == 0 && tok_mismatch == 0,
          "decode(encode(corpus)) == corpus for all %zu bytes (encode returned %ld, %zu bytes "
          "differ, %zu tokens differ from load_corpus's)", n, bad, mismatch, tok_mismatch);
    free(toks);
    free(back);
    size_t want_train = (size_t)(0.9 * (double)n), want_val = n - want_train;
    size_t n_val = c->n - c->n_train; // the validation split: what is left after n_train
    check(c->n_train == want_train && c->n_train == 1003854 && n_val == want_val &&
          n_val == 111540, "train/val split: n_train %zu (int(0.9*%zu) = %zu), n_val %zu "
          "(expected %zu)", c->n_train, n, want_train, n_val, want_val);
    free(raw);
}

// ----------------------------------------------------------------------------
// 3. Bigram draft

// The Laplace bigram table: rows are distributions with no zero, and a few cells
// equal (count + 1) / (row total + V) with counts taken from the raw train bytes.
static void test_bigram(const Fixture *fx) {
    const BigramDraft *d = &fx->draft;
    const Vocab *v = &fx->vocab;
    int V = d->V;
    double worst = 0.0;
    float min_entry = 1.0f;
    for (int a = 0; a < V; a++) {
        double s = 0.0;
        for (int b = 0; b < V; b++) {
            float p = d->probs[(size_t)a * V + b];
            s += p;
            if (p < min_entry || p != p) min_entry = p;
        }
        if (fabs(s - 1.0) > worst) worst = fabs(s - 1.0);
    }
    check(V == v->size && worst < 1e-5, "bigram rows sum to 1 (V=%d, max |sum-1| = %.2g)", V,
          worst);
    check(min_entry > 0.0f, "bigram entries all > 0 (smallest %.3g)", (double)min_entry);
    // cells checked against counts of the raw train bytes
    size_t n = 0;
    unsigned char *raw = slurp(CORPUS_PATH, &n);
    if (!raw) { check(0, "cannot read %s for the bigram counts", CORPUS_PATH); return; }
    size_t n_train = (size_t)(0.9 * (double)n);
    const char *pairs[] = {"th", "e ", "\n\n", "qu", "zz"};
    for (int k = 0; k < 5; k++) {
        unsigned char a = (unsigned char)pairs[k][0], b = (unsigned char)pairs[k][1];
        size_t count = 0, rowtotal = 0;
        for (size_t i = 0; i + 1 < n_train; i++) {
            if (raw[i] != a) continue;
            rowtotal++;
            count += raw[i + 1] == b;
        }
        double want = ((double)count + 1.0) / ((double)rowtotal + V);
        int ia = v->id[a], ib = v->id[b];
        double got = (ia >= 0 && ib >= 0) ? d->probs[(size_t)ia * V + ib] : -1.0;
        char va[8], vb[8];
        visible_char(va, a);
        visible_char(vb, b);
        check(fabs(got - want) < 1e-6, "bigram P(%s -> %s): %zu of %zu train pairs, "
              "(count+1)/(total+V) = %.9f, table %.9f (diff %.2g)", va, vb, count, rowtotal,
              want, got, fabs(got - want));
    }
    // every cell, against all pair counts of the raw train bytes
    size_t *pair = calloc(256 * 256, sizeof(size_t)), row[256] = {0};
    for (size_t i = 0; i + 1 < n_train; i++) {
        pair[raw[i] * 256 + raw[i + 1]]++;
        row[raw[i]]++;
    }
    double worst_cell = 0.0;
    for (int a = 0; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            if (v->id[a] < 0 || v->id[b] < 0) continue;
            double want = ((double)pair[a * 256 + b] + 1.0) / ((double)row[a] + V);
            double d_ab = fabs(d->probs[(size_t)v->id[a] * V + v->id[b]] - want);
            if (d_ab > worst_cell || d_ab != d_ab) worst_cell = d_ab;
        }
    }
    check(worst_cell < 1e-6, "bigram table == (count+1)/(row total+V) from the raw train bytes "
          "in all %d cells (max |diff| = %.2g)", V * V, worst_cell);
    free(pair);
    free(raw);
}

// ----------------------------------------------------------------------------
// 4. Forward against an independent reference

#include "reference.h"

// One comparison: forward() from an empty cache vs the reference, all T rows.
static void compare_with_reference(GPT *g, const int *tok, int T, const char *label) {
    int V = g->config.vocab_size;
    double *ref = malloc((size_t)T * V * sizeof(double));
    ref_forward(g, tok, T, ref);
    reset_cache(g);
    const float *got = forward(g, tok, T);
    double worst = 0.0, biggest = 0.0;
    for (size_t i = 0; i < (size_t)T * V; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (d > worst || d != d) worst = d;
        if (fabs(ref[i]) > biggest) biggest = fabs(ref[i]);
    }
    check(worst < 1e-4 && g->state.cache_len == T, "forward == double reference, %s, T=%d: "
          "max |diff| = %.2g over %d logits (largest |logit| %.2f), cache_len %d", label, T,
          worst, T * V, biggest, g->state.cache_len);
    free(ref);
}

// forward() computes the lecture architecture: compared with a naive double-precision
// reference on the default config and on a tiny odd config that exposes shape mix-ups.
static void test_forward_reference(const Fixture *fx) {
    Config c = {4, 4, 64, 32, fx->vocab.size, 256};
    GPT g;
    if (!check(build_gpt(&g, &c) == 0, "build a default-config model for the reference test")) {
        free_gpt(&g);
        return;
    }
    init_gpt_random(&g, 2024);
    perturb_layernorms(&g, 77);
    int Ts[3] = {1, 7, 32};
    for (int i = 0; i < 3; i++)
        compare_with_reference(&g, fx->corpus.tokens + 5000, Ts[i], "default config");
    free_gpt(&g);

    Config odd = {2, 2, 6, 5, 7, 24};
    if (!check(build_gpt(&g, &odd) == 0, "build the odd-config model")) {
        free_gpt(&g);
        return;
    }
    init_gpt_random(&g, 5);
    perturb_layernorms(&g, 6);
    int tok[5];
    Rng r;
    rng_seed(&r, 11);
    for (int t = 0; t < 5; t++) tok[t] = (int)(rng_u64(&r) % 7);
    compare_with_reference(&g, tok, 5, "L=2 NH=2 C=6 S=5 V=7");
    compare_with_reference(&g, tok, 3, "L=2 NH=2 C=6 S=5 V=7");
    free_gpt(&g);
}

// ----------------------------------------------------------------------------
// 4b. Attention, and the layout of the KV cache

// Causal attention in double, the test's own: for the T query rows q (T, C) of tokens at
// positions pos0 .., against keys and values stored by position (S, C). Writes the
// outputs (T, C) and the weights (NH, T, S), zero past each token's own position.
static void ref_attention(double *out, double *w, const float *q, const float *keys,
                          const float *vals, int T, int pos0, int C, int NH, int S) {
    int HS = C / NH;
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            int n = pos0 + t + 1;
            double *a = w + ((size_t)h * T + t) * S, m = -INFINITY, z = 0.0;
            for (int s = 0; s < S; s++) a[s] = 0.0;
            for (int s = 0; s < n; s++) {
                double d = 0.0;
                for (int i = 0; i < HS; i++)
                    d += (double)q[(size_t)t * C + h * HS + i] * keys[(size_t)s * C + h * HS + i];
                a[s] = d / sqrt((double)HS); // head_size ** -0.5
                if (a[s] > m) m = a[s];
            }
            for (int s = 0; s < n; s++) z += (a[s] = exp(a[s] - m));
            for (int s = 0; s < n; s++) a[s] /= z;
            for (int i = 0; i < HS; i++) {
                double acc = 0.0;
                for (int s = 0; s < n; s++) acc += a[s] * vals[(size_t)s * C + h * HS + i];
                out[(size_t)t * C + h * HS + i] = acc;
            }
        }
}

// attention() on a causal mask, with the given buffers: dims = {T, pos0, C, NH, S}.
static void causal_attention(float *out, float *att, const float *q, float *kc, float *vc,
                             const int *dims) {
    int T = dims[0], pos0 = dims[1], S = dims[4];
    Config c = {1, dims[3], dims[2], S, 1, 1};
    BlockActs a = {.q = (float *)q, .att = att, .att_out = out, .keys = kc,
                   .values = vc};
    attention(&c, &a, T, pos0);
}

// attention() over a cache of keys and values by position equals a straightforward
// recomputation in double (scores scaled by 1/sqrt(head_size), softmax over positions
// 0 .. pos0+t, the weighted sum of the values): outputs and weights, with the weights
// past each token's position exactly 0. Cache rows past the pass hold NaN, so reading
// one shows; and each token's outputs are bit-identical to a one-token call at its
// position (a token's numbers do not depend on the rest of its pass). Shapes: the
// blog's, wide heads, and odd ones (HS 3, S 5).
static void test_attention(void) {
    const int shapes[][3] = {{64, 4, 32}, {80, 4, 20}, {6, 2, 5}, {512, 8, 40}}; // C, NH, S
    for (int k = 0; k < 4; k++) {
        int C = shapes[k][0], NH = shapes[k][1], S = shapes[k][2], HS = C / NH;
        size_t SC = (size_t)S * C, NSS = (size_t)NH * S * S;
        float *q = malloc(SC * sizeof(float)), *keys = malloc(SC * sizeof(float));
        float *vals = malloc(SC * sizeof(float)), *out = malloc(SC * sizeof(float));
        float *one = malloc((size_t)C * sizeof(float)), *att = malloc(NSS * sizeof(float));
        float *att1 = malloc(NSS * sizeof(float));
        double *ref = malloc(SC * sizeof(double)), *w = malloc(NSS * sizeof(double));
        Rng r;
        rng_seed(&r, 100 + k);
        for (size_t i = 0; i < SC; i++) {
            q[i] = (float)rng_normal(&r);
            keys[i] = (float)(2.0 * rng_normal(&r)); // scores of a few units: a sharp softmax
            vals[i] = (float)rng_normal(&r);
        }
        // (T, pos0): one token at the end of the cache, a verify pass mid-way, a prefill
        int cases[3][2] = {{1, S - 1}, {S > 12 ? 5 : 2, S > 12 ? 7 : 1}, {S, 0}};
        double worst_out = 0.0, worst_w = 0.0;
        size_t masked_bad = 0, alone_differ = 0, compared = 0;
        for (int c = 0; c < 3; c++) {
            int T = cases[c][0], pos0 = cases[c][1], end = pos0 + T;
            // rows past the pass are not in the cache yet: poison them
            float *kc = malloc(SC * sizeof(float)), *vc = malloc(SC * sizeof(float));
            memcpy(kc, keys, SC * sizeof(float));
            memcpy(vc, vals, SC * sizeof(float));
            for (size_t i = (size_t)end * C; i < SC; i++) kc[i] = vc[i] = NAN;
            for (size_t i = 0; i < NSS; i++) att[i] = NAN;
            causal_attention(out, att, q, kc, vc, (int[]){T, pos0, C, NH, S});
            ref_attention(ref, w, q, keys, vals, T, pos0, C, NH, S);
            for (size_t i = 0; i < (size_t)T * C; i++) {
                double d = fabs((double)out[i] - ref[i]);
                if (d > worst_out || d != d) worst_out = d;
            }
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++)
                    for (int s = 0; s < S; s++) {
                        float got = att[((size_t)h * S + t) * S + s];
                        double want = w[((size_t)h * T + t) * S + s];
                        if (s > pos0 + t) masked_bad += got != 0.0f; // exactly 0, not NaN
                        double d = fabs((double)got - want);
                        if (d > worst_w || d != d) worst_w = d;
                    }
            // each token alone, at its own position, on the same cache
            for (int t = 0; t < T; t++) {
                causal_attention(one, att1, q + (size_t)t * C, kc, vc,
                                 (int[]){1, pos0 + t, C, NH, S});
                alone_differ += memcmp(one, out + (size_t)t * C, (size_t)C * sizeof(float)) != 0;
            }
            compared += (size_t)T;
            free(kc);
            free(vc);
        }
        check(worst_out < 1e-5 && worst_w < 1e-6 && masked_bad == 0 && alone_differ == 0,
              "attention == double recomputation over keys/values by position, C=%d NH=%d "
              "(HS %d) S=%d, T=1/mid/S: max |out diff| %.2g, max |weight diff| %.2g, %zu "
              "masked weights not 0, %zu of %zu tokens differ from a one-token call", C, NH,
              HS, S, worst_out, worst_w, masked_bad, alone_differ, compared);
        free(q); free(keys); free(vals); free(out); free(one); free(att); free(att1);
        free(ref); free(w);
    }
}

// y = x @ W for one row of C features, W (C, C) stored (in, out): float sums in the
// order i = 0, 1, ..., the test's own projection.
static void proj_row(float *y, const float *x, const float *W, int C) {
    for (int o = 0; o < C; o++) {
        float s = 0.0f;
        for (int i = 0; i < C; i++) s += x[i] * W[(size_t)i * C + o];
        y[o] = s;
    }
}

// Counts the floats of rows [from, to) of every layer of a cache (L, S, C) that differ
// from want (L, S, C) (want NULL: from 0).
static size_t rows_differ(const float *cache, const float *want, int L, int S, int C, int from,
                          int to) {
    size_t n = 0;
    for (int l = 0; l < L; l++)
        for (int pos = from; pos < to; pos++)
            for (int i = 0; i < C; i++) {
                size_t at = ((size_t)l * S + pos) * C + i;
                float w = want ? want[at] : 0.0f;
                n += memcmp(&cache[at], &w, sizeof(float)) != 0;
            }
    return n;
}

// The KV cache layout, pinned down: key_cache and value_cache are (L, S, C) by position,
// row (l, pos) = ln1(x_in of layer l at pos) @ key (value) of layer l. The expected rows
// come from a pass run token by token through block_forward, recording each layer's input
// and projecting its ln1 with the test's own loop; forward's caches must hold exactly
// those floats, after one S-token pass and after chunks (rows past cache_len stay zero).
// Then the model's last attention is recomputed from its query and the cache in double.
static void test_kv_layout(const Fixture *fx) {
    Config c = {4, 4, 64, 32, fx->vocab.size, 256};
    GPT g;
    if (!check(build_gpt(&g, &c) == 0, "build a model for the cache-layout test")) {
        free_gpt(&g);
        return;
    }
    init_gpt_random(&g, 4242);
    perturb_layernorms(&g, 43); // ln1 != ln2 != identity: a wrong input shows
    int L = c.n_layer, S = c.block_size, C = c.n_embd, NH = c.n_head;
    size_t LSC = (size_t)L * S * C;
    const int *tok = fx->corpus.tokens + 54321;
    float *xin = calloc(LSC, sizeof(float)), *want_k = calloc(LSC, sizeof(float));
    float *want_v = calloc(LSC, sizeof(float)), *ln = malloc((size_t)C * sizeof(float));
    // token by token, layer by layer, with a run state of its own (a second model's)
    GPT own;
    int built = build_gpt(&own, &c) == 0;
    RunState rs = own.state; // the same buffers, by another name: free_gpt(&own) frees them
    for (int t = 0; built && t < S; t++) {
        embed(rs.x, &g.w, tok + t, 1, t, C); // token t at position t: it sees 0 .. t
        for (int l = 0; l < L; l++) {
            size_t row = ((size_t)l * S + t) * C, CC = (size_t)C * C;
            memcpy(xin + row, rs.x, (size_t)C * sizeof(float));
            rs.block.keys = rs.key_cache + (size_t)l * S * C;
            rs.block.values = rs.value_cache + (size_t)l * S * C;
            block_forward(&c, &g.w, l, &rs.block, 1, t);
            memcpy(rs.x, rs.block.x_out, (size_t)C * sizeof(float)); // as forward does
            layernorm(ln, xin + row, g.w.ln1_weight + l * C, g.w.ln1_bias + l * C, 1, C);
            proj_row(want_k + row, ln, g.w.key + l * CC, C);
            proj_row(want_v + row, ln, g.w.value + l * CC, C);
        }
    }
    free_gpt(&own);
    // the keys and values are not all alike (a cache of zeros would pass nothing)
    size_t zeros = 0;
    for (size_t i = 0; i < LSC; i++) zeros += want_k[i] == 0.0f || want_v[i] == 0.0f;
    reset_cache(&g);
    forward(&g, tok, S);
    size_t dk = rows_differ(g.state.key_cache, want_k, L, S, C, 0, S);
    size_t dv = rows_differ(g.state.value_cache, want_v, L, S, C, 0, S);
    check(built && zeros == 0 && dk == 0 && dv == 0, "after one %d-token pass, key_cache and "
          "value_cache (L=%d, S=%d, C=%d) hold ln1(x) @ key and ln1(x) @ value of each layer "
          "and position, by position, bit for bit: %zu key and %zu value floats of %zu differ",
          S, L, S, C, dk, dv, LSC);
    // chunks 5 then 9 from an empty cache: rows 0..13 as above, rows 14.. still zero
    reset_cache(&g);
    forward(&g, tok, 5);
    forward(&g, tok + 5, 9);
    dk = rows_differ(g.state.key_cache, want_k, L, S, C, 0, 14);
    dv = rows_differ(g.state.value_cache, want_v, L, S, C, 0, 14);
    size_t past = rows_differ(g.state.key_cache, NULL, L, S, C, 14, S) +
                  rows_differ(g.state.value_cache, NULL, L, S, C, 14, S);
    check(dk == 0 && dv == 0 && past == 0 && g.state.cache_len == 14, "after passes of 5 and 9 "
          "tokens: rows 0..13 hold the same keys and values (%zu, %zu floats differ), rows "
          "14..%d are untouched zeros (%zu nonzero), cache_len %d", dk, dv, S - 1, past,
          g.state.cache_len);
    // the last layer's attention of the last pass (9 tokens at positions 5..13), again
    // from its queries and that layer's cache rows, in double
    size_t lay = (size_t)(L - 1) * S * C;
    int T = 9, pos0 = 5;
    double *ref = malloc((size_t)T * C * sizeof(double));
    double *w = malloc((size_t)NH * T * S * sizeof(double));
    ref_attention(ref, w, g.state.block.q, g.state.key_cache + lay, g.state.value_cache + lay,
                  T, pos0, C, NH, S);
    double worst = 0.0;
    for (size_t i = 0; i < (size_t)T * C; i++) {
        double d = fabs((double)g.state.block.att_out[i] - ref[i]);
        if (d > worst || d != d) worst = d;
    }
    check(worst < 1e-5, "the model's last attention output (layer %d, 9 tokens at positions "
          "5..13) == attention recomputed in double from its queries and the cache rows 0..13 "
          "of that layer: max |diff| %.2g", L - 1, worst);
    free(ref);
    free(w);
    free(xin);
    free(want_k);
    free(want_v);
    free(ln);
    free_gpt(&g);
}

// ----------------------------------------------------------------------------
// 5. KV cache chunking

// The same 32 tokens give bit-identical logits in one pass, one at a time, or in
// uneven chunks, and so do their first 2, 5 and 9 in one pass: verification must
// score tokens exactly as plain decoding does.
static void test_kv_chunking(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size;
    const int *tok = fx->corpus.tokens + 20000;
    size_t n = (size_t)S * V;
    float *single = malloc(n * sizeof(float)), *ones = malloc(n * sizeof(float));
    float *chunked = calloc(n, sizeof(float));
    reset_cache(g);
    memcpy(single, forward(g, tok, S), n * sizeof(float));
    int kv_single = g->state.cache_len;
    reset_cache(g);
    for (int t = 0; t < S; t++)
        memcpy(ones + (size_t)t * V, forward(g, tok + t, 1), (size_t)V * sizeof(float));
    int kv_ones = g->state.cache_len;
    int chunks[] = {3, 1, 5, 2, 7, 4, 6, 4}; // sums to 32
    reset_cache(g);
    int pos = 0, kv_ok = 1;
    for (int i = 0; i < 8 && pos + chunks[i] <= S; i++) {
        const float *lg = forward(g, tok + pos, chunks[i]);
        memcpy(chunked + (size_t)pos * V, lg, (size_t)chunks[i] * V * sizeof(float));
        pos += chunks[i];
        kv_ok &= g->state.cache_len == pos;
    }
    check(pos == S && memcmp(single, chunked, n * sizeof(float)) == 0 && kv_ok &&
          g->state.cache_len == S, "chunks 3,1,5,2,7,4,6,4 == one %d-token pass, bit for bit "
          "(max diff %.2g; cache_len %d after each chunk: %s)", S, max_abs_diff(single, chunked, n),
          g->state.cache_len, kv_ok ? "right" : "WRONG");
    check(memcmp(single, ones, n * sizeof(float)) == 0 && kv_single == S && kv_ones == S,
          "%d one-token passes == one %d-token pass, bit for bit (max diff %.2g; cache_len %d "
          "and %d)", S, S, max_abs_diff(single, ones, n), kv_ones, kv_single);
    // shorter passes from an empty cache, each against the first rows of the one-token passes
    int lens[] = {2, 5, 9}, short_ok = 1;
    for (int i = 0; i < 3; i++) {
        reset_cache(g);
        size_t rows = (size_t)lens[i] * V * sizeof(float);
        short_ok &= memcmp(forward(g, tok, lens[i]), ones, rows) == 0;
    }
    check(short_ok, "one 2-, 5- and 9-token pass each == as many one-token passes, bit for bit");
    free(single);
    free(ones);
    free(chunked);
}

// prefill (the first pass over the prompt, and plain decoding's refill of a full cache)
// empties the cache, runs the last min(n_seq, keep) tokens from position 0 in one forward,
// and returns the current token's row: equal, bit for bit, to forward's last row from a
// clean cache, with the same cache rows, even when the cache held other text before; it
// counts one target pass (Stats.target_passes) and touches no other counter. (The passes by
// kind and size are beyond.c's RunStats: test/test_beyond.c.)
static void test_prefill(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, C = g->config.n_embd;
    int L = g->config.n_layer;
    size_t LSC = (size_t)L * S * C;
    const int *seq = fx->corpus.tokens + 61000, *junk = fx->corpus.tokens + 70000;
    float *row = malloc((size_t)V * sizeof(float)), *kc = malloc(LSC * sizeof(float));
    float *vc = malloc(LSC * sizeof(float));
    int cases[][3] = {{1, S, 0}, {10, S, 0}, {S, S, 0}, {S + 8, S, 0}, {S + 8, S / 2, 1},
                      {S, S / 2, 1}}; // n_seq, keep, is_refill
    for (int i = 0; i < 6; i++) {
        int n_seq = cases[i][0], keep = cases[i][1], refill = cases[i][2];
        int n = n_seq < keep ? n_seq : keep;
        // a cache full of other text, as a refill finds it
        reset_cache(g);
        forward(g, junk, S - 3);
        Stats st;
        memset(&st, 0, sizeof(st));
        memcpy(row, prefill(g, seq, n_seq, keep, &st), (size_t)V * sizeof(float));
        int kv = g->state.cache_len;
        memcpy(kc, g->state.key_cache, LSC * sizeof(float));
        memcpy(vc, g->state.value_cache, LSC * sizeof(float));
        // the same window from a clean cache
        reset_cache(g);
        const float *want = forward(g, seq + n_seq - n, n) + (size_t)(n - 1) * V;
        size_t cache_differ = rows_differ(kc, g->state.key_cache, L, S, C, 0, n) +
                              rows_differ(vc, g->state.value_cache, L, S, C, 0, n);
        // one pass, nothing else: every other counter still 0
        Stats zero;
        memset(&zero, 0, sizeof(zero));
        long passes = st.target_passes, prefills = st.passes[PREFILL_PASS];
        st.target_passes = 0;
        st.passes[PREFILL_PASS] = 0;
        st.seconds_in[PREFILL_PASS] = 0.0; // its time: measured, so any value
        int others = memcmp(&st, &zero, sizeof(st)) != 0;
        st.target_passes = passes;
        int counted = passes == 1 && prefills == 1 && !others;
        check(memcmp(row, want, (size_t)V * sizeof(float)) == 0 && kv == n &&
              cache_differ == 0 && counted, "prefill of %d token%s, keep %d%s, over a cache "
              "holding %d other tokens: cache_len %d (want %d), row == forward's last row of "
              "tokens %d..%d from a clean cache (max diff %.2g), %zu cache floats differ, "
              "counted as %ld target pass%s (want 1, a prefill), other counters %s",
              n_seq, n_seq == 1 ? "" : "s", keep, refill ? " (refill)" : "", S - 3, kv, n,
              n_seq - n, n_seq - 1, max_abs_diff(row, want, (size_t)V), cache_differ,
              passes, passes == 1 ? "" : "es", others ? "CHANGED" : "untouched");
    }
    free(row);
    free(kc);
    free(vc);
}

// ----------------------------------------------------------------------------
// 6. trim_kv_cache

// After a verify of k+1 tokens, trimming to before+n keeps exactly those rows,
// untouched, and zeroes the rest in every layer, for every n the round can emit.
static void test_trim(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, C = g->config.n_embd;
    int L = g->config.n_layer, K = 4;
    size_t cache_n = (size_t)L * S * C;
    const int *prompt = fx->corpus.tokens + 30000;
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) { check(0, "trim: buffers"); return; }
    float *kc = malloc(cache_n * sizeof(float)), *vc = malloc(cache_n * sizeof(float));
    Rng r;
    rng_seed(&r, 3);
    reset_cache(g);
    forward(g, prompt, 9); // cache: 9 positions; prompt[9] is the current token
    int before = g->state.cache_len;
    draft_tokens(&fx->draft, prompt[9], K, 1.0f, &r, &b);
    verify_candidates(g, prompt[9], K, 1.0f, &b);
    int verified = g->state.cache_len;
    check(before == 9 && verified == before + K + 1, "verify of k+1=%d tokens: cache_len %d -> %d",
          K + 1, before, verified);
    memcpy(kc, g->state.key_cache, cache_n * sizeof(float));
    memcpy(vc, g->state.value_cache, cache_n * sizeof(float));
    for (int n = 1; n <= K + 1; n++) {
        memcpy(g->state.key_cache, kc, cache_n * sizeof(float));
        memcpy(g->state.value_cache, vc, cache_n * sizeof(float));
        g->state.cache_len = verified;
        trim_kv_cache(g, n, before);
        int keep = before + n;
        size_t nonzero = 0, was_nonzero = 0, changed = 0;
        for (int l = 0; l < L; l++) {
            for (int pos = 0; pos < S; pos++) {
                // keys and values both by position: (l, pos, i)
                size_t off = ((size_t)l * S + pos) * C;
                for (int i = 0; i < C; i++) {
                    float k = g->state.key_cache[off + i], v = g->state.value_cache[off + i];
                    if (pos >= keep) {
                        nonzero += (k != 0.0f) + (v != 0.0f);
                        was_nonzero += (kc[off + i] != 0.0f) + (vc[off + i] != 0.0f);
                    } else {
                        changed += (k != kc[off + i]) + (v != vc[off + i]);
                    }
                }
            }
        }
        // rows keep..verified-1 held data before the trim, unless nothing was trimmed
        int meaningful = keep == verified || was_nonzero > 0;
        check(g->state.cache_len == keep && nonzero == 0 && changed == 0 && meaningful,
              "trim n=%d: cache_len %d (want %d); rows %d..%d of %d layers: %zu nonzero floats "
              "left (%zu before trim); rows 0..%d: %zu floats changed", n, g->state.cache_len, keep,
              keep, S - 1, L, nonzero, was_nonzero, keep - 1, changed);
    }
    free(kc);
    free(vc);
    free_spec_buffers(&b);
}

// ----------------------------------------------------------------------------
// 7. Negative control for the cache tests

// A rejected candidate is dropped from the cache by the trim; skipping the trim (or
// keeping one row too many) must change the next logits, so the memcmp-based cache
// tests above can detect such a bug.
static void test_untrimmed_control(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, K = 4;
    const int *prompt = fx->corpus.tokens + 40000; // 10 tokens, the last one is current
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) {
        check(0, "negative control: buffers");
        return;
    }
    float *ref = malloc((size_t)V * sizeof(float)), *got = malloc((size_t)V * sizeof(float));
    // never-drafted reference: the 10 prompt tokens, then the greedy next token g0
    reset_cache(g);
    const float *lg = forward(g, prompt, 10);
    int g0 = ref_argmax(lg + (size_t)9 * V, V);
    memcpy(ref, forward(g, &g0, 1), (size_t)V * sizeof(float));
    // a greedy draft whose first guess is wrong, so the target rejects it
    int cand[4] = {(g0 + 1) % V, prompt[3], prompt[4], prompt[5]};
    for (int i = 0; i < K; i++) {
        b.candidates[i] = cand[i];
        set_one_hot(b.draft_probs + (size_t)i * V, V, cand[i]);
    }
    Rng r;
    // variant 0: the correct trim; 1: no trim at all; 2: one row too many kept
    const char *what[3] = {"a trimmed cache", "an untrimmed cache",
                           "a cache keeping the rejected candidate"};
    for (int variant = 0; variant < 3; variant++) {
        rng_seed(&r, 9);
        reset_cache(g);
        forward(g, prompt, 9);
        int before = g->state.cache_len;
        verify_candidates(g, prompt[9], K, 0.0f, &b);
        int n = accept_reject(&b, K, 1, &r);
        if (variant == 0) trim_kv_cache(g, n, before);
        if (variant == 2) trim_kv_cache(g, n + 1, before);
        int kv = g->state.cache_len;
        memcpy(got, forward(g, &b.emitted[n - 1], 1), (size_t)V * sizeof(float));
        double diff = max_abs_diff(ref, got, (size_t)V);
        int same = memcmp(ref, got, (size_t)V * sizeof(float)) == 0;
        int setup = n == 1 && b.rejected_at == 0 && b.emitted[0] == g0;
        if (variant == 0)
            check(setup && same, "control: rejected first guess (n=%d, rejected_at %d, resampled "
                  "%d, greedy %d), trimmed cache (cache_len %d) gives the never-drafted logits "
                  "(max diff %.2g)", n, b.rejected_at, b.emitted[0], g0, kv, diff);
        else
            check(setup && !same, "negative control: %s gives different logits (max diff "
                  "%.3g; cache_len %d, should be %d)", what[variant], diff, kv, before + n);
    }
    free(ref);
    free(got);
    free_spec_buffers(&b);
}

// ----------------------------------------------------------------------------
// ----------------------------------------------------------------------------
// 7b. The refill: a full cache restarts the window in a pass of its own

// What a round that finds the cache full does before it drafts: make_room empties the
// target's cache and runs the S/2 - 1 tokens before current_token from position 0, as a
// pass of its own (one target pass counted; with --trace, a REFILL line); the round's
// verify pass then runs current_token at position S/2 - 1 and the k guesses. Its rows are
// the rows S/2-1 .. S/2-1+k of one forward of the window [the S/2 tokens up to
// current_token, the guesses] from a clean cache, bit for bit (computed here with
// tempered_softmax), not that forward's row 0, and the cache holds that forward's S/2 + k
// positions. The trace's REFILL line names the window (trace_refill, read back here).
static void test_refill(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, C = g->config.n_embd;
    int L = g->config.n_layer, K = 4;
    size_t LSC = (size_t)L * S * C;
    const int *text = fx->corpus.tokens + 81000, *cands = fx->corpus.tokens + 91000;
    const int n_seq = S + 9; // current_token = text[n_seq - 1]
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) { check(0, "refill: buffers"); return; }
    float *want = malloc((size_t)(K + 1) * V * sizeof(float));
    float *kc = malloc(LSC * sizeof(float)), *vc = malloc(LSC * sizeof(float));
    int *window = malloc((size_t)(S + K) * sizeof(int));
    float temps[2] = {1.0f, 0.8f};
    int ks[3] = {0, 1, K};
    for (int ti = 0; ti < 2; ti++)
        for (int ki = 0; ki < 3; ki++) {
            int k = ks[ki];
            for (int i = 0; i < k; i++) b.candidates[i] = cands[i];
            // a full cache of other text, as the round finds it
            reset_cache(g);
            forward(g, fx->corpus.tokens + 5000, S);
            int full = g->state.cache_len == S;
            Stats st;
            memset(&st, 0, sizeof(st));
            DecodeOptions o = {.st = &st, .trace = 0};
            int room = make_room(g, text, n_seq, &o);
            int after_refill = g->state.cache_len;
            long passes = st.target_passes + 100 * (st.passes[REFILL_PASS] != 1) + 1000 * (room != S - S / 2);
            verify_candidates(g, text[n_seq - 1], k, temps[ti], &b);
            int kv = g->state.cache_len, T = S / 2 + k;
            memcpy(kc, g->state.key_cache, LSC * sizeof(float));
            memcpy(vc, g->state.value_cache, LSC * sizeof(float));
            // the test's own window: the S/2 tokens up to current_token, then the guesses
            for (int i = 0; i < S / 2; i++) window[i] = text[n_seq - S / 2 + i];
            for (int i = 0; i < k; i++) window[S / 2 + i] = cands[i];
            int input_ok = b.all_tokens[0] == text[n_seq - 1] &&
                           memcmp(b.all_tokens + 1, cands, (size_t)k * sizeof(int)) == 0;
            reset_cache(g);
            const float *lg = forward(g, window, T);
            for (int i = 0; i <= k; i++)
                tempered_softmax(want + (size_t)i * V, lg + (size_t)(S / 2 - 1 + i) * V, V,
                                 temps[ti]);
            int rows_ok = memcmp(b.target_probs, want, (size_t)(k + 1) * V * sizeof(float)) == 0;
            // the rows must be the window's last k+1: row 0 of the pass is another token's
            float first[256];
            tempered_softmax(first, lg, V, temps[ti]);
            int offset_matters = memcmp(first, b.target_probs, (size_t)V * sizeof(float)) != 0;
            size_t cache_differ = rows_differ(kc, g->state.key_cache, L, S, C, 0, T) +
                                  rows_differ(vc, g->state.value_cache, L, S, C, 0, T);
            check(full && after_refill == S / 2 - 1 && passes == 1 && input_ok && kv == T &&
                  rows_ok && offset_matters && cache_differ == 0, "refill, t=%.1f, k=%d: "
                  "make_room on a full cache leaves cache_len %d (want %d) after %ld pass "
                  "(want 1, a refill, and room for S/2 guesses); the verify pass ran [current_token, %d guesses] (%s), cache_len "
                  "%d (want %d); target_probs rows 0..%d %s the rows %d..%d of a clean forward "
                  "of the window (max diff %.2g), not its row 0; %zu cache floats differ",
                  temps[ti], k, after_refill, S / 2 - 1, passes, k, input_ok ? "right" : "WRONG",
                  kv, T, k, rows_ok ? "==" : "!=", S / 2 - 1, S / 2 - 1 + k,
                  max_abs_diff(b.target_probs, want, (size_t)(k + 1) * V), cache_differ);
        }
    // a cache with room: make_room runs nothing and returns the positions after current_token's
    int rooms_ok = 1;
    for (int n = 0; n < S; n++) {
        Stats st;
        memset(&st, 0, sizeof(st));
        DecodeOptions o = {.st = &st};
        reset_cache(g);
        if (n > 0) forward(g, fx->corpus.tokens + 5000, n);
        rooms_ok &= make_room(g, text, n_seq, &o) == S - 1 - n && g->state.cache_len == n &&
                    st.target_passes == 0;
    }
    check(rooms_ok, "make_room on a cache of 0 .. S-1 positions runs no pass, keeps it, and "
          "returns S-1-cache_len: %s", rooms_ok ? "yes" : "NO");
    // the trace of a refill: trace_refill's one line, with the window's numbers
    FILE *tmp = tmpfile();
    char line[512] = "";
    if (tmp) {
        fflush(stderr);
        int saved = dup(2);
        if (saved >= 0 && dup2(fileno(tmp), 2) >= 0) {
            Stats st;
            memset(&st, 0, sizeof(st));
            DecodeOptions o = {.st = &st, .trace = 1, .vocab = &fx->vocab};
            reset_cache(g);
            forward(g, fx->corpus.tokens + 5000, S);
            make_room(g, text, n_seq, &o);
            fflush(stderr);
            dup2(saved, 2);
            close(saved);
        }
        rewind(tmp);
        size_t got = fread(line, 1, sizeof(line) - 1, tmp);
        line[got] = '\0';
        fclose(tmp);
    }
    char want_line[160];
    snprintf(want_line, sizeof(want_line), "from the last %d tokens", S / 2);
    char want_pass[160];
    snprintf(want_pass, sizeof(want_pass), "one target pass over the %d before current_token "
             "at positions 0..%d", S / 2 - 1, S / 2 - 2);
    check(contains(line, "REFILL") && contains(line, want_line) && contains(line, want_pass),
          "make_room with --trace prints a REFILL line with \"%s\" and \"%s\": %s",
          want_line, want_pass, contains(line, "REFILL") ? "yes" : "NO");
    free(want);
    free(kc);
    free(vc);
    free(window);
    free_spec_buffers(&b);
}

// ----------------------------------------------------------------------------
// 8. sample_from

// Inverse-CDF sampling never returns a zero-probability index, whatever u and however
// far the float row's sum is from 1; frequencies follow the row.
static void test_sample_from(void) {
    enum { N = 5, DRAWS = 100000 };
    struct { const char *name; float p[N]; } rows[] = {
        {"zeros at the start", {0.0f, 0.0f, 0.2f, 0.3f, 0.5f}},
        {"zeros in the middle", {0.3f, 0.0f, 0.0f, 0.2f, 0.5f}},
        {"zeros at the end", {0.5f, 0.3f, 0.2f, 0.0f, 0.0f}},
        {"float sum < 1 (0.8)", {0.1f, 0.2f, 0.0f, 0.3f, 0.2f}},
        {"float sum > 1 (1.8)", {0.5f, 0.0f, 0.7f, 0.6f, 0.0f}},
    };
    Rng r;
    rng_seed(&r, 12345);
    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
        const float *p = rows[k].p;
        int first = -1, last = -1;
        double total = 0.0;
        for (int i = 0; i < N; i++) {
            total += p[i];
            if (p[i] > 0.0f) { if (first < 0) first = i; last = i; }
        }
        int at0 = sample_from(p, N, 0.0), at1 = sample_from(p, N, U_BELOW_1);
        long hits[N] = {0}, bad = 0;
        for (int t = 0; t < DRAWS; t++) {
            int i = sample_from(p, N, rng_uniform(&r));
            if (i < 0 || i >= N || p[i] <= 0.0f) bad++;
            else hits[i]++;
        }
        double worst = 0.0, worst_sigma = 0.0;
        for (int i = 0; i < N; i++) {
            double want = p[i] / total, freq = (double)hits[i] / DRAWS;
            double sigma = sqrt(want * (1.0 - want) / DRAWS);
            if (fabs(freq - want) > worst) worst = fabs(freq - want);
            if (sigma > 0 && fabs(freq - want) / sigma > worst_sigma)
                worst_sigma = fabs(freq - want) / sigma;
            if (sigma == 0 && hits[i] != 0) worst_sigma = INFINITY;
        }
        check(at0 == first && at1 == last && bad == 0 && worst_sigma < 5.0,
              "sample_from, %s: u=0 -> %d (want %d), u=1-2^-53 -> %d (want %d), %d random u: "
              "%ld zero-probability draws, max |freq - p/sum| = %.4f (%.1f sigma)",
              rows[k].name, at0, first, at1, last, DRAWS, bad, worst, worst_sigma);
    }
    // one-hot rows: the index for every u
    int onehot_bad = 0;
    for (int i = 0; i < N; i++) {
        float p[N];
        set_one_hot(p, N, i);
        double us[4] = {0.0, 0.5, U_BELOW_1, rng_uniform(&r)};
        for (int j = 0; j < 4; j++) onehot_bad += sample_from(p, N, us[j]) != i;
        for (int t = 0; t < 1000; t++) onehot_bad += sample_from(p, N, rng_uniform(&r)) != i;
    }
    check(onehot_bad == 0, "sample_from one-hot rows (index 0..4) return that index for every u "
          "(%d of %d draws wrong)", onehot_bad, N * 1004);
    float zero[N] = {0};
    int z0 = sample_from(zero, N, 0.0), z1 = sample_from(zero, N, 0.5),
        z2 = sample_from(zero, N, U_BELOW_1);
    check(z0 == -1 && z1 == -1 && z2 == -1, "sample_from all-zero row returns -1 (got %d, %d, %d)",
          z0, z1, z2);
    // exact inverse-CDF boundaries: index i covers [cdf_(i-1), cdf_i)
    float q[3] = {0.25f, 0.25f, 0.5f};
    double us[5] = {0.2499, 0.25, 0.4999, 0.5, 0.9999};
    int want[5] = {0, 1, 1, 2, 2}, got[5], ok = 1;
    for (int j = 0; j < 5; j++) ok &= (got[j] = sample_from(q, 3, us[j])) == want[j];
    check(ok, "sample_from {0.25,0.25,0.5} boundaries: u=0.2499 -> %d, 0.25 -> %d, 0.4999 -> %d, "
          "0.5 -> %d, 0.9999 -> %d (want 0,1,1,2,2)", got[0], got[1], got[2], got[3], got[4]);
}

// ----------------------------------------------------------------------------
// 9. tempered_softmax and tempered_bigram

// softmax(x / t) in double, the test's own.
static void ref_softmax(double *out, const float *x, int n, double t) {
    double m = -INFINITY, z = 0.0;
    for (int i = 0; i < n; i++) if (x[i] / t > m) m = x[i] / t;
    for (int i = 0; i < n; i++) z += (out[i] = exp(x[i] / t - m));
    for (int i = 0; i < n; i++) out[i] /= z;
}

// Largest |a[i] - b[i]| and |sum(a) - 1| of a float row against a double row.
static void row_errors(const float *a, const double *b, int n, double *diff, double *sum_err) {
    double s = 0.0;
    *diff = 0.0;
    for (int i = 0; i < n; i++) {
        s += a[i];
        double d = fabs((double)a[i] - b[i]);
        if (d > *diff || d != d) *diff = d;
    }
    *sum_err = fabs(s - 1.0);
}

// Temperature handling: t=0 is a one-hot argmax (ties to the lowest index), t=1 plain
// softmax, t=0.5 softmax(2x); the draft row is exact at t=1 and q^2-normalised at 0.5.
static void test_probs(const Fixture *fx) {
    enum { V = 65 };
    float logits[V], p[V];
    double ref[V], diff, serr;
    Rng r;
    rng_seed(&r, 99);
    for (int i = 0; i < V; i++) logits[i] = (float)(3.0 * rng_normal(&r));
    // t = 1 and t = 0.5 against the double softmax
    float temps[2] = {1.0f, 0.5f};
    for (int j = 0; j < 2; j++) {
        tempered_softmax(p, logits, V, temps[j]);
        ref_softmax(ref, logits, V, temps[j]);
        row_errors(p, ref, V, &diff, &serr);
        check(diff < 1e-6 && serr < 1e-5, "tempered_softmax t=%.1f == softmax(logits/%.1f) in double: "
              "max |diff| = %.2g, |sum-1| = %.2g", temps[j], temps[j], diff, serr);
    }
    // large logits: the max-subtraction keeps exp finite
    float big[V];
    for (int i = 0; i < V; i++) big[i] = 200.0f * logits[i];
    tempered_softmax(p, big, V, 0.5f);
    ref_softmax(ref, big, V, 0.5);
    row_errors(p, ref, V, &diff, &serr);
    check(diff < 1e-6 && serr < 1e-5, "tempered_softmax t=0.5 on logits up to |%.0f|: finite, max "
          "|diff| = %.2g, |sum-1| = %.2g", 200.0 * 3.0 * 3.0, diff, serr);
    // t = 0: one-hot at the argmax, ties to the lowest index
    tempered_softmax(p, logits, V, 0.0f);
    int am = ref_argmax(logits, V), ones = 0, at = -1;
    for (int i = 0; i < V; i++) if (p[i] != 0.0f) { ones++; at = i; }
    check(ones == 1 && at == am && p[am] == 1.0f, "tempered_softmax t=0 is one-hot at the argmax "
          "(%d nonzero entries, at %d, want %d)", ones, at, am);
    float tie[5] = {1.0f, 3.0f, 2.0f, 3.0f, 0.0f}, pt[5];
    tempered_softmax(pt, tie, 5, 0.0f);
    check(pt[1] == 1.0f && pt[0] == 0.0f && pt[2] == 0.0f && pt[3] == 0.0f && pt[4] == 0.0f,
          "tempered_softmax t=0 with a tie at 1 and 3 picks the lowest index (row %g %g %g %g %g)",
          pt[0], pt[1], pt[2], pt[3], pt[4]);

    // tempered_bigram on the Tiny Shakespeare table, for a few rows
    const BigramDraft *d = &fx->draft;
    int DV = d->V;
    float *q = malloc((size_t)DV * sizeof(float));
    double *qref = malloc((size_t)DV * sizeof(double));
    const char *from = "tq\nz ";
    for (int c = 0; from[c]; c++) {
        int a = fx->vocab.id[(unsigned char)from[c]];
        const float *row = d->probs + (size_t)a * DV;
        char vis[8];
        visible_char(vis, (unsigned char)from[c]);
        tempered_bigram(q, d, a, 1.0f);
        int exact = memcmp(q, row, (size_t)DV * sizeof(float)) == 0;
        tempered_bigram(q, d, a, 0.0f);
        int amr = ref_argmax(row, DV), hot = 1;
        for (int i = 0; i < DV; i++) hot &= q[i] == (i == amr ? 1.0f : 0.0f);
        tempered_bigram(q, d, a, 0.5f);
        double z = 0.0;
        for (int i = 0; i < DV; i++) z += (double)row[i] * row[i];
        for (int i = 0; i < DV; i++) qref[i] = (double)row[i] * row[i] / z;
        row_errors(q, qref, DV, &diff, &serr);
        check(exact && hot && diff < 1e-6 && serr < 1e-5, "tempered_bigram row %s: t=1 is the table "
              "row exactly: %s; t=0 one-hot at argmax %d: %s; t=0.5 vs q^2/sum(q^2): max |diff| "
              "= %.2g, |sum-1| = %.2g", vis, exact ? "yes" : "no", amr, hot ? "yes" : "no", diff,
              serr);
    }
    free(q);
    free(qref);
}

// ----------------------------------------------------------------------------
// 10. accept_reject and sample_adjusted

// Runs accept_reject on the buffers with a fresh Rng seeded with seed.
static int run_accept(SpecBuffers *b, int k, int allow_bonus, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    return accept_reject(b, k, allow_bonus, &r);
}

// The accept/reject rule on constructed rows: certain acceptance, certain rejection,
// the residual draw, the bonus, and the emitted token's distribution equal to p.
static void test_accept_reject(void) {
    enum { V = 5, K = 3 };
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) { check(0, "accept_reject: buffers"); return; }
    int cand[K] = {1, 3, 0};
    // (a) p one-hot at each candidate, q uniform: all accepted, bonus from p[k]
    for (int i = 0; i < K; i++) {
        b.candidates[i] = cand[i];
        for (int j = 0; j < V; j++) b.draft_probs[i * V + j] = 0.2f;
        set_one_hot(b.target_probs + i * V, V, cand[i]);
    }
    set_one_hot(b.target_probs + K * V, V, 4);
    int bad = 0, n = 0;
    for (uint64_t s = 0; s < 100; s++) {
        n = run_accept(&b, K, 1, s);
        bad += !(n == K + 1 && b.rejected_at == -1 && b.emitted[0] == 1 && b.emitted[1] == 3 &&
                 b.emitted[2] == 0 && b.emitted[3] == 4);
    }
    check(bad == 0, "accept_reject, p one-hot at each candidate: all accepted + bonus 4 for 100 "
          "seeds (%d wrong; last: n=%d, rejected_at %d, emitted %d %d %d %d)", bad, n,
          b.rejected_at, b.emitted[0], b.emitted[1], b.emitted[2], b.emitted[3]);
    // (b) the same without a bonus
    bad = 0;
    for (uint64_t s = 0; s < 100; s++) {
        n = run_accept(&b, K, 0, s);
        bad += !(n == K && b.rejected_at == -1 && b.emitted[0] == 1 && b.emitted[1] == 3 &&
                 b.emitted[2] == 0);
    }
    check(bad == 0, "accept_reject, allow_bonus=0 and all accepted: returns k=%d for 100 seeds "
          "(%d wrong; last n=%d)", K, bad, n);
    // (c) p at position 1 one-hot at 2, candidate is 3: reject, resample 2
    set_one_hot(b.target_probs + 1 * V, V, 2);
    bad = 0;
    for (uint64_t s = 0; s < 100; s++) {
        n = run_accept(&b, K, 1, s);
        bad += !(n == 2 && b.rejected_at == 1 && b.emitted[0] == 1 && b.emitted[1] == 2 &&
                 b.adjusted[2] == 1.0 - (double)0.2f && b.adjusted[3] == 0.0);
    }
    check(bad == 0, "accept_reject, p(c1)=0: c0 accepted, c1 rejected and resampled as p's "
          "argmax 2 for 100 seeds (%d wrong; last n=%d, rejected_at %d, emitted %d %d)", bad, n,
          b.rejected_at, b.emitted[0], b.emitted[1]);
    // (d) p == q, all entries > 0: min(1, p/q) = 1, so every candidate passes
    Rng r;
    rng_seed(&r, 5);
    for (int i = 0; i <= K; i++) {
        double z = 0.0;
        float row[V];
        for (int j = 0; j < V; j++) z += (row[j] = (float)(0.05 + rng_uniform(&r)));
        for (int j = 0; j < V; j++) b.target_probs[i * V + j] = (float)(row[j] / z);
        if (i < K) memcpy(b.draft_probs + i * V, b.target_probs + i * V, V * sizeof(float));
    }
    bad = 0;
    for (uint64_t s = 0; s < 1000; s++) {
        for (int i = 0; i < K; i++) b.candidates[i] = (int)((s + 2 * i) % V);
        n = run_accept(&b, K, 1, s);
        bad += !(n == K + 1 && b.rejected_at == -1);
    }
    check(bad == 0, "accept_reject, p == q: every candidate accepted for 1000 seeds (%d wrong)",
          bad);
    // (e) sample_adjusted: p == q leaves no residual mass, so it samples p itself
    float pe[V] = {0.0f, 0.25f, 0.0f, 0.75f, 0.0f};
    double res[V]; // the residual: the weights each draw takes
    double ue[5] = {0.0, 0.2, 0.25, 0.9, U_BELOW_1};
    int we[5] = {1, 1, 3, 3, 3}, ge[5], ok = 1;
    for (int j = 0; j < 5; j++) ok &= (ge[j] = sample_adjusted(pe, pe, V, res, ue[j])) == we[j];
    for (int j = 0; j < V; j++) ok &= res[j] == 0.0;
    check(ok, "sample_adjusted with p == q samples p {0,.25,0,.75,0}: u=0,.2,.25,.9,1-2^-53 -> "
          "%d %d %d %d %d (want 1 1 3 3 3), residual all zero", ge[0], ge[1], ge[2], ge[3], ge[4]);
    float pr[V] = {0.1f, 0.6f, 0.3f, 0.0f, 0.0f}, qr[V] = {0.3f, 0.2f, 0.1f, 0.2f, 0.2f};
    int r1 = sample_adjusted(pr, qr, V, res, 0.5), r2 = sample_adjusted(pr, qr, V, res, 0.7);
    check(r1 == 1 && r2 == 2 && res[0] == 0.0 && res[3] == 0.0 && res[4] == 0.0,
          "sample_adjusted norm(max(0,p-q)) = {0,.4,.2,0,0}/.6: u=0.5 -> %d (want 1), u=0.7 -> %d "
          "(want 2)", r1, r2);
    // (f) p(c) = 0: never accepted; the resample has residual mass
    float pf[2 * V] = {0.3f, 0.3f, 0.0f, 0.2f, 0.2f}, qf[V] = {0.1f, 0.2f, 0.4f, 0.2f, 0.1f};
    int c2 = 2, acc[2], never = 0;
    double u1[1], resid[V];
    SpecBuffers bf = {.V = V, .candidates = &c2, .draft_probs = qf, .target_probs = pf,
                      .u = u1, .adjusted = resid, .emitted = acc}; // one guess, on these rows
    for (uint64_t s = 0; s < 1000; s++) {
        Rng rs;
        rng_seed(&rs, s);
        int m = accept_reject(&bf, 1, 1, &rs);
        // residual max(0, p - q) = {0.2, 0.1, 0, 0, 0.1}: only 0, 1, 4 can come out
        never += !(m == 1 && bf.rejected_at == 0 && (acc[0] == 0 || acc[0] == 1 || acc[0] == 4));
    }
    check(never == 0, "accept_reject, p(c)=0: rejected and resampled from {0,1,4} for 1000 seeds "
          "(%d wrong)", never);
    // (g) the first emitted token is distributed as p (the speculative sampling theorem)
    float pg[2 * V] = {0.3f, 0.3f, 0.05f, 0.2f, 0.15f}, qg[V] = {0.1f, 0.2f, 0.4f, 0.2f, 0.1f};
    enum { TRIALS = 200000 };
    long hits[V] = {0}, accepted = 0;
    Rng rg;
    rng_seed(&rg, 2718);
    for (int t = 0; t < TRIALS; t++) {
        int c = sample_from(qg, V, rng_uniform(&rg));
        SpecBuffers bg = {.V = V, .candidates = &c, .draft_probs = qg, .target_probs = pg,
                          .u = u1, .adjusted = resid, .emitted = acc};
        accept_reject(&bg, 1, 0, &rg);
        hits[acc[0]]++;
        accepted += bg.rejected_at < 0;
    }
    double worst = 0.0;
    for (int i = 0; i < V; i++) {
        double sigma = sqrt(pg[i] * (1.0 - pg[i]) / TRIALS);
        double z = fabs((double)hits[i] / TRIALS - pg[i]) / sigma;
        if (z > worst) worst = z;
    }
    // acceptance probability sum_x min(p(x), q(x)) = 0.1+0.2+0.05+0.2+0.1 = 0.65
    double acc_rate = (double)accepted / TRIALS, acc_z = fabs(acc_rate - 0.65) /
                                                         sqrt(0.65 * 0.35 / TRIALS);
    check(worst < 5.0 && acc_z < 5.0, "draft-then-accept_reject emits tokens distributed as p over "
          "%d trials (worst bin %.1f sigma; acceptance %.4f vs sum min(p,q) = 0.65, %.1f sigma)",
          TRIALS, worst, acc_rate, acc_z);
    free_spec_buffers(&b);
}

// ----------------------------------------------------------------------------
// 11. Greedy equivalence with a draft that agrees often

// Greedy speculative decoding == greedy plain decoding, byte for byte, for K = 1..8
// and three prompts, with a draft built from the model's own greedy text so that
// accepted drafts and bonus tokens really occur.
static void test_greedy_equivalence(Fixture *fx) {
    GPT *g = &fx->model;
    const Vocab *v = &fx->vocab;
    int V = g->config.vocab_size;
    enum { N_SELF = 3000, N_NEW = 300 };
    DecodeOptions o = {.temperature = 0.0f, .K = 1, .trace = 0, .vocab = v};
    // the draft: bigrams of 3,000 greedy tokens of the target itself
    int seed_prompt[64];
    int np0 = encode_str(v, "First Citizen:\n", seed_prompt);
    int *self = malloc((size_t)(np0 + N_SELF) * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    Stats st;
    memset(&st, 0, sizeof(st));
    Rng r;
    rng_seed(&r, 1);
    o.max_new_tokens = N_SELF;
    o.rng = &r;
    o.st = &st;
    generate(g, &(Tokens){seed_prompt, np0}, &o, self, p);
    BigramDraft dself = {0};
    if (!check(st.emitted == N_SELF && BigramDraftModel(&dself, self + np0, N_SELF, V) == 0,
               "greedy self-draft: %ld greedy tokens generated and counted into a bigram table",
               st.emitted)) {
        free(self); free(p); free_bigram_draft(&dself);
        return;
    }
    // prompts: empty, the blog's, a 50-char corpus slice
    int to_be[64], n_to_be = encode_str(v, "To be or not to be, that is the ", to_be);
    struct { const char *name; const int *tok; int n; } prompts[3] = {
        {"empty", NULL, 0}, {"to-be", to_be, n_to_be}, {"corpus-50", fx->corpus.tokens + 123456, 50}};
    long k1_acc = 0, k1_drafted = 0, bonus = 0, resampled = 0;
    for (int pi = 0; pi < 3; pi++) {
        int cap = (prompts[pi].n > 0 ? prompts[pi].n : 1) + N_NEW;
        int start = cap - N_NEW;
        int *ss = malloc((size_t)cap * sizeof(int)), *sp = malloc((size_t)cap * sizeof(int));
        for (int K = 1; K <= 8; K++) {
            SpecBuffers b;
            if (build_spec_buffers(&b, K, V) != 0) {
                check(0, "greedy: buffers");
                break;
            }
            Stats a, c;
            memset(&a, 0, sizeof(a));
            memset(&c, 0, sizeof(c));
            Rng r1, r2;
            rng_seed(&r1, 100 + K);
            rng_seed(&r2, 200 + K); // greedy decoding must not depend on the stream
            o.K = K;
            o.max_new_tokens = N_NEW;
            o.rng = &r1;
            o.st = &a;
            speculative_generate(g, &dself, &b, &(Tokens){prompts[pi].tok, prompts[pi].n}, &o,
                                 ss);
            o.max_new_tokens = N_NEW;
            o.rng = &r2;
            o.st = &c;
            generate(g, &(Tokens){prompts[pi].tok, prompts[pi].n}, &o, sp, p);
            int diff_at = -1;
            for (int i = 0; i < N_NEW && diff_at < 0; i++)
                if (ss[start + i] != sp[start + i]) diff_at = i;
            double rate = a.drafted ? (double)a.guesses_accepted / a.drafted : 0.0;
            check(diff_at < 0 && a.emitted == N_NEW && c.emitted == N_NEW,
                  "greedy speculative == plain, prompt %s, K=%d: %d tokens %s (acceptance %.3f, "
                  "%ld bonus, %ld resampled, %ld vs %ld target passes)", prompts[pi].name, K,
                  N_NEW, diff_at < 0 ? "identical" : "DIFFER", rate, a.bonus, a.resampled,
                  a.target_passes, c.target_passes);
            if (diff_at >= 0) printf("  first difference at generated token %d\n", diff_at);
            if (K == 1) { k1_acc += a.guesses_accepted; k1_drafted += a.drafted; }
            bonus += a.bonus;
            resampled += a.resampled;
            free_spec_buffers(&b);
        }
        free(ss);
        free(sp);
    }
    double k1 = k1_drafted ? (double)k1_acc / k1_drafted : 0.0;
    check(k1 > 0.2, "greedy self-draft acceptance at K=1 is %.3f (> 0.2: the accept path ran, "
          "%ld of %ld)", k1, k1_acc, k1_drafted);
    check(bonus > 0 && resampled > 0, "greedy runs exercised both round endings: %ld bonus "
          "tokens, %ld resamples", bonus, resampled);
    free_bigram_draft(&dself);
    free(self);
    free(p);
}

// ----------------------------------------------------------------------------
// 12. Stats invariants on sampled runs

// What the test's own speculative loop counted.
typedef struct {
    long rounds, drafted, judged, accepted, resampled, bonus, no_bonus_full;
    long refills;       // rounds that found the cache full: a refill pass of their own first
    long steps;         // rounds at the cache's last slot, asked for no guess: one token
    long passes;        // target passes: the prefill, the refills, one verify pass a round
    double alpha_sum;   // sum over judged candidates of sum_x min(p(x), q(x))
    double alpha_var;   // sum over judged candidates of a(1 - a), a = that candidate's chance
} LoopCounts;

// The documented decoding policy of specdec.c, driven with the draft and accept/reject
// phases and the test's own forward passes: prefill the last S prompt tokens from position
// 0 and sample. Then rounds: a round that finds the cache full (cache_len == S) first
// refills it in a pass of its own, the S/2 - 1 tokens before current_token from position 0
// (plain decoding's refill, less current_token, which the verify pass then runs at position
// S/2 - 1); it asks for k = min(K, remaining, S-1-cache_len) guesses, so that none falls
// outside the cache: at its last slot k = 0 and the round is a one-token step. The verify
// pass is one forward over [current_token, the guesses], its rows served at t; a bonus only
// if k < remaining; the cache trimmed to cache_len + n. Returns the sequence length.
static int driver_speculative(GPT *g, const BigramDraft *d, SpecBuffers *b, const int *prompt,
                              int n_prompt, int max_new_tokens, float t, int K, Rng *rng, int *seq,
                              float *p, LoopCounts *lc) {
    int V = g->config.vocab_size, S = g->config.block_size, n_seq;
    int pass[65]; // one verify pass's tokens: K <= 64 here
    if (n_prompt == 0) { seq[0] = 0; n_seq = 1; }
    else { memcpy(seq, prompt, (size_t)n_prompt * sizeof(int)); n_seq = n_prompt; }
    int first = n_seq;
    memset(lc, 0, sizeof(*lc));
    // the prefill, and the first token sampled straight from the current token's row
    int n0 = n_seq < S ? n_seq : S;
    g->state.cache_len = 0;
    const float *lg0 = forward(g, seq + n_seq - n0, n0);
    lc->passes++;
    tempered_softmax(p, lg0 + (size_t)(n0 - 1) * V, V, t);
    seq[n_seq++] = sample_from(p, V, rng_uniform(rng));
    while (n_seq - first < max_new_tokens) {
        int remaining = max_new_tokens - (n_seq - first);
        if (g->state.cache_len == S) { // the refill: the S/2 - 1 tokens before current_token
            int n = S / 2 - 1;
            g->state.cache_len = 0;
            if (n > 0) {
                forward(g, seq + n_seq - 1 - n, n);
                lc->passes++;
            }
            lc->refills++;
        }
        int pos = g->state.cache_len; // current_token's position
        int k = K < remaining ? K : remaining;
        if (k > S - 1 - pos) k = S - 1 - pos; // guesses at pos+1 .. pos+k, inside the cache
        draft_tokens(d, seq[n_seq - 1], k, t, rng, b);
        pass[0] = seq[n_seq - 1];
        memcpy(pass + 1, b->candidates, (size_t)k * sizeof(int));
        const float *lg = forward(g, pass, k + 1); // from position pos
        lc->passes++;
        for (int i = 0; i <= k; i++)
            tempered_softmax(b->target_probs + (size_t)i * V, lg + (size_t)i * V, V, t);
        int m = accept_reject(b, k, k < remaining, rng);
        g->state.cache_len = pos + m; // the trim: the rows past it are not read again
        lc->steps += k == 0;
        // the candidates accept_reject looked at: every one up to the first rejection
        int judged = b->rejected_at >= 0 ? b->rejected_at + 1 : k;
        for (int i = 0; i < judged; i++) {
            const float *pi = b->target_probs + (size_t)i * V, *qi = b->draft_probs + (size_t)i * V;
            double a = 0.0;
            for (int x = 0; x < V; x++) a += pi[x] < qi[x] ? pi[x] : qi[x];
            lc->alpha_sum += a;
            lc->alpha_var += a * (1.0 - a);
        }
        lc->judged += judged;
        lc->rounds++;
        lc->drafted += k;
        if (k == 0) {} // row 0 of the pass gave the token
        else if (b->rejected_at >= 0) { lc->accepted += b->rejected_at; lc->resampled++; }
        else {
            lc->accepted += k;
            if (m == k + 1) lc->bonus++;
            else lc->no_bonus_full++;
        }
        memcpy(seq + n_seq, b->emitted, (size_t)m * sizeof(int));
        n_seq += m;
    }
    return n_seq;
}

// One sampled run of speculative_generate on model g (named for the messages) at
// temperature t with the bigram draft d: its counters add up (every token and every pass
// accounted for) and agree with the test's own driver loop, which also fixes the tokens and
// recomputes alpha, the expected acceptance, from the rows each judged candidate was
// decided on.
static void stats_run(GPT *g, const BigramDraft *d, const Vocab *v, const char *model, float t,
                      uint64_t seed) {
    int V = g->config.vocab_size, K = 4;
    enum { N_NEW = 500 };
    int prompt[64], np = encode_str(v, "To be or not to be, that is the ", prompt);
    int cap = np + N_NEW;
    int *seq = malloc((size_t)cap * sizeof(int)), *ref = malloc((size_t)cap * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0 || !seq || !ref || !p) {
        check(0, "stats: buffers");
        free(seq); free(ref); free(p); free_spec_buffers(&b);
        return;
    }
    DecodeOptions o = {.temperature = t, .K = K, .trace = 0, .vocab = v, .out = NULL};
    Stats s;
    memset(&s, 0, sizeof(s));
    Rng r;
    rng_seed(&r, seed);
    o.max_new_tokens = N_NEW;
    o.rng = &r;
    o.st = &s;
    speculative_generate(g, d, &b, &(Tokens){prompt, np}, &o, seq);
    LoopCounts lc;
    rng_seed(&r, seed);
    int n_ref = driver_speculative(g, d, &b, prompt, np, N_NEW, t, K, &r, ref, p, &lc);
    int same = n_ref == cap && memcmp(seq, ref, (size_t)cap * sizeof(int)) == 0;
    check(same, "%s t=%.1f K=%d: speculative_generate's %d tokens == the test's own "
          "refill/draft/verify/accept/trim loop (%d tokens)", model, t, K, N_NEW, n_ref - np);
    // every token after the prefill's comes from a round
    check(s.emitted == N_NEW && s.emitted == 1 + s.round_tokens,
          "%s t=%.1f: emitted %ld == n %d == 1 prefill token + %ld round tokens", model, t,
          s.emitted, N_NEW, s.round_tokens);
    // a round ends in a resample, a bonus, or (only the last one, when k was all that
    // was still needed) all k accepted and no bonus; its accepted tokens count as accepted;
    // a round at the cache's last slot drafts nothing and gives one token
    long x = s.rounds - (s.resampled + s.bonus + lc.steps);
    check(s.round_tokens == s.guesses_accepted + s.resampled + s.bonus + lc.steps &&
          x == lc.no_bonus_full && x >= 0 && x <= 1,
          "%s t=%.1f: round tokens %ld == accepted %ld + resampled %ld + bonus %ld + %ld "
          "one-token rounds at the cache's last slot (the driver's); rounds %ld == resampled + "
          "bonus + last-slot + %ld all-accepted round(s) without bonus (driver counted %ld)",
          model, t, s.round_tokens, s.guesses_accepted, s.resampled, s.bonus, lc.steps, s.rounds, x,
          lc.no_bonus_full);
    check(s.drafted == lc.drafted && s.rounds == lc.rounds && s.guesses_accepted == lc.accepted &&
          s.resampled == lc.resampled && s.bonus == lc.bonus && s.guesses_accepted <= s.drafted,
          "%s t=%.1f: drafted %ld == sum of k %ld, rounds %ld/%ld, accepted %ld/%ld (<= drafted),"
          " resampled %ld/%ld, bonus %ld/%ld (stats/driver)", model, t, s.drafted, lc.drafted,
          s.rounds, lc.rounds, s.guesses_accepted, lc.accepted, s.resampled, lc.resampled, s.bonus,
          lc.bonus);
    // the target's passes: the prefill, one a round, and each refill's own pass
    check(s.target_passes == lc.passes && s.target_passes == 1 + s.rounds + lc.refills &&
          lc.refills > 0 && lc.steps > 0,
          "%s t=%.1f: target passes %ld == the driver's %ld == 1 prefill + %ld rounds + %ld "
          "refills (the refill is a pass of its own; %ld rounds at the cache's last slot)",
          model, t, s.target_passes, lc.passes, s.rounds, lc.refills, lc.steps);
    // alpha: every judged candidate was accepted or was the rejected one, and alpha_sum
    // is the driver's own sum over them of sum_x min(p(x), q(x))
    double alpha = stats_alpha(&s);
    check(s.judged == s.guesses_accepted + s.resampled && s.judged <= s.drafted &&
          s.judged == lc.judged && s.judged > 0,
          "%s t=%.1f: judged %ld == accepted %ld + rejected %ld, <= drafted %ld, == the "
          "driver's %ld", model, t, s.judged, s.guesses_accepted, s.resampled, s.drafted, lc.judged);
    double tol = 1e-9 * (1.0 + lc.alpha_sum);
    check(fabs(s.alpha_sum - lc.alpha_sum) <= tol && alpha == s.alpha_sum / s.judged &&
          alpha >= 0.0 && alpha <= 1.0,
          "%s t=%.1f: alpha_sum %.9f == the driver's sum over %ld judged candidates of "
          "sum_x min(p,q) %.9f (|diff| %.2g, tolerance %.2g); stats_alpha %.6f == alpha_sum / "
          "judged", model, t, s.alpha_sum, lc.judged, lc.alpha_sum,
          fabs(s.alpha_sum - lc.alpha_sum), tol, alpha);
    // each judged candidate passes with chance sum_x min(p, q) given what came before, so
    // accepted - alpha_sum is a sum of zero-mean steps of variance a(1 - a)
    double sd = sqrt(lc.alpha_var), z = sd > 0 ? fabs((double)s.guesses_accepted - lc.alpha_sum) / sd : 0;
    check(z < 5.0, "%s t=%.1f: accepted %ld vs alpha_sum %.1f, the expected number "
          "(%.1f sigma, sd %.1f): alpha predicts acceptance", model, t, s.guesses_accepted,
          lc.alpha_sum, z, sd);
    free_spec_buffers(&b);
    free(seq);
    free(ref);
    free(p);
}

// stats_run on the shared random model and, if it is there, on the trained model
// tinyshakespeare/model.bin (whatever its numbers), at t = 1 and 0.7, with the bigram.
// (The other drafts and --draft-p-min are beyond.c's: test/test_beyond.c.)
static void test_stats(Fixture *fx) {
    float temps[2] = {1.0f, 0.7f};
    for (int ti = 0; ti < 2; ti++)
        stats_run(&fx->model, &fx->draft, &fx->vocab, "random model", temps[ti], 31 + ti);
    struct stat st;
    if (stat(DEFAULT_MODEL, &st) != 0) {
        printf("  (no %s: the stats checks ran on the random model only)\n", DEFAULT_MODEL);
        return;
    }
    GPT trained;
    Vocab tv;
    char err[512] = "";
    memset(&trained, 0, sizeof(trained));
    memset(&tv, 0, sizeof(tv));
    int loaded = load_checkpoint(DEFAULT_MODEL, &trained, &tv, err, sizeof(err)) == 0;
    // the shared draft counts the corpus in the fixture's vocabulary: it must be the model's
    int same_vocab = loaded && tv.size == fx->vocab.size &&
                     memcmp(tv.chars, fx->vocab.chars, (size_t)tv.size) == 0;
    if (check(loaded && same_vocab, "load the trained model %s (vocabulary of %d characters, "
              "the corpus's: %s) %s", DEFAULT_MODEL, tv.size, same_vocab ? "yes" : "no", err))
        for (int ti = 0; ti < 2; ti++)
            stats_run(&trained, &fx->draft, &fx->vocab, "trained model", temps[ti], 41 + ti);
    free_gpt(&trained);
}

// ----------------------------------------------------------------------------
// 12b. alpha and the tokens a verify pass is expected to give

// sum_{i=0..K} alpha^i, the test's own: the expected tokens of a round whose guesses
// each pass with chance alpha (the first failure ends it, a bonus follows K passes).
static double geometric_sum(double alpha, int K) {
    double s = 0.0, term = 1.0;
    for (int i = 0; i <= K; i++, term *= alpha) s += term;
    return s;
}

// expected_acceptance on rows whose overlap is known; stats_alpha is alpha_sum / judged;
// expected_tokens_per_pass is the closed form at alpha 0, 0.5, 1 (K+1) and others; and
// rounds simulated with accept_reject give that many tokens on average.
static void test_alpha_formulas(void) {
    enum { V = 5 };
    float p[V] = {0.3f, 0.3f, 0.05f, 0.2f, 0.15f}, q[V] = {0.1f, 0.2f, 0.4f, 0.2f, 0.1f};
    float hot1[V], hot3[V], uni[V] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
    set_one_hot(hot1, V, 1);
    set_one_hot(hot3, V, 3);
    double a_pq = expected_acceptance(p, q, V), a_qp = expected_acceptance(q, p, V);
    double a_pp = expected_acceptance(p, p, V), a_13 = expected_acceptance(hot1, hot3, V);
    double a_11 = expected_acceptance(hot1, hot1, V), a_1u = expected_acceptance(hot1, uni, V);
    double sum_p = 0.0;
    for (int i = 0; i < V; i++) sum_p += p[i];
    check(fabs(a_pq - 0.65) < 1e-7 && a_pq == a_qp && fabs(a_pp - sum_p) < 1e-7 && a_13 == 0.0 &&
          a_11 == 1.0 && fabs(a_1u - 0.2) < 1e-7,
          "expected_acceptance = sum min(p,q): %.7f (want 0.1+0.2+0.05+0.2+0.1 = 0.65), "
          "symmetric %.7f, p with itself %.7f (sum p %.7f), disjoint one-hots %g, equal "
          "one-hots %g, one-hot vs uniform %.7f (want 0.2)", a_pq, a_qp, a_pp, sum_p, a_13,
          a_11, a_1u);
    Stats none, some;
    memset(&none, 0, sizeof(none));
    memset(&some, 0, sizeof(some));
    some.drafted = 20;
    some.judged = 8;
    some.guesses_accepted = 6;
    some.resampled = 2;
    some.alpha_sum = 3.2;
    check(stats_alpha(&none) == 0.0 && stats_alpha(&some) == 3.2 / 8,
          "stats_alpha: 0 with nothing judged (%g); alpha_sum 3.2 over 8 judged (6 accepted of "
          "20 drafted) -> %g (want 0.4)", stats_alpha(&none), stats_alpha(&some));
    // the closed form against the test's own sum, and its two ends exactly
    double alphas[] = {0.0, 0.25, 0.5, 0.9, 1.0 - 1e-6, 1.0};
    int Ks[] = {1, 4, 8}, bad = 0;
    double worst = 0.0;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 3; j++) {
            double got = expected_tokens_per_pass(alphas[i], Ks[j]);
            double want = geometric_sum(alphas[i], Ks[j]), rel = fabs(got - want) / want;
            if (rel > worst || rel != rel) worst = rel;
            bad += !(rel < 1e-9);
        }
    double e0 = expected_tokens_per_pass(0.0, 4), e5 = expected_tokens_per_pass(0.5, 4);
    double e1 = expected_tokens_per_pass(1.0, 4), e18 = expected_tokens_per_pass(1.0, 8);
    check(bad == 0 && e0 == 1.0 && fabs(e5 - 1.9375) < 1e-12 && e1 == 5.0 && e18 == 9.0,
          "expected_tokens_per_pass == (1 - alpha^(K+1)) / (1 - alpha): alpha 0 K=4 -> %g "
          "(want 1), 0.5 K=4 -> %.6f (want 1.9375), 1 K=4 -> %g and K=8 -> %g (want K+1); "
          "alpha in {0,.25,.5,.9,1-1e-6,1} x K in {1,4,8} vs sum of alpha^i: max relative "
          "diff %.2g", e0, e5, e1, e18, worst);
    // simulated rounds: K = 4 guesses drawn from q, judged against p, bonus allowed
    enum { K = 4, ROUNDS = 100000 };
    float qk[K * V], pk[(K + 1) * V];
    for (int i = 0; i < K; i++) memcpy(qk + i * V, q, sizeof(q));
    for (int i = 0; i <= K; i++) memcpy(pk + i * V, p, sizeof(p));
    int cand[K], out[K + 1];
    double u[K], sum = 0.0, sum2 = 0.0, res[V];
    SpecBuffers bk = {.V = V, .candidates = cand, .draft_probs = qk, .target_probs = pk,
                      .u = u, .adjusted = res, .emitted = out}; // a round's buffers, on these
    Rng r;
    rng_seed(&r, 4321);
    for (int t = 0; t < ROUNDS; t++) {
        for (int i = 0; i < K; i++) cand[i] = sample_from(q, V, rng_uniform(&r));
        int n = accept_reject(&bk, K, 1, &r);
        sum += n;
        sum2 += (double)n * n;
    }
    double mean = sum / ROUNDS, var = sum2 / ROUNDS - mean * mean;
    double want = expected_tokens_per_pass(a_pq, K), z = fabs(mean - want) / sqrt(var / ROUNDS);
    check(z < 5.0, "%d simulated rounds at K=%d with sum min(p,q) = %.4f: %.4f tokens per "
          "round vs expected_tokens_per_pass %.4f (%.1f sigma)", ROUNDS, K, a_pq, mean, want, z);
}

// ----------------------------------------------------------------------------
// 12c. print_stats

// print_stats's arguments, for stderr_of.
typedef struct {
    const Stats *s;
    int speculative, K;
} PrintArgs;

// Runs print_stats("title", ...) for stderr_of.
static void print_with(const void *arg) {
    const PrintArgs *a = arg;
    print_stats("title", a->s, a->speculative);
}

// What print_stats prints for s (check.h's stderr_of), or NULL.
static char *print_stats_text(const Stats *s, int speculative, int K) {
    PrintArgs args = {s, speculative, K};
    return stderr_of(print_with, &args);
}

// print_stats shows both numbers: the acceptance rate accepted/judged, and alpha, the
// mean of sum min(p,q) over the judged candidates, with the tokens per verify pass alpha
// predicts at the mean k (drafted / rounds); the rounds and how they ended, the target
// passes by kind and the wall time; plain decoding without the speculative lines. (The acceptance by position and the time table are
// beyond.c's print_run_stats: test/test_beyond.c.)
static void test_print_stats(void) {
    Stats s;
    memset(&s, 0, sizeof(s));
    s.rounds = 6;
    s.drafted = 20;
    s.judged = 8;
    s.guesses_accepted = 6;
    s.resampled = 2;
    s.bonus = 3;
    s.alpha_sum = 3.2;
    s.round_tokens = 12;
    s.emitted = 13;
    s.target_passes = 7;
    s.passes[PREFILL_PASS] = 1;
    s.passes[VERIFY_PASS] = 6;
    s.seconds = 10e-3;
    char rate[32], alpha[32], predicted[32];
    snprintf(rate, sizeof(rate), "%.3f", 6.0 / 8.0);
    snprintf(alpha, sizeof(alpha), "%.3f", 3.2 / 8.0);
    // at the mean k, 20 / 6 guesses a round: 1 + 0.4 + .. + 0.4^k with k not whole
    snprintf(predicted, sizeof(predicted), "%.3f", (1.0 - pow(0.4, 20.0 / 6.0 + 1.0)) / 0.6);
    char *text = print_stats_text(&s, 1, 4);
    // the line that starts with "alpha" (after the indent)
    const char *line = NULL;
    for (const char *at = text; at && (at = strstr(at, "\n  alpha")) != NULL; at++) line = at + 1;
    char alpha_line[256] = "";
    if (line) {
        size_t len = strcspn(line, "\n");
        snprintf(alpha_line, sizeof(alpha_line), "%.*s", (int)(len < 255 ? len : 255), line);
    }
    check(text && contains(text, "acceptance rate") && contains(text, rate) && line &&
          contains(alpha_line, alpha) && contains(text, predicted),
          "print_stats (6 accepted of 8 judged, 20 drafted in 6 rounds, alpha_sum 3.2) prints "
          "the acceptance rate %s, an alpha line with %s (\"%s\") and the predicted %s tokens "
          "per pass", rate, alpha, alpha_line, predicted);
    char rounds[256], passes[256], wall[256], per_pass[256];
    stats_line(text, "rounds", rounds, sizeof(rounds));
    stats_line(text, "target passes", passes, sizeof(passes));
    stats_line(text, "wall time", wall, sizeof(wall));
    stats_line(text, "tokens per verify pass", per_pass, sizeof(per_pass));
    check(contains(rounds, " 6 ") && contains(rounds, "2 ending in a resample") &&
          contains(rounds, "3 in a bonus") && contains(passes, " 7 ") &&
          contains(passes, "(1 prefill, 0 refill, 6 verify)") &&
          contains(wall, "10.000 ms") && contains(wall, "1300 tokens/s") &&
          contains(per_pass, "2.000"),
          "print_stats (6 rounds, 2 resampled, 3 bonus, 7 target passes, 13 tokens in 10 ms, "
          "12 round tokens) prints \"%s\", \"%s\", \"%s\" and \"%s\"", rounds, passes, wall,
          per_pass);
    free(text);
    // plain decoding: no speculative lines
    Stats pl;
    memset(&pl, 0, sizeof(pl));
    pl.emitted = 50;
    pl.target_passes = 49;
    pl.passes[PREFILL_PASS] = 1;
    pl.passes[REFILL_PASS] = 2;
    pl.passes[STEP_PASS] = 46;
    pl.seconds = 10e-3;
    text = print_stats_text(&pl, 0, 4);
    char tp[256];
    stats_line(text, "target passes", tp, sizeof(tp));
    check(text && contains(tp, " 49 ") && contains(tp, "(1 prefill, 2 refill, 46 one-token)") &&
          !contains(text, "alpha") && !contains(text, "rounds") &&
          !contains(text, "acceptance"), "print_stats (plain) prints \"%s\" (want 49) and no "
          "alpha, rounds or acceptance line: %s", tp,
          text && !contains(text, "alpha") && !contains(text, "rounds") ? "none" : "SOME");
    free(text);
}

// ----------------------------------------------------------------------------
// 13. Determinism, and the max_new_tokens = 0 edge

// A seed fixes a sampled run; another seed gives another text (for both decoders).
static void test_determinism(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, K = 4;
    enum { N_NEW = 400 };
    int prompt[64], np = encode_str(&fx->vocab, "ROMEO:\n", prompt), cap = np + N_NEW;
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) {
        check(0, "determinism: buffers");
        return;
    }
    int *a = malloc((size_t)cap * sizeof(int)), *b2 = malloc((size_t)cap * sizeof(int));
    int *c = malloc((size_t)cap * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    DecodeOptions o = {.temperature = 1.0f, .K = K, .trace = 0, .vocab = &fx->vocab};
    for (int plain = 0; plain < 2; plain++) {
        uint64_t seeds[3] = {42, 42, 43};
        int *out[3] = {a, b2, c};
        for (int i = 0; i < 3; i++) {
            Stats s;
            memset(&s, 0, sizeof(s));
            Rng r;
            rng_seed(&r, seeds[i]);
            o.max_new_tokens = N_NEW;
            o.rng = &r;
            o.st = &s;
            if (plain) generate(g, &(Tokens){prompt, np}, &o, out[i], p);
            else speculative_generate(g, &fx->draft, &b, &(Tokens){prompt, np}, &o, out[i]);
        }
        int differ = 0;
        for (int i = np; i < cap; i++) differ += a[i] != c[i];
        int same = memcmp(a, b2, (size_t)cap * sizeof(int)) == 0;
        check(same && differ > 0, "%s t=1: seed 42 twice gives the same %d tokens: %s; seed 43 "
              "differs at %d of %d positions", plain ? "plain" : "speculative", N_NEW,
              same ? "yes" : "no", differ, N_NEW);
    }
    free_spec_buffers(&b);
    free(a); free(b2); free(c); free(p);
}

// max_new_tokens = 0 asks for nothing: both decoders must emit 0 tokens and write nothing past
// the documented capacity max(n_prompt, 1) + max_new_tokens (a guard slot sits just after it).
static void test_zero_new_tokens(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, K = 4, prompt[64];
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt);
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) {
        check(0, "max_new_tokens=0: buffers");
        return;
    }
    int *seq = malloc((size_t)(np + 1) * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    DecodeOptions o = {.temperature = 1.0f, .K = K, .trace = 0, .vocab = &fx->vocab};
    for (int plain = 0; plain < 2; plain++) {
        Stats s;
        memset(&s, 0, sizeof(s));
        Rng r;
        rng_seed(&r, 1);
        seq[np] = -12345; // guard slot
        o.max_new_tokens = 0;
        o.rng = &r;
        o.st = &s;
        if (plain) generate(g, &(Tokens){prompt, np}, &o, seq, p);
        else speculative_generate(g, &fx->draft, &b, &(Tokens){prompt, np}, &o, seq);
        check(s.emitted == 0 && seq[np] == -12345, "%s with max_new_tokens=0 emits %ld tokens (want 0) and "
              "%s the slot after its capacity", plain ? "generate" : "speculative_generate",
              s.emitted, seq[np] == -12345 ? "leaves" : "WRITES");
    }
    free_spec_buffers(&b);
    free(seq);
    free(p);
}

// ----------------------------------------------------------------------------
// 14. Checkpoint

// parse_checkpoint on a private heap copy of len bytes (so a sanitizer sees any read
// past the end); leaves the message in err and frees whatever was built.
static int parse_copy(const unsigned char *buf, size_t len, char *err, size_t errlen) {
    unsigned char *c = malloc(len ? len : 1);
    if (len) memcpy(c, buf, len);
    GPT g;
    Vocab v;
    memset(&g, 0, sizeof(g));
    memset(&v, 0, sizeof(v));
    err[0] = '\0';
    int rc = parse_checkpoint(c, len, &g, &v, err, errlen);
    free_gpt(&g);
    free(c);
    return rc;
}

// Rewrites the trailing FNV-1a checksum after an edit, so that the intended check fires.
static void fix_checksum(unsigned char *buf, size_t n) {
    uint64_t h = fnv1a64(buf, n - 8);
    for (int i = 0; i < 8; i++) buf[n - 8 + i] = (unsigned char)(h >> (8 * i));
}

// Expects parse_checkpoint to reject a mutated copy with a message containing want.
static void expect_reject(const unsigned char *buf, size_t len, const char *what,
                          const char *want, const char *want2) {
    char err[512];
    int rc = parse_copy(buf, len, err, sizeof(err));
    check(rc == -1 && contains(err, want) && (!want2 || contains(err, want2)),
          "checkpoint %s rejected (rc %d) with \"%s\"%s%s: \"%s\"", what, rc, want,
          want2 ? " and " : "", want2 ? want2 : "", err);
}

// Counts directory entries whose name contains sub.
static int count_entries(const char *dir, const char *sub) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, sub) != NULL;
    closedir(d);
    return n;
}

// save/load round-trips the model exactly; every kind of corruption is caught with a
// message that names it; a failed save leaves nothing and a save replaces a file whole.
static void test_checkpoint(Fixture *fx) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size;
    char dir[] = "/tmp/specdec_test.XXXXXX";
    if (!check(mkdtemp(dir) != NULL, "make a temporary directory for checkpoints")) return;
    char path[256], over[256], missing_dir[256], missing[512], err[512];
    snprintf(path, sizeof(path), "%s/model.bin", dir);
    snprintf(over, sizeof(over), "%s/over.bin", dir);
    snprintf(missing_dir, sizeof(missing_dir), "%s/no_such_dir", dir);
    snprintf(missing, sizeof(missing), "%s/model.bin", missing_dir);

    // round trip
    err[0] = '\0';
    int rc = save_checkpoint(g, &fx->vocab, path, err, sizeof(err));
    GPT h;
    Vocab hv;
    memset(&h, 0, sizeof(h));
    memset(&hv, 0, sizeof(hv));
    int rc2 = rc == 0 ? load_checkpoint(path, &h, &hv, err, sizeof(err)) : -1;
    if (check(rc == 0 && rc2 == 0, "save_checkpoint + load_checkpoint succeed (%d, %d) %s", rc,
              rc2, err)) {
        int cfg = memcmp(&h.config, &g->config, sizeof(Config)) == 0;
        int voc = hv.size == fx->vocab.size &&
                  memcmp(hv.chars, fx->vocab.chars, (size_t)hv.size) == 0 &&
                  memcmp(hv.id, fx->vocab.id, sizeof(hv.id)) == 0;
        int par = h.n_params == g->n_params &&
                  memcmp(h.params, g->params, g->n_params * sizeof(float)) == 0;
        check(cfg && voc && par, "checkpoint round trip: config %s, vocabulary %s, %zu parameters "
              "%s", cfg ? "equal" : "DIFFER", voc ? "equal" : "DIFFER", h.n_params,
              par ? "bit-identical" : "DIFFER");
        if (cfg) {
            const int *tok = fx->corpus.tokens + 777;
            size_t n = (size_t)16 * V;
            float *lg = malloc(n * sizeof(float));
            reset_cache(g);
            memcpy(lg, forward(g, tok, 16), n * sizeof(float));
            reset_cache(&h);
            const float *lh = forward(&h, tok, 16);
            check(memcmp(lg, lh, n * sizeof(float)) == 0, "loaded model's logits == original's "
                  "for 16 tokens, bit for bit (max diff %.2g)", max_abs_diff(lg, lh, n));
            free(lg);
        }
    }
    free_gpt(&h);

    // the file: size 36 + V + 4P, checksum FNV-1a 64 little-endian over the rest
    size_t n = 0;
    unsigned char *file = slurp(path, &n);
    size_t P = lecture_param_count(&g->config), want_n = 36 + (size_t)V + 4 * P;
    if (!check(file && n == want_n, "checkpoint file is %zu bytes (36 + V + 4P = %zu)", n, want_n)) {
        free(file);
        goto cleanup;
    }
    uint64_t stored = 0;
    for (int i = 7; i >= 0; i--) stored = stored << 8 | file[n - 8 + i];
    int vectors = fnv1a64((const unsigned char *)"", 0) == 0xcbf29ce484222325ULL &&
                  fnv1a64((const unsigned char *)"a", 1) == 0xaf63dc4c8601ec8cULL &&
                  fnv1a64((const unsigned char *)"foobar", 6) == 0x85944171f73967e8ULL;
    check(vectors && stored == fnv1a64(file, n - 8) && memcmp(file, "SPDC", 4) == 0,
          "fnv1a64 matches the published FNV-1a 64 vectors (\"\", \"a\", \"foobar\"): %s; the "
          "file's magic and trailing checksum %016llx are right", vectors ? "yes" : "no",
          (unsigned long long)stored);
    err[0] = '\0';
    check(parse_copy(file, n, err, sizeof(err)) == 0, "parse_checkpoint accepts an unmodified "
          "in-memory copy %s", err);

    // truncation at every section boundary
    size_t header = 28, params_at = header + (size_t)V;
    size_t cuts[] = {0, 3, 4, 8, 27, 28, params_at - 1, params_at, params_at + 4 * P / 2, n - 8,
                     n - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "truncated to %zu bytes", cuts[i]);
        if (cuts[i] < header) expect_reject(file, cuts[i], what, "shorter than", "bytes");
        else expect_reject(file, cuts[i], what, "needs", "bytes");
    }
    // header and content corruptions (checksum recomputed where a later check must fire)
    unsigned char *m = malloc(n);
    memcpy(m, file, n);
    m[0] = 'X';
    expect_reject(m, n, "with wrong magic", "magic", NULL);
    memcpy(m, file, n);
    put_u32(m + 4, 2);
    fix_checksum(m, n);
    expect_reject(m, n, "with version 2", "version", NULL);
    memcpy(m, file, n);
    m[params_at + 1000] ^= 0x40;
    expect_reject(m, n, "with a flipped parameter byte", "checksum", NULL);
    memcpy(m, file, n);
    put_u32(m + 8, 3);
    fix_checksum(m, n);
    expect_reject(m, n, "with n_layer 3 (checksum fixed)", "needs", NULL);
    memcpy(m, file, n);
    m[header + 1] = m[header];
    fix_checksum(m, n);
    expect_reject(m, n, "with a repeated vocabulary byte (checksum fixed)", "ascending", NULL);
    memcpy(m, file, n);
    size_t sizes[N_TENSORS], key_at = 0;
    weight_sizes(&g->config, sizes);
    for (int t = 0; t < 5; t++) key_at += sizes[t]; // tensor 5 is "key"
    put_u32(m + params_at + 4 * (key_at + 3), 0x7fc00000u); // a quiet NaN
    fix_checksum(m, n);
    expect_reject(m, n, "with a NaN in key (checksum fixed)", "finite", "tensor key");
    memcpy(m, file, n);
    put_u32(m + params_at + 4 * (P - 1), 0x7f800000u); // +inf, the very last parameter
    fix_checksum(m, n);
    expect_reject(m, n, "with +inf as the last parameter (checksum fixed)", "finite",
                  "lm_head_bias");
    memcpy(m, file, n);
    put_u32(m + 12, 3);
    fix_checksum(m, n);
    expect_reject(m, n, "with n_head 3 for n_embd 64 (checksum fixed)", "multiple", NULL);
    free(m);

    // a save into a missing directory fails and leaves nothing behind
    err[0] = '\0';
    rc = save_checkpoint(g, &fx->vocab, missing, err, sizeof(err));
    struct stat st;
    int nothing = stat(missing, &st) != 0 && stat(missing_dir, &st) != 0;
    check(rc == -1 && contains(err, "cannot write") && nothing, "save into a missing directory "
          "fails (rc %d) with \"cannot write\" and creates nothing: \"%s\"", rc, err);

    // a save over a larger existing file replaces it completely
    size_t junk_n = n + 1000;
    unsigned char *junk = malloc(junk_n);
    memset(junk, 0xAB, junk_n);
    write_bytes(over, junk, junk_n);
    free(junk);
    err[0] = '\0';
    rc = save_checkpoint(g, &fx->vocab, over, err, sizeof(err));
    size_t n2 = 0;
    unsigned char *again = slurp(over, &n2);
    int replaced = again && n2 == n && memcmp(again, file, n) == 0;
    int tmps = count_entries(dir, ".tmp.");
    check(rc == 0 && replaced && tmps == 0, "save over a %zu-byte file replaces it whole (rc %d, "
          "now %zu bytes, equal to a fresh save: %s) and leaves %d *.tmp.* files", junk_n, rc, n2,
          replaced ? "yes" : "no", tmps);
    free(again);
    free(file);
cleanup:
    unlink(path);
    unlink(over);
    rmdir(dir);
}

// ----------------------------------------------------------------------------
// ----------------------------------------------------------------------------
// 15. load_corpus errors

// Each bad corpus gets an error naming the problem, and the Corpus left behind holds
// no freed pointer (main calls free_corpus after a failed load).
static void test_corpus_errors(const Fixture *fx) {
    char dir[] = "/tmp/specdec_corpus.XXXXXX";
    if (!check(mkdtemp(dir) != NULL, "make a temporary directory for corpora")) return;
    char missing[256], empty[256], one[256], hash[256];
    snprintf(missing, sizeof(missing), "%s/no_such_file.txt", dir);
    snprintf(empty, sizeof(empty), "%s/empty.txt", dir);
    snprintf(one, sizeof(one), "%s/one.txt", dir);
    snprintf(hash, sizeof(hash), "%s/hash.txt", dir);
    write_bytes(empty, "", 0);
    write_bytes(one, "a", 1);
    const char *hash_text = "hello\n#abc"; // '#' at offset 6 is not in Tiny Shakespeare
    write_bytes(hash, hash_text, strlen(hash_text));
    struct { const char *name, *path; int given_vocab; const char *want[3]; } cases[] = {
        {"a missing file", missing, 0, {"make data", "no_such_file.txt", NULL}},
        {"a directory", dir, 0, {"not a regular file", NULL, NULL}},
        {"an empty file", empty, 0, {"at least 2", "has 0 bytes", NULL}},
        {"a 1-byte file", one, 0, {"at least 2", "has 1 byte", NULL}},
        {"a '#' with the 65-char vocabulary", hash, 1, {"'#'", "0x23", "offset 6"}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Corpus c;
        Vocab v;
        if (cases[i].given_vocab) v = fx->vocab;
        else memset(&v, 0, sizeof(v));
        char err[512] = "";
        int rc = load_corpus(&c, cases[i].path, &v, err, sizeof(err));
        int named = 1;
        for (int j = 0; j < 3 && cases[i].want[j]; j++) named &= contains(err, cases[i].want[j]);
        check(rc == -1 && named, "load_corpus of %s fails (rc %d) with %s%s%s%s%s: \"%s\"",
              cases[i].name, rc, cases[i].want[0], cases[i].want[1] ? ", " : "",
              cases[i].want[1] ? cases[i].want[1] : "", cases[i].want[2] ? ", " : "",
              cases[i].want[2] ? cases[i].want[2] : "", err);
        // main() calls free_corpus on this Corpus: it must not hold freed pointers
        int clean = c.bytes == NULL && c.tokens == NULL;
        check(clean, "load_corpus of %s leaves no freed pointer in the Corpus (bytes %s, tokens "
              "%s), so free_corpus after it is safe", cases[i].name,
              c.bytes ? "DANGLING" : "NULL", c.tokens ? "DANGLING" : "NULL");
        if (clean) free_corpus(&c); // a no-op then; calling it on dangling pointers would crash
    }
    unlink(empty);
    unlink(one);
    unlink(hash);
    rmdir(dir);
}

// ----------------------------------------------------------------------------

// Runs one test function and prints its wall time as a commentary line.
#define TIMED(call)                                                              \
    do {                                                                         \
        double t0_ = now_seconds();                                              \
        call;                                                                    \
        printf("  (%s: %.2f s)\n", #call, now_seconds() - t0_);                 \
    } while (0)

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); // each line reaches the runner even after an abort
    Fixture fx;
    memset(&fx, 0, sizeof(fx));
    char err[512] = "";
    if (load_corpus_learning_vocab(&fx.corpus, CORPUS_PATH, &fx.vocab, err, sizeof(err)) != 0) {
        check(0, "load %s (run 'make data'): %s", CORPUS_PATH, err);
        return 1;
    }
    Config c = {4, 4, 64, 32, fx.vocab.size, 256};
    if (build_gpt(&fx.model, &c) != 0 ||
        BigramDraftModel(&fx.draft, fx.corpus.tokens, fx.corpus.n_train, fx.vocab.size) != 0) {
        check(0, "build the shared model and draft: out of memory");
        return 1;
    }
    init_gpt_random(&fx.model, 1337);
    // the CLI's helpers are not under test here; naming them keeps -Wunused-function quiet
    (void)usage;
    (void)run_generation;

    TIMED(test_param_count());
    TIMED(test_tokenizer_corpus(&fx));
    TIMED(test_bigram(&fx));
    TIMED(test_forward_reference(&fx));
    TIMED(test_attention());
    TIMED(test_kv_layout(&fx));
    TIMED(test_kv_chunking(&fx));
    TIMED(test_prefill(&fx));
    TIMED(test_trim(&fx));
    TIMED(test_untrimmed_control(&fx));
    TIMED(test_refill(&fx));
    TIMED(test_sample_from());
    TIMED(test_probs(&fx));
    TIMED(test_accept_reject());
    TIMED(test_greedy_equivalence(&fx));
    TIMED(test_stats(&fx));
    TIMED(test_alpha_formulas());
    TIMED(test_print_stats());
    TIMED(test_determinism(&fx));
    TIMED(test_zero_new_tokens(&fx));
    TIMED(test_checkpoint(&fx));
    TIMED(test_corpus_errors(&fx));

    free_bigram_draft(&fx.draft);
    free_gpt(&fx.model);
    free_corpus(&fx.corpus);
    printf("test_specdec summary: %d checks passed and %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
