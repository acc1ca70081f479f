/*
 * specdec.c — speculative decoding, from scratch, in one C file.
 *
 * What this is
 *   A reference implementation of speculative decoding that you can read top to
 *   bottom and step through in a debugger. It holds:
 *     - a tiny character-level GPT (the lecture model: 4 layers, 4 heads, 64-wide
 *       embeddings, a 32-token context, 65-char vocabulary, 209,729 parameters),
 *       written with plain loops and a KV cache;
 *     - a Laplace-smoothed bigram table built from Tiny Shakespeare: the draft model;
 *     - the four-phase loop  draft -> verify -> accept/reject -> trim the KV cache,
 *       with a trace that prints every p/q decision, --color to show which characters
 *       the draft earned, and plain decoding beside it;
 *     - a greedy-equivalence self-test (--selftest);
 *     - `./specdec bench`: the verify cost c(T) and the K sweep beside the speedup model;
 *     - the backward pass, AdamW and `./specdec train`, which made the shipped
 *       tinyshakespeare/model.bin.
 *   The functions carry the names of the blog post's Python functions:
 *       BigramDraftModel, draft_tokens, verify_candidates, accept_reject,
 *       trim_kv_cache, speculative_generate   (and generate, the baseline).
 *
 * What this is not
 *   Not a fast inference engine, not a training framework (it trains this one model,
 *   with the lecture's recipe, and nothing else), not a tokenizer library. Batch size
 *   is 1 at inference; one thread.
 *
 * Constraints
 *   C11, libc + libm only. No -ffast-math and no FMA contraction by the compiler:
 *   the sum for one token must come out bit-identical whether that token is run
 *   alone or with K others in one pass, or greedy speculative decoding would drift
 *   from plain greedy decoding. (The matmul kernel fuses with fmaf itself, the same
 *   way on every path; see gemm_acc.) Every bad input ends in one line on stderr and
 *   exit status 1.
 *
 * Test-only flags
 *   -DBREAK_RESIDUAL, -DBREAK_RATIO, -DBREAK_DRAFT_Q, -DBREAK_TRIM and
 *   -DBREAK_LAYERNORM_BACKWARD each plant one known bug (see the #ifdef where it
 *   sits). test/ builds them to show that its tests fail when the code is wrong.
 *
 * Build and run
 *   make            # ./specdec, optimised
 *   make run        # the demo: a traced speculative run, then a greedy comparison
 *   make train      # retrain tinyshakespeare/model.bin (under 2 minutes, one core)
 *   make test       # unit, exactness, CLI, sanitizer, valgrind and fuzz tests
 *   make bench      # c(T), the K sweep and the speedup model (notes/speed.md)
 *   ./specdec explain  # one accept/reject decision worked out exactly (notes/math.md)
 *   make debug      # ./specdec_debug: -O0 -g3, address + undefined sanitizers
 *
 * Step through it (notes/debugging.md; test/gdb_walkthrough.gdb does one whole round)
 *   gdb --args ./specdec_debug -n 20 --trace
 *   (gdb) set environment ASAN_OPTIONS detect_leaks=0   # no leak check under ptrace
 *   (gdb) break accept_reject       # one p/q decision per candidate
 *   (gdb) run
 *   (gdb) p candidates[0]@k         # the draft's guesses
 *   (gdb) p q_draft[candidates[0]]  # q of the first guess (guess i: q_draft[i*V + ...])
 *   (gdb) finish                    # returns how many tokens the round emits
 *
 * Size letters used in the shape comments (declared once, here):
 *   B  batch size (always 1 at inference)
 *   T  tokens in one forward pass (1 for plain decoding, k+1 for a verify pass)
 *   C  embedding width, n_embd            (64)
 *   V  vocabulary size                     (65)
 *   L  number of transformer blocks        (4)
 *   NH number of attention heads           (4);  HS = C / NH, the head size (16)
 *   S  block_size, the longest context     (32)
 *   K  draft length, tokens guessed per round (4 by default)
 *   N  corpus length in bytes                (1,115,394)
 *   P  parameter count                        (209,729)
 */

#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> // isatty, for --color's default
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// Config, weights and run state

typedef struct {
    int n_layer;    // L,  number of transformer blocks      e.g. 4
    int n_head;     // NH, attention heads per block         e.g. 4
    int n_embd;     // C,  residual stream width             e.g. 64
    int block_size; // S,  longest context, in tokens        e.g. 32
    int vocab_size; // V,  distinct characters               e.g. 65
} Config;

// The blog's model: 4 layers, 4 heads, 64 wide, 32 tokens of context, 65 chars.
#define DEFAULT_CONFIG {4, 4, 64, 32, 65}

// The model's parameters, pointing into one allocation (see weight_sizes).
// Names follow the lecture's PyTorch modules; each block's tensors are stacked
// along a leading L axis. A Linear's weight is stored (in, out): PyTorch's
// weight transposed, so that matmul's inner loop is contiguous.
typedef struct {
    float *token_embedding;    // (V, C)      token_embedding_table
    float *position_embedding; // (S, C)      position_embedding_table
    float *ln1_weight;         // (L, C)      blocks[l].ln1
    float *ln1_bias;           // (L, C)
    float *query;              // (L, C, C)   blocks[l].sa.heads[h].query: column h*HS+j = head h's row j
    float *key;                // (L, C, C)   .key   (no bias), heads side by side the same way
    float *value;              // (L, C, C)   .value (no bias)
    float *proj_weight;        // (L, C, C)   blocks[l].sa.proj
    float *proj_bias;          // (L, C)
    float *ln2_weight;         // (L, C)      blocks[l].ln2
    float *ln2_bias;           // (L, C)
    float *ffwd_up_weight;     // (L, C, 4C)  blocks[l].ffwd.net[0]  Linear(C, 4C)
    float *ffwd_up_bias;       // (L, 4C)
    float *ffwd_down_weight;   // (L, 4C, C)  blocks[l].ffwd.net[2]  Linear(4C, C)
    float *ffwd_down_bias;     // (L, C)
    float *ln_f_weight;        // (C)         ln_f
    float *ln_f_bias;          // (C)
    float *lm_head_weight;     // (C, V)      lm_head (not tied to the embedding)
    float *lm_head_bias;       // (V)
} Weights;
#define N_TENSORS 19

// Names of the tensors in checkpoint order, for messages and the format doc.
static const char *TENSOR_NAMES[N_TENSORS] = {
    "token_embedding", "position_embedding", "ln1_weight", "ln1_bias",
    "query", "key", "value", "proj_weight", "proj_bias", "ln2_weight", "ln2_bias",
    "ffwd_up_weight", "ffwd_up_bias", "ffwd_down_weight", "ffwd_down_bias",
    "ln_f_weight", "ln_f_bias", "lm_head_weight", "lm_head_bias"};

// What one transformer block computes for the T tokens of a pass, one buffer per role,
// so a debugger watch on any of them means one thing. Inference keeps one set and reuses
// it for every layer, with x_in, x_mid and x_out all the same residual array updated in
// place; a training pass keeps one set per layer, since its backward pass needs them all.
typedef struct {
    float *x_in;     // (S, C)      residual stream entering the block
    float *ln1;      // (S, C)      ln1(x_in): the input of query, key and value
    float *ln1_mean; // (S)         ln1's per-token mean and 1/std, kept for a backward pass
    float *ln1_rstd; // (S)
    float *q;        // (S, C)      queries of the T tokens, heads side by side
    float *k;        // (S, C)      keys of the T tokens, before they are filed in the cache
    float *att;      // (NH, S, S)  attention weights: head, token attention ran for, position
    float *att_out;  // (S, C)      attention output before proj, heads concatenated
    float *attn;     // (S, C)      proj(att_out): what the attention sub-block adds
    float *x_mid;    // (S, C)      x_in + attn
    float *ln2;      // (S, C)      ln2(x_mid): the input of the MLP
    float *ln2_mean; // (S)
    float *ln2_rstd; // (S)
    float *hidden;   // (S, 4C)     MLP hidden layer, after ReLU
    float *ffwd;     // (S, C)      what the MLP sub-block adds
    float *x_out;    // (S, C)      x_mid + ffwd: the next block's x_in
} BlockActs;

// Activations of one inference pass of up to S tokens, and the KV cache.
typedef struct {
    float *x;           // (S, C)      residual stream of the T tokens in flight
    BlockActs block;    //             one block's buffers, reused by every layer
    BlockActs **layers; // (L)         layers[l] = &block for every l: what forward_core walks
    float *ln_f;        // (S, C)      ln_f(x): the input of lm_head
    float *ln_f_mean;   // (S)
    float *ln_f_rstd;   // (S)
    float *logits;      // (S, V)      output: one row per token of the pass
    float *key_cache;   // (L, C, S)   keys of every cached position, per layer, by feature:
                        //             key_cache[l][i][s] is feature i of position s's key
    float *value_cache; // (L, S, C)   values of every cached position, per layer, by position
    int kv_len;         // positions 0 .. kv_len-1 of the caches are valid
} RunState;

// The target model: config, parameters (one block of floats) and run state.
typedef struct {
    Config config;
    Weights w;
    float *params;   // all parameters, in checkpoint order
    size_t n_params; // 209,729 for the default config
    RunState state;
} GPT;

// A training pass over B windows of S tokens: every block's activations for every window
// (the backward pass needs them all), each window's own cache, and the gradients.
typedef struct {
    int B;              //             windows per batch, e.g. 16
    int n_blocks;       //             B * L block records
    float *resid;       // (B, L+1, S, C) resid[b][l] enters block l; resid[b][L] leaves the last
    float *mid;         // (B, L, S, C)   x_mid of every block
    BlockActs *blocks;  // (B*L)          the blocks' records, window by window
    BlockActs **layers; // (B*L)          &blocks[b*L + l], what forward_core walks
    float *key;         // (B, L, C, S)   each window's keys, by feature as in RunState ...
    float *value;       // (B, L, S, C)   ... and values, as a cache from position 0
    float *ln_f;        // (B, S, C)      ln_f output
    float *ln_f_mean;   // (B, S)
    float *ln_f_rstd;   // (B, S)
    float *logits;      // (B, S, V)
    float *probs;       // (B, S, V)      softmax(logits), kept for the backward pass
    float *grads;       // (P)            dLoss/dparameter, in checkpoint order
    Weights dw;         //                grads split like the weights: dw.key is dLoss/dkey
    float *weights_t;   // (P)            the weights with every matrix transposed ...
    Weights wt;         //                ... to (out, in), split the same way: wt.key is key^T
    // backward scratch for one window at a time, one role each
    float *d_logits;    // (S, V)
    float *d_ln_f;      // (S, C)         gradient of ln_f's output
    float *d_resid;     // (S, C)         gradient of the residual stream where the pass is
    float *d_mid;       // (S, C)         gradient of a block's x_mid
    float *d_hidden;    // (S, 4C)        gradient of the MLP hidden layer
    float *d_ln2;       // (S, C)         gradient of ln2's output
    float *d_att_out;   // (S, C)         gradient of the attention output before proj
    float *d_q;         // (S, C)         gradient of the queries
    float *d_k;         // (S, C)         gradient of the window's keys
    float *d_v;         // (S, C)         gradient of the window's values
    float *d_weights;   // (S)            gradient of one row of attention weights
    float *d_scores;    // (S, S)         gradient of one head's scores, before the softmax
    float *d_ln1;       // (S, C)         gradient of ln1's output
} TrainState;

// The character vocabulary: sorted distinct bytes; id[b] = -1 if b is not in it.
typedef struct {
    int size;                 // V
    unsigned char chars[256]; // chars[i] = byte of token i, ascending
    int id[256];              // id[byte] = token, or -1
} Vocab;

// ----------------------------------------------------------------------------
// Build and free

// n zeroed floats starting on a 64-byte boundary (a cache line, one AVX-512 register),
// or NULL: a free() releases them. malloc's 16-byte alignment would make every 16-float
// load of a weight row straddle two cache lines and cost two; aligned, the matmuls of a
// one-token pass run 13% faster and those of a two-token pass 27% (bench, matmuls alone).
static float *alloc_floats(size_t n) {
    if (n > (SIZE_MAX - 63) / sizeof(float)) return NULL;
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64; // aligned_alloc wants a multiple
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes ? bytes : 64);
    return p;
}

// Fills sizes[i] with the float count of tensor i (checkpoint order); returns the sum.
size_t weight_sizes(const Config *c, size_t sizes[N_TENSORS]) {
    size_t L = c->n_layer, C = c->n_embd, V = c->vocab_size, S = c->block_size;
    size_t table[N_TENSORS] = {
        V * C, S * C,                 // token and position embeddings
        L * C, L * C,                 // ln1
        L * C * C, L * C * C, L * C * C, // query, key, value
        L * C * C, L * C,             // proj
        L * C, L * C,                 // ln2
        L * C * 4 * C, L * 4 * C,     // ffwd up
        L * 4 * C * C, L * C,         // ffwd down
        C, C,                         // ln_f
        C * V, V};                    // lm_head
    size_t total = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        sizes[i] = table[i];
        total += table[i];
    }
    return total;
}

// Points every Weights field at its slice of the one parameter block.
static void point_weights(Weights *w, float *p, const size_t sizes[N_TENSORS]) {
    // the sizes table is the one place that knows the layout; this just walks it
    float **fields[N_TENSORS] = {
        &w->token_embedding, &w->position_embedding, &w->ln1_weight, &w->ln1_bias,
        &w->query, &w->key, &w->value, &w->proj_weight, &w->proj_bias,
        &w->ln2_weight, &w->ln2_bias, &w->ffwd_up_weight, &w->ffwd_up_bias,
        &w->ffwd_down_weight, &w->ffwd_down_bias, &w->ln_f_weight, &w->ln_f_bias,
        &w->lm_head_weight, &w->lm_head_bias};
    for (int i = 0; i < N_TENSORS; i++) {
        *fields[i] = p;
        p += sizes[i];
    }
}

// Allocates a block's buffers for up to S tokens, all but the residual arrays, which the
// caller provides (inference passes one array three times: the residual is updated in place).
static int build_block_acts(BlockActs *a, const Config *c, float *x_in, float *x_mid,
                            float *x_out) {
    size_t S = c->block_size, C = c->n_embd, NH = c->n_head;
    a->x_in = x_in;
    a->x_mid = x_mid;
    a->x_out = x_out;
    a->ln1 = alloc_floats(S * C);
    a->ln1_mean = alloc_floats(S);
    a->ln1_rstd = alloc_floats(S);
    a->q = alloc_floats(S * C);
    a->k = alloc_floats(S * C);
    a->att = alloc_floats(NH * S * S);
    a->att_out = alloc_floats(S * C);
    a->attn = alloc_floats(S * C);
    a->ln2 = alloc_floats(S * C);
    a->ln2_mean = alloc_floats(S);
    a->ln2_rstd = alloc_floats(S);
    a->hidden = alloc_floats(S * 4 * C);
    a->ffwd = alloc_floats(S * C);
    return (a->ln1 && a->ln1_mean && a->ln1_rstd && a->q && a->k && a->att && a->att_out && a->attn &&
            a->ln2 && a->ln2_mean && a->ln2_rstd && a->hidden && a->ffwd) ? 0 : -1;
}

// Frees what build_block_acts allocated (not the residual arrays, which are the caller's).
static void free_block_acts(BlockActs *a) {
    free(a->ln1); free(a->ln1_mean); free(a->ln1_rstd); free(a->q); free(a->k); free(a->att);
    free(a->att_out); free(a->attn); free(a->ln2); free(a->ln2_mean); free(a->ln2_rstd);
    free(a->hidden); free(a->ffwd);
    memset(a, 0, sizeof(*a));
}

// Allocates the activations and the KV cache for a config.
static int build_run_state(RunState *s, const Config *c) {
    size_t S = c->block_size, C = c->n_embd, V = c->vocab_size, L = c->n_layer;
    // zeroed (alloc_floats), so that a cache position never written reads as zero in a debugger
    s->x = alloc_floats(S * C);
    s->ln_f = alloc_floats(S * C);
    s->ln_f_mean = alloc_floats(S);
    s->ln_f_rstd = alloc_floats(S);
    s->logits = alloc_floats(S * V);
    s->key_cache = alloc_floats(L * S * C);
    s->value_cache = alloc_floats(L * S * C);
    s->kv_len = 0;
    // one residual array serves as x_in, x_mid and x_out of every layer
    int blk = build_block_acts(&s->block, c, s->x, s->x, s->x);
    s->layers = malloc(L * sizeof(BlockActs *));
    if (s->layers)
        for (size_t l = 0; l < L; l++) s->layers[l] = &s->block;
    return (blk == 0 && s->layers && s->x && s->ln_f && s->ln_f_mean && s->ln_f_rstd && s->logits &&
            s->key_cache && s->value_cache) ? 0 : -1;
}

// Frees what build_run_state allocated.
static void free_run_state(RunState *s) {
    free_block_acts(&s->block);
    free(s->layers);
    free(s->x); free(s->ln_f); free(s->ln_f_mean); free(s->ln_f_rstd);
    free(s->logits); free(s->key_cache); free(s->value_cache);
    memset(s, 0, sizeof(*s));
}

// Allocates parameters (uninitialised) and run state for a config; 0 on success.
int build_gpt(GPT *g, const Config *c) {
    memset(g, 0, sizeof(*g));
    g->config = *c;
    size_t sizes[N_TENSORS];
    g->n_params = weight_sizes(c, sizes);
    // one allocation for all parameters: one copy in, one copy out, one free
    g->params = alloc_floats(g->n_params);
    if (!g->params) return -1;
    point_weights(&g->w, g->params, sizes);
    return build_run_state(&g->state, c);
}

// Frees what build_gpt allocated; safe on a zeroed or half-built GPT.
void free_gpt(GPT *g) {
    free(g->params);
    free_run_state(&g->state);
    memset(g, 0, sizeof(*g));
}

// Allocates a training pass of B windows for a model's config; 0 on success.
int build_train_state(TrainState *ts, const Config *c, int B) {
    memset(ts, 0, sizeof(*ts));
    size_t S = c->block_size, C = c->n_embd, V = c->vocab_size, L = c->n_layer;
    size_t SC = S * C, sizes[N_TENSORS];
    ts->B = B;
    ts->n_blocks = B * (int)L;
    ts->resid = alloc_floats((size_t)B * (L + 1) * SC);
    ts->mid = alloc_floats((size_t)B * L * SC);
    ts->blocks = calloc((size_t)B * L, sizeof(BlockActs));
    ts->layers = calloc((size_t)B * L, sizeof(BlockActs *));
    ts->key = alloc_floats((size_t)B * L * SC);
    ts->value = alloc_floats((size_t)B * L * SC);
    ts->ln_f = alloc_floats((size_t)B * SC);
    ts->ln_f_mean = alloc_floats((size_t)B * S);
    ts->ln_f_rstd = alloc_floats((size_t)B * S);
    ts->logits = alloc_floats((size_t)B * S * V);
    ts->probs = alloc_floats((size_t)B * S * V);
    ts->grads = alloc_floats(weight_sizes(c, sizes));
    ts->weights_t = alloc_floats(weight_sizes(c, sizes));
    if (!ts->resid || !ts->mid || !ts->blocks || !ts->layers || !ts->key || !ts->value ||
        !ts->ln_f || !ts->ln_f_mean || !ts->ln_f_rstd || !ts->logits || !ts->probs ||
        !ts->grads || !ts->weights_t)
        return -1;
    point_weights(&ts->dw, ts->grads, sizes);
    point_weights(&ts->wt, ts->weights_t, sizes);
    // block l of window b reads resid[b][l] and writes resid[b][l+1]: the stream is kept
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t l = 0; l < L; l++) {
            float *r = ts->resid + (b * (L + 1) + l) * SC;
            BlockActs *a = &ts->blocks[b * L + l];
            ts->layers[b * L + l] = a;
            if (build_block_acts(a, c, r, ts->mid + (b * L + l) * SC, r + SC) != 0) return -1;
        }
    // the backward scratch
    ts->d_logits = alloc_floats(S * V);
    ts->d_ln_f = alloc_floats(SC);
    ts->d_resid = alloc_floats(SC);
    ts->d_mid = alloc_floats(SC);
    ts->d_hidden = alloc_floats(4 * SC);
    ts->d_ln2 = alloc_floats(SC);
    ts->d_att_out = alloc_floats(SC);
    ts->d_q = alloc_floats(SC);
    ts->d_k = alloc_floats(SC);
    ts->d_v = alloc_floats(SC);
    ts->d_weights = alloc_floats(S);
    ts->d_scores = alloc_floats(S * S);
    ts->d_ln1 = alloc_floats(SC);
    return (ts->d_logits && ts->d_ln_f && ts->d_resid && ts->d_mid && ts->d_hidden &&
            ts->d_ln2 && ts->d_att_out && ts->d_q && ts->d_k && ts->d_v && ts->d_weights && ts->d_scores &&
            ts->d_ln1) ? 0 : -1;
}

// Frees what build_train_state allocated; safe on a half-built one.
void free_train_state(TrainState *ts) {
    // blocks is calloc'd, so a record never built holds NULLs and frees as nothing
    for (int i = 0; ts->blocks && i < ts->n_blocks; i++) free_block_acts(&ts->blocks[i]);
    free(ts->resid); free(ts->mid); free(ts->blocks); free(ts->layers);
    free(ts->key); free(ts->value); free(ts->ln_f); free(ts->ln_f_mean); free(ts->ln_f_rstd);
    free(ts->logits); free(ts->probs); free(ts->grads); free(ts->weights_t);
    free(ts->d_logits); free(ts->d_ln_f); free(ts->d_resid); free(ts->d_mid);
    free(ts->d_hidden); free(ts->d_ln2); free(ts->d_att_out); free(ts->d_q); free(ts->d_k);
    free(ts->d_v); free(ts->d_weights); free(ts->d_scores); free(ts->d_ln1);
    memset(ts, 0, sizeof(*ts));
}

// ----------------------------------------------------------------------------
// Neural net blocks: each reads (T, in) rows and writes (T, out) rows

// x . y over n floats in 8 running sums (sum j takes i = j, j+8, j+16, ...), added up at
// the end in a fixed order. The compiler keeps the 8 sums in one vector register; one
// running sum would make every addition wait for the one before. The order depends on
// n only, never on how many tokens share the pass.
static inline float dot(const float *restrict x, const float *restrict y, int n) {
    float part[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) part[j] += x[i + j] * y[i + j];
    // the last n % 8, then the 8 sums
    float sum = 0.0f;
    for (; i < n; i++) sum += x[i] * y[i];
    for (int j = 0; j < 8; j++) sum += part[j];
    return sum;
}

// out = LayerNorm(in) * weight + bias, per row, over C features (eps 1e-5, biased variance).
// mean and rstd (T) receive each row's mean and 1/std, which a backward pass needs.
void layernorm(float *out, float *mean_out, float *rstd_out, const float *in,
               const float *weight, const float *bias, int T, int C) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C;
        float *o = out + (size_t)t * C;
        // mean and biased variance, as torch.nn.LayerNorm computes them; the deviations
        // x - mean wait in the output row, so dot() can square and sum them
        float mean = 0.0f;
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) o[i] = x[i] - mean;
        float var = dot(o, o, C) / C;
        float rstd = 1.0f / sqrtf(var + 1e-5f);
        for (int i = 0; i < C; i++) o[i] = o[i] * rstd * weight[i] + bias[i];
        mean_out[t] = mean;
        rstd_out[t] = rstd;
    }
}

// Backward of layernorm, accumulating (+=) into din, dweight, dbias. With xhat = (x - mean)
// * rstd and g = dout * weight, the input gradient is
//     din = rstd * (g - mean(g) - xhat * mean(g * xhat))
// (the two means come from the mean and the variance depending on every input).
void layernorm_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *mean, const float *rstd,
                        const float *weight, int T, int C) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C, *dy = dout + (size_t)t * C;
        float *dx = din + (size_t)t * C;
        // the two row means the input gradient needs
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - mean[t]) * rstd[t];
            g_mean += dy[i] * weight[i];
            gx_mean += dy[i] * weight[i] * xhat;
        }
        g_mean /= C;
        gx_mean /= C;
#ifdef BREAK_LAYERNORM_BACKWARD
        gx_mean = 0.0f; // test-only build: drops a term, so the gradient check must fail
#endif
        // parameter gradients, then the input gradient
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - mean[t]) * rstd[t];
            dweight[i] += dy[i] * xhat;
            dbias[i] += dy[i];
            dx[i] += rstd[t] * (dy[i] * weight[i] - g_mean - xhat * gx_mean);
        }
    }
}

// The loop nest every Linear layer runs on, forward and backward:
//     c[m][n] += sum_k a[m][k] * b[k][n]     for k = 0, 1, 2, ... in that order,
// with c (M, N) and b (K, N) row-major and a read through two strides,
// a[m][k] = a[m * a_m + k * a_k], so one function takes in, in transposed, or dout.
// It works on blocks of up to TILE_M rows by TILE_N (or 2 or 4 TILE_N) columns of c: the
// block's running sums stay in vector registers while k runs, so c is loaded and stored
// once per block instead of once per k, and each row segment of b is loaded once for
// all the rows of the block.
// Every c[m][n] gets the same steps in the same order whichever block holds it, so a
// token's output does not depend on how many tokens share the pass. Each step is
// fmaf(a, b, c): a fused multiply-add, rounded once, and the same in every block and on
// every path, because it is written here, not left to the compiler (which is told
// -ffp-contract=off, so it never fuses a multiply and an add on its own). With FMA in
// the hardware (-march=native) it is one instruction and makes training ~12% faster.
// 8 x 32 was the fastest of 4x32, 4x64, 6x32, 8x16 and 8x32 here for training; try other
// widths with -DTILE_N=.. (the rows per tile stay 8: gemm_band names each count 1 to 8).
#define TILE_M 8
#ifndef TILE_N
#define TILE_N 32
#endif

// R rows of c (m0 .. m0+R-1, R = 1 .. TILE_M) by W columns (n0 .., W = TILE_N, or 4
// times that for one row, or 2 times for two to six rows: see gemm_band). R and W are
// constants wherever this is inlined, so the compiler unrolls the block into R * W / 16
// (AVX-512) registers; the loop over k is the only loop left, and each row segment of b
// is loaded once for all R rows: a verify pass of k+1 tokens reads the weights once.
static inline __attribute__((always_inline)) void
gemm_block(float *restrict c, const float *restrict a, size_t a_m, size_t a_k,
           const float *restrict b, int K, int N, int m0, int n0, const int R, const int W) {
    float acc[6 * 2 * TILE_N]; // R * W <= 6 * 2 * TILE_N for every shape gemm_band uses
    // the block's sums start from what c holds (a bias, or the gradients so far)
    for (int r = 0; r < R; r++)
        for (int j = 0; j < W; j++) acc[r * W + j] = c[(size_t)(m0 + r) * N + n0 + j];
    // one k at a time: one row segment of b meets one number of a per row of c
    for (int k = 0; k < K; k++) {
        const float *bk = b + (size_t)k * N + n0;
        if (R == 1) {
            // one row (a decoding step): the same steps, written 16 columns at a time. In
            // the form below, gcc 12 unrolls this loop by two for one row and keeps the 8
            // running sums on the stack, storing them at every k (objdump shows it); this
            // form keeps them in registers, and one-token matmuls run ~19% faster
            float x = a[(size_t)m0 * a_m + (size_t)k * a_k];
            for (int j0 = 0; j0 < W; j0 += 16)
                for (int j = j0; j < j0 + 16; j++) acc[j] = fmaf(x, bk[j], acc[j]);
            continue;
        }
        for (int r = 0; r < R; r++) {
            float x = a[(size_t)(m0 + r) * a_m + (size_t)k * a_k];
            for (int j = 0; j < W; j++) acc[r * W + j] = fmaf(x, bk[j], acc[r * W + j]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < W; j++) c[(size_t)(m0 + r) * N + n0 + j] = acc[r * W + j];
}

// A band of `rows` rows (1 .. TILE_M) from m0, across the columns that whole tiles cover.
// Each sum runs over k in order, so one sum's next step waits for the last (4 cycles);
// a block must hold enough sums to keep the multiply-adders busy meanwhile. One row
// takes 4 tiles of columns at once and two to six rows 2, where N allows (wider blocks
// also stream a large b better); 7 or 8 rows take one, as training's 8-row bands were
// measured fastest with. The switch hands gemm_block constant shapes to unroll.
static void gemm_band(float *restrict c, const float *restrict a, size_t a_m, size_t a_k,
                      const float *restrict b, int K, int N, int m0, int rows) {
    int n0 = 0;
    for (int w = rows == 1 ? 4 : rows <= 6 ? 2 : 1; w >= 1; w /= 2) {
        for (; n0 + w * TILE_N <= N; n0 += w * TILE_N) {
            switch (rows * 10 + w) {
            case 14: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 1, 4 * TILE_N); break;
            case 12: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 1, 2 * TILE_N); break;
            case 11: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 1, TILE_N); break;
            case 22: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 2, 2 * TILE_N); break;
            case 21: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 2, TILE_N); break;
            case 32: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 3, 2 * TILE_N); break;
            case 31: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 3, TILE_N); break;
            case 42: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 4, 2 * TILE_N); break;
            case 41: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 4, TILE_N); break;
            case 52: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 5, 2 * TILE_N); break;
            case 51: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 5, TILE_N); break;
            case 62: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 6, 2 * TILE_N); break;
            case 61: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 6, TILE_N); break;
            case 71: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, 7, TILE_N); break;
            default: gemm_block(c, a, a_m, a_k, b, K, N, m0, n0, TILE_M, TILE_N); break;
            }
        }
    }
}

// The columns n0 .. N-1 left over at the right of row m (fewer than TILE_N; the
// vocabulary's 65 leaves one): the same sums, one element at a time.
static void gemm_rest(float *restrict c, const float *restrict a, size_t a_m, size_t a_k,
                      const float *restrict b, int K, int N, int m, int n0) {
    for (int n = n0; n < N; n++) {
        float acc = c[(size_t)m * N + n];
        for (int k = 0; k < K; k++)
            acc = fmaf(a[(size_t)m * a_m + (size_t)k * a_k], b[(size_t)k * N + n], acc);
        c[(size_t)m * N + n] = acc;
    }
}

// c (M, N) += a (M, K) b (K, N): bands of up to TILE_M rows, then the columns left over.
void gemm_acc(float *restrict c, const float *restrict a, size_t a_m, size_t a_k,
              const float *restrict b, int M, int K, int N) {
    // bands of TILE_M rows (the tokens of a training window, a long prefill), then one
    // band of what is left (a decoding step's 1 token, a verify pass's k+1)
    for (int m = 0; m < M; m += TILE_M)
        gemm_band(c, a, a_m, a_k, b, K, N, m, M - m < TILE_M ? M - m : TILE_M);
    // the columns right of the last whole tile, every row
    int n_rest = N / TILE_N * TILE_N;
    if (n_rest < N)
        for (int m = 0; m < M; m++) gemm_rest(c, a, a_m, a_k, b, K, N, m, n_rest);
}

// out[t][o] = bias[o] + sum_i in[t][i] * weight[i][o]   (a PyTorch Linear; bias may be NULL).
// weight is stored (in, out), PyTorch's weight transposed, so gemm_acc's innermost loop
// walks contiguous outputs and the compiler vectorises it. For one (t, o) the sum is
// always bias, then i = 0, 1, 2, ... in order, whatever T is: a token's logits are
// bit-identical alone or in a pass.
void matmul(float *restrict out, const float *restrict in, const float *restrict weight,
            const float *restrict bias, int T, int in_dim, int out_dim) {
    // start every output at its bias (or 0), then add the input features in order
    for (int t = 0; t < T; t++)
        for (int o = 0; o < out_dim; o++) out[(size_t)t * out_dim + o] = bias ? bias[o] : 0.0f;
    gemm_acc(out, in, in_dim, 1, weight, T, in_dim, out_dim);
}

// Backward of matmul, accumulating (+=): dweight[i][o] += sum_t in[t][i] * dout[t][o],
// dbias[o] += sum_t dout[t][o], din[t][i] += sum_o dout[t][o] * weight_t[o][i].
// weight_t is the weight transposed to (out, in), PyTorch's own layout, so that the
// input gradient, too, is a gemm_acc with a contiguous innermost loop.
// din and dbias may be NULL (an input that needs no gradient, a Linear without bias).
void matmul_backward(float *din, float *dweight, float *dbias, const float *dout,
                     const float *in, const float *weight_t, int T, int in_dim, int out_dim) {
    // dweight = in^T dout: in read transposed (row i of in^T is column i of in)
    gemm_acc(dweight, in, 1, in_dim, dout, in_dim, T, out_dim);
    if (dbias)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < out_dim; o++) dbias[o] += dout[(size_t)t * out_dim + o];
    // din = dout weight^T
    if (din) gemm_acc(din, dout, out_dim, 1, weight_t, T, out_dim, in_dim);
}

// Attention scores of 16 cached positions s0 .. s0+15 for one head's query qh (HS):
// out[l] = scale * dot(qh, key of position s0+l), with exactly dot()'s sums, in dot()'s
// order, but 16 positions side by side: row i of key_t (its stride is S) holds feature i
// of every position, so each step is one multiply and one add over 16 positions (one
// AVX-512 register) instead of 16 dot products that each end in a chain of additions.
static inline void scores16(float *restrict out, const float *restrict qh,
                            const float *restrict key_t, int HS, int S, float scale) {
    int n8 = HS / 8 * 8; // dot(): features 0 .. n8-1 go to 8 running sums, the rest first
    float sum[16] = {0};
    for (int i = n8; i < HS; i++)
        for (int l = 0; l < 16; l++) sum[l] += qh[i] * key_t[(size_t)i * S + l];
    // running sum j takes features j, j+8, ...; then it joins the total, j = 0 .. 7
    for (int j = 0; j < 8; j++) {
        float part[16] = {0};
        for (int i = j; i < n8; i += 8)
            for (int l = 0; l < 16; l++) part[l] += qh[i] * key_t[(size_t)i * S + l];
        for (int l = 0; l < 16; l++) sum[l] += part[l];
    }
    for (int l = 0; l < 16; l++) out[l] = sum[l] * scale;
}

// One position's score, the same sums as scores16 for a single lane (used where 16
// positions would run past the end of the cache row: block sizes not a multiple of 16).
static float score1(const float *qh, const float *key_t, int HS, int S, float scale) {
    int n8 = HS / 8 * 8;
    float sum = 0.0f;
    for (int i = n8; i < HS; i++) sum += qh[i] * key_t[(size_t)i * S];
    for (int j = 0; j < 8; j++) {
        float part = 0.0f;
        for (int i = j; i < n8; i += 8) part += qh[i] * key_t[(size_t)i * S];
        sum += part;
    }
    return sum * scale;
}

// a[s] = softmax over s < n of a[s], in place (subtract the max so exp never overflows).
// Each step is its own loop: the exps are independent calls, and the running sum stays in
// a register instead of being saved around every call to expf.
static void softmax_row(float *a, int n) {
    float maxv = a[0];
    for (int s = 1; s < n; s++) maxv = a[s] > maxv ? a[s] : maxv;
    for (int s = 0; s < n; s++) a[s] = expf(a[s] - maxv);
    float sum = 0.0f;
    for (int s = 0; s < n; s++) sum += a[s];
    for (int s = 0; s < n; s++) a[s] /= sum;
}

// out (HS) = sum over s < n of w[s] * value of position s, for one head (its values start
// at v, stride C), adding s = 0, 1, ... in order. 16 features at a time are summed in a
// register, so no partial sum goes to memory and back between positions.
static void weighted_values(float *restrict out, const float *restrict w,
                            const float *restrict v, int n, int HS, int C) {
    int i0 = 0;
    for (; i0 + 16 <= HS; i0 += 16) {
        float sum[16] = {0};
        for (int s = 0; s < n; s++)
            for (int l = 0; l < 16; l++) sum[l] += w[s] * v[(size_t)s * C + i0 + l];
        for (int l = 0; l < 16; l++) out[i0 + l] = sum[l];
    }
    for (int i = i0; i < HS; i++) { // features left over when HS is not a multiple of 16
        float sum = 0.0f;
        for (int s = 0; s < n; s++) sum += w[s] * v[(size_t)s * C + i];
        out[i] = sum;
    }
}

// Causal multi-head attention of T new tokens (positions pos0 .. pos0+T-1) against
// the cache, which already holds the keys and values of positions 0 .. pos0+T-1.
// q: (T, C); key_t: (C, S) and value_cache: (S, C), one layer of the caches;
// att: (NH, S, S); out: (T, C).
// Keys are kept by feature and values by position because that is how each is read:
// a score runs over positions (16 side by side), a weighted sum over features.
void attention(float *restrict out, float *restrict att, const float *restrict q,
               const float *restrict key_t, const float *restrict value_cache, int T,
               int pos0, int C, int NH, int S) {
    // each head sees its own HS-wide slice of q, k and v; the slices sit side by side
    int HS = C / NH;
    // the lecture's Head scales the scores by C ** -0.5 with C = x.shape[-1], which is
    // n_embd, not head_size (later versions of its code use head_size ** -0.5)
    float scale = 1.0f / sqrtf((float)C);
    for (int h = 0; h < NH; h++) {
        const float *kh = key_t + (size_t)h * HS * S; // this head's HS feature rows
        for (int t = 0; t < T; t++) {
            int n = pos0 + t + 1; // this token sees positions 0 .. pos0+t, never later ones
            const float *qh = q + (size_t)t * C + h * HS;
            float *a = att + ((size_t)h * S + t) * S;
            // scores q . k / sqrt(C): 16 positions at a time while they fit in the row;
            // a block may compute positions >= n, which the mask below zeroes
            int s = 0;
            for (; s < n && s + 16 <= S; s += 16) scores16(a + s, qh, kh + s, HS, S, scale);
            for (; s < n; s++) a[s] = score1(qh, kh + s, HS, S, scale);
            softmax_row(a, n);
            for (s = n; s < S; s++) a[s] = 0.0f; // the causal mask, made visible
            // output: this token's attention-weighted sum of the head's values
            weighted_values(out + (size_t)t * C + h * HS, a, value_cache + h * HS, n, HS, C);
        }
    }
}

// Files the keys of T new tokens (T, C) into one layer's cache, kept by feature (C, S),
// at positions pos0 .. pos0+T-1.
static void store_keys(float *restrict key_t, const float *restrict k, int T, int pos0, int C,
                       int S) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++) key_t[(size_t)i * S + pos0 + t] = k[(size_t)t * C + i];
}

// Backward of attention, accumulating (+=) into dq (T, C) and into dkc, dvc, the
// gradients of the cache's keys and values, both by position (S, C). For one token and
// head, with weights a = softmax(z) and out = sum_s a[s] v_s:  da[s] = dout . v_s,
// dz[s] = a[s] (da[s] - sum_j a[j] da[j]), and z[s] = scale * q . k_s spreads dz to q and
// to every k_s it saw. key_t: (C, S), by feature as attention reads it; value_cache: (S, C).
// da: (S) and dz: (S, S) scratch, for one head at a time.
void attention_backward(float *restrict dq, float *restrict dkc, float *restrict dvc,
                        float *restrict da, float *restrict dz, const float *restrict dout,
                        const float *restrict att, const float *restrict q,
                        const float *restrict key_t, const float *restrict value_cache,
                        int T, int pos0, int C, int NH, int S) {
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)C); // as in attention
    for (int h = 0; h < NH; h++) {
        for (int t = 0; t < T; t++) {
            int pos = pos0 + t;
            const float *a = att + ((size_t)h * S + t) * S;
            const float *dy = dout + (size_t)t * C + h * HS;
            // through the weighted sum: da for every weight, dv for every value
            float da_dot_a = 0.0f;
            for (int s = 0; s <= pos; s++) {
                const float *vh = value_cache + (size_t)s * C + h * HS;
                float *dvh = dvc + (size_t)s * C + h * HS;
                da[s] = dot(dy, vh, HS);
                for (int i = 0; i < HS; i++) dvh[i] += a[s] * dy[i];
                da_dot_a += da[s] * a[s];
            }
            // through the softmax to the scores, and from each score to its key
            const float *qh = q + (size_t)t * C + h * HS;
            float *dzt = dz + (size_t)t * S;
            for (int s = 0; s <= pos; s++) {
                float g = a[s] * (da[s] - da_dot_a) * scale;
                float *dkh = dkc + (size_t)s * C + h * HS;
                for (int i = 0; i < HS; i++) dkh[i] += g * qh[i];
                dzt[s] = g;
            }
        }
        // from the scores to the queries: dq += dz[s] k_s, positions in order (a key is
        // a column of key_t: feature i of position s at key_t[i][s])
        const float *kh = key_t + (size_t)h * HS * S;
        for (int t = 0; t < T; t++) {
            float *dqh = dq + (size_t)t * C + h * HS;
            for (int s = 0; s <= pos0 + t; s++) {
                float g = dz[(size_t)t * S + s];
                for (int i = 0; i < HS; i++) dqh[i] += g * kh[(size_t)i * S + s];
            }
        }
    }
}

// x = max(0, x), elementwise over n floats.
void relu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// Backward of relu, in place: the gradient passes where the output was positive.
void relu_backward(float *dx, const float *out, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = out[i] > 0.0f ? dx[i] : 0.0f;
}

// out = x + y, elementwise over n floats: the residual connection (out may be x).
void residual_add(float *out, const float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
}

// ----------------------------------------------------------------------------
// Forward: T new tokens on top of the KV cache -> T rows of logits

// x[t] = token_embedding[tokens[t]] + position_embedding[pos0 + t].
static void embed(float *x, const Weights *w, const int *tokens, int T, int pos0, int C) {
    // the position is absolute: a token verified at cache position 20 gets row 20
    for (int t = 0; t < T; t++) {
        const float *te = w->token_embedding + (size_t)tokens[t] * C;
        const float *pe = w->position_embedding + (size_t)(pos0 + t) * C;
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = te[i] + pe[i];
    }
}

// One transformer block l:  x_mid = x_in + proj(attn(ln1(x_in)));
//                           x_out = x_mid + ffwd(ln2(x_mid)).
// Keys and values of the T tokens go into this layer's cache at pos0; kc: (C, S), the
// keys by feature; vc: (S, C), the values by position. Only the last n_out tokens go on
// through attention and the MLP (rows T-n_out .. T-1 of the buffers): the others are
// done once their keys and values are cached. Training passes n_out = T; so does
// inference, except in the last block of a prefill (see forward_last).
static void block_forward(const Config *c, const Weights *w, int l, BlockActs *a, float *kc,
                          float *vc, int T, int pos0, int n_out) {
    int C = c->n_embd, S = c->block_size, t0 = T - n_out;
    size_t CC = (size_t)C * C, o = (size_t)t0 * C; // o: where row t0 starts in a (T, C) buffer
    // keys and values of all T tokens, appended to the cache
    layernorm(a->ln1, a->ln1_mean, a->ln1_rstd, a->x_in, w->ln1_weight + l * C,
              w->ln1_bias + l * C, T, C);
    matmul(a->k, a->ln1, w->key + l * CC, NULL, T, C, C);
    store_keys(kc, a->k, T, pos0, C, S);
    matmul(vc + (size_t)pos0 * C, a->ln1, w->value + l * CC, NULL, T, C, C);
    // attention sub-block for tokens t0 ..: queries, attention over the cache, proj
    matmul(a->q + o, a->ln1 + o, w->query + l * CC, NULL, n_out, C, C);
    attention(a->att_out + o, a->att, a->q + o, kc, vc, n_out, pos0 + t0, C, c->n_head, S);
    matmul(a->attn + o, a->att_out + o, w->proj_weight + l * CC, w->proj_bias + l * C, n_out,
           C, C);
    residual_add(a->x_mid + o, a->x_in + o, a->attn + o, (size_t)n_out * C);

    // MLP sub-block: Linear(C, 4C) -> ReLU -> Linear(4C, C)
    layernorm(a->ln2 + o, a->ln2_mean + t0, a->ln2_rstd + t0, a->x_mid + o,
              w->ln2_weight + l * C, w->ln2_bias + l * C, n_out, C);
    matmul(a->hidden + 4 * o, a->ln2 + o, w->ffwd_up_weight + l * 4 * CC,
           w->ffwd_up_bias + l * 4 * C, n_out, C, 4 * C);
    relu(a->hidden + 4 * o, (size_t)n_out * 4 * C);
    matmul(a->ffwd + o, a->hidden + 4 * o, w->ffwd_down_weight + l * 4 * CC,
           w->ffwd_down_bias + l * C, n_out, 4 * C, C);
    residual_add(a->x_out + o, a->x_mid + o, a->ffwd + o, (size_t)n_out * C);
}

// The model from tokens to logits for T tokens at positions pos0 ..: embed, L blocks,
// ln_f, lm_head. layer[l] holds block l's buffers (inference passes one record L times);
// key_cache: (L, C, S); value_cache: (L, S, C); ln_f: (T, C) and its mean, rstd (T);
// logits: (T, V). Logits are computed for the last n_out tokens only (rows T-n_out ..
// T-1; n_out = T for all). Inference and the training pass both run this one function.
static void forward_core(const Config *c, const Weights *w, const int *tokens, int T, int pos0,
                         int n_out, BlockActs **layer, float *key_cache, float *value_cache,
                         float *ln_f, float *ln_f_mean, float *ln_f_rstd, float *logits) {
    int L = c->n_layer, C = c->n_embd, t0 = T - n_out;
    // the new tokens enter at absolute positions pos0.. (the blog's positions tensor)
    embed(layer[0]->x_in, w, tokens, T, pos0, C);
    // L blocks, each appending this pass's keys and values to its layer of the cache; every
    // token's keys and values are needed, but past the last block's, only logits are
    size_t layer_cache = (size_t)c->block_size * C;
    for (int l = 0; l < L; l++)
        block_forward(c, w, l, layer[l], key_cache + l * layer_cache,
                      value_cache + l * layer_cache, T, pos0, l == L - 1 ? n_out : T);
    // final LayerNorm and the language-model head, for the rows that want logits
    size_t o = (size_t)t0 * C;
    layernorm(ln_f + o, ln_f_mean + t0, ln_f_rstd + t0, layer[L - 1]->x_out + o, w->ln_f_weight,
              w->ln_f_bias, n_out, C);
    matmul(logits + (size_t)t0 * c->vocab_size, ln_f + o, w->lm_head_weight, w->lm_head_bias,
           n_out, C, c->vocab_size);
}

// Runs T >= 1 new tokens at positions kv_len .. kv_len+T-1, appends their keys and
// values to the cache (kv_len += T) and computes logits for the last n_out of them,
// rows T-n_out .. T-1 of the returned (T, V) array.
static float *forward_rows(GPT *g, const int *tokens, int T, int n_out) {
    const Config *c = &g->config;
    RunState *s = &g->state;
    // the new tokens go right after the cached ones, and must fit the context
    int pos0 = s->kv_len;
    if (T < 1 || pos0 + T > c->block_size) {
        // callers keep to the context policy, so this is a bug, not bad input
        fprintf(stderr, "specdec: internal error: forward of %d tokens at kv_len %d "
                "exceeds block_size %d\n", T, pos0, c->block_size);
        abort();
    }
    forward_core(c, &g->w, tokens, T, pos0, n_out, s->layers, s->key_cache, s->value_cache,
                 s->ln_f, s->ln_f_mean, s->ln_f_rstd, s->logits);
    // the cache now holds these T positions too; trim_kv_cache may roll some back
    s->kv_len += T;
    return s->logits;
}

// Runs T >= 1 new tokens on top of the cache (as forward_rows) and returns all T rows
// of logits, (T, V). Verify (T = k+1) and plain decoding (T = 1) come here.
float *forward(GPT *g, const int *tokens, int T) { return forward_rows(g, tokens, T, T); }

// A prefill: the same pass, but only the last token's logits are wanted (the blog's
// logits[0, -1, :]), so the other tokens stop in the last block once their keys and
// values are cached. Returns that row, (V): bit for bit the last row forward would give.
const float *forward_last(GPT *g, const int *tokens, int T) {
    return forward_rows(g, tokens, T, 1) + (size_t)(T - 1) * g->config.vocab_size;
}

// Cross-entropy of one row of logits for its true next token, logsumexp(z) - z[target],
// in double with the max taken out first: nothing overflows, and a tiny p never becomes
// log(0). probs (V), if not NULL, receives softmax(z), which the backward pass needs.
static double cross_entropy(const float *z, int V, int target, float *probs) {
    double m = z[0], sum = 0.0;
    for (int v = 1; v < V; v++) m = z[v] > m ? z[v] : m;
    for (int v = 0; v < V; v++) sum += exp((double)z[v] - m);
    if (probs)
        for (int v = 0; v < V; v++) probs[v] = (float)(exp((double)z[v] - m) / sum);
    return m + log(sum) - z[target];
}

// Mean next-character cross-entropy of B windows of S tokens (training and evaluation):
// runs each window from an empty cache through forward_core, keeping every activation
// in ts for train_backward. inputs, targets: (B, S). Returns the mean loss.
double train_forward(const GPT *g, TrainState *ts, const int *inputs, const int *targets) {
    const Config *c = &g->config;
    int S = c->block_size, V = c->vocab_size, L = c->n_layer;
    size_t SC = (size_t)S * c->n_embd, SV = (size_t)S * V;
    double loss = 0.0;
    for (int b = 0; b < ts->B; b++) {
        forward_core(c, &g->w, inputs + (size_t)b * S, S, 0, S, ts->layers + (size_t)b * L,
                     ts->key + b * L * SC, ts->value + b * L * SC, ts->ln_f + b * SC,
                     ts->ln_f_mean + (size_t)b * S, ts->ln_f_rstd + (size_t)b * S,
                     ts->logits + b * SV);
        // every position predicts its next token; the softmax is kept for the backward
        for (int t = 0; t < S; t++)
            loss += cross_entropy(ts->logits + b * SV + (size_t)t * V, V,
                                  targets[(size_t)b * S + t], ts->probs + b * SV + (size_t)t * V);
    }
    return loss / ((double)ts->B * S);
}

// out (cols, rows) = in (rows, cols) transposed.
static void transpose(float *out, const float *in, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < cols; k++) out[(size_t)k * rows + r] = in[(size_t)r * cols + k];
}

// Fills wt's matrices with w's, transposed from (in, out) to (out, in), layer by layer:
// the backward pass's input gradients read them row by row (see matmul_backward).
static void transpose_matrices(const Config *c, const Weights *w, Weights *wt) {
    int C = c->n_embd;
    size_t CC = (size_t)C * C;
    for (int l = 0; l < c->n_layer; l++) {
        transpose(wt->query + l * CC, w->query + l * CC, C, C);
        transpose(wt->key + l * CC, w->key + l * CC, C, C);
        transpose(wt->value + l * CC, w->value + l * CC, C, C);
        transpose(wt->proj_weight + l * CC, w->proj_weight + l * CC, C, C);
        transpose(wt->ffwd_up_weight + l * 4 * CC, w->ffwd_up_weight + l * 4 * CC, C, 4 * C);
        transpose(wt->ffwd_down_weight + l * 4 * CC, w->ffwd_down_weight + l * 4 * CC, 4 * C, C);
    }
    transpose(wt->lm_head_weight, w->lm_head_weight, C, c->vocab_size);
}

// One block's backward pass for one window: d_resid holds dLoss/dx_out on entry and
// dLoss/dx_in on return; the parameter gradients of layer l accumulate into ts->dw.
static void block_backward(const Config *c, const Weights *w, TrainState *ts, int l,
                           const BlockActs *a, const float *kc, const float *vc) {
    int C = c->n_embd, S = c->block_size, T = S;
    size_t CC = (size_t)C * C, TC = (size_t)T * C;
    Weights *dw = &ts->dw;
    const Weights *wt = &ts->wt; // the matrices, transposed, for the input gradients
    // x_out = x_mid + ffwd(ln2(x_mid)): the gradient reaches x_mid directly and via the MLP
    memcpy(ts->d_mid, ts->d_resid, TC * sizeof(float));
    memset(ts->d_hidden, 0, TC * 4 * sizeof(float));
    matmul_backward(ts->d_hidden, dw->ffwd_down_weight + l * 4 * CC, dw->ffwd_down_bias + l * C,
                    ts->d_resid, a->hidden, wt->ffwd_down_weight + l * 4 * CC, T, 4 * C, C);
    relu_backward(ts->d_hidden, a->hidden, TC * 4);
    memset(ts->d_ln2, 0, TC * sizeof(float));
    matmul_backward(ts->d_ln2, dw->ffwd_up_weight + l * 4 * CC, dw->ffwd_up_bias + l * 4 * C,
                    ts->d_hidden, a->ln2, wt->ffwd_up_weight + l * 4 * CC, T, C, 4 * C);
    layernorm_backward(ts->d_mid, dw->ln2_weight + l * C, dw->ln2_bias + l * C, ts->d_ln2,
                       a->x_mid, a->ln2_mean, a->ln2_rstd, w->ln2_weight + l * C, T, C);
    // x_mid = x_in + proj(attn(ln1(x_in))): the same split, through attention
    memcpy(ts->d_resid, ts->d_mid, TC * sizeof(float));
    memset(ts->d_att_out, 0, TC * sizeof(float));
    matmul_backward(ts->d_att_out, dw->proj_weight + l * CC, dw->proj_bias + l * C, ts->d_mid,
                    a->att_out, wt->proj_weight + l * CC, T, C, C);
    memset(ts->d_q, 0, TC * sizeof(float));
    memset(ts->d_k, 0, TC * sizeof(float));
    memset(ts->d_v, 0, TC * sizeof(float));
    attention_backward(ts->d_q, ts->d_k, ts->d_v, ts->d_weights, ts->d_scores, ts->d_att_out, a->att, a->q, kc,
                       vc, T, 0, C, c->n_head, S);
    // query, key and value all read ln1's output: their input gradients add up
    memset(ts->d_ln1, 0, TC * sizeof(float));
    matmul_backward(ts->d_ln1, dw->query + l * CC, NULL, ts->d_q, a->ln1, wt->query + l * CC, T,
                    C, C);
    matmul_backward(ts->d_ln1, dw->key + l * CC, NULL, ts->d_k, a->ln1, wt->key + l * CC, T, C, C);
    matmul_backward(ts->d_ln1, dw->value + l * CC, NULL, ts->d_v, a->ln1, wt->value + l * CC, T,
                    C, C);
    layernorm_backward(ts->d_resid, dw->ln1_weight + l * C, dw->ln1_bias + l * C, ts->d_ln1,
                       a->x_in, a->ln1_mean, a->ln1_rstd, w->ln1_weight + l * C, T, C);
}

// The gradient of train_forward's mean loss with respect to every parameter, into
// ts->grads (zeroed first). Needs the activations train_forward left in ts.
void train_backward(const GPT *g, TrainState *ts, const int *inputs, const int *targets) {
    const Config *c = &g->config;
    const Weights *w = &g->w;
    Weights *dw = &ts->dw;
    int S = c->block_size, V = c->vocab_size, L = c->n_layer, C = c->n_embd;
    size_t SC = (size_t)S * C, SV = (size_t)S * V;
    memset(ts->grads, 0, g->n_params * sizeof(float));
    transpose_matrices(c, w, &ts->wt);
    float scale = 1.0f / ((float)ts->B * S); // the loss is a mean over B*S positions
    for (int b = 0; b < ts->B; b++) {
        // cross-entropy through softmax: dLoss/dlogits = (p - onehot(target)) / (B*S)
        for (int t = 0; t < S; t++) {
            const float *p = ts->probs + b * SV + (size_t)t * V;
            float *dz = ts->d_logits + (size_t)t * V;
            for (int v = 0; v < V; v++) dz[v] = p[v] * scale;
            dz[targets[(size_t)b * S + t]] -= scale;
        }
        // lm_head and ln_f, into the residual stream that left the last block
        memset(ts->d_ln_f, 0, SC * sizeof(float));
        matmul_backward(ts->d_ln_f, dw->lm_head_weight, dw->lm_head_bias, ts->d_logits,
                        ts->ln_f + b * SC, ts->wt.lm_head_weight, S, C, V);
        BlockActs **layer = ts->layers + (size_t)b * L;
        memset(ts->d_resid, 0, SC * sizeof(float));
        layernorm_backward(ts->d_resid, dw->ln_f_weight, dw->ln_f_bias, ts->d_ln_f,
                           layer[L - 1]->x_out, ts->ln_f_mean + (size_t)b * S,
                           ts->ln_f_rstd + (size_t)b * S, w->ln_f_weight, S, C);
        // the blocks, last to first
        for (int l = L - 1; l >= 0; l--)
            block_backward(c, w, ts, l, layer[l], ts->key + (b * L + l) * SC,
                           ts->value + (b * L + l) * SC);
        // the embeddings: each token's row and each position's row collect its gradient
        const int *tok = inputs + (size_t)b * S;
        for (int t = 0; t < S; t++)
            for (int i = 0; i < C; i++) {
                dw->token_embedding[(size_t)tok[t] * C + i] += ts->d_resid[(size_t)t * C + i];
                dw->position_embedding[(size_t)t * C + i] += ts->d_resid[(size_t)t * C + i];
            }
    }
}

// ----------------------------------------------------------------------------
// Tokenizer and corpus: one token per byte that occurs in the corpus

// Builds the vocabulary of the sorted distinct bytes of text (as the lecture does).
void build_vocab(Vocab *v, const unsigned char *text, size_t n) {
    // mark the bytes present, then number them in byte order: sorted(set(text))
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++) seen[text[i]] = 1;
    v->size = 0;
    for (int b = 0; b < 256; b++) {
        v->id[b] = -1;
        if (seen[b]) {
            v->id[b] = v->size;
            v->chars[v->size++] = (unsigned char)b;
        }
    }
}

// Encodes n bytes into tokens; returns the index of the first byte not in the
// vocabulary, or -1 when every byte encoded.
long encode(const Vocab *v, const unsigned char *text, size_t n, int *tokens) {
    for (size_t i = 0; i < n; i++) {
        if (v->id[text[i]] < 0) return (long)i;
        tokens[i] = v->id[text[i]];
    }
    return -1;
}

// Decodes one token to its byte.
unsigned char decode(const Vocab *v, int token) { return v->chars[token]; }

// Writes a byte so that it can be seen: '\n', ' ', 'a', '\x07'.
void visible_char(char out[8], unsigned char b) {
    if (b == '\n') snprintf(out, 8, "'\\n'");
    else if (b == '\t') snprintf(out, 8, "'\\t'");
    else if (b == '\'') snprintf(out, 8, "'\\''");
    else if (b == '\\') snprintf(out, 8, "'\\\\'");
    else if (isprint(b)) snprintf(out, 8, "'%c'", b);
    else snprintf(out, 8, "'\\x%02x'", b);
}

// The training text, its tokens and the lecture's 90% / 10% train/validation split.
typedef struct {
    unsigned char *bytes; // (N) the raw file
    int *tokens;          // (N) encoded with the model's vocabulary
    size_t n;             // N, 1,115,394 for Tiny Shakespeare
    size_t n_train;       // first 90% (int(0.9 * N) in the lecture): the bigram counts come from here
    size_t n_val;         // the last 10%
} Corpus;

// The largest file read_file accepts: 2 GiB (a checkpoint of 500 million parameters).
#define MAX_FILE_BYTES ((uint64_t)1 << 31)

// Reads a whole file into memory; fills err and returns NULL on any failure.
unsigned char *read_file(const char *path, size_t *n_out, const char *what,
                         const char *fix, char *err, size_t errlen) {
    // stat first: a directory opens fine with fopen and only fails later, confusingly
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot open %s '%s': %s (%s)", what, path, strerror(errno), fix);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s '%s' is not a regular file (%s)", what, path, fix);
        return NULL;
    }
    // refuse a huge file before allocating for it: no checkpoint, state or corpus this
    // program writes or needs comes near the limit
    if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        snprintf(err, errlen, "%s '%s' is %llu bytes, more than the %llu this program reads "
                 "(%s)", what, path, (unsigned long long)st.st_size,
                 (unsigned long long)MAX_FILE_BYTES, fix);
        return NULL;
    }
    // fopen can still fail after stat: no read permission, for instance
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s '%s': %s (%s)", what, path, strerror(errno), fix);
        return NULL;
    }
    // one read of the whole file; a short read means it changed or broke underneath us
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    size_t got = buf ? fread(buf, 1, n, f) : 0;
    int bad = !buf || got != n || ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read %s '%s' (%s)", what, path, fix);
        free(buf);
        return NULL;
    }
    *n_out = n;
    return buf;
}

// Frees what load_corpus allocated; safe to call twice.
void free_corpus(Corpus *c) {
    free(c->bytes);
    free(c->tokens);
    memset(c, 0, sizeof(*c));
}

// Loads the corpus and encodes it; with vocab->size == 0 the vocabulary is built
// from the corpus, otherwise every byte must already be in it. 0 on success.
int load_corpus(Corpus *c, const char *path, Vocab *vocab, char *err, size_t errlen) {
    memset(c, 0, sizeof(*c));
    c->bytes = read_file(path, &c->n, "corpus", "run 'make data' to fetch Tiny Shakespeare",
                         err, errlen);
    if (!c->bytes) return -1;
    // every error below frees through free_corpus, which leaves NULLs behind, so the
    // caller's own free_corpus afterwards is harmless
    if (c->n < 2) {
        snprintf(err, errlen, "corpus '%s' has %zu byte%s; it needs at least 2 to count "
                 "a bigram (run 'make data' for Tiny Shakespeare)", path, c->n,
                 c->n == 1 ? "" : "s");
        free_corpus(c);
        return -1;
    }
    // a random model learns its vocabulary here; a checkpoint brought its own
    if (vocab->size == 0) build_vocab(vocab, c->bytes, c->n);
    c->tokens = malloc(c->n * sizeof(int));
    if (!c->tokens) {
        snprintf(err, errlen, "out of memory encoding corpus '%s'", path);
        free_corpus(c);
        return -1;
    }
    // a byte the model has no token for cannot be counted in the bigram table
    long bad = encode(vocab, c->bytes, c->n, c->tokens);
    if (bad >= 0) {
        char vis[8];
        visible_char(vis, c->bytes[bad]);
        snprintf(err, errlen, "corpus '%s' has byte %s (0x%02x) at offset %ld, which is not "
                 "in the model's vocabulary (use the corpus the model was built with)",
                 path, vis, c->bytes[bad], bad);
        free_corpus(c);
        return -1;
    }
    // the lecture's split: n = int(0.9 * len(data)); train_data = data[:n]
    c->n_train = (size_t)(0.9 * (double)c->n);
    c->n_val = c->n - c->n_train;
    return 0;
}

// ----------------------------------------------------------------------------
// Bigram draft model: P(next | current) counted from the training split

typedef struct {
    int V;        // vocabulary size
    float *probs; // (V, V) row a = P(next | a); every row sums to 1, every entry > 0
} BigramDraft;

// Counts every adjacent pair of the training tokens, adds 1 to every cell (Laplace
// smoothing, so no draft probability is ever 0 and p/q is always defined) and
// normalises each row. The blog's BigramDraftModel.__init__. 0 on success.
int BigramDraftModel(BigramDraft *d, const int *train, size_t n, int V) {
    d->V = V;
    d->probs = malloc((size_t)V * V * sizeof(float));
    double *counts = calloc((size_t)V * V, sizeof(double));
    if (!d->probs || !counts) {
        free(counts);
        free(d->probs);
        d->probs = NULL;
        return -1;
    }
    // counts[a][b] = how often b follows a
    // double counts: a float would stop counting exactly past 2^24 pairs
    for (size_t i = 0; i + 1 < n; i++) counts[(size_t)train[i] * V + train[i + 1]] += 1.0;
    // +1 on every cell, then each row divided by its total
    for (int a = 0; a < V; a++) {
        double *row = counts + (size_t)a * V;
        double total = 0.0;
        for (int b = 0; b < V; b++) total += row[b] + 1.0;
        for (int b = 0; b < V; b++) d->probs[(size_t)a * V + b] = (float)((row[b] + 1.0) / total);
    }
    free(counts);
    return 0;
}

// Frees what BigramDraftModel allocated.
void free_bigram_draft(BigramDraft *d) {
    free(d->probs);
    d->probs = NULL;
}

// Returns the row P(next | token): the blog's get_probs, an O(1) lookup.
const float *bigram_get_probs(const BigramDraft *d, int token) {
    return d->probs + (size_t)token * d->V;
}

// ----------------------------------------------------------------------------
// RNG and sampling

// A small PRNG of our own (xorshift64*), so a seed gives the same text everywhere.
// forced lets a test or a debugger session choose the uniform draws: while n_forced > 0,
// rng_uniform returns forced[0], forced[1], ... instead of generating them, so any branch
// of a round (this draft token, that acceptance, this resample) can be made to happen.
typedef struct {
    uint64_t state;
    const double *forced; // (n_forced) uniforms in [0, 1) to return next, or NULL
    int n_forced;         // how many of them are left
} Rng;

// Seeds the generator; splitmix64 spreads nearby seeds (1, 2, 3) far apart.
void rng_seed(Rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    r->state = z ? z : 0x2545F4914F6CDD1DULL; // xorshift must never hold 0
    r->forced = NULL;
    r->n_forced = 0;
}

// Makes the next n uniform draws return u[0] .. u[n-1]; the generator's state does not
// move while they are used up, so afterwards it continues where it was.
void rng_force(Rng *r, const double *u, int n) {
    r->forced = u;
    r->n_forced = n;
}

// The next 64 random bits: three shifts and a multiply (xorshift64*).
uint64_t rng_u64(Rng *r) {
    uint64_t x = r->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

// A uniform draw in [0, 1) with 53 random bits: never 1, sometimes exactly 0. Every
// value is a multiple of 2^-53, so a branch's probability is a count of such values.
double rng_uniform(Rng *r) {
    if (r->n_forced > 0) { // a forced draw (rng_force), for tests and debugging
        r->n_forced--;
        return *r->forced++;
    }
    return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

// A standard normal draw (Box-Muller), for the random initialisation.
double rng_normal(Rng *r) {
    double u1 = 1.0 - rng_uniform(r); // in (0, 1], so log(u1) is finite
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Inverse-CDF sampling from the weights w_i = max(0, probs_i - minus_i) (minus may be
// NULL: w_i = probs_i): the first index whose running sum of weights exceeds u * total.
// The weights are taken in double: the difference of two floats is exact there, so the
// residual max(0, p - q) gets no rounding. Zero-weight entries are skipped outright, and
// if rounding carries u * total past the last running sum, the last index with weight
// is returned: a token of weight 0 can never come out. Returns -1 if every weight is 0.
static int sample_weights(const float *probs, const float *minus, int n, double u) {
    // scale u by the actual total: a float row may sum to 1 +- 1e-7, never exactly 1
    double total = 0.0;
    for (int i = 0; i < n; i++) total += fmax(0.0, (double)probs[i] - (minus ? minus[i] : 0.0f));
    double target = u * total, cdf = 0.0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        double w = (double)probs[i] - (minus ? minus[i] : 0.0f);
        if (w <= 0.0) continue;
        cdf += w;
        last = i;
        if (target < cdf) return i;
    }
    return last;
}

// A draw from a probability row with a uniform u in [0, 1); see sample_weights.
int sample_from(const float *probs, int n, double u) { return sample_weights(probs, NULL, n, u); }

// Index of the largest entry; ties go to the lowest index, in every decoder alike.
int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// Writes a one-hot row at index i: how greedy decoding (t = 0) turns into a distribution.
static void one_hot(float *out, int n, int i) {
    for (int j = 0; j < n; j++) out[j] = 0.0f;
    out[i] = 1.0f;
}

// p = softmax(logits / t); for t = 0, one-hot at the argmax (greedy decoding).
void target_probs(float *p, const float *logits, int V, float temperature) {
    if (temperature == 0.0f) {
        one_hot(p, V, argmax(logits, V));
        return;
    }
    // subtract the max before exp: the largest term becomes exp(0) = 1, nothing overflows
    float maxv = logits[argmax(logits, V)];
    double e[256], sum = 0.0; // V <= 256 (validate_config); each exp is taken once
    for (int i = 0; i < V; i++) sum += e[i] = exp(((double)logits[i] - maxv) / temperature);
    for (int i = 0; i < V; i++) p[i] = (float)(e[i] / sum);
}

// q = the draft row sharpened by the same temperature, q^(1/t) renormalised;
// for t = 0, one-hot at the row's argmax. At t = 1 the row is copied unchanged.
void draft_probs(float *q, const BigramDraft *d, int token, float temperature) {
    const float *row = bigram_get_probs(d, token);
    int V = d->V;
    if (temperature == 0.0f) {
        one_hot(q, V, argmax(row, V));
        return;
    }
    // t = 1 must give the table's row exactly, not a re-rounded copy of it
    if (temperature == 1.0f) {
        memcpy(q, row, (size_t)V * sizeof(float));
        return;
    }
    // q_i^(1/t) = exp(log q_i / t), taken relative to the largest entry
    double logmax = log((double)row[argmax(row, V)]), sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((log((double)row[i]) - logmax) / temperature);
    for (int i = 0; i < V; i++)
        q[i] = (float)(exp((log((double)row[i]) - logmax) / temperature) / sum);
}

// Draws one token after `token` from the draft, and returns the row q it was drawn
// from: the blog's BigramDraftModel.sample, which returns (token, probs) for the
// same reason: accept_reject needs q of the guess. q: (V).
int bigram_sample(const BigramDraft *d, int token, float temperature, Rng *rng, float *q) {
    draft_probs(q, d, token, temperature); // the row the ratio will use is the row we sample
    int next = sample_from(q, d->V, rng_uniform(rng));
#ifdef BREAK_DRAFT_Q
    draft_probs(q, d, token, 1.0f); // test-only bug: report the untempered row as q
#endif
    return next;
}

// ----------------------------------------------------------------------------
// The four phases of one speculative round

// Buffers of one round, each with a single role, so a debugger shows the whole decision.
typedef struct {
    int K;            // the longest draft this buffer holds
    int V;
    int *candidates;  // (K)       c0 .. c(k-1), drafted this round
    float *q_draft;   // (K, V)    q_draft[i] = the draft distribution c(i) was sampled from
    float *p_target;  // (K+1, V)  p_target[i] = the target's distribution after [current, c0..c(i-1)]
    float *residual;  // (V)       max(0, p - q) at the rejected position, unnormalised
    double *u;        // (K)       the uniform draw that decided each candidate
    int *accepted;    // (K+1)     tokens the round emits: accepted drafts, then a resample or bonus
    int *all_tokens;  // (K+1)     the verify pass's input: [current, c0 .. c(k-1)]
    float *p_next;    // (V)       target distribution after a (re)prefill, sampled directly
    int rejected_at;  //           index of the rejected candidate, or -1 if none was rejected
} SpecBuffers;

// Allocates the buffers of a round for drafts of up to K tokens; 0 on success.
int build_spec_buffers(SpecBuffers *b, int K, int V) {
    b->K = K;
    b->V = V;
    b->candidates = calloc((size_t)K, sizeof(int));
    b->q_draft = alloc_floats((size_t)K * V);
    b->p_target = alloc_floats((size_t)(K + 1) * V);
    b->residual = alloc_floats((size_t)V);
    b->u = calloc((size_t)K, sizeof(double));
    b->accepted = calloc((size_t)K + 1, sizeof(int));
    b->all_tokens = calloc((size_t)K + 1, sizeof(int));
    b->p_next = alloc_floats((size_t)V);
    b->rejected_at = -1;
    return (b->candidates && b->q_draft && b->p_target && b->residual && b->u && b->accepted &&
            b->all_tokens && b->p_next) ? 0 : -1;
}

// Frees what build_spec_buffers allocated.
void free_spec_buffers(SpecBuffers *b) {
    free(b->candidates); free(b->q_draft); free(b->p_target);
    free(b->residual); free(b->u); free(b->accepted); free(b->all_tokens); free(b->p_next);
    memset(b, 0, sizeof(*b));
}

// Phase 1, DRAFT: samples k tokens from the bigram table, each conditioned on the one
// before, starting from current_token. Keeps every q row: accept_reject needs q(c_i)
// and the whole row for the residual.
void draft_tokens(const BigramDraft *d, int current_token, int k, float temperature,
                  Rng *rng, int *candidates, float *q_draft) {
    int tok = current_token;
    for (int i = 0; i < k; i++) {
        // each guess is conditioned on the previous guess, not on the target's view
        candidates[i] = bigram_sample(d, tok, temperature, rng, q_draft + (size_t)i * d->V);
        tok = candidates[i];
    }
}

// Phase 2, VERIFY: ONE target forward over [current_token, c0 .. c(k-1)] at positions
// kv_len .. kv_len+k. Row i of the output is the target's distribution for the token
// after [.., current, c0 .. c(i-1)]: rows 0..k-1 judge the candidates, row k is the bonus.
// all_tokens: (k+1) receives the pass's input, so a debugger can show it.
void verify_candidates(GPT *g, int current_token, const int *candidates, int k,
                       float temperature, int *all_tokens, float *p_target) {
    // the blog's all_tokens = [current_token] + candidates
    int V = g->config.vocab_size;
    all_tokens[0] = current_token;
    for (int i = 0; i < k; i++) all_tokens[i + 1] = candidates[i];
    const float *logits = forward(g, all_tokens, k + 1); // the single pass
    // softmax each row at the decoding temperature, as the blog's F.softmax loop does
    for (int i = 0; i <= k; i++)
        target_probs(p_target + (size_t)i * V, logits + (size_t)i * V, V, temperature);
}

// Residual draw after a rejection: a token from norm(max(0, p - q)). If the residual
// has no mass (p <= q everywhere, which for two rows summing to 1 means p == q up to
// rounding) it draws from p instead. residual: (V) receives max(0, p - q) as floats for
// the trace and a debugger; the draw itself uses the exact differences (sample_weights).
static int sample_residual(const float *p, const float *q, int V, float *residual, double u) {
    // the residual stays unnormalised: the draw scales by its total anyway
    double mass = 0.0;
    for (int j = 0; j < V; j++) {
        residual[j] = p[j] > q[j] ? p[j] - q[j] : 0.0f;
        mass += fmax(0.0, (double)p[j] - q[j]);
    }
#ifdef BREAK_RESIDUAL
    return sample_from(p, V, u); // test-only bug: resample from p, not from the residual
#endif
    return mass > 0.0 ? sample_weights(p, q, V, u) : sample_from(p, V, u);
}

// Phase 3, ACCEPT/REJECT: walks the k candidates left to right. Candidate i is
// accepted when u_i < min(1, p_i(c_i) / q_i(c_i)). The first rejection is replaced by
// a draw from norm(max(0, p_i - q_i)) and ends the round. If all k pass and
// allow_bonus is set, one bonus token is drawn from p_k. Writes the emitted tokens
// to accepted and returns how many there are: 1 .. k+1 (k when the bonus is not allowed).
// *rejected_at = the index of the rejected candidate, or -1.
int accept_reject(const int *candidates, int k, const float *q_draft, const float *p_target,
                  int V, int allow_bonus, Rng *rng, double *u, float *residual, int *accepted,
                  int *rejected_at) {
    *rejected_at = -1;
    for (int i = 0; i < k; i++) {
        int tok = candidates[i];
        double q = q_draft[(size_t)i * V + tok]; // > 0: tok was sampled from this row
        double p = p_target[(size_t)i * V + tok];
        u[i] = rng_uniform(rng);
#ifdef BREAK_RATIO
        double tmp = p; p = q; q = tmp; // test-only bug: accept with min(1, q/p)
#endif
        if (u[i] < fmin(1.0, p / q)) {
            accepted[i] = tok; // the target agrees often enough: keep the draft's token
            continue;
        }
        // rejected: this position is drawn again from the mass the draft under-covered
        *rejected_at = i;
        accepted[i] = sample_residual(p_target + (size_t)i * V, q_draft + (size_t)i * V, V,
                                      residual, rng_uniform(rng));
        return i + 1; // later candidates were drafted after a wrong token: discard them
    }
    if (!allow_bonus) return k;
    // every candidate passed: p_k came free with the verify pass, so take one more token
    accepted[k] = sample_from(p_target + (size_t)k * V, V, rng_uniform(rng));
    return k + 1;
}

// Phase 4, TRIM: keeps cache_len_before + num_accepted positions, i.e. current_token
// and the accepted drafts but the last emitted token. num_accepted = len(accepted)
// counts that last token too (a resample, a bonus, or in a final round without bonus
// the last accepted draft), and it is NOT cached: it becomes the next current_token.
// So the invariant holds: the newest token is never in the cache. The discarded positions
// are zeroed, so a debugger shows them gone; the next pass overwrites them anyway.
void trim_kv_cache(GPT *g, int num_accepted, int cache_len_before) {
    RunState *s = &g->state;
    const Config *c = &g->config;
    // the blog slices k[:, :keep]; here the cache is a fixed array, so lower kv_len
    int keep = cache_len_before + num_accepted;
#ifdef BREAK_TRIM
    return; // test-only bug: the rejected candidates stay in the cache
#endif
    size_t C = c->n_embd, S = c->block_size;
    for (int l = 0; l < c->n_layer; l++) {
        float *key_t = s->key_cache + l * C * S, *values = s->value_cache + l * S * C;
        for (int pos = keep; pos < s->kv_len; pos++) {
            for (size_t i = 0; i < C; i++) key_t[i * S + pos] = 0.0f; // a column of keys
            memset(values + pos * C, 0, C * sizeof(float));          // a row of values
        }
    }
    s->kv_len = keep;
}

// ----------------------------------------------------------------------------
// Generation loops: plain autoregressive decoding and speculative decoding

// Counters of one generation; the trace-and-stats section prints them.
typedef struct {
    long rounds;          // speculative rounds (one verify pass each)
    long drafted;         // candidates drafted, sum of k
    long accepted;        // candidates accepted
    long resampled;       // rounds that ended in a rejection and a residual draw
    long bonus;           // rounds where all k passed and a bonus token was drawn
    long prefill_passes;  // target passes over the prompt (1)
    long reprefill_passes;// target passes that refilled a full cache
    long verify_passes;   // target passes of speculative rounds
    long decode_passes;   // one-token target passes: every step of plain decoding, and
                          // speculative decoding's steps when one cache slot is left
    long emitted;         // tokens generated
    long round_tokens;    // tokens emitted by speculative rounds
    double seconds;       // wall time of the whole generation
} Stats;

// Every forward pass of the target model, whatever its kind: the cost speculation cuts.
long target_passes(const Stats *s) {
    return s->prefill_passes + s->reprefill_passes + s->verify_passes + s->decode_passes;
}

// Where an emitted token came from; --color shows it on the terminal.
typedef enum {
    FROM_TARGET,    // sampled from one target pass: a prefill, refill or step, or plain decoding
    FROM_ACCEPTED,  // a draft token that passed u < min(1, p/q)
    FROM_RESAMPLED, // drawn from norm(max(0, p - q)) after a rejection
    FROM_BONUS,     // drawn from p_target[k] after all k drafts passed
    N_SOURCES
} TokenSource;

// How a generation is run: shared by generate and speculative_generate.
typedef struct {
    float temperature;   // 1.0; 0 = greedy
    int K;               // draft length, 4
    int trace;           // print each speculative round and (re)prefill on stderr
    FILE *echo;          // where emitted text is written as it appears, or NULL
    const Vocab *vocab;  // for echo and trace
    unsigned char *source; // (length of seq) or NULL: source[i] is where seq[i] came from,
                           // a TokenSource (the prompt's entries are left as they are)
    int color;           // echo with one ANSI colour per TokenSource (needs source)
    // called by speculative_generate after every round and every single target pass,
    // with the text so far (seq[n_seq-1] is the current token): tests check the cache
    // and the counters here, a debugger can break here. NULL: not called.
    void (*after_step)(void *ctx, const GPT *g, const int *seq, int n_seq);
    void *ctx;           // passed to after_step
} DecodeOptions;

// Wall-clock seconds from a monotonic clock (never jumps with the date).
static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ANSI colours of the token sources, and their names for the legend.
static const char *const SOURCE_COLOR[N_SOURCES] = {"\033[35m", "\033[32m", "\033[33m",
                                                    "\033[36m"};
static const char *const SOURCE_NAME[N_SOURCES] = {"target sample", "accepted draft",
                                                   "resampled", "bonus"};

// Writes n tokens as text; with color (and source: (n) TokenSources) each character is
// wrapped in its source's colour. A newline always goes out uncoloured, so no colour
// runs into the next line, and the stream is reset at the end.
void write_text(FILE *f, const Vocab *v, const int *toks, const unsigned char *source, int n,
                int color) {
    int current = -1; // the colour now in force, -1 for none
    for (int i = 0; i < n; i++) {
        unsigned char ch = decode(v, toks[i]);
        int want = color && source && ch != '\n' ? source[i] : -1;
        if (want != current) {
            fputs(want >= 0 ? SOURCE_COLOR[want] : "\033[0m", f);
            current = want;
        }
        fputc(ch, f);
    }
    if (current >= 0) fputs("\033[0m", f);
}

// Writes the tokens seq[from .. from+n-1] to the echo stream, if any.
static void echo_tokens(const DecodeOptions *o, const int *seq, int from, int n) {
    if (!o->echo || !o->vocab) return;
    write_text(o->echo, o->vocab, seq + from, o->source ? o->source + from : NULL, n, o->color);
    fflush(o->echo);
}

// Records where seq[from .. from+n-1] came from, if the caller asked (o->source).
static void mark_source(const DecodeOptions *o, int from, int n, TokenSource src) {
    if (o->source) memset(o->source + from, src, (size_t)n);
}

// The trace printers live in the trace-and-stats section below.
static void trace_pass(const DecodeOptions *o, const char *what, int n_tokens, int pos0,
                       int kv_len, int sampled);
static void trace_round(const DecodeOptions *o, long round, int current, int k,
                        const SpecBuffers *b, int n_out, int cache_before,
                        int cache_verified, int cache_after);

// The context policy, one rule for both decoders. The cache holds at most S positions.
// (Re)prefill runs the last tokens of the sequence, current token included, with
// positions from 0, and returns the logits row of the current token. The first
// prefill keeps the last S tokens of the prompt; when the cache is full, a re-prefill
// keeps the last S/2 tokens, so the cost is paid once per S/2 tokens, not each token.
// Both decoders refill at the same sequence index, so every token is predicted from
// the same context in both.
static const float *prefill(GPT *g, const int *seq, int n_seq, int keep, Stats *st,
                            int is_refill) {
    // empty the cache and run the window in one pass: positions restart at 0
    int n = n_seq < keep ? n_seq : keep;
    g->state.kv_len = 0;
    const float *logits = forward_last(g, seq + n_seq - n, n);
    if (is_refill) st->reprefill_passes++;
    else st->prefill_passes++;
    return logits;
}

// The prompt as tokens; an empty prompt starts from token 0 ('\n' in Tiny
// Shakespeare), as the lecture's generate starts from torch.zeros((1, 1)).
// seq must have room for max(n_prompt, 1) + n_new tokens. Returns the sequence length.
static int start_sequence(int *seq, const int *prompt, int n_prompt) {
    if (n_prompt == 0) {
        seq[0] = 0;
        return 1;
    }
    memcpy(seq, prompt, (size_t)n_prompt * sizeof(int));
    return n_prompt;
}

// Samples one token from a row of target logits at the decoding temperature; p: (V).
static int sample_target(const float *logits, int V, float temperature, float *p, Rng *rng) {
    target_probs(p, logits, V, temperature);
    return sample_from(p, V, rng_uniform(rng));
}

// Plain autoregressive decoding with the same cache: one target pass per token.
// seq receives the prompt (or the start token) and then n_new generated tokens;
// p: (V) holds each step's target distribution. This is the baseline speculation must match.
void generate(GPT *g, const int *prompt, int n_prompt, int n_new, const DecodeOptions *o,
              Rng *rng, int *seq, float *p, Stats *st) {
    int V = g->config.vocab_size, S = g->config.block_size;
    double t0 = now_seconds();
    // seq[first..] is the generated part; seq[n_seq-1] is always the current token
    int n_seq = start_sequence(seq, prompt, n_prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, st, 0);
    while (n_seq - first < n_new) {
        // sample the next token from the logits of the current token
        seq[n_seq] = sample_target(logits, V, o->temperature, p, rng);
        mark_source(o, n_seq, 1, FROM_TARGET);
        echo_tokens(o, seq, n_seq, 1);
        n_seq++;
        if (n_seq - first == n_new) break;
        // feed it back: one token on top of the cache, or a refill when the cache is full
        if (g->state.kv_len == S) logits = prefill(g, seq, n_seq, S / 2, st, 1);
        else {
            logits = forward(g, &seq[n_seq - 1], 1);
            st->decode_passes++;
        }
    }
    st->emitted = n_seq - first;
    st->seconds = now_seconds() - t0;
}

// One speculative round on top of the cache: draft, verify, accept/reject, trim.
// Returns the number of tokens it appends to seq (1 .. k+1).
static int speculative_round(GPT *g, const BigramDraft *d, SpecBuffers *b, int k,
                             int allow_bonus, const DecodeOptions *o, Rng *rng,
                             int current_token, Stats *st) {
    int V = g->config.vocab_size;
    int cache_len = g->state.kv_len;
    draft_tokens(d, current_token, k, o->temperature, rng, b->candidates, b->q_draft);
    verify_candidates(g, current_token, b->candidates, k, o->temperature, b->all_tokens,
                      b->p_target);
    int cache_verified = g->state.kv_len;
    int n = accept_reject(b->candidates, k, b->q_draft, b->p_target, V, allow_bonus, rng,
                          b->u, b->residual, b->accepted, &b->rejected_at);
    trim_kv_cache(g, n, cache_len);
    // count what happened: accepted drafts, and how the round ended
    int n_acc = b->rejected_at >= 0 ? b->rejected_at : k;
    if (b->rejected_at >= 0) st->resampled++;
    if (n == k + 1) st->bonus++;
    st->rounds++;
    st->verify_passes++;
    st->drafted += k;
    st->accepted += n_acc;
    st->round_tokens += n;
    if (o->trace)
        trace_round(o, st->rounds, current_token, k, b, n, cache_len, cache_verified,
                    g->state.kv_len);
    return n;
}

// Speculative decoding: prefill, then rounds until n_new tokens exist. Each round
// drafts k = min(K, tokens still needed, room left in the cache) tokens, so a round
// never verifies past the end of the cache. seq: room for max(n_prompt,1) + n_new.
void speculative_generate(GPT *g, const BigramDraft *d, SpecBuffers *b, const int *prompt,
                          int n_prompt, int n_new, const DecodeOptions *o, Rng *rng,
                          int *seq, Stats *st) {
    int V = g->config.vocab_size, S = g->config.block_size;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt, n_prompt), first = n_seq;
    // 1. prefill, and the first token sampled straight from it (if any is wanted at all)
    const float *logits = prefill(g, seq, n_seq, S, st, 0);
    if (n_new > 0) {
        seq[n_seq] = sample_target(logits, V, o->temperature, b->p_next, rng);
        mark_source(o, n_seq, 1, FROM_TARGET);
        if (o->trace) trace_pass(o, "PREFILL", g->state.kv_len, 0, g->state.kv_len, seq[n_seq]);
        echo_tokens(o, seq, n_seq, 1);
        n_seq++;
    }
    // 2. the speculative loop; seq[n_seq-1] is the current token, never in the cache
    while (n_seq - first < n_new) {
        int remaining = n_new - (n_seq - first);
        // a verify pass writes k+1 positions from kv_len, so k <= S-1-kv_len keeps it
        // inside the cache; a round needs room for at least one draft
        int room = S - 1 - g->state.kv_len;
        if (room > 0) {
            int k = o->K < remaining ? o->K : remaining;
            if (k > room) k = room;
            int allow_bonus = k < remaining; // never emit more than was asked for
            int n = speculative_round(g, d, b, k, allow_bonus, o, rng, seq[n_seq - 1], st);
            memcpy(seq + n_seq, b->accepted, (size_t)n * sizeof(int));
            // the round's tokens: the drafts that passed, then a resample or a bonus (or
            // neither, when all k passed and no bonus was allowed)
            int n_acc = b->rejected_at >= 0 ? b->rejected_at : k;
            mark_source(o, n_seq, n_acc, FROM_ACCEPTED);
            if (n > n_acc)
                mark_source(o, n_seq + n_acc, 1, b->rejected_at >= 0 ? FROM_RESAMPLED : FROM_BONUS);
            echo_tokens(o, seq, n_seq, n);
            n_seq += n;
            if (o->after_step) o->after_step(o->ctx, g, seq, n_seq);
            continue;
        }
        // no room for a draft: the next token comes from one target pass, exactly the
        // pass plain decoding makes at this point of the text
        int pos0 = g->state.kv_len, n_pass;
        const char *what;
        if (pos0 == S) {
            // cache full: refill from the last S/2 tokens, as plain decoding does
            logits = prefill(g, seq, n_seq, S / 2, st, 1);
            what = "REFILL";
            n_pass = S / 2;
            pos0 = 0;
        } else {
            // one free slot: the current token alone, at the last position
            logits = forward(g, &seq[n_seq - 1], 1);
            st->decode_passes++;
            what = "STEP";
            n_pass = 1;
        }
        seq[n_seq] = sample_target(logits, V, o->temperature, b->p_next, rng);
        mark_source(o, n_seq, 1, FROM_TARGET);
        if (o->trace) trace_pass(o, what, n_pass, pos0, g->state.kv_len, seq[n_seq]);
        echo_tokens(o, seq, n_seq, 1);
        n_seq++;
        if (o->after_step) o->after_step(o->ctx, g, seq, n_seq);
    }
    st->emitted = n_seq - first;
    st->seconds = now_seconds() - t0;
}

// ----------------------------------------------------------------------------
// Trace and stats (stderr)

// Prints a target pass outside the rounds (prefill, refill, or a one-token step at the
// cache edge): what it ran, where, and the token sampled from its last row.
static void trace_pass(const DecodeOptions *o, const char *what, int n_tokens, int pos0,
                       int kv_len, int sampled) {
    char vis[8];
    visible_char(vis, decode(o->vocab, sampled));
    if (!strcmp(what, "REFILL"))
        fprintf(stderr, "cache full (cache_len = block_size): keep the last %d tokens\n", n_tokens);
    if (!strcmp(what, "STEP"))
        fprintf(stderr, "one free cache slot: no room to verify a draft, so one plain step\n");
    fprintf(stderr, "%-8s one target pass over %d token%s at positions %d..%d -> cache_len %d; "
            "sampled %s, the new current_token\n", what, n_tokens, n_tokens == 1 ? "" : "s",
            pos0, pos0 + n_tokens - 1, kv_len, vis);
}

// Prints one round the way the blog's worked example reads, with real numbers.
static void trace_round(const DecodeOptions *o, long round, int current, int k,
                        const SpecBuffers *b, int n_out, int cache_before,
                        int cache_verified, int cache_after) {
    const Vocab *v = o->vocab;
    int V = b->V;
    char vis[8];
    visible_char(vis, decode(v, current));
    fprintf(stderr, "\nround %ld: current_token %s, cache_len %d, k %d\n", round, vis,
            cache_before, k);
    // DRAFT: the chain current -> c0 -> c1 ..., with the q of each guess
    fprintf(stderr, "  DRAFT   %s", vis);
    for (int i = 0; i < k; i++) {
        visible_char(vis, decode(v, b->candidates[i]));
        fprintf(stderr, " -> %s (q=%.3f)", vis, b->q_draft[(size_t)i * V + b->candidates[i]]);
    }
    fputc('\n', stderr);
    // VERIFY: the one pass, and which positions it scored
    fprintf(stderr, "  VERIFY  one target pass over %d tokens at positions %d..%d\n", k + 1,
            cache_before, cache_before + k);
    // ACCEPT/REJECT: one line per candidate that was checked
    int checked = b->rejected_at >= 0 ? b->rejected_at + 1 : k;
    if (checked > 0) fprintf(stderr, "  ACCEPT/REJECT (accept when u < min(1, p/q))\n");
    for (int i = 0; i < checked; i++) {
        int c = b->candidates[i];
        double p = b->p_target[(size_t)i * V + c], q = b->q_draft[(size_t)i * V + c];
        int ok = i != b->rejected_at;
        visible_char(vis, decode(v, c));
        fprintf(stderr, "    %-6s p=%.3f q=%.3f p/q=%.3f min(1,p/q)=%.3f u=%.3f -> %s\n",
                vis, p, q, p / q, fmin(1.0, p / q), b->u[i], ok ? "ACCEPT" : "REJECT");
    }
    // how the round ended: a resample at the rejection, a bonus, or neither (last round)
    if (b->rejected_at >= 0) {
        int left = k - b->rejected_at - 1;
        visible_char(vis, decode(v, b->accepted[b->rejected_at]));
        fprintf(stderr, "    resample from norm(max(0, p-q)) -> %s; discard the "
                "remaining %d candidate%s\n", vis, left, left == 1 ? "" : "s");
    } else if (n_out == k + 1) {
        visible_char(vis, decode(v, b->accepted[k]));
        fprintf(stderr, "  BONUS   all %d passed: one more token from p_target[%d] -> %s\n",
                k, k, vis);
    } else {
        fprintf(stderr, "  (all %d passed; no bonus: the round already gives every token "
                "still needed)\n", k);
    }
    // RESULT and TRIM: what the round emitted, and the cache rolled back to match it
    fprintf(stderr, "  RESULT  emitted \"");
    for (int i = 0; i < n_out; i++) {
        unsigned char ch = decode(v, b->accepted[i]);
        if (ch == '\n') fputs("\\n", stderr);
        else fputc(isprint(ch) ? ch : '?', stderr);
    }
    fprintf(stderr, "\": %d token%s from 1 target pass\n", n_out, n_out == 1 ? "" : "s");
    // the last emitted token is not cached: it is the next round's current_token
    visible_char(vis, decode(v, b->accepted[n_out - 1]));
    fprintf(stderr, "  TRIM    cache_len %d -> %d (kept current + %d accepted, dropped %d); "
            "%s is the new current_token\n", cache_verified, cache_after,
            cache_after - cache_before - 1, cache_verified - cache_after, vis);
}

// Prints the counters of one generation, one per line, on stderr.
void print_stats(const char *title, const Stats *s, int speculative) {
    fprintf(stderr, "\n%s\n", title);
    fprintf(stderr, "  tokens emitted          %ld\n", s->emitted);
    // speculation's own counters: how much was guessed, kept and paid for
    if (speculative) {
        fprintf(stderr, "  rounds                  %ld\n", s->rounds);
        fprintf(stderr, "  drafted                 %ld\n", s->drafted);
        fprintf(stderr, "  accepted                %ld   acceptance rate %.3f (accepted/drafted)\n",
                s->accepted, s->drafted ? (double)s->accepted / s->drafted : 0.0);
        fprintf(stderr, "  rounds ending           %ld in a resample, %ld in a bonus\n",
                s->resampled, s->bonus);
        fprintf(stderr, "  tokens per verify pass  %.3f\n",
                s->rounds ? (double)s->round_tokens / s->rounds : 0.0);
        fprintf(stderr, "  target passes           %ld   (prefill %ld, re-prefill %ld, verify %ld, "
                "one-token steps at the cache edge %ld)\n", target_passes(s), s->prefill_passes,
                s->reprefill_passes, s->verify_passes, s->decode_passes);
    } else {
        fprintf(stderr, "  target passes           %ld   (prefill %ld, re-prefill %ld, decode %ld)\n",
                target_passes(s), s->prefill_passes, s->reprefill_passes, s->decode_passes);
    }
    // the wall time covers prefill to last token, refills included; also the trace and
    // the streamed text when they are on (--compare turns streaming off for both decoders)
    fprintf(stderr, "  wall time               %.3f ms   %.0f tokens/s\n", 1e3 * s->seconds,
            s->seconds > 0 ? s->emitted / s->seconds : 0.0);
}

// Prints speculative and plain side by side, with the ratios speculation is about.
void print_comparison(const Stats *spec, const Stats *plain, int greedy, int identical) {
    // ratios below 1 are what speculation buys: fewer passes, and perhaps less time
    fprintf(stderr, "\ncomparison              speculative        plain    spec/plain\n");
    fprintf(stderr, "  target passes        %11ld  %11ld  %11.3f\n", target_passes(spec),
            target_passes(plain), (double)target_passes(spec) / target_passes(plain));
    fprintf(stderr, "  wall time (ms)       %11.3f  %11.3f  %11.3f\n", 1e3 * spec->seconds,
            1e3 * plain->seconds, plain->seconds > 0 ? spec->seconds / plain->seconds : 0.0);
    // only greedy decoding promises equal texts; sampling promises equal distributions
    if (greedy)
        fprintf(stderr, "  greedy outputs are %s\n", identical ? "byte-identical" : "DIFFERENT (a bug)");
    else
        fprintf(stderr, "  (sampled texts %s: the decoders consume the random stream "
                "differently; their distributions are the same)\n", identical ? "agree" : "differ");
}

// ----------------------------------------------------------------------------
// Checkpoint file and random initialisation
//
// Format (every integer uint32 and every float float32, little-endian):
//   offset     size    field
//   0          4       magic "SPDC"
//   4          4       version = 1
//   8          20      n_layer, n_head, n_embd, block_size, vocab_size
//   28         V       the vocabulary: V distinct bytes, ascending (token i is the i-th)
//   28+V       4*P     the P parameters, tensor by tensor in TENSOR_NAMES order,
//                      each row-major with the shape given in Weights (Linear
//                      weights as (in, out), PyTorch's weight.T)
//   28+V+4P    8       checksum: FNV-1a 64 of every byte before it
// The file size is therefore exactly 36 + V + 4P, and the loader checks that first.

#define CKPT_MAGIC "SPDC"
#define CKPT_VERSION 1
#define CKPT_HEADER 28

// FNV-1a, 64-bit: a short, well-known hash; enough to catch a flipped byte.
uint64_t fnv1a64(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

// Little-endian byte order, written and read byte by byte: the same file on any host.
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
// Reads what put_u32 wrote.
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// The same for 64-bit values: low half first.
static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get_u64(const unsigned char *p) {
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

// Checks a config for sizes the model can be built with; fills err and returns -1 if not.
int validate_config(const Config *c, char *err, size_t errlen) {
    // generous bounds; every size product stays far below 2^63 (a 64-bit size_t)
    if (c->n_layer < 1 || c->n_layer > 64 || c->n_head < 1 || c->n_head > 64 ||
        c->n_embd < 1 || c->n_embd > 4096 || c->block_size < 2 || c->block_size > 4096 ||
        c->vocab_size < 1 || c->vocab_size > 256) {
        snprintf(err, errlen, "config out of range (n_layer %d, n_head %d, n_embd %d, "
                 "block_size %d, vocab_size %d)", c->n_layer, c->n_head, c->n_embd,
                 c->block_size, c->vocab_size);
        return -1;
    }
    // heads split the embedding evenly: HS = C / NH must be whole
    if (c->n_embd % c->n_head != 0) {
        snprintf(err, errlen, "n_embd %d is not a multiple of n_head %d", c->n_embd, c->n_head);
        return -1;
    }
    return 0;
}

// Parses a checkpoint held in memory into g (built here) and vocab. Every field is
// checked before it is used; fills err and returns -1 on the first problem.
int parse_checkpoint(const unsigned char *buf, size_t n, GPT *g, Vocab *vocab,
                     char *err, size_t errlen) {
    // header: magic, version, config
    if (n < CKPT_HEADER) {
        snprintf(err, errlen, "file is %zu bytes, shorter than the %d-byte header", n, CKPT_HEADER);
        return -1;
    }
    if (memcmp(buf, CKPT_MAGIC, 4) != 0) {
        snprintf(err, errlen, "wrong magic (not a specdec checkpoint)");
        return -1;
    }
    uint32_t version = get_u32(buf + 4);
    if (version != CKPT_VERSION) {
        snprintf(err, errlen, "version %u, this program reads version %d", version, CKPT_VERSION);
        return -1;
    }
    Config c;
    uint32_t f[5];
    for (int i = 0; i < 5; i++) f[i] = get_u32(buf + 8 + 4 * i);
    // a huge field would wrap to a negative int: refuse it here, naming the real value
    static const char *field[5] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"};
    for (int i = 0; i < 5; i++)
        if (f[i] > 4096) {
            snprintf(err, errlen, "config out of range (%s %u)", field[i], f[i]);
            return -1;
        }
    c.n_layer = (int)f[0]; c.n_head = (int)f[1]; c.n_embd = (int)f[2];
    c.block_size = (int)f[3]; c.vocab_size = (int)f[4];
    if (validate_config(&c, err, errlen) != 0) return -1;
    // size: known exactly from the config, so check it before reading further
    size_t sizes[N_TENSORS];
    size_t P = weight_sizes(&c, sizes);
    size_t V = (size_t)c.vocab_size;
    // one number covers truncation at any section and a config that lies about the tensors
    size_t expect = CKPT_HEADER + V + 4 * P + 8;
    if (n != expect) {
        snprintf(err, errlen, "file is %zu bytes, but its config (L=%d NH=%d C=%d S=%d V=%d, "
                 "%zu parameters) needs %zu: %s", n, c.n_layer, c.n_head, c.n_embd,
                 c.block_size, c.vocab_size, P, expect,
                 n < expect ? "truncated or mismatched"
                            : "too long: mismatched, or bytes were appended");
        return -1;
    }
    // checksum: the last 8 bytes, little-endian, over everything before them
    if (fnv1a64(buf, n - 8) != get_u64(buf + n - 8)) {
        snprintf(err, errlen, "checksum mismatch: the file is corrupted");
        return -1;
    }
    // vocabulary: strictly ascending bytes
    const unsigned char *vb = buf + CKPT_HEADER;
    for (size_t i = 1; i < V; i++) {
        if (vb[i] <= vb[i - 1]) {
            snprintf(err, errlen, "vocabulary bytes are not distinct and ascending at entry %zu", i);
            return -1;
        }
    }
    // parameters: copied out, and every one must be a finite number
    if (build_gpt(g, &c) != 0) {
        snprintf(err, errlen, "out of memory for %zu parameters and the activations of a "
                 "%d-token context", P, c.block_size);
        free_gpt(g);
        return -1;
    }
    // memcpy of the bits, not a cast: reinterpreting bytes as float is only defined this way
    const unsigned char *pb = vb + V;
    for (size_t i = 0; i < P; i++) {
        uint32_t bits = get_u32(pb + 4 * i);
        memcpy(&g->params[i], &bits, 4);
        if (!isfinite(g->params[i])) {
            int t = 0; // name the tensor the bad value sits in
            for (size_t end = sizes[0]; i >= end && t + 1 < N_TENSORS; end += sizes[++t]) {}
            snprintf(err, errlen, "parameter %zu (in tensor %s) is not a finite number", i,
                     TENSOR_NAMES[t]);
            free_gpt(g);
            return -1;
        }
    }
    // vocabulary: token i is the i-th byte; every other byte maps to -1
    vocab->size = (int)V;
    for (int b = 0; b < 256; b++) vocab->id[b] = -1;
    for (size_t i = 0; i < V; i++) {
        vocab->chars[i] = vb[i];
        vocab->id[vb[i]] = (int)i;
    }
    return 0;
}

// Loads a checkpoint file; on failure err names the file and the problem.
int load_checkpoint(const char *path, GPT *g, Vocab *vocab, char *err, size_t errlen) {
    size_t n = 0;
    unsigned char *buf = read_file(path, &n, "checkpoint",
                                   "train one with './specdec train', or make a random one "
                                   "with './specdec --init 1337 --save PATH'",
                                   err, errlen);
    if (!buf) return -1;
    char why[256];
    int rc = parse_checkpoint(buf, n, g, vocab, why, sizeof(why));
    free(buf);
    if (rc != 0)
        snprintf(err, errlen, "checkpoint '%s': %s (point -m at a file written by "
                 "'./specdec train' or './specdec --init SEED --save PATH')", path, why);
    return rc;
}

// Writes n bytes to a new temporary file beside path (path.tmp.XXXXXX) and flushes
// them to disk. Returns the temporary file's name (malloc'd), or NULL with err set and
// nothing left behind. what names the kind of file ("checkpoint", "training state").
static char *write_temp(const char *path, const unsigned char *buf, size_t n,
                        const char *what, char *err, size_t errlen) {
    // the temporary file lives in the same directory, so the rename after it is atomic
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        snprintf(err, errlen, "out of memory writing '%s'", path);
        return NULL;
    }
    // mkstemp picks a fresh name, so two writers never share a temporary file;
    // fsync, so the name published later never points at data still in flight
    snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    // mkstemp creates the file 0600; give it the mode an ordinary write would (0666 & ~umask)
    mode_t mask = umask(0);
    umask(mask);
    if (fd >= 0) fchmod(fd, 0666 & ~mask);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int ok = f && fwrite(buf, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    if (f) ok = (fclose(f) == 0) && ok;
    else if (fd >= 0) close(fd);
    if (!ok) {
        // the old file, if any, is untouched; only the temporary one is removed
        snprintf(err, errlen, "cannot write %s '%s': %s (check the directory exists "
                 "and is writable)", what, path, strerror(saved ? saved : errno));
        if (fd >= 0) unlink(tmp);
        free(tmp);
        return NULL;
    }
    return tmp;
}

// Renames a finished temporary file over path (the atomic step) and frees its name.
static int publish_temp(char *tmp, const char *path, const char *what, char *err,
                        size_t errlen) {
    int ok = rename(tmp, path) == 0;
    if (!ok) {
        snprintf(err, errlen, "cannot write %s '%s': %s (check the directory exists "
                 "and is writable)", what, path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

// Writes the n bytes of a serialized file (buf, which it frees; NULL means serializing
// ran out of memory) to path atomically: to a temporary file beside path, then rename,
// so an interrupted write never leaves a half-written file where a good one was.
static int write_file_atomic(const char *path, unsigned char *buf, size_t n,
                             const char *what, char *err, size_t errlen) {
    if (!buf) {
        snprintf(err, errlen, "out of memory writing '%s'", path);
        return -1;
    }
    char *tmp = write_temp(path, buf, n, what, err, errlen);
    free(buf);
    return tmp ? publish_temp(tmp, path, what, err, errlen) : -1;
}

// Lays a checkpoint out in memory (the format above), checksum included; sets *n.
// Returns NULL if out of memory. The same model always gives the same bytes.
static unsigned char *serialize_checkpoint(const GPT *g, const Vocab *vocab, size_t *n) {
    const Config *c = &g->config;
    size_t V = (size_t)c->vocab_size;
    *n = CKPT_HEADER + V + 4 * g->n_params + 8;
    unsigned char *buf = malloc(*n);
    if (!buf) return NULL;
    // header, vocabulary, parameters, checksum
    memcpy(buf, CKPT_MAGIC, 4);
    put_u32(buf + 4, CKPT_VERSION);
    int fields[5] = {c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab_size};
    for (int i = 0; i < 5; i++) put_u32(buf + 8 + 4 * i, (uint32_t)fields[i]);
    memcpy(buf + CKPT_HEADER, vocab->chars, V);
    for (size_t i = 0; i < g->n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &g->params[i], 4);
        put_u32(buf + CKPT_HEADER + V + 4 * i, bits);
    }
    put_u64(buf + *n - 8, fnv1a64(buf, *n - 8));
    return buf;
}

// Writes a checkpoint atomically (see write_file_atomic).
int save_checkpoint(const GPT *g, const Vocab *vocab, const char *path, char *err, size_t errlen) {
    size_t n = 0;
    unsigned char *buf = serialize_checkpoint(g, vocab, &n);
    return write_file_atomic(path, buf, n, "checkpoint", err, errlen);
}

// Fills n floats uniformly from [-bound, bound).
static void init_uniform(float *x, size_t n, double bound, Rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(bound * (2.0 * rng_uniform(r) - 1.0));
}

// A seeded random model with PyTorch's default initialisation: Linear weight and bias
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), Embedding N(0, 1), LayerNorm weight 1, bias 0.
void init_gpt_random(GPT *g, uint64_t seed) {
    // its own generator, so the model does not depend on the sampling seed
    Rng r;
    rng_seed(&r, seed);
    const Config *c = &g->config;
    Weights *w = &g->w;
    size_t sizes[N_TENSORS];
    weight_sizes(c, sizes);
    size_t L = c->n_layer, C = c->n_embd;
    double bc = 1.0 / sqrt((double)C), b4c = 1.0 / sqrt(4.0 * C); // fan_in C or 4C
    // embeddings
    for (size_t i = 0; i < sizes[0]; i++) w->token_embedding[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < sizes[1]; i++) w->position_embedding[i] = (float)rng_normal(&r);
    // LayerNorms start as the identity
    for (size_t i = 0; i < L * C; i++) {
        w->ln1_weight[i] = 1.0f; w->ln1_bias[i] = 0.0f;
        w->ln2_weight[i] = 1.0f; w->ln2_bias[i] = 0.0f;
    }
    for (size_t i = 0; i < C; i++) { w->ln_f_weight[i] = 1.0f; w->ln_f_bias[i] = 0.0f; }
    // Linears, each bounded by its fan-in
    init_uniform(w->query, sizes[4], bc, &r);
    init_uniform(w->key, sizes[5], bc, &r);
    init_uniform(w->value, sizes[6], bc, &r);
    init_uniform(w->proj_weight, sizes[7], bc, &r);
    init_uniform(w->proj_bias, sizes[8], bc, &r);
    init_uniform(w->ffwd_up_weight, sizes[11], bc, &r);
    init_uniform(w->ffwd_up_bias, sizes[12], bc, &r);
    init_uniform(w->ffwd_down_weight, sizes[13], b4c, &r);
    init_uniform(w->ffwd_down_bias, sizes[14], b4c, &r);
    init_uniform(w->lm_head_weight, sizes[17], bc, &r);
    init_uniform(w->lm_head_bias, sizes[18], bc, &r);
}

// ----------------------------------------------------------------------------
// Training: the lecture's recipe (random windows, cross-entropy, AdamW), evaluation

// AdamW with PyTorch's defaults; m and v have one entry per parameter.
typedef struct {
    float lr;           // learning rate, constant       e.g. 1e-3
    float beta1, beta2; // moment decay rates            e.g. 0.9, 0.999
    float eps;          // added to sqrt(v)              e.g. 1e-8
    float weight_decay; // decoupled, on every parameter e.g. 0.01
    float *m;           // (P) first moment: a running mean of the gradient
    float *v;           // (P) second moment: a running mean of its square
    long step;          // updates made so far
} AdamW;

// One AdamW step over n parameters, as torch.optim.AdamW takes it: decay the weights,
// update both moments, correct their start-up bias, and step by m / (sqrt(v) + eps).
void adamw_update(AdamW *opt, float *params, const float *grads, size_t n) {
    opt->step++;
    // the moments start at 0, so early averages are too small by exactly these factors
    float bias1 = 1.0f - powf(opt->beta1, (float)opt->step);
    float bias2 = 1.0f - powf(opt->beta2, (float)opt->step);
    for (size_t i = 0; i < n; i++) {
        params[i] *= 1.0f - opt->lr * opt->weight_decay; // decoupled weight decay
        opt->m[i] = opt->beta1 * opt->m[i] + (1.0f - opt->beta1) * grads[i];
        opt->v[i] = opt->beta2 * opt->v[i] + (1.0f - opt->beta2) * grads[i] * grads[i];
        float m_hat = opt->m[i] / bias1, v_hat = opt->v[i] / bias2;
        params[i] -= opt->lr * m_hat / (sqrtf(v_hat) + opt->eps);
    }
}

// B random windows of the training split, as the lecture's get_batch draws them: a
// start i anywhere that leaves room for S+1 tokens; inputs data[i..i+S), targets one on.
void get_batch(const Corpus *corpus, int B, int S, Rng *rng, int *inputs, int *targets) {
    size_t starts = corpus->n_train - (size_t)S; // torch.randint(len(data) - block_size)
    for (int b = 0; b < B; b++) {
        size_t i = (size_t)(rng_u64(rng) % starts);
        memcpy(inputs + (size_t)b * S, corpus->tokens + i, (size_t)S * sizeof(int));
        memcpy(targets + (size_t)b * S, corpus->tokens + i + 1, (size_t)S * sizeof(int));
    }
}

// Mean cross-entropy over every position of tokens[0..n): consecutive windows of up to
// S tokens, each from an empty cache, each target scored once. Deterministic.
double eval_loss(GPT *g, const int *tokens, size_t n) {
    int S = g->config.block_size, V = g->config.vocab_size;
    double total = 0.0;
    size_t scored = 0;
    for (size_t start = 0; start + 1 < n; start += (size_t)S) {
        int T = n - 1 - start < (size_t)S ? (int)(n - 1 - start) : S; // the last may be short
        g->state.kv_len = 0;
        const float *logits = forward(g, tokens + start, T);
        // each row predicts the next token, scored as in training
        for (int t = 0; t < T; t++)
            total += cross_entropy(logits + (size_t)t * V, V, tokens[start + t + 1], NULL);
        scored += (size_t)T;
    }
    g->state.kv_len = 0;
    return total / (double)scored;
}

// The training state file, PATH.state beside the checkpoint PATH: what the checkpoint
// does not hold and an exact resume needs. Integers little-endian, floats float32:
//   offset     size    field
//   0          4       magic "SPDS"
//   4          4       version = 1
//   8          4       batch: windows per step
//   12         4       0 (padding)
//   16         8       step: optimiser updates made so far
//   24         8       the batch sampler's generator state
//   32         8       the checksum of the checkpoint saved with it: the pair must match
//   40         8       P, the parameter count
//   48         4P      AdamW's first moments m
//   48+4P      4P      AdamW's second moments v
//   48+8P      8       checksum: FNV-1a 64 of every byte before it
#define STATE_MAGIC "SPDS"
#define STATE_VERSION 1
#define STATE_HEADER 48

// Where a training run stands, beyond the weights: enough to continue it exactly.
typedef struct {
    AdamW opt;          // the optimiser, its moments and opt.step, the updates made
    Rng rng;            // the batch sampler's generator
    int batch;          // windows per step                e.g. 16
    uint64_t ckpt_sum;  // checksum of the checkpoint this state goes with
} TrainProgress;

// The training state of p as the bytes of a file (*n of them, malloc'd); NULL if out
// of memory.
static unsigned char *serialize_train_state(const TrainProgress *p, size_t P, size_t *n_out) {
    size_t n = STATE_HEADER + 8 * P + 8;
    unsigned char *buf = malloc(n);
    if (!buf) return NULL;
    // header, moments, checksum: the layout above
    memcpy(buf, STATE_MAGIC, 4);
    put_u32(buf + 4, STATE_VERSION);
    put_u32(buf + 8, (uint32_t)p->batch);
    put_u32(buf + 12, 0);
    put_u64(buf + 16, (uint64_t)p->opt.step);
    put_u64(buf + 24, p->rng.state);
    put_u64(buf + 32, p->ckpt_sum);
    put_u64(buf + 40, (uint64_t)P);
    for (size_t i = 0; i < P; i++) {
        uint32_t m, v;
        memcpy(&m, &p->opt.m[i], 4);
        memcpy(&v, &p->opt.v[i], 4);
        put_u32(buf + STATE_HEADER + 4 * i, m);
        put_u32(buf + STATE_HEADER + 4 * (P + i), v);
    }
    put_u64(buf + n - 8, fnv1a64(buf, n - 8));
    *n_out = n;
    return buf;
}

// Writes the training state of p atomically to path; 0 on success.
int save_train_state(const TrainProgress *p, size_t P, const char *path, char *err,
                     size_t errlen) {
    size_t n = 0;
    unsigned char *buf = serialize_train_state(p, P, &n);
    return write_file_atomic(path, buf, n, "training state", err, errlen);
}

// Reads a training state for a model of P parameters into p (whose opt.m and opt.v
// hold P floats each) and checks it belongs with the checkpoint whose checksum is
// ckpt_sum. Fills err and returns -1 on the first problem.
int load_train_state(TrainProgress *p, size_t P, uint64_t ckpt_sum, const char *path,
                     char *err, size_t errlen) {
    size_t n = 0;
    char why[256];
    unsigned char *buf = read_file(path, &n, "training state",
                                   "train afresh without --resume", why, sizeof(why));
    if (!buf) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    // every check before any use: size, magic, version, checksum, then the pairing
    int ok = 0;
    if (n != STATE_HEADER + 8 * P + 8)
        snprintf(why, sizeof(why), "file is %zu bytes, but a model of %zu parameters needs "
                 "%zu: truncated, or saved for another model", n, P, STATE_HEADER + 8 * P + 8);
    else if (memcmp(buf, STATE_MAGIC, 4) != 0)
        snprintf(why, sizeof(why), "wrong magic (not a specdec training state)");
    else if (get_u32(buf + 4) != STATE_VERSION)
        snprintf(why, sizeof(why), "version %u, this program reads version %d",
                 get_u32(buf + 4), STATE_VERSION);
    else if (fnv1a64(buf, n - 8) != get_u64(buf + n - 8))
        snprintf(why, sizeof(why), "checksum mismatch: the file is corrupted");
    else if (get_u64(buf + 32) != ckpt_sum || get_u64(buf + 40) != P)
        snprintf(why, sizeof(why), "it was saved with a different checkpoint (a run stopped "
                 "between writing the two, or another run's file)");
    else if (get_u32(buf + 8) < 1 || get_u32(buf + 8) > 4096 || get_u64(buf + 24) == 0 ||
             get_u64(buf + 16) > 10000000)
        snprintf(why, sizeof(why), "batch, step or generator state out of range");
    else
        ok = 1;
    if (ok) {
        p->batch = (int)get_u32(buf + 8);
        p->opt.step = (long)get_u64(buf + 16);
        p->rng.state = get_u64(buf + 24);
        p->ckpt_sum = ckpt_sum;
        for (size_t i = 0; i < P; i++) {
            uint32_t m = get_u32(buf + STATE_HEADER + 4 * i);
            uint32_t v = get_u32(buf + STATE_HEADER + 4 * (P + i));
            memcpy(&p->opt.m[i], &m, 4);
            memcpy(&p->opt.v[i], &v, 4);
        }
    } else
        snprintf(err, errlen, "training state '%s': %s (train afresh without --resume)", path,
                 why);
    free(buf);
    return ok ? 0 : -1;
}

// What `./specdec train` is asked to do.
typedef struct {
    int iters;         // optimisation steps, in all                  e.g. 5000
    int batch;         // windows per step, B                         e.g. 16
    int eval_interval; // steps between validation losses/checkpoints e.g. 500
    int log_interval;  // steps between progress lines                e.g. 100
    uint64_t seed;     // initialisation and batch sampling           e.g. 1337
    const char *out;   // checkpoint path, rewritten at every evaluation; PATH.state too
    int resume;        // 1: continue from out and out.state
} TrainOptions;

// Floating-point operations in one training step, counting a multiply-add as 2: the
// matmuls (per token: query, key, value, proj 4C^2, the MLP 8C^2, lm_head CV) and the
// attention (per token and layer: scores and weighted sum over (S+1)/2 positions on
// average, 4C each), forward once and backward twice (input and weight gradients).
// LayerNorm, softmax and AdamW are left out: they are a few percent. The progress
// line divides this by the time a step takes.
static double train_step_flops(const Config *c, int B) {
    double C = c->n_embd, S = c->block_size, L = c->n_layer, V = c->vocab_size;
    double matmul = 2.0 * (L * 12.0 * C * C + C * V), attn = L * 4.0 * C * (S + 1) / 2.0;
    return 3.0 * (matmul + attn) * S * B;
}

// Sets up a fresh run's progress: AdamW with the lecture's settings and zero moments,
// the batch sampler seeded. 0 on success, -1 if out of memory.
int build_train_progress(TrainProgress *p, size_t P, int batch, uint64_t seed) {
    AdamW opt = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, NULL, NULL, 0};
    p->opt = opt;
    p->opt.m = alloc_floats(P);
    p->opt.v = alloc_floats(P);
    rng_seed(&p->rng, seed);
    p->batch = batch;
    p->ckpt_sum = 0;
    return p->opt.m && p->opt.v ? 0 : -1;
}

// Frees what build_train_progress allocated.
void free_train_progress(TrainProgress *p) {
    free(p->opt.m);
    free(p->opt.v);
    memset(p, 0, sizeof(*p));
}

// Fills out (of size n) with "PATH.state", the training state's name beside checkpoint
// path; fills err and returns -1 if the name does not fit.
static int state_path_of(const char *path, char *out, size_t n, char *err, size_t errlen) {
    if ((size_t)snprintf(out, n, "%s.state", path) >= n) {
        snprintf(err, errlen, "checkpoint path is too long (%zu bytes); use a shorter -o",
                 strlen(path));
        return -1;
    }
    return 0;
}

// Saves the checkpoint and the training state that goes with it. Both are written to
// temporary files first; only when both are safely on disk are they renamed into place,
// so a failed write (a full disk, a bad path) leaves the old pair as it was. If the
// process dies between the two renames, --resume refuses the new state beside the old
// checkpoint: its checksum does not match.
static int save_training(const GPT *g, const Vocab *vocab, TrainProgress *p,
                         const char *path, char *err, size_t errlen) {
    char state_path[4096];
    if (state_path_of(path, state_path, sizeof(state_path), err, errlen) != 0) return -1;
    size_t n_ckpt, n_state;
    unsigned char *ckpt = serialize_checkpoint(g, vocab, &n_ckpt);
    if (ckpt) p->ckpt_sum = get_u64(ckpt + n_ckpt - 8); // the state names its checkpoint
    unsigned char *state = ckpt ? serialize_train_state(p, g->n_params, &n_state) : NULL;
    if (!ckpt || !state) {
        snprintf(err, errlen, "out of memory writing '%s'", path);
        free(ckpt);
        free(state);
        return -1;
    }
    // a directory in the way would only fail at its rename, after the other one's
    char *tmp_ckpt = NULL, *tmp_state = NULL;
    struct stat st;
    const char *paths[2] = {path, state_path}, *whats[2] = {"checkpoint", "training state"};
    for (int i = 0; i < 2; i++)
        if (stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "cannot write %s '%s': %s (check the directory exists and "
                     "is writable)", whats[i], paths[i], strerror(EISDIR));
            goto done;
        }
    // both files whole on disk before either name changes
    tmp_ckpt = write_temp(path, ckpt, n_ckpt, "checkpoint", err, errlen);
    if (tmp_ckpt) tmp_state = write_temp(state_path, state, n_state, "training state", err, errlen);
    if (!tmp_state) goto done;
    // the state first: if the checkpoint's rename then failed, the old checkpoint would
    // stay, and --resume would refuse the new state beside it (checksum mismatch)
    if (publish_temp(tmp_state, state_path, "training state", err, errlen) != 0) goto done;
    int rc = publish_temp(tmp_ckpt, path, "checkpoint", err, errlen); // frees tmp_ckpt
    free(ckpt);
    free(state);
    return rc;
done:
    if (tmp_ckpt) { unlink(tmp_ckpt); free(tmp_ckpt); }
    free(ckpt);
    free(state);
    return -1;
}

// Trains g on the corpus with the lecture's recipe from p->opt.step up to to->iters
// steps, printing progress on stderr and writing a checkpoint and its training state
// (atomically) at every evaluation and at the end. 0 on success.
int train(GPT *g, const Vocab *vocab, const Corpus *corpus, const TrainOptions *to,
          TrainProgress *p, char *err, size_t errlen) {
    int S = g->config.block_size, B = p->batch;
    TrainState ts;
    int *inputs = malloc((size_t)B * S * sizeof(int)), *targets = malloc((size_t)B * S * sizeof(int));
    int rc = -1;
    if (build_train_state(&ts, &g->config, B) != 0 || !inputs || !targets) {
        snprintf(err, errlen, "out of memory for a training pass of %d windows", B);
        goto done;
    }
    double t_start = now_seconds(), t_log = t_start, recent = 0.0;
    int recent_n = 0, first = (int)p->opt.step;
    for (int it = first; it <= to->iters; it++) {
        // evaluate and save every eval_interval steps and after the last one (a resumed
        // run's first step was evaluated and saved before it stopped)
        if ((it % to->eval_interval == 0 || it == to->iters) && !(to->resume && it == first)) {
            double t0 = now_seconds();
            double val = eval_loss(g, corpus->tokens + corpus->n_train, corpus->n_val);
            if (save_training(g, vocab, p, to->out, err, errlen) != 0) goto done;
            fprintf(stderr, "step %5d: val loss %.4f (whole validation split, %.1f s); "
                    "checkpoint written to %s\n", it, val, now_seconds() - t0, to->out);
            t_log += now_seconds() - t0; // evaluation time is not training time
        }
        if (it == to->iters) break;
        // one step: a batch, the loss, its gradient, the update
        get_batch(corpus, B, S, &p->rng, inputs, targets);
        recent += train_forward(g, &ts, inputs, targets);
        recent_n++;
        train_backward(g, &ts, inputs, targets);
        adamw_update(&p->opt, g->params, ts.grads, g->n_params);
        // progress: mean train loss since the last line, speed, and time left
        if ((it + 1) % to->log_interval == 0) {
            double now = now_seconds(), ms = 1e3 * (now - t_log) / recent_n;
            fprintf(stderr, "step %5d: train loss %.4f, %.1f ms/step (%.1f GFLOP/s), ETA %.0f s\n",
                    it + 1, recent / recent_n, ms, train_step_flops(&g->config, B) / ms / 1e6,
                    ms * (to->iters - it - 1) / 1e3);
            recent = 0.0;
            recent_n = 0;
            t_log = now;
        }
    }
    fprintf(stderr, "trained %d steps in %.1f s\n", to->iters - first, now_seconds() - t_start);
    rc = 0;
done:
    free_train_state(&ts);
    free(inputs); free(targets);
    return rc;
}

// Prints the config and the parameter count (stderr).
void print_config(const GPT *g, const char *source) {
    const Config *c = &g->config;
    fprintf(stderr, "model: %s\n", source);
    fprintf(stderr, "config: n_layer=%d n_head=%d n_embd=%d block_size=%d vocab_size=%d -> "
            "%zu parameters\n", c->n_layer, c->n_head, c->n_embd, c->block_size,
            c->vocab_size, g->n_params);
}

// ----------------------------------------------------------------------------
// Self-test: speculative greedy decoding is plain greedy decoding, bit for bit

// Greedy speculative vs greedy plain on one prompt and one K: the texts must be equal.
static int selftest_greedy_case(GPT *g, const BigramDraft *d, const Vocab *v,
                                const char *label, const int *prompt, int n_prompt, int K,
                                int n_new) {
    int V = g->config.vocab_size;
    int cap = (n_prompt > 0 ? n_prompt : 1) + n_new;
    int *seq_spec = malloc((size_t)cap * sizeof(int));
    int *seq_plain = malloc((size_t)cap * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    SpecBuffers b;
    DecodeOptions o = {.temperature = 0.0f, .K = K, .vocab = v};
    Stats ss = {0}, sp = {0};
    Rng r1, r2;
    rng_seed(&r1, 1);
    rng_seed(&r2, 2); // different streams: greedy decoding must not depend on them
    int ok = seq_spec && seq_plain && p && build_spec_buffers(&b, K, V) == 0;
    if (ok) {
        // both decoders from the same prompt; each refills its own cache from scratch
        speculative_generate(g, d, &b, prompt, n_prompt, n_new, &o, &r1, seq_spec, &ss);
        generate(g, prompt, n_prompt, n_new, &o, &r2, seq_plain, p, &sp);
        free_spec_buffers(&b);
    }
    // compare the generated parts only (the prompt is shared), byte for byte
    int start = n_prompt > 0 ? n_prompt : 1;
    int same = ok && ss.emitted == n_new && sp.emitted == n_new &&
               memcmp(seq_spec + start, seq_plain + start, (size_t)n_new * sizeof(int)) == 0;
    printf("%s greedy %-14s K=%d: %d tokens %s (spec: %ld target passes, %ld refills, "
           "acceptance %.3f; plain: %ld passes)\n", same ? "PASS" : "FAIL", label, K, n_new,
           same ? "byte-identical" : "DIFFER", target_passes(&ss), ss.reprefill_passes,
           ss.drafted ? (double)ss.accepted / ss.drafted : 0.0, target_passes(&sp));
    free(seq_spec);
    free(seq_plain);
    free(p);
    return same;
}

// The logits of one T-token pass equal, bit for bit, those of the same tokens fed one
// at a time: the property that makes verification agree with plain decoding.
static int selftest_multi_vs_single(GPT *g, const int *tokens, int T) {
    int V = g->config.vocab_size;
    float *multi = malloc((size_t)T * V * sizeof(float));
    float *single = malloc((size_t)T * V * sizeof(float));
    if (!multi || !single) { free(multi); free(single); return 0; }
    // the same T tokens twice from an empty cache: once as one pass, once one by one
    g->state.kv_len = 0;
    memcpy(multi, forward(g, tokens, T), (size_t)T * V * sizeof(float));
    g->state.kv_len = 0;
    for (int t = 0; t < T; t++)
        memcpy(single + (size_t)t * V, forward(g, tokens + t, 1), (size_t)V * sizeof(float));
    // memcmp, not a tolerance: greedy equivalence needs exact equality of every float
    int same = memcmp(multi, single, (size_t)T * V * sizeof(float)) == 0;
    printf("%s logits of one %d-token pass == %d one-token passes, bit for bit\n",
           same ? "PASS" : "FAIL", T, T);
    free(multi);
    free(single);
    return same;
}

// After draft -> verify -> accept/reject -> trim, the next forward gives the same
// logits, bit for bit, as a cache that was filled one token at a time and never drafted.
static int selftest_trim_case(GPT *g, const BigramDraft *d, const int *prompt, int n_prompt,
                              int K, float temperature, uint64_t seed) {
    int V = g->config.vocab_size, S = g->config.block_size;
    SpecBuffers b;
    if (build_spec_buffers(&b, K, V) != 0) return 0;
    int *seq = malloc((size_t)S * sizeof(int));
    float *after_trim = malloc((size_t)V * sizeof(float));
    if (!seq || !after_trim) {
        free(seq);
        free(after_trim);
        free_spec_buffers(&b);
        return 0;
    }
    Rng r;
    rng_seed(&r, seed);
    Stats st = {0};
    DecodeOptions o = {.temperature = temperature, .K = K};
    // run A: prefill all but the last prompt token, then rounds until the cache nears S
    memcpy(seq, prompt, (size_t)n_prompt * sizeof(int));
    int n_seq = n_prompt, rounds = 0, all_same = 1;
    g->state.kv_len = 0;
    forward(g, seq, n_seq - 1);
    // stop while a verify pass and the probe below still fit in the cache
    while (g->state.kv_len + K + 1 <= S - 1) {
        int n = speculative_round(g, d, &b, K, 1, &o, &r, seq[n_seq - 1], &st);
        memcpy(seq + n_seq, b.accepted, (size_t)n * sizeof(int));
        n_seq += n;
        rounds++;
        // A: the trimmed cache, then one forward of the new current token
        int kept = g->state.kv_len;
        memcpy(after_trim, forward(g, &seq[n_seq - 1], 1), (size_t)V * sizeof(float));
        g->state.kv_len = kept; // undo that probe: the next round starts from the trim
        // B: a fresh cache fed one token at a time, never drafted
        GPT fresh = *g; // shares the weights; needs its own run state
        if (build_run_state(&fresh.state, &g->config) != 0) { all_same = 0; break; }
        const float *ref = forward(&fresh, &seq[0], 1);
        for (int t = 1; t < n_seq; t++) ref = forward(&fresh, &seq[t], 1);
        all_same &= memcmp(after_trim, ref, (size_t)V * sizeof(float)) == 0;
        free_run_state(&fresh.state);
    }
    printf("%s after draft/verify/trim (K=%d, t=%.1f, %d rounds, %ld accepted of %ld), the "
           "next forward == a never-drafted cache, bit for bit\n", all_same ? "PASS" : "FAIL",
           K, temperature, rounds, st.accepted, st.drafted);
    free(seq);
    free(after_trim);
    free_spec_buffers(&b);
    return all_same;
}

// The corpus length the self-test needs: its longest prompt, 2S+7 tokens, comes from it.
size_t selftest_min_corpus(int S) { return (size_t)2 * S + 7; }

// Runs every self-test case, one line each; returns the number of failures.
int selftest(GPT *g, const BigramDraft *d, const Vocab *v, const Corpus *corpus) {
    int S = g->config.block_size, failures = 0, cases = 0;
    // prompts: empty, one char, the blog's, exactly S, longer than S, and a name line
    const char *texts[] = {"", "\n", "To be or not to be, that is the ", NULL, NULL, "ROMEO:\n"};
    const char *labels[] = {"empty", "newline", "to-be", "exactly-S", "longer-than-S", "romeo"};
    int n_cases = 6;
    size_t long_len = selftest_min_corpus(S);
    int *tokens = malloc((long_len + 64) * sizeof(int));
    if (!tokens) return 1;
    for (int c = 0; c < n_cases; c++) {
        int n_prompt;
        if (texts[c]) {
            // a vocabulary without these bytes cannot run the required prompts: a failure
            n_prompt = (int)strlen(texts[c]);
            if (encode(v, (const unsigned char *)texts[c], (size_t)n_prompt, tokens) >= 0) {
                printf("FAIL greedy %-14s cannot run: the vocabulary lacks one of its bytes "
                       "(use Tiny Shakespeare)\n", labels[c]);
                failures++;
                cases++;
                continue;
            }
        } else {
            // taken from the corpus itself, so every byte is in the vocabulary
            // main has checked that the corpus holds long_len tokens
            n_prompt = c == 3 ? S : (int)long_len;
            memcpy(tokens, corpus->tokens, (size_t)n_prompt * sizeof(int));
        }
        // K = 1..8: short and long drafts; 300 tokens is several refills of the cache
        for (int K = 1; K <= 8 && K < S; K++) {
            failures += !selftest_greedy_case(g, d, v, labels[c], tokens, n_prompt, K, 300);
            cases++;
        }
    }
    // one pass vs one token at a time, for several pass lengths
    int lens[] = {2, 5, 9, S};
    for (int i = 0; i < 4; i++) {
        int T = lens[i] < S ? lens[i] : S;
        failures += !selftest_multi_vs_single(g, corpus->tokens, T);
        cases++;
    }
    // draft -> verify -> trim leaves the cache as if no draft had happened
    int np = S / 4 > 1 ? S / 4 : 2;
    float temps[] = {0.0f, 1.0f, 1.0f, 0.7f};
    int Ks[] = {4, 4, 1, 3};
    for (int i = 0; i < 4; i++) {
        int K = Ks[i] < S - np - 2 ? Ks[i] : 1;
        size_t at = corpus->n > 1000 + (size_t)np ? 1000 : 0; // a window inside the corpus
        failures += !selftest_trim_case(g, d, corpus->tokens + at, np, K, temps[i], 7 + i);
        cases++;
    }
    // the summary line is commentary for the test runner, which counts PASS/FAIL lines
    printf("selftest: %d of %d cases passed\n", cases - failures, cases);
    free(tokens);
    return failures;
}

// ----------------------------------------------------------------------------
// Benchmark (./specdec bench): the K sweep, the verify-cost curve c(T), the speedup model

// The prompts every cell of the sweep decodes, BENCH_TOKENS new tokens each.
static const char *BENCH_PROMPTS[] = {"To be or not to be, that is the ", "ROMEO:\n",
                                      "First Citizen:\n", "KING RICHARD III:\nNow is the "};
#define BENCH_N_PROMPTS 4
#define BENCH_TOKENS 500  // per prompt: 2,000 per cell
#define BENCH_REPEATS 5   // timed runs per cell after one warm-up; the median is reported
#define BENCH_MAX_K 8

// One cell of the sweep: K and t, and what the runs measured.
typedef struct {
    int K;
    float t;
    long drafted, accepted, resampled, rounds, round_tokens, passes, emitted;
    long pos_judged[BENCH_MAX_K], pos_accepted[BENCH_MAX_K]; // per draft position
    double sec_spec;     // median wall time of BENCH_N_PROMPTS x BENCH_TOKENS tokens
    double sec_plain;    // the same for plain decoding, timed between the speculative runs
    double speedup;      // median over the timed passes of plain time / speculative time
} BenchCell;

// What the after_step hook sees of a run: the round buffers and the counters.
typedef struct {
    const SpecBuffers *b;
    const Stats *st;
    BenchCell *cell;
    long last_rounds, last_drafted;
} BenchWatch;

// after_step hook: after each round, which draft positions were judged and accepted.
static void bench_watch(void *ctx, const GPT *g, const int *seq, int n_seq) {
    BenchWatch *w = ctx;
    (void)g; (void)seq; (void)n_seq;
    if (w->st->rounds > w->last_rounds) {
        int k = (int)(w->st->drafted - w->last_drafted);
        int rej = w->b->rejected_at;
        // positions before the rejection were accepted; the rejected one was judged too
        for (int i = 0; i < k && (rej < 0 || i <= rej); i++) {
            w->cell->pos_judged[i]++;
            w->cell->pos_accepted[i] += rej < 0 || i < rej;
        }
    }
    w->last_rounds = w->st->rounds;
    w->last_drafted = w->st->drafted;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Median of n numbers (sorts them).
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// Seconds of plain decoding over every prompt at temperature t; p: (V).
static double bench_plain_pass(GPT *g, const Vocab *v, float t, float *p) {
    int prompt[64], seq[64 + BENCH_TOKENS];
    double sec = 0.0;
    DecodeOptions o = {.temperature = t, .K = 1, .vocab = v};
    for (int i = 0; i < BENCH_N_PROMPTS; i++) {
        int np = (int)strlen(BENCH_PROMPTS[i]);
        encode(v, (const unsigned char *)BENCH_PROMPTS[i], (size_t)np, prompt);
        Stats sp;
        memset(&sp, 0, sizeof(sp));
        Rng r;
        rng_seed(&r, 1000 + (uint64_t)i);
        generate(g, prompt, np, BENCH_TOKENS, &o, &r, seq, p, &sp);
        sec += sp.seconds;
    }
    return sec;
}

// Runs one cell: every prompt with speculative decoding, then with plain decoding, one
// warm-up and BENCH_REPEATS timed passes of each. The two alternate, so a machine that
// speeds up or slows down meanwhile moves both; the speedup is the median of the
// per-pass ratios. The counters come from the warm-up pass.
static void bench_cell(GPT *g, const BigramDraft *d, const Vocab *v, BenchCell *c) {
    int V = g->config.vocab_size, prompt[64], seq[64 + BENCH_TOKENS];
    SpecBuffers b;
    float *p = malloc((size_t)V * sizeof(float));
    if (!p || build_spec_buffers(&b, c->K, V) != 0) { free(p); return; }
    double spec[BENCH_REPEATS + 1], plain[BENCH_REPEATS + 1], ratio[BENCH_REPEATS + 1];
    for (int rep = 0; rep <= BENCH_REPEATS; rep++) {
        spec[rep] = 0.0;
        for (int i = 0; i < BENCH_N_PROMPTS; i++) {
            int np = (int)strlen(BENCH_PROMPTS[i]);
            encode(v, (const unsigned char *)BENCH_PROMPTS[i], (size_t)np, prompt);
            Stats st;
            memset(&st, 0, sizeof(st));
            BenchWatch w = {&b, &st, c, 0, 0};
            // only the first pass counts positions; the timed ones run without the hook
            DecodeOptions o = {.temperature = c->t, .K = c->K, .vocab = v,
                               .after_step = rep == 0 ? bench_watch : NULL, .ctx = &w};
            Rng r;
            rng_seed(&r, 1000 + (uint64_t)i);
            speculative_generate(g, d, &b, prompt, np, BENCH_TOKENS, &o, &r, seq, &st);
            spec[rep] += st.seconds;
            if (rep == 0) {
                c->drafted += st.drafted;
                c->accepted += st.accepted;
                c->resampled += st.resampled;
                c->rounds += st.rounds;
                c->round_tokens += st.round_tokens;
                c->passes += target_passes(&st);
                c->emitted += st.emitted;
            }
        }
        plain[rep] = bench_plain_pass(g, v, c->t, p);
        ratio[rep] = plain[rep] / spec[rep];
    }
    // pass 0 was the warm-up (and ran the hook); the medians of the others
    c->sec_spec = median(spec + 1, BENCH_REPEATS);
    c->sec_plain = median(plain + 1, BENCH_REPEATS);
    c->speedup = median(ratio + 1, BENCH_REPEATS);
    free_spec_buffers(&b);
    free(p);
}

// Seconds per forward over T new tokens on top of a cache of kv tokens, over reps calls;
// last: as a prefill makes it (forward_last: logits for the last token only).
static double time_forward(GPT *g, const int *tokens, int kv, int T, int reps, int last) {
    double t0 = now_seconds();
    for (int i = 0; i < reps; i++) {
        g->state.kv_len = kv;
        if (last) forward_last(g, tokens, T); // a prefill or refill: the last row's logits
        else forward(g, tokens, T);
    }
    g->state.kv_len = 0;
    return (now_seconds() - t0) / reps;
}

// Seconds for the matmuls of one forward over T tokens, alone (every Linear of every
// block and lm_head, on the inference buffers): the part of c(T) that is arithmetic on
// the weights, without attention, softmax, LayerNorm and the rest.
static double time_matmuls(GPT *g, int T, int reps) {
    const Config *c = &g->config;
    const Weights *w = &g->w;
    BlockActs *a = &g->state.block;
    int C = c->n_embd;
    size_t CC = (size_t)C * C;
    double t0 = now_seconds();
    for (int i = 0; i < reps; i++) {
        for (int l = 0; l < c->n_layer; l++) {
            // the value matmul writes into k too: the cache is not touched
            matmul(a->q, a->ln1, w->query + l * CC, NULL, T, C, C);
            matmul(a->k, a->ln1, w->key + l * CC, NULL, T, C, C);
            matmul(a->k, a->ln1, w->value + l * CC, NULL, T, C, C);
            matmul(a->attn, a->att_out, w->proj_weight + l * CC, w->proj_bias + l * C, T, C, C);
            matmul(a->hidden, a->ln2, w->ffwd_up_weight + l * 4 * CC,
                   w->ffwd_up_bias + l * 4 * C, T, C, 4 * C);
            matmul(a->ffwd, a->hidden, w->ffwd_down_weight + l * 4 * CC,
                   w->ffwd_down_bias + l * C, T, 4 * C, C);
        }
        matmul(g->state.logits, g->state.ln_f, w->lm_head_weight, w->lm_head_bias, T, C,
               c->vocab_size);
    }
    return (now_seconds() - t0) / reps;
}

// Floating-point operations (2 per multiply-add) of the matmuls of one forward over T
// tokens: every weight once per token.
static double matmul_flops(const Config *c, int T) {
    double C = c->n_embd, L = c->n_layer, V = c->vocab_size;
    return 2.0 * T * (L * (4 * C * C + 8 * C * C) + C * V); // q k v proj, ffwd, lm_head
}

// ... and of the whole forward over T tokens after kv cached ones: the matmuls, and
// attention's scores and weighted sums.
static double forward_flops(const Config *c, int kv, int T) {
    double attn = 0.0;
    for (int t = 0; t < T; t++) attn += 2.0 * c->n_layer * c->n_embd * (kv + t + 1);
    return matmul_flops(c, T) + 2.0 * attn;
}

// c(T) = time(T tokens) / time(1 token) at a mid-context cache, T = 1 .. 9; c[0] is the
// one-token time in seconds. Also the refill both decoders make when the cache is full:
// one pass over S/2 tokens from an empty cache. Each of 9 rounds times every pass once,
// so a machine that drifts moves them all alike; the medians are printed with the
// forward's GFLOP/s.
static void bench_curve(GPT *g, const char *what, double c[10], int reps) {
    const Config *cf = &g->config;
    int S = cf->block_size, kv = S / 2 - 4 > 0 ? S / 2 - 4 : 0, n_T = 9, keep = S / 2;
    int *tokens = malloc((size_t)S * sizeof(int));
    if (!tokens) return;
    for (int i = 0; i < S; i++) tokens[i] = (i * 7 + 3) % cf->vocab_size;
    if (kv + 9 > S) kv = S - 9 > 0 ? S - 9 : 0;
    if (kv + n_T > S) n_T = S - kv;
    double sec[11][9], mm[10][9]; // [T] for T = 1 .. 9, sec[10] the refill
    for (int r = 0; r < 9; r++) {
        for (int T = 1; T <= n_T; T++) {
            sec[T][r] = time_forward(g, tokens, kv, T, reps, 0);
            mm[T][r] = time_matmuls(g, T, reps);
        }
        sec[10][r] = keep > 0 ? time_forward(g, tokens, 0, keep, reps, 1) : 0.0;
    }
    free(tokens);
    fprintf(stderr, "\nverify cost c(T) = time(one forward over T new tokens) / time(T = 1), "
            "%s, %d tokens cached:\n", what, kv);
    double mm1 = median(mm[1], 9);
    for (int T = 1; T <= n_T; T++) {
        double m = median(sec[T], 9), mt = median(mm[T], 9);
        if (T == 1) c[0] = m;
        c[T] = m / c[0];
        fprintf(stderr, "  T=%d  %8.1f us  c(T) = %5.2f  %6.1f GFLOP/s    the matmuls alone "
                "%8.1f us  c = %5.2f  %6.1f GFLOP/s\n", T, 1e6 * m, c[T],
                forward_flops(cf, kv, T) / m * 1e-9, 1e6 * mt, mt / mm1,
                matmul_flops(cf, T) / mt * 1e-9);
    }
    // a refill re-runs the last S/2 tokens and then makes room for S - S/2 more, so its
    // cost is shared by S - S/2 + 1 tokens (it samples one itself)
    if (keep > 0) {
        double m = median(sec[10], 9);
        fprintf(stderr, "  refill: T=%d from an empty cache %8.1f us  c = %5.2f,"
                " %.1f us for each of the %d tokens it serves\n", keep, 1e6 * m, m / c[0],
                1e6 * m / (S - keep + 1), S - keep + 1);
    }
}

// A bar of width proportional to x / max, at most `width` characters.
static void bar(double x, double max, int width) {
    int n = max > 0 ? (int)(x / max * width + 0.5) : 0;
    for (int i = 0; i < n && i < width; i++) fputc('#', stderr);
    for (int i = n; i < width; i++) fputc(' ', stderr);
}

// ./specdec bench: the sweep, the curve, the predictions beside the measurements, a
// chart; csv also writes the sweep as CSV on stdout; big adds a cache-busting model.
int run_bench(GPT *g, const BigramDraft *d, const Vocab *v, int csv, int big, char *err,
              size_t errlen) {
    double t_start = now_seconds();
    // 1. the verify-cost curve and the draft's cost, on this model
    double c[10] = {0};
    bench_curve(g, "this model", c, 2000);
    float *q = malloc((size_t)d->V * sizeof(float));
    Rng r;
    rng_seed(&r, 1);
    int tok = 0, n_draft = 200000;
    double t0 = now_seconds();
    for (int i = 0; i < n_draft; i++) tok = bigram_sample(d, tok, 1.0f, &r, q);
    double c_draft = (now_seconds() - t0) / n_draft / c[0];
    free(q);
    fprintf(stderr, "  one draft step (bigram_sample): c_draft = %.4f of a one-token forward\n",
            c_draft);
    // 2. the sweep
    BenchCell cells[2 * BENCH_MAX_K];
    memset(cells, 0, sizeof(cells));
    float temps[2] = {0.0f, 1.0f};
    if (csv) printf("t,K,accepted_per_drafted,accepted_per_judged,tokens_per_verify,"
                    "predicted_tokens_per_verify,passes_per_token,us_per_token_plain,"
                    "us_per_token_spec,speedup,predicted_speedup\n");
    for (int ti = 0; ti < 2; ti++) {
        fprintf(stderr, "\nK sweep at t = %g: %d prompts x %d tokens per cell, speculative and "
                "plain decoding alternating, medians of %d timed runs after a warm-up\n",
                temps[ti], BENCH_N_PROMPTS, BENCH_TOKENS, BENCH_REPEATS);
        // alpha: accepted / drafted (the blog's "acceptance rate"); beta: accepted / judged,
        // the chance a draft that is looked at passes, which the speedup model assumes
        fprintf(stderr, "   K  alpha   beta  tok/verify  model  passes/tok  us/tok plain  "
                "spec  speedup  model  acceptance at draft position 1..K\n");
        for (int K = 1; K <= BENCH_MAX_K; K++) {
            BenchCell *x = &cells[ti * BENCH_MAX_K + K - 1];
            x->K = K;
            x->t = temps[ti];
            bench_cell(g, d, v, x);
            double n = (double)x->emitted;
            double alpha = x->drafted ? (double)x->accepted / x->drafted : 0.0;
            long judged = x->accepted + x->resampled;
            double beta = judged ? (double)x->accepted / judged : 0.0;
            double tpv = x->rounds ? (double)x->round_tokens / x->rounds : 0.0;
            // the model: E[tokens per pass] = (1 - beta^(K+1)) / (1 - beta), and the wall
            // speedup that / (c(K+1) + K c_draft); past T = 9, c(T) is taken as T
            double model = beta < 1.0 ? (1.0 - pow(beta, K + 1)) / (1.0 - beta) : K + 1;
            double cK = K + 1 <= 9 ? c[K + 1] : (double)(K + 1);
            double model_speed = model / (cK + K * c_draft);
            double us_spec = 1e6 * x->sec_spec / n, us_plain = 1e6 * x->sec_plain / n;
            double speed = x->speedup;
            fprintf(stderr, "  %2d  %.3f  %.3f  %10.3f  %5.3f  %10.3f  %12.2f %5.2f  %7.2f  "
                    "%5.2f ", K, alpha, beta, tpv, model, (double)x->passes / n, us_plain,
                    us_spec, speed, model_speed);
            for (int i = 0; i < K; i++)
                fprintf(stderr, " %.2f", x->pos_judged[i] ? (double)x->pos_accepted[i] /
                                                            x->pos_judged[i] : 0.0);
            fputc('\n', stderr);
            if (csv) printf("%g,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.4f,%.4f\n", temps[ti],
                            K, alpha, beta, tpv, model, (double)x->passes / n, us_plain, us_spec,
                            speed, model_speed);
        }
        // 3. the chart: tokens per verify pass and wall speedup against K
        double max_tpv = 2.5, max_sp = 1.5;
        for (int K = 1; K <= BENCH_MAX_K; K++) {
            BenchCell *x = &cells[ti * BENCH_MAX_K + K - 1];
            max_tpv = fmax(max_tpv, (double)x->round_tokens / x->rounds);
            max_sp = fmax(max_sp, x->speedup);
        }
        fprintf(stderr, "\n   K  tokens per verify pass            wall speedup ('|' = 1.0)\n");
        for (int K = 1; K <= BENCH_MAX_K; K++) {
            BenchCell *x = &cells[ti * BENCH_MAX_K + K - 1];
            double tpv = (double)x->round_tokens / x->rounds, sp = x->speedup;
            fprintf(stderr, "  %2d  ", K);
            bar(tpv, max_tpv, 24);
            fprintf(stderr, " %5.2f   ", tpv);
            // the speedup bar marks break-even, 1.0, with a '|'
            int one = (int)(1.0 / max_sp * 24 + 0.5), nb = (int)(sp / max_sp * 24 + 0.5);
            for (int i = 0; i < 24; i++) fputc(i == one ? '|' : i < nb ? '#' : ' ', stderr);
            fprintf(stderr, " %5.2f\n", sp);
        }
    }
    // 4. a model too large for the caches, where one token is memory-bound
    if (big) {
        Config bc = {8, 8, 512, 32, g->config.vocab_size};
        GPT bg;
        if (build_gpt(&bg, &bc) != 0) {
            free_gpt(&bg);
            snprintf(err, errlen, "out of memory for the --big model (8 layers, n_embd 512)");
            return 1;
        }
        init_gpt_random(&bg, 7);
        double bcurve[10] = {0};
        char what[128];
        snprintf(what, sizeof(what), "a random model too large for the caches (L=8, C=512, "
                 "%zu parameters, %.0f MB)", bg.n_params, bg.n_params * 4.0 / 1e6);
        bench_curve(&bg, what, bcurve, 3);
        free_gpt(&bg);
    }
    fprintf(stderr, "\nbench: %.1f s\n", now_seconds() - t_start);
    return 0;
}

// ----------------------------------------------------------------------------
// Explain (./specdec explain): one position's accept/reject, worked out exactly

// Seed 004's example ("Why do we sample from the adjusted distribution?"): a draft q and
// a target p over four tokens A, B, C, D.
#define EXPLAIN_V 4
#define EXPLAIN_ROUNDS 200000
static const char EXPLAIN_NAMES[EXPLAIN_V] = {'A', 'B', 'C', 'D'};
static const float EXPLAIN_Q[EXPLAIN_V] = {0.10f, 0.60f, 0.20f, 0.10f};
static const float EXPLAIN_P[EXPLAIN_V] = {0.05f, 0.10f, 0.60f, 0.25f};

// What one position does with draft row q and target row p (V each, V <= EXPLAIN_V):
// exact[x] = P(x is emitted) = min(p, q)[x] (drafted and accepted) + P(reject) *
// residual[x] (rejected, then drawn from norm(max(0, p - q))), and *beta = sum min(p, q),
// the chance the draft's token is accepted. Then the same position run `rounds` times
// through the real draft_tokens and accept_reject (k = 1, no bonus), from a draft table
// whose every row is q: counts[x] = times x was emitted, *n_accepted = times the draft's
// token passed. At temperature 0 both rows become one-hot, as draft_probs and
// target_probs make them. With f non-NULL, prints the table.
void explain_position(FILE *f, const char *title, const float *q, const float *p,
                      const char *names, int V, float temperature, long rounds, uint64_t seed,
                      double *exact, double *beta, long *counts, long *n_accepted) {
    // the rows the decision uses: the draft's through a real draft table, p as the
    // target's softmax would give it at this temperature
    float table[EXPLAIN_V * EXPLAIN_V], q_used[EXPLAIN_V], p_used[EXPLAIN_V];
    for (int a = 0; a < V; a++) memcpy(table + a * V, q, (size_t)V * sizeof(float));
    BigramDraft d = {V, table};
    draft_probs(q_used, &d, 0, temperature);
    if (temperature == 0.0f) one_hot(p_used, V, argmax(p, V));
    else memcpy(p_used, p, (size_t)V * sizeof(float));
    // 1. exactly: the accept path and the residual path, in double precision
    double b = 0.0, mass = 0.0, resid[EXPLAIN_V];
    for (int x = 0; x < V; x++) {
        b += fmin(p_used[x], q_used[x]);
        resid[x] = fmax(0.0, (double)p_used[x] - q_used[x]);
        mass += resid[x];
    }
    for (int x = 0; x < V; x++)
        exact[x] = fmin(p_used[x], q_used[x]) + (mass > 0.0 ? (1.0 - b) * resid[x] / mass : 0.0);
    *beta = b;
    // 2. by sampling: the draft proposes, accept_reject decides (k = 1, no bonus)
    Rng rng;
    rng_seed(&rng, seed);
    int cand[1], out[2], rejected_at;
    float q_draft[EXPLAIN_V], p_target[2 * EXPLAIN_V], residual[EXPLAIN_V];
    double u[1];
    memcpy(p_target, p_used, (size_t)V * sizeof(float));
    memcpy(p_target + V, p_used, (size_t)V * sizeof(float)); // the bonus row, never used
    for (int x = 0; x < V; x++) counts[x] = 0;
    *n_accepted = 0;
    for (long r = 0; r < rounds; r++) {
        draft_tokens(&d, 0, 1, temperature, &rng, cand, q_draft);
        accept_reject(cand, 1, q_draft, p_target, V, 0, &rng, u, residual, out, &rejected_at);
        counts[out[0]]++;
        *n_accepted += rejected_at < 0;
    }
    if (!f) return;
    // 3. the table, with each measured frequency's distance from exact in standard errors
    fprintf(f, "\n%s (t = %g)\n", title, temperature);
    fprintf(f, "  token     q      p   min(p,q)  max(0,p-q)  residual   P(emit) exact   "
            "measured in %ld rounds\n", rounds);
    for (int x = 0; x < V; x++) {
        double freq = (double)counts[x] / rounds;
        double se = sqrt(exact[x] * (1.0 - exact[x]) / rounds);
        fprintf(f, "  %c     %.3f  %.3f     %.3f       %.3f     %.3f    %.4f (p %.4f)  "
                "%.4f", names[x], q_used[x], p_used[x], fmin(p_used[x], q_used[x]), resid[x],
                mass > 0.0 ? resid[x] / mass : 0.0, exact[x], p_used[x], freq);
        if (se > 0.0) fprintf(f, "  (%+.1f se)\n", (freq - exact[x]) / se);
        else fprintf(f, "\n");
    }
    double acc = (double)*n_accepted / rounds;
    fprintf(f, "  acceptance = sum min(p, q) = %.4f; measured %.4f", b, acc);
    if (b > 0.0 && b < 1.0) fprintf(f, " (%+.1f se)\n", (acc - b) / sqrt(b * (1.0 - b) / rounds));
    else fprintf(f, "\n");
    fprintf(f, "  rejection  = sum max(0, p - q) = %.4f, spread over the residual\n", mass);
}

// ----------------------------------------------------------------------------
// CLI: ./specdec [options], in the manner of llama2.c's run

// Prints "specdec: MESSAGE" and a newline on stderr, as one line whatever the message
// holds: a command-line word or a path may contain a newline or other control bytes,
// which are shown escaped (\n, \xNN) so every bad input still ends in exactly one line.
__attribute__((format(printf, 1, 2)))
void error_line(const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fputs("specdec: ", stderr);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) {
        if (*c == '\n') fputs("\\n", stderr);
        else if (*c < 0x20 || *c == 0x7f) fprintf(stderr, "\\x%02x", *c);
        else fputc(*c, stderr);
    }
    fputc('\n', stderr);
}

typedef struct {
    const char *model_path;  // -m, default tinyshakespeare/model.bin
    const char *corpus_path; // -i, default tinyshakespeare/input.txt
    const char *prompt;      // -p
    int n_new;               // -n, tokens to generate
    int K;                   // -k, draft length
    float temperature;       // -t
    uint64_t seed;           // -s
    int init;                // --init SEED given
    uint64_t init_seed;
    const char *save_path;   // --save PATH
    int trace, compare, plain, run_selftest, help;
    int color;               // --color 1, --no-color 0; -1 (unset): on when stdout is a
                             // terminal and NO_COLOR is unset or empty
} Options;

#define DEFAULT_MODEL "tinyshakespeare/model.bin"
#define DEFAULT_CORPUS "tinyshakespeare/input.txt"
#define DEFAULT_PROMPT "To be or not to be, that is the "
#define MAX_NEW_TOKENS 10000000

// The help text of -h.
void usage(FILE *f) {
    fprintf(f,
        "usage: ./specdec [options]\n"
        "  -m PATH     checkpoint (default " DEFAULT_MODEL "; if it is absent, a seeded\n"
        "              random model stands in, as with --init 1337)\n"
        "  -i PATH     corpus for the vocabulary and the bigram draft (default " DEFAULT_CORPUS ")\n"
        "  -p TEXT     prompt (default \"" DEFAULT_PROMPT "\"; may be empty)\n"
        "  -n N        tokens to generate, 1..%d (default 200)\n"
        "  -k K        draft length, 1..block_size-1 (default 4)\n"
        "  -t T        temperature >= 0; 0 = greedy (default 1.0)\n"
        "  -s SEED     sampling seed, a non-negative integer (default 42)\n"
        "  --init SEED build a seeded random model instead of loading one\n"
        "  --save PATH write the model to PATH as a checkpoint and exit\n"
        "  --trace     print every round's draft, verify, accept/reject and trim on stderr\n"
        "  --compare   also run plain decoding with the same seed; compare passes and time\n"
        "  --plain     plain autoregressive decoding only\n"
        "  --color     colour each generated character by where it came from (accepted\n"
        "              draft, resampled, bonus, target sample), legend on stderr; the\n"
        "              default when stdout is a terminal and NO_COLOR is unset or empty\n"
        "  --no-color  plain text even on a terminal\n"
        "  --selftest  greedy equivalence and KV-cache checks, one PASS/FAIL line per case\n"
        "              on stdout; exit 1 on any failure\n"
        "  -h, --help  this text\n"
        "Generated text goes to stdout; config, trace and stats go to stderr.\n"
        "\n"
        "usage: ./specdec train [--iters 5000] [--seed 1337] [-o " DEFAULT_MODEL "]\n"
        "                       [--layers 4] [--heads 4] [--embd 64] [--block 32] [--batch 16] [-i corpus]\n"
        "       ./specdec train --resume [--iters 5000] [-o " DEFAULT_MODEL "] [-i corpus]\n"
        "  trains the target with the lecture's recipe (AdamW, lr 1e-3); the checkpoint and\n"
        "  PATH.state (optimiser and sampler, for --resume) are written atomically every 500\n"
        "  steps and at the end; --resume continues exactly where they were written\n"
        "usage: ./specdec eval [-m " DEFAULT_MODEL "] [-i corpus]\n"
        "  mean cross-entropy over the whole validation and training splits\n"
        "usage: ./specdec bench [-m " DEFAULT_MODEL "] [-i corpus] [--csv] [--big]\n"
        "  the verify cost c(T), then K = 1..8 at t = 0 and 1: acceptance, tokens per verify\n"
        "  pass, time per token and speedup beside the speedup model; --csv writes the sweep\n"
        "  to stdout, --big adds c(T) for a random model too large for the caches\n"
        "usage: ./specdec explain\n"
        "  one accept/reject decision worked out: seed 004's A/B/C/D rows, the exact chance\n"
        "  of each token beside 200,000 runs of draft_tokens + accept_reject, t = 1 and 0\n",
        MAX_NEW_TOKENS);
}

// Parses a whole decimal integer within [lo, hi]; -1 if it is not one.
static int parse_int(const char *s, long lo, long hi, long *out) {
    // strtol alone accepts "", " 5" and "5x"; demand digits from the first to the last byte
    if (!*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

// Parses a non-negative 64-bit seed; -1 if it is not one.
static int parse_seed(const char *s, uint64_t *out) {
    // strtoull would quietly turn "-1" into 2^64-1; a seed must start with a digit
    if (!isdigit((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return -1;
    *out = (uint64_t)v;
    return 0;
}

// Fills o from argv; on a bad argument writes one line to err and returns -1.
int parse_args(int argc, char **argv, Options *o, char *err, size_t errlen) {
    // defaults: the blog's prompt, K = 4, t = 1, a fixed seed so a run can be repeated
    *o = (Options){NULL, DEFAULT_CORPUS, DEFAULT_PROMPT, 200, 4, 1.0f, 42, 0, 0, NULL,
                   0, 0, 0, 0, 0, -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        // flags without a value; a later error still wins over -h, so no typo goes unseen
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { o->help = 1; continue; }
        if (!strcmp(a, "--trace")) { o->trace = 1; continue; }
        if (!strcmp(a, "--compare")) { o->compare = 1; continue; }
        if (!strcmp(a, "--plain")) { o->plain = 1; continue; }
        if (!strcmp(a, "--selftest")) { o->run_selftest = 1; continue; }
        if (!strcmp(a, "--color")) { o->color = 1; continue; }
        if (!strcmp(a, "--no-color")) { o->color = 0; continue; }
        int takes_value = !strcmp(a, "-m") || !strcmp(a, "-i") || !strcmp(a, "-p") ||
                          !strcmp(a, "-n") || !strcmp(a, "-k") || !strcmp(a, "-t") ||
                          !strcmp(a, "-s") || !strcmp(a, "--init") || !strcmp(a, "--save");
        if (!takes_value) {
            snprintf(err, errlen, "unknown option '%s' (see ./specdec -h)", a);
            return -1;
        }
        // the value is the next word, whatever it looks like ("-p -x" is a prompt)
        if (i + 1 >= argc) {
            snprintf(err, errlen, "option %s needs a value (see ./specdec -h)", a);
            return -1;
        }
        const char *val = argv[++i];
        long v;
        // options with a value, each checked in full: no silent clamping
        if (!strcmp(a, "-m")) o->model_path = val;
        else if (!strcmp(a, "-i")) o->corpus_path = val;
        else if (!strcmp(a, "-p")) o->prompt = val;
        else if (!strcmp(a, "--save")) o->save_path = val;
        else if (!strcmp(a, "-n")) {
            if (parse_int(val, 1, MAX_NEW_TOKENS, &v) != 0) {
                snprintf(err, errlen, "-n must be a whole number of tokens from 1 to %d, got '%s'",
                         MAX_NEW_TOKENS, val);
                return -1;
            }
            o->n_new = (int)v;
        } else if (!strcmp(a, "-k")) {
            // the upper bound depends on the model's block_size, checked once it is loaded
            if (parse_int(val, 1, 4096, &v) != 0) {
                snprintf(err, errlen, "-k must be a whole number from 1 to block_size-1, got '%s'",
                         val);
                return -1;
            }
            o->K = (int)v;
        } else if (!strcmp(a, "-t")) {
            // strtod happily reads "nan" and "inf": a temperature must be finite and >= 0
            char *end;
            errno = 0;
            double t = strtod(val, &end);
            if (!*val || *end || errno || !isfinite(t) || t < 0.0 || t > 1e6) {
                snprintf(err, errlen, "-t must be a finite temperature from 0 (greedy) to 1e6, "
                         "got '%s'", val);
                return -1;
            }
            // a temperature float cannot hold would become 0, greedy, without a word
            if (t > 0.0 && (float)t < FLT_MIN) {
                snprintf(err, errlen, "-t %s is too small to be a temperature; use -t 0 for "
                         "greedy decoding", val);
                return -1;
            }
            o->temperature = (float)t;
        } else if (!strcmp(a, "-s")) {
            if (parse_seed(val, &o->seed) != 0) {
                snprintf(err, errlen, "-s must be a non-negative whole number below 2^64, got '%s'",
                         val);
                return -1;
            }
        } else if (!strcmp(a, "--init")) {
            if (parse_seed(val, &o->init_seed) != 0) {
                snprintf(err, errlen, "--init must be a non-negative whole number below 2^64, "
                         "got '%s'", val);
                return -1;
            }
            o->init = 1;
        }
    }
    // combinations that cannot both hold
    if (o->init && o->model_path) {
        snprintf(err, errlen, "-m and --init both choose the model; give one of them");
        return -1;
    }
    if (o->plain && o->compare) {
        snprintf(err, errlen, "--plain and --compare cannot be combined; --compare already "
                 "runs plain decoding");
        return -1;
    }
    if (o->plain && o->trace) {
        snprintf(err, errlen, "--trace shows the rounds of speculative decoding; drop --plain "
                 "to see them");
        return -1;
    }
    // one action per run: write a checkpoint, run the self-test, or generate
    int generation_flags = o->trace || o->compare || o->plain;
    if ((o->save_path && (o->run_selftest || generation_flags)) ||
        (o->run_selftest && generation_flags)) {
        snprintf(err, errlen, "--save, --selftest and generation (--trace, --compare, "
                 "--plain) are separate actions; give one per run");
        return -1;
    }
    return 0;
}

// Encodes the prompt; names the first byte not in the vocabulary. 0 on success.
int encode_prompt(const Vocab *v, const char *prompt, int *tokens, char *err, size_t errlen) {
    size_t n = strlen(prompt);
    long bad = encode(v, (const unsigned char *)prompt, n, tokens);
    // name the byte, visibly, and where it is: the user can find it and fix it
    if (bad >= 0) {
        char vis[8];
        visible_char(vis, (unsigned char)prompt[bad]);
        snprintf(err, errlen, "prompt character %s (byte 0x%02x) at position %ld is not in the "
                 "model's vocabulary of %d characters; remove or replace it", vis,
                 (unsigned char)prompt[bad], bad, v->size);
        return -1;
    }
    return 0;
}

// Loads or builds the model and the corpus (in the order the vocabulary needs).
// source receives a description of the model, printed once every input is checked.
int setup_model(const Options *o, GPT *g, Vocab *v, Corpus *corpus, char *source,
                       size_t srclen, char *err, size_t errlen) {
    const char *path = o->model_path;
    int use_init = o->init;
    uint64_t init_seed = o->init_seed;
    struct stat st;
    if (!use_init && !path) {
        // no model named: the default checkpoint, or a seeded random stand-in
        if (stat(DEFAULT_MODEL, &st) == 0) path = DEFAULT_MODEL;
        else {
            use_init = 1;
            init_seed = 1337;
        }
    }
    memset(v, 0, sizeof(*v));
    if (use_init) {
        // a random model takes its vocabulary from the corpus, and the blog's sizes
        if (load_corpus(corpus, o->corpus_path, v, err, errlen) != 0) return -1;
        Config c = DEFAULT_CONFIG;
        c.vocab_size = v->size;
        if (build_gpt(g, &c) != 0) {
            snprintf(err, errlen, "out of memory building the model");
            return -1;
        }
        init_gpt_random(g, init_seed);
        snprintf(source, srclen, "random initialisation, --init %llu%s",
                 (unsigned long long)init_seed, o->init ? "" : " (no trained checkpoint at "
                 DEFAULT_MODEL ": the mechanics are real, the text is noise)");
        return 0;
    }
    // a checkpoint brings its vocabulary; the corpus must fit it
    if (load_checkpoint(path, g, v, err, errlen) != 0) return -1;
    snprintf(source, srclen, "%s", path);
    return load_corpus(corpus, o->corpus_path, v, err, errlen);
}

// Runs the chosen decoder(s) and prints text to stdout, stats to stderr.
int run_generation(const Options *o, GPT *g, const BigramDraft *d, const Vocab *v,
                          const int *prompt, int n_prompt) {
    int V = g->config.vocab_size;
    int cap = (n_prompt > 0 ? n_prompt : 1) + o->n_new, start = n_prompt > 0 ? n_prompt : 1;
    int *seq = malloc((size_t)cap * sizeof(int));
    int *seq_plain = malloc((size_t)cap * sizeof(int));
    unsigned char *source = calloc((size_t)cap, 1), *source_plain = calloc((size_t)cap, 1);
    float *p = malloc((size_t)V * sizeof(float));
    // seq holds prompt + output for refills; the plain run keeps its own for the comparison
    SpecBuffers b;
    memset(&b, 0, sizeof(b));
    if (!seq || !seq_plain || !source || !source_plain || !p ||
        build_spec_buffers(&b, o->K, V) != 0) {
        free(seq); free(seq_plain); free(source); free(source_plain); free(p);
        free_spec_buffers(&b);
        return 1; // main reports it
    }
    // colour: as asked, or by default when stdout is a terminal and NO_COLOR says nothing
    const char *no_color = getenv("NO_COLOR");
    int color = o->color >= 0 ? o->color : isatty(fileno(stdout)) && !(no_color && *no_color);
    // the text streams to stdout as it is made, except with --trace (the trace has the
    // stage) and --compare (so that both wall times measure decoding, not printing);
    // then it is printed whole afterwards
    FILE *stream = o->trace || o->compare ? NULL : stdout;
    DecodeOptions opt = {.temperature = o->temperature, .K = o->K, .trace = o->trace,
                         .echo = stream, .vocab = v, .source = source, .color = color};
    Stats spec = {0}, plain = {0};
    Rng rng;
    fprintf(stderr, "sampling: seed %llu, temperature %g%s, K=%d, %d new tokens\n",
            (unsigned long long)o->seed, o->temperature, o->temperature == 0 ? " (greedy)" : "",
            o->K, o->n_new);
    if (color) {
        // the legend, one line, each name in its own colour
        fputs("colours:", stderr);
        for (int i = 0; i < N_SOURCES; i++)
            fprintf(stderr, " %s%s\033[0m", SOURCE_COLOR[i], SOURCE_NAME[i]);
        fputc('\n', stderr);
    }
    if (!o->plain) {
        // stdout carries the prompt and the text; everything else goes to stderr
        fputs(o->prompt, stdout);
        rng_seed(&rng, o->seed);
        speculative_generate(g, d, &b, prompt, n_prompt, o->n_new, &opt, &rng, seq, &spec);
        if (!stream) write_text(stdout, v, seq + start, source + start, o->n_new, color);
        fputc('\n', stdout);
        print_stats("speculative decoding", &spec, 1);
    }
    if (o->plain || o->compare) {
        if (o->compare) fprintf(stderr, "\nplain decoding, same seed:\n");
        // the same seed, so that in greedy mode the two texts can be compared byte for byte
        fputs(o->prompt, stdout);
        rng_seed(&rng, o->seed);
        opt.trace = 0;
        opt.source = source_plain;
        generate(g, prompt, n_prompt, o->n_new, &opt, &rng, seq_plain, p, &plain);
        if (!stream) write_text(stdout, v, seq_plain + start, source_plain + start, o->n_new, color);
        fputc('\n', stdout);
        print_stats("plain decoding", &plain, 0);
    }
    if (o->compare) {
        // equal texts are required at t = 0 and merely possible at t > 0
        int same = memcmp(seq + start, seq_plain + start, (size_t)o->n_new * sizeof(int)) == 0;
        print_comparison(&spec, &plain, o->temperature == 0.0f, same);
    }
    free(seq); free(seq_plain); free(source); free(source_plain); free(p);
    free_spec_buffers(&b);
    return 0;
}

// `./specdec train [flags]`: trains a model from a seeded initialisation. Returns the
// exit status; every bad flag is one line on stderr.
// --resume: loads the checkpoint to->out and its training state to->out.state into g
// and p, after checking they match each other, the corpus's vocabulary v and the steps
// asked for. Fills err and returns -1 on the first problem.
static int resume_training(GPT *g, const Vocab *v, TrainProgress *p, const TrainOptions *to,
                           char *err, size_t errlen) {
    Vocab cv;
    if (load_checkpoint(to->out, g, &cv, err, errlen) != 0) return -1;
    if (cv.size != v->size || memcmp(cv.chars, v->chars, (size_t)v->size) != 0) {
        snprintf(err, errlen, "checkpoint '%s' has a vocabulary of %d characters that is not "
                 "the corpus's %d; resume with the corpus it was trained on (-i)", to->out,
                 cv.size, v->size);
        return -1;
    }
    // the checksum pairs the state with this checkpoint: the same model, the same bytes
    size_t n;
    unsigned char *buf = serialize_checkpoint(g, &cv, &n);
    if (!buf || build_train_progress(p, g->n_params, 1, 0) != 0) {
        free(buf);
        snprintf(err, errlen, "out of memory for the optimiser");
        return -1;
    }
    uint64_t sum = get_u64(buf + n - 8);
    free(buf);
    char state_path[4096];
    if (state_path_of(to->out, state_path, sizeof(state_path), err, errlen) != 0) return -1;
    if (load_train_state(p, g->n_params, sum, state_path, err, errlen) != 0) return -1;
    if (p->opt.step >= to->iters) {
        snprintf(err, errlen, "checkpoint '%s' has already had %ld steps; ask for more with "
                 "--iters N (N > %ld)", to->out, p->opt.step, p->opt.step);
        return -1;
    }
    print_config(g, to->out);
    fprintf(stderr, "resuming at step %ld of %d, %d windows per step (optimiser moments and "
            "batch sampler restored from %s)\n", p->opt.step, to->iters, p->batch, state_path);
    return 0;
}

int main_train(int argc, char **argv) {
    TrainOptions to = {5000, 16, 500, 100, 1337, DEFAULT_MODEL, 0};
    Config c = DEFAULT_CONFIG;
    const char *corpus_path = DEFAULT_CORPUS, *fixed_flag = NULL;
    char err[512];
    // flags: --resume alone, every other one with one value, checked in full
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--resume")) {
            to.resume = 1;
            i--; // no value follows
            continue;
        }
        // what a resumed run must take from its files, not from flags
        if (strcmp(a, "--iters") && strcmp(a, "-o") && strcmp(a, "-i")) fixed_flag = a;
        struct { const char *flag; int *dst; long lo, hi; } ints[] = {
            {"--iters", &to.iters, 1, 10000000}, {"--batch", &to.batch, 1, 4096},
            {"--layers", &c.n_layer, 1, 64}, {"--heads", &c.n_head, 1, 64},
            {"--embd", &c.n_embd, 1, 4096}, {"--block", &c.block_size, 2, 4096}};
        int known = !strcmp(a, "--seed") || !strcmp(a, "-o") || !strcmp(a, "-i");
        for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) known |= !strcmp(a, ints[k].flag);
        if (!known) {
            error_line("unknown train option '%s' (see ./specdec -h)", a);
            return 1;
        }
        if (!val) {
            error_line("option %s needs a value (see ./specdec -h)", a);
            return 1;
        }
        if (!strcmp(a, "--seed")) {
            if (parse_seed(val, &to.seed) != 0) {
                error_line("--seed must be a non-negative whole number, got '%s'", val);
                return 1;
            }
        } else if (!strcmp(a, "-o")) to.out = val;
        else if (!strcmp(a, "-i")) corpus_path = val;
        else
            for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
                long v;
                if (strcmp(a, ints[k].flag)) continue;
                if (parse_int(val, ints[k].lo, ints[k].hi, &v) != 0) {
                    error_line("%s must be a whole number from %ld to %ld, got '%s'",
                               a, ints[k].lo, ints[k].hi, val);
                    return 1;
                }
                *ints[k].dst = (int)v;
            }
    }
    if (to.resume && fixed_flag) {
        error_line("train --resume takes the model size, batch and seed from "
                   "the checkpoint and its .state file; drop %s", fixed_flag);
        return 1;
    }
    // the corpus gives the vocabulary; then the config must hold together
    Vocab v;
    Corpus corpus;
    GPT g;
    TrainProgress p;
    memset(&v, 0, sizeof(v));
    memset(&g, 0, sizeof(g));
    memset(&p, 0, sizeof(p));
    if (load_corpus(&corpus, corpus_path, &v, err, sizeof(err)) != 0) {
        error_line("%s", err);
        return 1;
    }
    int rc = 1;
    if (to.resume) {
        if (resume_training(&g, &v, &p, &to, err, sizeof(err)) != 0) goto done;
        goto run;
    }
    c.vocab_size = v.size;
    if (validate_config(&c, err, sizeof(err)) != 0) goto done;
    if (corpus.n_val < 2 || corpus.n_train <= (size_t)c.block_size) {
        snprintf(err, sizeof(err), "corpus '%s' is too short to train with block_size %d; use "
                 "Tiny Shakespeare (make data)", corpus_path, c.block_size);
        goto done;
    }
    if (build_gpt(&g, &c) != 0) {
        snprintf(err, sizeof(err), "out of memory for the model");
        goto done;
    }
    // PyTorch's default initialisation, from the seed; saved once before anything is
    // printed, so that an unwritable -o is one line of error, not a failure at step 0
    init_gpt_random(&g, to.seed);
    if (build_train_progress(&p, g.n_params, to.batch, to.seed) != 0) {
        snprintf(err, sizeof(err), "out of memory for the optimiser");
        goto done;
    }
    if (save_training(&g, &v, &p, to.out, err, sizeof(err)) != 0) goto done;
    print_config(&g, "training from a random initialisation");
    fprintf(stderr, "recipe: %d steps of %d windows of %d tokens, AdamW lr 1e-3 betas "
            "0.9/0.999 eps 1e-8 weight decay 0.01, seed %llu\n", to.iters, to.batch,
            c.block_size, (unsigned long long)to.seed);
run:
    if (train(&g, &v, &corpus, &to, &p, err, sizeof(err)) != 0) goto done;
    rc = 0;
    err[0] = '\0';
done:
    if (rc != 0) error_line("%s", err);
    free_train_progress(&p);
    free_gpt(&g);
    free_corpus(&corpus);
    return rc;
}

// The "-m PATH" or "-i PATH" at argv[i] of a subcommand (cmd, which takes the options
// named in takes): sets *model or *corpus and returns 0, or prints one line and returns -1.
static int path_option(int argc, char **argv, int i, const char **model, const char **corpus,
                       const char *cmd, const char *takes) {
    const char *a = argv[i];
    if (strcmp(a, "-m") && strcmp(a, "-i")) {
        error_line("unknown %s option '%s' (%s takes %s)", cmd, a, cmd, takes);
        return -1;
    }
    if (i + 1 >= argc) {
        error_line("option %s needs a value (see ./specdec -h)", a);
        return -1;
    }
    if (!strcmp(a, "-m")) *model = argv[i + 1];
    else *corpus = argv[i + 1];
    return 0;
}

// `./specdec eval [-m model] [-i corpus]`: the mean cross-entropy of a checkpoint over
// the whole validation split and the whole training split.
int main_eval(int argc, char **argv) {
    const char *model_path = DEFAULT_MODEL, *corpus_path = DEFAULT_CORPUS;
    char err[512];
    for (int i = 2; i < argc; i += 2)
        if (path_option(argc, argv, i, &model_path, &corpus_path, "eval", "-m and -i") != 0)
            return 1;
    GPT g;
    Vocab v;
    Corpus corpus;
    memset(&g, 0, sizeof(g)); // zeroed, so the frees below are safe whatever failed
    memset(&corpus, 0, sizeof(corpus));
    if (load_checkpoint(model_path, &g, &v, err, sizeof(err)) != 0 ||
        load_corpus(&corpus, corpus_path, &v, err, sizeof(err)) != 0) {
        error_line("%s", err);
        free_gpt(&g);
        return 1;
    }
    // each split needs one position with a next token to score, or the mean is 0/0
    if (corpus.n_val < 2 || corpus.n_train < 2) {
        error_line("corpus '%s' is too short to evaluate: its splits have %zu "
                   "(train) and %zu (validation) tokens, and each needs at least 2 (use a longer "
                   "corpus, e.g. Tiny Shakespeare)", corpus_path, corpus.n_train, corpus.n_val);
        free_gpt(&g);
        free_corpus(&corpus);
        return 1;
    }
    print_config(&g, model_path);
    // validation first: it is the number that matters, and it is ten times shorter
    double t0 = now_seconds();
    double val = eval_loss(&g, corpus.tokens + corpus.n_train, corpus.n_val);
    fprintf(stderr, "val loss   %.4f  (%zu tokens, %.1f s)\n", val, corpus.n_val, now_seconds() - t0);
    t0 = now_seconds();
    double tr = eval_loss(&g, corpus.tokens, corpus.n_train);
    fprintf(stderr, "train loss %.4f  (%zu tokens, %.1f s)\n", tr, corpus.n_train, now_seconds() - t0);
    free_gpt(&g);
    free_corpus(&corpus);
    return 0;
}

// ./specdec bench [-m PATH] [-i PATH] [--csv] [--big]: see run_bench.
int main_bench(int argc, char **argv) {
    Options o;
    memset(&o, 0, sizeof(o));
    o.corpus_path = DEFAULT_CORPUS;
    int csv = 0, big = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--csv")) { csv = 1; continue; }
        if (!strcmp(a, "--big")) { big = 1; continue; }
        if (path_option(argc, argv, i, &o.model_path, &o.corpus_path, "bench",
                        "-m, -i, --csv and --big") != 0)
            return 1;
        i++; // past the option's value too
    }
    char err[512], source[256];
    GPT g;
    Vocab v;
    Corpus corpus;
    BigramDraft d = {0, NULL};
    memset(&g, 0, sizeof(g));
    memset(&corpus, 0, sizeof(corpus));
    int rc = 1;
    if (setup_model(&o, &g, &v, &corpus, source, sizeof(source), err, sizeof(err)) != 0)
        goto done;
    // the bench's prompts must be in the vocabulary (they are in Tiny Shakespeare's)
    for (int i = 0; i < BENCH_N_PROMPTS; i++) {
        int tokens[64];
        if (encode_prompt(&v, BENCH_PROMPTS[i], tokens, err, sizeof(err)) != 0) goto done;
    }
    if (BigramDraftModel(&d, corpus.tokens, corpus.n_train, v.size) != 0) {
        snprintf(err, sizeof(err), "out of memory building the bigram table");
        goto done;
    }
    print_config(&g, source);
    rc = run_bench(&g, &d, &v, csv, big, err, sizeof(err));
done:
    if (rc != 0) error_line("%s", err);
    free_bigram_draft(&d);
    free_corpus(&corpus);
    free_gpt(&g);
    return rc;
}

// ./specdec explain: seed 004's table at t = 1 and t = 0, exact beside measured.
int main_explain(int argc, char **argv) {
    if (argc > 2) {
        error_line("explain takes no options, got '%s' (see ./specdec -h)", argv[2]);
        return 1;
    }
    double exact[EXPLAIN_V], beta;
    long counts[EXPLAIN_V], n_acc;
    fprintf(stderr, "One position of accept/reject: the draft proposes x ~ q and it is kept "
            "with probability\nmin(1, p(x)/q(x)); otherwise the position is drawn from "
            "norm(max(0, p - q)).\nP(emit x) = min(p(x), q(x)) + (1 - sum min(p, q)) * "
            "residual(x), which is p(x).\n");
    explain_position(stderr, "seed 004's example: draft q and target p over A, B, C, D",
                     EXPLAIN_Q, EXPLAIN_P, EXPLAIN_NAMES, EXPLAIN_V, 1.0f, EXPLAIN_ROUNDS, 1,
                     exact, &beta, counts, &n_acc);
    explain_position(stderr, "the same rows, greedy: both become one-hot at their argmax",
                     EXPLAIN_Q, EXPLAIN_P, EXPLAIN_NAMES, EXPLAIN_V, 0.0f, EXPLAIN_ROUNDS, 1,
                     exact, &beta, counts, &n_acc);
    return 0;
}

#ifndef TESTING
// Parses the flags, loads the model and corpus, checks every input, runs one action.
int main(int argc, char **argv) {
    char err[512];
    Options o;
    // the subcommands have flags of their own
    if (argc > 1 && !strcmp(argv[1], "train")) return main_train(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "eval")) return main_eval(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "bench")) return main_bench(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "explain")) return main_explain(argc, argv);
    // 1. the command line: every flag checked before anything is loaded
    if (parse_args(argc, argv, &o, err, sizeof(err)) != 0) {
        error_line("%s", err);
        return 1;
    }
    if (o.help) {
        usage(stdout);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); // self-test lines survive a sanitizer abort
    err[0] = '\0';
    GPT g;
    Vocab v;
    Corpus corpus;
    // 2. the model and the corpus (zeroed first, so the frees below are always safe)
    char source[256];
    memset(&g, 0, sizeof(g));
    memset(&corpus, 0, sizeof(corpus));
    if (setup_model(&o, &g, &v, &corpus, source, sizeof(source), err, sizeof(err)) != 0) {
        error_line("%s", err);
        free_gpt(&g);
        free_corpus(&corpus);
        return 1;
    }
    // 3. checks that need the model, then the one action asked for
    int rc = 1;
    int S = g.config.block_size;
    int *prompt = malloc((strlen(o.prompt) + 1) * sizeof(int));
    BigramDraft d = {0, NULL};
    // checks that need the model: K against block_size, the prompt against the
    // vocabulary (generation only: the self-test brings its own prompts and Ks), and
    // for the self-test a corpus long enough to take its longest prompt from
    if (!prompt) {
        snprintf(err, sizeof(err), "out of memory for a prompt of %zu bytes", strlen(o.prompt));
        goto done;
    }
    if (o.run_selftest && corpus.n < selftest_min_corpus(S)) {
        snprintf(err, sizeof(err), "the self-test takes prompts of up to %zu tokens from the "
                 "corpus, which has %zu; use Tiny Shakespeare (make data)",
                 selftest_min_corpus(S), corpus.n);
        goto done;
    }
    if (!o.run_selftest && o.K >= S) {
        snprintf(err, sizeof(err), "-k %d is too large: a verify pass of K+1 tokens must fit "
                 "block_size %d; use -k 1..%d", o.K, S, S - 1);
        goto done;
    }
    if (!o.run_selftest && encode_prompt(&v, o.prompt, prompt, err, sizeof(err)) != 0) goto done;
    if (BigramDraftModel(&d, corpus.tokens, corpus.n_train, v.size) != 0) {
        snprintf(err, sizeof(err), "out of memory building the bigram table");
        goto done;
    }
    // every input is good: say what runs, then run it (a save speaks only after it worked,
    // so that a failed write is one line, like every other error)
    if (o.save_path) {
        if (save_checkpoint(&g, &v, o.save_path, err, sizeof(err)) != 0) goto done;
        print_config(&g, source);
        fprintf(stderr, "wrote %s\n", o.save_path);
        rc = 0;
    } else if (o.run_selftest) {
        print_config(&g, source);
        rc = selftest(&g, &d, &v, &corpus) != 0;
    } else {
        print_config(&g, source);
        rc = run_generation(&o, &g, &d, &v, prompt, (int)strlen(o.prompt));
        if (rc) snprintf(err, sizeof(err), "out of memory for %d tokens", o.n_new);
    }
    if (rc == 0) err[0] = '\0';
done:
    // every failure above left its one-line reason in err
    if (rc != 0 && err[0]) error_line("%s", err);
    free(prompt);
    free_bigram_draft(&d);
    free_corpus(&corpus);
    free_gpt(&g);
    return rc;
}
#endif
