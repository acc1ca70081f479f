/*
 * specdec.c — speculative decoding, from scratch, in one C file.
 *
 * What this is
 *   The lesson of the blog post "Adding Speculative Decoding to Andrej Karpathy's NanoGPT",
 *   in C that you read once, top to bottom, and can step through in a debugger:
 *     - the draft: the blog's Laplace-smoothed bigram table from Tiny Shakespeare; then the
 *       papers' small GPT with a KV cache of its own (tinyshakespeare/draft.bin), and the
 *       serving engines' prompt lookup;
 *     - the served distribution (temperature, top-k, top-p), applied to target and draft;
 *     - a tree of guesses (SpecInfer, Medusa, EAGLE): several per position, one masked pass,
 *       an exact rule child by child; and Medusa heads as its draft;
 *     - the four phases of one round, draft -> verify -> accept/reject -> trim the KV
 *       cache, and the loop around them, with a trace that prints every p/q decision;
 *     - plain autoregressive decoding beside it, and a self-test that greedy speculative
 *       decoding is plain greedy decoding, byte for byte;
 *     - the target model the phases call: the lecture's character-level GPT (4 layers,
 *       4 heads, 64 wide, 32 tokens of context, 65 characters, 209,729 parameters) in
 *       textbook loops, with a KV cache. Loading, the self-test and the command line come
 *       last: plumbing, which a reader of the lesson can skip.
 *
 * What this is not
 *   Not a fast inference engine, and not a trainer. Beside this file, each including it
 *   whole (#include "../specdec.c" with TESTING defined, which leaves out main):
 *     tinyshakespeare/train.c  the trainer that made tinyshakespeare/model.bin (make train)
 *     test/bench.c             c(T), the K sweep and the speedup model (make bench)
 *     test/explain.c           one accept/reject decision worked out exactly (make explain)
 *     test/test_*.c            the unit and exactness tests (make test)
 *
 * Constraints
 *   C11, libc and libm only, one thread, batch size 1. No -ffast-math, and no fused
 *   multiply-add made by the compiler (-ffp-contract=off): a token's sums must come out
 *   bit-identical whether it runs alone or with K others in one verify pass, or greedy
 *   speculative decoding would drift from plain greedy decoding. Every bad input ends in
 *   one line on stderr and exit status 1.
 *
 * Build, run, step through (notes/debugging.md walks one whole round)
 *   make run                          # build, fetch the corpus, run the demo
 *   ./specdec --trace -n 24 -s 277 -p "To be or not to be, "   # round 1: the blog's example
 *   make debug                        # ./specdec_debug: -O0 -g3, address + UB sanitizers
 *   ASAN_OPTIONS=detect_leaks=0 gdb -ex 'break accept_reject' -ex run --args ./specdec_debug
 *   (gdb) p b->candidates[0]@k        # the draft's guesses; q_draft[i*V] starts guess i's row
 *   (gdb) finish                      # how many tokens the round emits
 *
 * Map: the blog's Python, and where it is here (the sections come in this order)
 *   F.softmax(logits / t)         tempered_softmax()       Random numbers and sampling
 *   BigramDraftModel.__init__     BigramDraftModel()       The draft model
 *   BigramDraftModel.get_probs    bigram_get_probs()
 *   BigramDraftModel.sample       bigram_sample()
 *   draft_tokens                  draft_tokens()           The four phases of one round
 *   verify_candidates             verify_candidates()
 *   accept_reject                 accept_reject()
 *   trim_kv_cache                 trim_kv_cache()
 *   (the baseline it must match)  generate()               The loop
 *   speculative_generate          speculative_generate()
 *   The blog's lists draft_probs and target_probs are the rows q_draft and p_target here.
 *   Beyond the blog, after the loop (a reader of the blog can stop before them):
 *   (top-k, top-p)                apply_top_k_top_p()      Beyond the blog: top-k and top-p
 *   (a small GPT as the draft)    gpt_draft_tokens()       Beyond the blog: a small GPT as
 *   (prompt lookup)               lookup_draft_tokens()      the draft, and prompt lookup
 *   Then the plumbing (buffers, counters, output, trace and stats), then the tree:
 *   (a tree of guesses, one pass) draft_tree(), verify_tree(), Beyond the blog: a tree of
 *     accept_reject_tree(), judge_children(), compact_kv_cache()   guesses
 *   target_model(idx, past_kvs)   forward()                The target model
 *   (Medusa heads)                medusa_logits()          Beyond the blog: Medusa heads
 *
 * Size letters used in the shape comments (declared once, here):
 *   B  batch size (always 1 here; the trainer's windows per step)
 *   T  tokens in one forward pass (1 for a step, k+1 for a verify pass, S/2+k with a refill)
 *   C  embedding width, n_embd             (64)
 *   V  vocabulary size                      (65)
 *   L  number of transformer blocks         (4)
 *   NH number of attention heads            (4);  HS = C / NH, the head size (16)
 *   S  block_size, the longest context      (32)
 *   K  draft length, tokens guessed per round (4 by default); k <= K in one round
 *   H  the MLP's hidden width, ffn_width    (4C = 256; --ffn-width pads it with zeros)
 *   P  parameter count                      (209,729)
 *   N  the guesses of a whole --tree shape  (21 for 3,2,1,1); D its levels (4)
 */

#define _POSIX_C_SOURCE 200809L // clock_gettime, fileno and stat under -std=c11
#include <ctype.h>
#include <errno.h> // errno: strto*'s range errors, and why a file failed to open
#include <float.h> // FLT_MIN: the smallest positive -t and --top-p that a float holds
#include <math.h>
#include <stdarg.h> // error_line's printf-style arguments
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h> // stat: read_file looks at a path before opening it
#include <time.h> // clock_gettime, for the wall times in the stats
#include <unistd.h> // isatty, for --color's default

// ----------------------------------------------------------------------------
// The target model's interface: its config, weights and run state
//
// The phases below need only this much of the target: forward() runs T new tokens on top
// of the KV cache and returns T rows of logits, and the cache is an array with a length,
// kv_len, that trim_kv_cache can lower. How forward computes them comes after the loop,
// in "The target model": it is the engine verify_candidates calls.

typedef struct {
    int n_layer;    // L,  number of transformer blocks      e.g. 4
    int n_head;     // NH, attention heads per block         e.g. 4
    int n_embd;     // C,  residual stream width             e.g. 64
    int block_size; // S,  longest context, in tokens        e.g. 32
    int vocab_size; // V,  distinct characters               e.g. 65
    int ffn_width;  // H,  the MLP's hidden units: 4C, or more e.g. 256 (--ffn-width widens)
} Config;

// The model's parameters, pointing into one allocation (see weight_sizes). Names follow
// the lecture's PyTorch modules; each block's tensors are stacked along a leading L axis.
// A Linear's weight is stored (in, out): PyTorch's weight transposed (see matmul).
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
    float *ffwd_up_weight;     // (L, C, H)   blocks[l].ffwd.net[0]  Linear(C, 4C): H = 4C
    float *ffwd_up_bias;       // (L, H)
    float *ffwd_down_weight;   // (L, H, C)   blocks[l].ffwd.net[2]  Linear(4C, C)
    float *ffwd_down_bias;     // (L, C)
    float *ln_f_weight;        // (C)         ln_f
    float *ln_f_bias;          // (C)
    float *lm_head_weight;     // (C, V)      lm_head (not tied to the embedding)
    float *lm_head_bias;       // (V)
} Weights;
#define N_TENSORS 19 // the fields of Weights, in checkpoint order

// Names of the tensors in checkpoint order, for messages and the format doc.
static const char *TENSOR_NAMES[N_TENSORS] = {
    "token_embedding", "position_embedding", "ln1_weight", "ln1_bias",
    "query", "key", "value", "proj_weight", "proj_bias", "ln2_weight", "ln2_bias",
    "ffwd_up_weight", "ffwd_up_bias", "ffwd_down_weight", "ffwd_down_bias",
    "ln_f_weight", "ln_f_bias", "lm_head_weight", "lm_head_bias"};

// What one transformer block computes for the T tokens of a pass, one buffer per role.
// Inference shares ONE set among all layers, and there x_in, x_mid and x_out are the same
// array (RunState.x, the residual stream, updated in place).
typedef struct {
    float *x_in;    // (S, C)      residual stream entering the block
    float *ln1;     // (S, C)      ln1(x_in): the input of query, key and value
    float *q;       // (S, C)      queries of the T tokens, heads side by side
    float *att;     // (NH, S, S)  attention weights: head, token of the pass, cache slot
    float *att_out; // (S, C)      attention output before proj, heads concatenated
    float *attn;    // (S, C)      proj(att_out): what the attention sub-block adds
    float *x_mid;   // (S, C)      x_in + attn
    float *ln2;     // (S, C)      ln2(x_mid): the input of the MLP
    float *hidden;  // (S, H)      MLP hidden layer, after ReLU
    float *ffwd;    // (S, C)      what the MLP sub-block adds
    float *x_out;   // (S, C)      x_mid + ffwd: the next block's x_in
    float *key_cache;   // (S, C)  this layer's cached keys, by slot: the pass writes its rows
    float *value_cache; // (S, C)  and values (views into RunState's caches, set per layer)
    const unsigned char *sees; // (S, S) sees[t][s] = 1 when token t of the pass attends to slot s
} BlockActs;

// Activations of one inference pass of up to S tokens, and the KV cache.
typedef struct {
    float *x;           // (S, C)      residual stream of the T tokens in flight
    BlockActs block;    //             one block's buffers, reused by every layer
    float *ln_f;        // (S, C)      ln_f(x): the input of lm_head
    float *logits;      // (S, V)      output: one row per token of the pass
    float *key_cache;   // (L, S, C)   keys of every cached token, per layer, by slot
    float *value_cache; // (L, S, C)   values, the same way
    int kv_len;         //             slots 0 .. kv_len-1 of the caches are valid
    // which cached tokens each token follows: one chain, or a tree of guesses (beyond the blog)
    int *parent;        // (S)         parent[s] = the slot of the token before slot s's: s - 1
                        //             in a chain, -1 at slot 0
    int *position;      // (S)         position[s] = its position in the window, the count of
                        //             its ancestors: s in a chain
    unsigned char *sees; // (S, S)     the attention mask of the last pass: sees[t][s] = 1 when
                        //             its token t attends to slot s (slot s is t's or an ancestor)
} RunState;

// The target model: config, parameters (one block of floats) and run state.
typedef struct {
    Config config; // the sizes, from the checkpoint's header
    Weights w; // named views into params: owns no memory of its own
    float *params;   // (P) all parameters, in checkpoint order
    size_t n_params; // P, 209,729 for the shipped model
    uint64_t padded_from; // 0, or target_fingerprint of the weights --ffn-width padded
    RunState state; // one sequence's activations and cache: batch size 1
} GPT;

// Runs T >= 1 new tokens at slots kv_len .. kv_len+T-1 on top of the cache, appends their
// keys and values to it (kv_len += T) and returns T rows of logits, (T, V). parents NULL:
// each token follows the one before, at positions kv_len ..: the only case the blog needs.
// Else parents[t] is the slot that token t follows (a tree of guesses, beyond the blog).
float *forward(GPT *g, const int *tokens, int T, const int *parents);

// The tokenizer (one token per byte of the corpus) is plumbing: it comes after the loop.
typedef struct Vocab Vocab;

// ----------------------------------------------------------------------------
// Random numbers and sampling

// A small PRNG of our own (xorshift64*), so a seed gives the same text everywhere.
// forced lets a test or a debugger session choose the uniform draws: while n_forced > 0,
// rng_uniform returns forced[0], forced[1], ... instead of generating them, so any branch
// of a round (this draft token, that acceptance, this resample) can be made to happen.
typedef struct {
    uint64_t state;       //              the generator's 64 bits; never 0
    const double *forced; // (n_forced)   uniforms in [0, 1) to return next, or NULL
    int n_forced;         //              how many of them are left
} Rng;

// Seeds the generator; splitmix64 spreads nearby seeds (1, 2, 3) far apart.
void rng_seed(Rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL; // splitmix64: step by 2^64 / golden ratio, then mix
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    r->state = z ? z : 0x2545F4914F6CDD1DULL; // xorshift must never hold 0
    r->forced = NULL; // nothing forced: every draw is generated
    r->n_forced = 0;
}

// Makes the next n uniform draws return u[0] .. u[n-1]; the generator's state does not
// move while they are used up, so afterwards it continues where it was.
void rng_force(Rng *r, const double *u, int n) {
    r->forced = u; // u must outlive the n draws: it is not copied
    r->n_forced = n;
}

// The next 64 random bits: three shifts and a multiply (xorshift64*).
uint64_t rng_u64(Rng *r) {
    uint64_t x = r->state;
    x ^= x >> 12; // this shift triple (12, 25, 27) gives period 2^64 - 1
    x ^= x << 25;
    x ^= x >> 27;
    r->state = x;
    return x * 0x2545F4914F6CDD1DULL; // the multiply scrambles the weak low bits
}

// A uniform draw in [0, 1) with 53 random bits: never 1, sometimes exactly 0. Every
// value is a multiple of 2^-53, so a branch's probability is a count of such values.
double rng_uniform(Rng *r) {
    if (r->n_forced > 0) { // a forced value comes first (rng_force)
        r->n_forced--;
        return *r->forced++;
    }
    // the top 53 bits, exactly a double's mantissa, times 2^-53
    return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
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
    int last = -1; // the last index with weight: the fallback
    for (int i = 0; i < n; i++) {
        double w = (double)probs[i] - (minus ? minus[i] : 0.0f);
        if (w <= 0.0) continue; // weight 0: can never be drawn
        cdf += w;
        last = i;
        if (target < cdf) return i; // strict <: u = 0 gives the first with weight
    }
    return last;
}

// A draw from a probability row with a uniform u in [0, 1); see sample_weights.
int sample_from(const float *probs, int n, double u) { return sample_weights(probs, NULL, n, u); }

// Index of the largest entry; ties go to the lowest index, in every decoder alike.
int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

// Writes a one-hot row at index i: how greedy decoding (t = 0) turns into a distribution.
static void one_hot(float *out, int n, int i) {
    for (int j = 0; j < n; j++) out[j] = 0.0f;
    out[i] = 1.0f;
}

// p = softmax(logits / t): the target's distribution at the decoding temperature (the
// blog's F.softmax(logits) is t = 1); for t = 0, one-hot at the argmax (greedy).
void tempered_softmax(float *p, const float *logits, int V, float temperature) {
    if (temperature == 0.0f) { // greedy: the limit of the softmax as t -> 0
        one_hot(p, V, argmax(logits, V));
        return;
    }
    // subtract the max before exp: the largest term becomes exp(0) = 1, nothing overflows
    float maxv = logits[argmax(logits, V)];
    double e[256], sum = 0.0; // V <= 256 (validate_config); each exp is taken once
    for (int i = 0; i < V; i++) {
        e[i] = exp(((double)logits[i] - maxv) / temperature);
        sum += e[i];
    }
    for (int i = 0; i < V; i++) p[i] = (float)(e[i] / sum); // divide in double, round once
}

// The served distribution: what a token is really sampled from. The target's p must be
// the served row, or the output follows some other distribution; the draft's q must be
// the row its guess was really drawn from. specdec serves the bigram and the model draft
// the same way, so that q stays close to p (a guess the target's top-k removed could only
// be rejected); lookup's q is one-hot, and stays so.
typedef struct {
    float temperature; // softmax(logits / t), the draft's row tempered alike; 0 = greedy
    int top_k;         // then keep the top_k most likely tokens; 0 = off
    float top_p;       // then keep the fewest most likely tokens whose mass reaches top_p;
                       // 0 (or 1) = off
} Sampler;

// Cuts a row to its top-k and top-p and renormalises it: beyond the blog, after the loop.
void apply_top_k_top_p(float *p, int V, const Sampler *s);

// p = the served distribution of a row of logits (the target's, or the model draft's):
// temperature, top-k, top-p.
void served_probs(float *p, const float *logits, int V, const Sampler *s) {
    tempered_softmax(p, logits, V, s->temperature);
    apply_top_k_top_p(p, V, s);
}

// Samples one token from a row of logits as served, with one uniform; p: (V) receives
// the row it was drawn from.
static int sample_served(const float *logits, int V, const Sampler *s, float *p, Rng *rng) {
    served_probs(p, logits, V, s);
    return sample_from(p, V, rng_uniform(rng));
}

// ----------------------------------------------------------------------------
// The draft model: a bigram table, P(next | current), counted from the training split

typedef struct {
    int V;        //          vocabulary size
    float *probs; // (V, V)   row a = P(next | a); every row sums to 1, every entry > 0
} BigramDraft;

// Counts every adjacent pair of the training tokens, adds 1 to every cell (Laplace
// smoothing, so no table entry is 0: a guess's q is never 0, and p/q is defined) and
// normalises each row. The blog's BigramDraftModel.__init__. 0 on success.
int BigramDraftModel(BigramDraft *d, const int *train, size_t n, int V) {
    d->V = V;
    d->probs = malloc((size_t)V * V * sizeof(float)); // (V, V): 16.9 KB for V = 65
    double *counts = calloc((size_t)V * V, sizeof(double));
    if (!d->probs || !counts) { // out of memory: leave d as free_bigram_draft expects it
        free(counts);
        free(d->probs);
        d->probs = NULL;
        return -1;
    }
    // counts[a][b] = how often b follows a; in double, because a float would stop
    // counting exactly past 2^24 pairs
    for (size_t i = 0; i + 1 < n; i++) counts[(size_t)train[i] * V + train[i + 1]] += 1.0;
    for (int a = 0; a < V; a++) { // +1 on every cell, then each row divided by its total
        double *row = counts + (size_t)a * V;
        double total = 0.0;
        for (int b = 0; b < V; b++) total += row[b] + 1.0;
        for (int b = 0; b < V; b++) d->probs[(size_t)a * V + b] = (float)((row[b] + 1.0) / total);
    }
    free(counts); // only the normalised table is kept
    return 0;
}

// Frees what BigramDraftModel allocated.
void free_bigram_draft(BigramDraft *d) {
    free(d->probs);
    d->probs = NULL; // so a second call is harmless
}

// Returns the row P(next | token): the blog's get_probs, an O(1) lookup.
const float *bigram_get_probs(const BigramDraft *d, int token) {
    return d->probs + (size_t)token * d->V; // a view into the table, not a copy
}

// q = the draft's row after token, served like the target: tempered, q^(1/t) renormalised,
// then cut by top-k and top-p as the target's row is (apply_top_k_top_p).
// Why temper at all: exactness holds for ANY draft q (accept/reject corrects whatever the
// draft proposes; notes/math.md), so this is a design choice, made for acceptance. The
// target is sampled from softmax(logits / t); a bigram row raised to 1/t moves the same
// way, sharper for t < 1, flatter for t > 1 (measured: alpha rises below t = 1 and at 2;
// notes/math.md). At t = 1 it is the table's row; at t = 0, one-hot at its argmax, like
// greedy's p: a guess then passes exactly when it is the target's argmax.
void bigram_served_probs(float *q, const BigramDraft *d, int token, const Sampler *s) {
    const float *row = bigram_get_probs(d, token); // the untempered row P(next | token)
    int V = d->V;
    float t = s->temperature;
    if (t == 0.0f) { // greedy: one-hot, as tempered_softmax does
        one_hot(q, V, argmax(row, V));
        return;
    }
    if (t == 1.0f) {
        memcpy(q, row, (size_t)V * sizeof(float)); // t = 1: the table's row exactly
    } else {
        // q_i^(1/t) = exp(log q_i / t), taken relative to the largest entry
        double logmax = log((double)row[argmax(row, V)]), sum = 0.0;
        for (int i = 0; i < V; i++) sum += exp((log((double)row[i]) - logmax) / t);
        for (int i = 0; i < V; i++)
            q[i] = (float)(exp((log((double)row[i]) - logmax) / t) / sum);
    }
    apply_top_k_top_p(q, V, s); // the same cut as the target's row
}

// Draws one token after `token` from the draft, and returns the row q it was drawn
// from: the blog's BigramDraftModel.sample, which returns (token, probs) for the
// same reason: accept_reject needs q of the guess. q: (V).
int bigram_sample(const BigramDraft *d, int token, const Sampler *s, Rng *rng, float *q) {
    bigram_served_probs(q, d, token, s); // the row the ratio will use is the row we sample
    return sample_from(q, d->V, rng_uniform(rng)); // one uniform per guess
}

// Which draft proposes the guesses (--draft).
typedef enum {
    DRAFT_BIGRAM, // the blog's table (the default)
    DRAFT_GPT,    // a small GPT distilled from the target (make train-draft), with its own KV cache
    DRAFT_LOOKUP, // prompt lookup: copies earlier text; q is one-hot at each guess
    DRAFT_MEDUSA  // Medusa heads on the target's hidden row: trees only (beyond the blog)
} DraftKind;

typedef struct MedusaHeads MedusaHeads; // a Medusa draft's heads: after the target model

// A draft: its kind, and what that kind needs.
typedef struct {
    DraftKind kind;
    const char *name;   // for the trace and the stats, e.g. "bigram"
    int V;              // vocabulary size, the target's
    BigramDraft bigram; // DRAFT_BIGRAM: the table
    GPT model;          // DRAFT_GPT: its weights and its own KV cache (model.state)
    int match_n;        // DRAFT_LOOKUP: the n-gram length the last round matched
    int match_end;      //   and the index in seq where that earlier occurrence ended
    MedusaHeads *medusa; // DRAFT_MEDUSA: the heads, and the target whose hidden
    const GPT *target;          //   rows they read and whose lm_head they share
    float p_min;        // --draft-p-min: a guess the draft itself gives less than this chance
                        // (at t = 1, unfiltered) is its last of the round; 0 = off
} Draft;

// ----------------------------------------------------------------------------
// The four phases of one round: draft, verify, accept/reject, trim

// Token ids and how many, in one argument, as the blog's tensors carry their length.
typedef struct {
    const int *tok; // (n)
    int n;
} Tokens;

// Buffers of one round, each with a single role, so a debugger shows the whole decision.
typedef struct {
    int K;            //           the longest draft these buffers hold
    int V;            //           vocabulary size
    int *candidates;  // (K)       c0 .. c(k-1), drafted this round
    float *q_draft;   // (K, V)    q_draft[i] = the draft distribution c(i) was sampled from
    int *all_tokens;  // (S)       the verify pass's input: [current, c0 .. c(k-1)], after the
                      //           lag tokens before current_token when the round restarts the cache
    int restarted;    //           1 when the round found the cache full and restarted it
    int lag;          //           tokens before current_token the verify pass reran: S/2-1 when
                      //           restarted (plain decoding's refill, folded in), else 0
    int cache_len;    //           current_token's position, kv_len + lag: the blog's cache_len
    float *p_target;  // (K+1, V)  p_target[i] = the target's distribution after [current, c0..c(i-1)]
    double *u;        // (K)       the uniform draw that decided each candidate
    float *residual;  // (V)       max(0, p - q) at the rejected position, unnormalised
    int *accepted;    // (K+1)     tokens the round emits: accepted drafts, then a resample or bonus
    int rejected_at;  //           index of the rejected candidate, or -1 if none was rejected
    int asked;        //           the guesses the round asked for: K, or fewer (room, text's end)
    int drafted;      //           k: the guesses draft_tokens proposed this round (<= asked)
    int draft_lag;    //           tokens a model draft's first pass caught up on (trace)
    float *p_next;    // (V)       the prefill's distribution, which the first token is drawn from
} SpecBuffers;

// The model draft and prompt lookup come after the loop, under "Beyond the blog".
static int lookup_draft_tokens(Draft *d, const Tokens *text, int k, SpecBuffers *b);
static int gpt_draft_tokens(Draft *d, const Tokens *text, int k, const Sampler *s, Rng *rng,
                            SpecBuffers *b);

// Phase 1, DRAFT: proposes up to k tokens after current_token (the last of text), each
// continuing the ones before (sampled from the bigram or the model draft, whose cache catches
// up to b->cache_len, or copied by lookup), into b->candidates, and keeps every q row in
// b->q_draft: accept_reject needs q(c_i) and the whole row for the residual. Returns how many:
// k, but lookup may find fewer, or none (a plain step), and --draft-p-min may stop it early.
int draft_tokens(Draft *d, const Tokens *text, int k, const Sampler *s, Rng *rng,
                 SpecBuffers *b) {
    if (d->kind == DRAFT_GPT) return gpt_draft_tokens(d, text, k, s, rng, b);
    if (d->kind == DRAFT_LOOKUP) return lookup_draft_tokens(d, text, k, b);
    // the blog's bigram: a table row per guess
    int tok = text->tok[text->n - 1]; // current_token: a bigram's whole context is one token
    for (int i = 0; i < k; i++) {
        // each guess is conditioned on the previous guess, not on the target's view
        b->candidates[i] = bigram_sample(&d->bigram, tok, s, rng, b->q_draft + (size_t)i * d->V);
        float own = bigram_get_probs(&d->bigram, tok)[b->candidates[i]]; // the table's own chance
        tok = b->candidates[i];
        if (own < d->p_min) // --draft-p-min, beyond the blog: unsure, so stop after this guess
            return i + 1;
    }
    return k;
}

// Phase 2, VERIFY: ONE target forward over [current_token (the last of text), c0 .. c(k-1)]
// at positions cache_len .. cache_len+k. Row i of b->p_target is the target's distribution
// for the token after [.., current, c0 .. c(i-1)]: rows 0..k-1 judge the candidates, row k
// is the bonus. Why one pass of k+1 tokens can cost little more than one token: a pass
// reads every weight once whatever its T (matmul), and where the weights must come from
// memory, that read is the cost (notes/speed.md measures where it holds here, and where
// it does not). b->lag > 0 only when the round restarted a full cache: the pass then first
// reruns the lag tokens before current_token, at positions 0 .. lag-1, as plain decoding's
// refill does (their rows are not needed). b->all_tokens: (lag+k+1) the pass's input.
void verify_candidates(GPT *g, const Tokens *text, int k, const Sampler *s, SpecBuffers *b) {
    int V = g->config.vocab_size, lag = b->lag;
    const int *current = text->tok + text->n - 1; // current_token, in the text
    // the blog's all_tokens = [current_token] + candidates, after any tokens the cache lacks
    for (int i = 0; i <= lag; i++) b->all_tokens[i] = current[i - lag]; // current_token last
    for (int i = 0; i < k; i++) b->all_tokens[lag + 1 + i] = b->candidates[i];
    const float *logits = forward(g, b->all_tokens, lag + 1 + k, NULL); // the single pass
    // each row from current_token on, as served: the blog's F.softmax, at the temperature,
    // then top-k and top-p
    for (int i = 0; i <= k; i++) // k+1 rows: the bonus row k too
        served_probs(b->p_target + (size_t)i * V, logits + (size_t)(lag + i) * V, V, s);
}

// Residual draw after a rejection: a token from norm(max(0, p - q)). If the residual
// has no mass (p <= q everywhere, which for two rows summing to 1 means p == q up to
// rounding) it draws from p instead. residual: (V) receives max(0, p - q) as floats for
// the trace and a debugger; the draw itself uses the exact differences (sample_weights).
static int sample_residual(const float *p, const float *q, int V, float *residual, double u) {
    double mass = 0.0; // the residual stays unnormalised: the draw scales by its total anyway
    for (int j = 0; j < V; j++) {
        residual[j] = p[j] > q[j] ? p[j] - q[j] : 0.0f; // float copy: trace, debugger
        mass += fmax(0.0, (double)p[j] - q[j]); // in double, as the draw will sum it
    }
    if (mass > 0.0) // the usual case: a draw from the residual
        return sample_weights(p, q, V, u);
    return sample_from(p, V, u); // p == q up to rounding: a draw from p itself
}

// Phase 3, ACCEPT/REJECT: walks the k candidates in b left to right. Candidate i is
// accepted when u_i < min(1, p_i(c_i) / q_i(c_i)). The first rejection is replaced by a draw
// from norm(max(0, p_i - q_i)) and ends the round. If all k pass and allow_bonus is set, one
// bonus token is drawn from p_k (k = 0 needs allow_bonus: it is then one plain step from p_0).
// Writes the emitted tokens to b->accepted and returns how many: 1 .. k+1 (1 .. k if no
// bonus is allowed); b->rejected_at = the rejected candidate's index, or -1.
// Why one position emits exactly p: a guess x, drawn from q, passes with chance
// min(1, p(x)/q(x)), so x comes out that way with chance q(x) min(1, p(x)/q(x)) = min(p, q)(x).
// A rejection, of chance 1 - sum min(p, q), draws from norm(max(0, p - q)), whose mass
// sum max(0, p - q) is that same 1 - sum min(p, q). So
//     P(emit x) = min(p, q)(x) + max(0, p - q)(x) = p(x):
// min(p, q) kept, max(0, p - q) redrawn, and their sum is p (notes/math.md, section 1).
int accept_reject(SpecBuffers *b, int k, int allow_bonus, Rng *rng) {
    int V = b->V, *candidates = b->candidates, *accepted = b->accepted;
    const float *q_draft = b->q_draft, *p_target = b->p_target; // (K, V) and (K+1, V)
    double *u = b->u; // (K) the uniform that decides each candidate
    b->rejected_at = -1;
    for (int i = 0; i < k; i++) {
        int tok = candidates[i];
        double q = q_draft[(size_t)i * V + tok]; // > 0: tok was sampled from this row
        double p = p_target[(size_t)i * V + tok]; // the target's chance of the same token
        u[i] = rng_uniform(rng); // kept in u, so the trace can print it
        if (u[i] < fmin(1.0, p / q)) {
            accepted[i] = tok; // the target agrees often enough: keep the draft's token
            continue;
        }
        // rejected: this position is drawn again from the mass the draft under-covered
        b->rejected_at = i;
        accepted[i] = sample_residual(p_target + (size_t)i * V, q_draft + (size_t)i * V, V,
                                      b->residual, rng_uniform(rng)); // the resample's own uniform
        return i + 1; // later candidates were drafted after a wrong token: discard them
    }
    if (!allow_bonus) // the last round: a bonus would overshoot n_new
        return k;
    // every candidate passed: p_k came free with the verify pass, so take one more token
    accepted[k] = sample_from(p_target + (size_t)k * V, V, rng_uniform(rng));
    return k + 1;
}

// Lowers a model's kv_len to keep (<= kv_len). The dropped positions are zeroed, so a
// debugger shows them gone; the next pass would overwrite them anyway.
static void roll_back_cache(GPT *g, int keep) {
    RunState *s = &g->state;
    const Config *c = &g->config;
    size_t C = c->n_embd, S = c->block_size, dropped = (size_t)(s->kv_len - keep);
    for (int l = 0; l < c->n_layer; l++) {
        // rows keep .. kv_len-1 of this layer's keys and values: the rejected guesses
        memset(s->key_cache + (l * S + keep) * C, 0, dropped * C * sizeof(float));
        memset(s->value_cache + (l * S + keep) * C, 0, dropped * C * sizeof(float));
    }
    s->kv_len = keep; // the whole rollback: the next pass writes from here
}

// Phase 4, TRIM: keeps cache_len_before + num_accepted positions: current_token and
// every token the round emitted but the last. num_accepted = len(accepted)
// counts that last token too (a resample, a bonus, or in a final round without bonus
// the last accepted draft), and it is NOT cached: it becomes the next current_token.
// THE INVARIANT, between rounds: the target's cache holds exactly the tokens before
// current_token, never current_token itself. A model draft's cache holds a prefix of those
// same tokens, never more: it may lag (gpt_draft_tokens), and its next pass catches up.
// draft is the model draft (NULL for a table or lookup). Drafting k >= 1, it ran current and
// every guess but the last, so it keeps the same positions; after a bonus it holds one fewer
// (it never ran the last guess), and draft_tokens catches it up in the next round.
void trim_kv_cache(GPT *g, GPT *draft, int num_accepted, int cache_len_before) {
    // the blog slices k[:, :keep]; here the cache is a fixed array, so lower kv_len
    int keep = cache_len_before + num_accepted;
    roll_back_cache(g, keep);
    if (draft && draft->state.kv_len > keep) roll_back_cache(draft, keep);
}

// ----------------------------------------------------------------------------
// The loop: speculative decoding, and plain decoding, the baseline it must match

// The kinds of target pass, as the stats count and time them (Stats.pass).
typedef enum {
    PASS_PREFILL, // the prompt's last S tokens from position 0: each decoder, once
    PASS_REFILL,  // plain decoding, cache full: the last S/2 tokens again, from position 0
    PASS_FOLDED,  // speculative, cache full: those S/2 tokens, then the guesses: one pass
    PASS_VERIFY,  // speculative: current_token and k >= 1 guesses on top of the cache
    PASS_STEP,    // one token on top of the cache: plain decoding's steps; speculative
                  // rounds with no guess (the cache's last slot, or lookup found nothing)
    N_PASS_KINDS
} PassKind;
// A generation's counters (passes by kind and size, rounds, time): after the loop, with
// the functions that count into them and print them.
typedef struct Stats Stats;

// How a generation is run: shared by generate and speculative_generate.
typedef struct Output Output; // the streamed text and its colours: plumbing, after the loop
typedef struct {
    int n_new;          // tokens to generate after the prompt: the blog's max_new_tokens
    int K;              // draft length, e.g. 4: the blog's k
    Sampler sampler;    // the served distribution: temperature (0 = greedy), top-k, top-p
    int trace;          // print the prefill and every speculative round on stderr
    const Vocab *vocab; // for the trace and the output
    Output *out;        // where the text streams as it is made, or NULL (see Output)
    Rng *rng;           // the random stream: every draw of the generation, in order
    Stats *st;          // the generation's counters (passes, rounds, times)
} DecodeOptions;

// Wall-clock seconds from a monotonic clock (never jumps with the date).
static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The counting lives after the loop, with Stats ("The loop's plumbing").
static void count_pass(Stats *st, PassKind kind, int T, double seconds);
static void count_round(Stats *st, const Draft *d, const SpecBuffers *b, int n,
                        double draft_seconds, double verify_seconds);
static void finish_stats(Stats *st, long emitted, double t0);

// The output's helpers live after the loop, with Output: they stream the new tokens of a
// round (b), or one sampled from a target pass (b NULL), to stdout, coloured by where each
// came from, and say when stdout failed, so that decoding stops.
static void show_round(const DecodeOptions *o, const SpecBuffers *b, const int *seq, int from,
                       int n);
static int output_failed(const DecodeOptions *o);
// The trace printers live in the trace-and-stats section below.
static void trace_prefill(const DecodeOptions *o, int n_tokens, int sampled);
static void trace_round(const DecodeOptions *o, const Draft *d, const SpecBuffers *b, int n_out,
                        int cache_after);
// A model draft's cache restarts with the target's: after the loop, with that draft.
static void restart_draft_cache(Draft *d);

// The context rule, one for both decoders, and where it differs from the lecture. The
// lecture's generate crops the text to its last S tokens at every step and runs them all
// again; specdec keeps a KV cache of at most S positions instead. The prefill runs the
// prompt's last S tokens from position 0. When the cache is full, the window restarts: the
// last S/2 tokens, current_token last, run again from position 0 (a refill), so that cost
// comes once per S/2 tokens, not at every token. Both decoders restart at the same point of
// the text, so each token is predicted from the same context in both: "exact" means the
// same text as specdec's own plain decoding (greedy), or the same distribution (sampled),
// under this rule. The lecture's cropping gives other contexts, and so other text.
// prefill empties the cache, runs the last `keep` tokens of seq (all, if fewer) and returns
// the logits row of the current token, seq[n_seq-1]; kind: PASS_PREFILL or PASS_REFILL
// (plain decoding's refill; speculative decoding folds it into a round's verify pass).
static const float *prefill(GPT *g, const int *seq, int n_seq, int keep, PassKind kind,
                            Stats *st) {
    int n = n_seq < keep ? n_seq : keep; // a short prompt runs whole
    g->state.kv_len = 0; // positions restart at 0
    double t0 = now_seconds();
    const float *logits = forward(g, seq + n_seq - n, n, NULL);
    count_pass(st, kind, n, now_seconds() - t0);
    return logits + (size_t)(n - 1) * g->config.vocab_size; // the blog's logits[0, -1, :]
}

// The prompt as tokens; an empty prompt starts from token 0 ('\n' in Tiny
// Shakespeare), as the lecture's generate starts from torch.zeros((1, 1)).
// seq must have room for max(prompt->n, 1) + n_new tokens. Returns the sequence length.
static int start_sequence(int *seq, const Tokens *prompt) {
    if (prompt->n == 0) { // a round needs a current token to start from
        seq[0] = 0;
        return 1;
    }
    memcpy(seq, prompt->tok, (size_t)prompt->n * sizeof(int));
    return prompt->n;
}

// Plain autoregressive decoding with the same cache: one target pass per token.
// seq receives the prompt (or the start token) and then o->n_new generated tokens;
// p: (V) holds each step's target distribution. This is the baseline speculation must match.
void generate(GPT *g, const Tokens *prompt, const DecodeOptions *o, int *seq, float *p) {
    int V = g->config.vocab_size, S = g->config.block_size, n_new = o->n_new;
    double t0 = now_seconds();
    // seq[first..] is the generated part; seq[n_seq-1] is always the current token
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, PASS_PREFILL, o->st);
    while (n_seq - first < n_new && !output_failed(o)) {
        // sample the next token from the logits of the current token
        seq[n_seq] = sample_served(logits, V, &o->sampler, p, o->rng);
        show_round(o, NULL, seq, n_seq, 1);
        n_seq++;
        if (n_seq - first == n_new) break; // the last token needs no pass
        // feed it back: a refill when the cache is full, else one token on top of the cache
        if (g->state.kv_len == S) {
            logits = prefill(g, seq, n_seq, S / 2, PASS_REFILL, o->st);
            continue;
        }
        double t1 = now_seconds(); // every pass is timed: the stats say where the time went
        logits = forward(g, &seq[n_seq - 1], 1, NULL);
        count_pass(o->st, PASS_STEP, 1, now_seconds() - t1);
    }
    finish_stats(o->st, n_seq - first, t0);
}

// The context rule at a round's start: when the cache is full (kv_len == S), the window
// restarts from the last S/2 tokens, current_token last, where plain decoding refills too.
// Empties the target's cache and a model draft's, and returns how many tokens before
// current_token the round's verify pass must run again: S/2 - 1.
static int restart_cache(GPT *g, Draft *d) {
    g->state.kv_len = 0; // the pass writes the window from position 0
    restart_draft_cache(d); // the draft restarts at the same index: its first pass catches up
    return g->config.block_size / 2 - 1;
}

// One speculative round on top of the cache: the four phases, the blog's loop body. The
// last of text is current_token, and remaining tokens are still wanted: k <= min(K, remaining).
// Returns how many tokens it emits (1 .. k+1), in b->accepted; the loop appends them to seq.
static int speculative_round(GPT *g, Draft *d, SpecBuffers *b, const Tokens *text,
                             int remaining, const DecodeOptions *o) {
    int S = g->config.block_size, k = o->K < remaining ? o->K : remaining; // as the blog clamps k
    // 0. CONTEXT: a full cache restarts, and the verify pass reruns the window: the refill
    // plain decoding makes at this point, folded into the round instead of a pass of its own
    b->restarted = g->state.kv_len == S;
    b->lag = b->restarted ? restart_cache(g, d) : 0;
    int cache_len = b->cache_len = g->state.kv_len + b->lag; // the blog's cache_len
    // the guesses take positions cache_len+1 .. cache_len+k, inside the cache; at its last
    // position none fits, and the round is the one-token step plain decoding takes there
    if (k > S - 1 - cache_len) k = S - 1 - cache_len;
    b->asked = k;
    GPT *draft_model = d->kind == DRAFT_GPT ? &d->model : NULL; // a second cache to keep
    b->draft_lag = draft_model ? cache_len - draft_model->state.kv_len : 0; // for the trace
    double t0 = now_seconds();
    // 1. DRAFT: k guesses, or fewer from lookup or --draft-p-min
    k = draft_tokens(d, text, k, &o->sampler, o->rng, b);
    b->drafted = k;
    double t1 = now_seconds();
    // 2. VERIFY: one target pass over current_token and the k guesses (after the lag tokens)
    verify_candidates(g, text, k, &o->sampler, b);
    double t2 = now_seconds();
    int allow_bonus = k < remaining; // never emit more than was asked for
    // 3. ACCEPT/REJECT: n tokens, the accepted guesses, then a resample or a bonus
    int n = accept_reject(b, k, allow_bonus, o->rng);
    // 4. TRIM: the target's cache to cache_len + n (the draft's: at most that)
    trim_kv_cache(g, draft_model, n, cache_len);
    // count and show what happened
    count_round(o->st, d, b, n, t1 - t0, t2 - t1);
    if (o->trace) trace_round(o, d, b, n, g->state.kv_len);
    return n;
}

// Speculative decoding: prefill, then rounds until o->n_new tokens exist, each drafting
// k = min(K, tokens still needed) guesses, or fewer where the cache has less room.
// seq: room for max(prompt->n, 1) + n_new.
void speculative_generate(GPT *g, Draft *d, SpecBuffers *b, const Tokens *prompt,
                          const DecodeOptions *o, int *seq) {
    int V = g->config.vocab_size, S = g->config.block_size, n_new = o->n_new;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    // 1. prefill, and the first token sampled straight from it (if any is wanted at all);
    // a model draft runs the same window in its first pass (restart_draft_cache)
    const float *logits = prefill(g, seq, n_seq, S, PASS_PREFILL, o->st);
    restart_draft_cache(d);
    if (n_new > 0) {
        seq[n_seq] = sample_served(logits, V, &o->sampler, b->p_next, o->rng);
        if (o->trace) trace_prefill(o, g->state.kv_len, seq[n_seq]);
        show_round(o, NULL, seq, n_seq, 1);
        n_seq++;
    }
    // 2. the speculative loop; seq[n_seq-1] is the current token, never in the cache
    while (n_seq - first < n_new && !output_failed(o)) {
        int remaining = n_new - (n_seq - first); // >= 1: the loop's condition
        Tokens text = {seq, n_seq}; // the text so far: current_token last
        int n = speculative_round(g, d, b, &text, remaining, o);
        // the round's tokens extend the text; the last is the next current_token
        memcpy(seq + n_seq, b->accepted, (size_t)n * sizeof(int));
        show_round(o, b, seq, n_seq, n);
        n_seq += n;
    }
    finish_stats(o->st, n_seq - first, t0);
}

// ----------------------------------------------------------------------------
// Beyond the blog: top-k and top-p, the rest of the served distribution
//
// The blog samples from softmax(logits) at a temperature. Serving engines also cut the
// row: top-k keeps the k most likely tokens, top-p the fewest whose mass reaches p. Both
// sides must be cut alike, and the q in the ratio must be the row the guess was drawn
// from (notes/math.md, section 8); served_probs and bigram_served_probs call this.

// Keeps the most likely entries of a probability row and renormalises it: first the top_k
// (if on), then the fewest whose mass reaches top_p (if on). Ties go to the lower index,
// in the target and the draft alike. Nothing changes at t = 0 (a one-hot row keeps its 1).
void apply_top_k_top_p(float *p, int V, const Sampler *s) {
    int use_k = s->top_k > 0 && s->top_k < V;
    int use_p = s->top_p > 0.0f && s->top_p < 1.0f;
    if (s->temperature == 0.0f || (!use_k && !use_p)) return; // nothing to filter
    // order[r] = the index of the r-th most likely token; a rank by counting, no sort
    int order[256]; // V <= 256 (validate_config)
    for (int i = 0; i < V; i++) {
        int rank = 0; // how many tokens come before i: more likely, or as likely and lower
        for (int j = 0; j < V; j++)
            rank += p[j] > p[i] || (p[j] == p[i] && j < i);
        order[rank] = i;
    }
    // top-k's cut first; top-p then counts mass within it, as if top-k had renormalised
    int keep = use_k ? s->top_k : V;
    double top_k_mass = 0.0;
    for (int r = 0; r < keep; r++) top_k_mass += p[order[r]];
    // walk down the ranking until top-p's share of that mass is reached
    double mass = 0.0; // of the tokens kept so far
    int kept = 0;
    while (kept < keep) {
        mass += p[order[kept]];
        kept++;
        if (use_p && mass >= s->top_p * top_k_mass) break; // enough mass: stop here
    }
    // zero everything past the cut, then rescale the kept tokens to sum to 1
    for (int r = kept; r < V; r++) p[order[r]] = 0.0f;
    for (int r = 0; r < kept; r++) p[order[r]] = (float)(p[order[r]] / mass);
}

// ----------------------------------------------------------------------------
// Beyond the blog: a small GPT as the draft, and prompt lookup
//
// The blog drafts with a bigram table. The papers (Leviathan et al. 2023, Chen et al. 2023)
// draft with a smaller transformer of the target's family, and serving engines also offer
// prompt lookup, which copies what followed the last earlier occurrence of the text's
// ending. Accept/reject, verify and trim do not care which: any q is exact (notes/math.md).

// Prompt lookup tries the longest n-gram first: the text's last n tokens, n from
// LOOKUP_MAX_N down to LOOKUP_MIN_N. Both are choices: a longer match predicts what follows
// better, a shorter one is found more often. It searches the last LOOKUP_WINDOW tokens
// only, so that a round's search costs the same however long the text grows.
#define LOOKUP_MAX_N 8
#define LOOKUP_MIN_N 2
#define LOOKUP_WINDOW 1024

// Prompt lookup: finds the most recent earlier occurrence of the last n tokens of seq
// (prompt and generated text together), longest n first, and proposes up to k of the
// tokens that followed it, each with a one-hot q, into b. Returns how many: 0 if nothing matched.
static int lookup_draft_tokens(Draft *d, const Tokens *text, int k, SpecBuffers *b) {
    for (int n = LOOKUP_MAX_N; n >= LOOKUP_MIN_N; n--) {
        if (n > text->n - 1) continue; // too short a text for an earlier occurrence this long
        const int *tail = text->tok + text->n - n; // the last n tokens, current_token last
        // end = the index of an earlier occurrence's last token, newest first; it must have
        // a next token to propose, so end <= text->n - 2
        for (int end = text->n - 2; end >= n - 1 && end >= text->n - 1 - LOOKUP_WINDOW; end--) {
            if (memcmp(text->tok + end - n + 1, tail, (size_t)n * sizeof(int)) != 0) continue;
            // a match: propose what followed it, as far as the text goes
            d->match_n = n; // for the trace
            d->match_end = end;
            int m = 0;
            while (m < k && end + 1 + m < text->n) {
                b->candidates[m] = text->tok[end + 1 + m];
                one_hot(b->q_draft + (size_t)m * d->V, d->V, b->candidates[m]); // q = 1: certain
                m++;
            }
            return m;
        }
    }
    return 0; // no earlier occurrence of even the shortest n-gram
}

// The model draft's guesses: up to k passes of the draft model on its own KV cache, one
// guess each, every q served like the target's row. Between rounds its cache holds a prefix
// of the target's (the tokens before current_token), `lag` tokens short: 1 after a round that
// ended in a bonus (the draft never ran the last guess), a whole window after the prefill or
// a restart of a full cache emptied it, else 0. The first pass runs those lag tokens and
// current_token together: one rule for all three cases, and one pass of lag+1 tokens costs
// less than lag+1 passes (c(T), notes/speed.md). A guess the model gives less than d->p_min
// ends the round's drafting (--draft-p-min). Returns how many guesses it made, in b.
static int gpt_draft_tokens(Draft *d, const Tokens *text, int k, const Sampler *s, Rng *rng,
                            SpecBuffers *b) {
    GPT *m = &d->model;
    int V = m->config.vocab_size, cache_len = b->cache_len, *candidates = b->candidates;
    int lag = cache_len - m->state.kv_len; // tokens before current_token it has not run
    if (lag < 0 || lag >= text->n) { // trim_kv_cache keeps it at or behind the target's
        fprintf(stderr, "specdec: internal error: the draft's cache (%d) is out of step "
                "with the target's (%d)\n", m->state.kv_len, cache_len);
        abort();
    }
    const int *next = text->tok + text->n - 1 - lag; // the first pass: lag tokens, then current
    int n = lag + 1;
    for (int i = 0; i < k; i++) {
        const float *logits = forward(m, next, n, NULL); // one draft pass; its cache grows by n
        const float *last = logits + (size_t)(n - 1) * V; // the row after next
        // served like the target's row; one uniform per guess
        candidates[i] = sample_served(last, V, s, b->q_draft + (size_t)i * V, rng);
        float own[256]; // the model's own row: softmax(logits) at t = 1, before any filter
        tempered_softmax(own, last, V, 1.0f);
        if (own[candidates[i]] < d->p_min) // --draft-p-min: unsure, so stop after this guess
            return i + 1;
        next = &candidates[i]; // each later pass runs the previous guess alone
        n = 1;
    }
    return k;
}

// Empties the model draft's cache whenever the target's is filled again from position 0
// (the prefill, and the refill of a full cache: "The loop"): its next pass catches up on
// the same window, so both caches restart at the same sequence index.
static void restart_draft_cache(Draft *d) {
    if (d->kind == DRAFT_GPT) d->model.state.kv_len = 0;
}

// ----------------------------------------------------------------------------
// Tokenizer: one token per byte that occurs in the corpus (plumbing)

// The character vocabulary: sorted distinct bytes; id[b] = -1 if b is not in it.
struct Vocab {
    int size;                 // V
    unsigned char chars[256]; // chars[i] = byte of token i, ascending
    int id[256];              // id[byte] = token, or -1
};

// Builds the vocabulary of the sorted distinct bytes of text (as the lecture does).
void build_vocab(Vocab *v, const unsigned char *text, size_t n) {
    // mark the bytes present, then number them in byte order: sorted(set(text))
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++) seen[text[i]] = 1;
    v->size = 0;
    for (int b = 0; b < 256; b++) {
        v->id[b] = -1;
        if (!seen[b]) continue; // not in the text: no token
        v->id[b] = v->size; // the next token number, so tokens go in byte order
        v->chars[v->size] = (unsigned char)b;
        v->size++;
    }
}

// Encodes n bytes into tokens; returns the index of the first byte not in the
// vocabulary, or -1 when every byte encoded.
long encode(const Vocab *v, const unsigned char *text, size_t n, int *tokens) {
    for (size_t i = 0; i < n; i++) {
        if (v->id[text[i]] < 0) return (long)i; // stop at the first unknown byte: callers name it
        tokens[i] = v->id[text[i]];
    }
    return -1;
}

// Decodes one token to its byte.
unsigned char decode(const Vocab *v, int token) { return v->chars[token]; }

// ----------------------------------------------------------------------------
// The loop's plumbing: the round's buffers, and the counters of a generation

// Frees each of the n pointers in owned (NULLs are fine): one call per struct's buffers.
static void free_all(void *const *owned, size_t n) {
    for (size_t i = 0; i < n; i++) free(owned[i]);
}

// Allocates a round's buffers for drafts of up to K tokens and a target of block_size S.
int build_spec_buffers(SpecBuffers *b, int K, int V, int S) {
    *b = (SpecBuffers){.K = K, .V = V, .rejected_at = -1}; // rows stay V wide for any k <= K
    // K rows for the guesses, K+1 for the verify pass and the output: the bonus needs one more
    b->candidates = calloc((size_t)K, sizeof(int));
    b->q_draft = calloc((size_t)K * V, sizeof(float));
    b->all_tokens = calloc((size_t)(S > K + 1 ? S : K + 1), sizeof(int)); // a restart: S
    b->p_target = calloc((size_t)(K + 1) * V, sizeof(float));
    b->u = calloc((size_t)K, sizeof(double));
    b->residual = calloc((size_t)V, sizeof(float));
    b->accepted = calloc((size_t)K + 1, sizeof(int));
    b->p_next = calloc((size_t)V, sizeof(float));
    return (b->candidates && b->q_draft && b->all_tokens && b->p_target && b->u &&
            b->residual && b->accepted && b->p_next) ? 0 : -1;
}

// Frees what build_spec_buffers allocated.
void free_spec_buffers(SpecBuffers *b) {
    void *owned[] = {b->candidates, b->q_draft, b->all_tokens, b->p_target, b->u,
                     b->residual, b->accepted, b->p_next};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    memset(b, 0, sizeof(*b)); // NULLs: a second free is harmless
}

static const char *const PASS_NAME[N_PASS_KINDS] = {"prefill", "refill", "verify + refill",
                                                    "verify", "one-token step"};

// How many target passes of one kind, or one size, ran, their tokens and their wall time.
typedef struct {
    long passes, tokens; // tokens: the sum of T over those passes
    double seconds; // a verify pass's time includes its k+1 served rows
} PassTally;

// Counters of one generation; the trace-and-stats section prints them.
#define POSITIONS 16  // guesses whose acceptance is counted one by one
#define PASS_SIZES 65 // pass sizes T = 1..63 tallied one by one; the last slot pools T >= 64
struct Stats {
    long rounds;          // speculative rounds (one verify pass each)
    long drafted;         // candidates drafted, the sum of k
    long judged;          // candidates accept_reject decided on: accepted + rejected (a
                          // tree's: the positions where a node's children were tried)
    long accepted;        // candidates accepted
    double alpha_sum;     // expected_acceptance summed over the judged; alpha_sum / judged is alpha
    long resampled;       // rounds that ended in a rejection and a residual draw
    long bonus;           // rounds where all k passed and a bonus token was drawn
    long emitted;         // tokens generated
    long round_tokens;    // tokens emitted by speculative rounds
    long empty_rounds;    // rounds whose draft, asked for guesses, proposed none (lookup: no match)
    long judged_at[POSITIONS];   // judged_at[i]: rounds that judged guess i (0-based; the
    long accepted_at[POSITIONS]; // last slot pools i >= POSITIONS-1), and that accepted it
    PassTally pass[N_PASS_KINDS]; // the target's passes by kind: the cost speculation cuts
    PassTally size[PASS_SIZES];   // the same passes by their size T: size[T] (c(T), the stats)
    long draft_passes;    // forward passes of a model draft (a table or lookup makes none)
    double draft_seconds; // wall time spent drafting
    double seconds;       // wall time of the whole generation
    int tree;             // 1: the rounds drafted trees, where the chain's formulas do not hold
};

// Every forward pass of the target model, whatever its kind.
long target_passes(const Stats *s) {
    long n = 0;
    for (int i = 0; i < N_PASS_KINDS; i++) n += s->pass[i].passes;
    return n;
}

// Adds one target pass of T tokens that took `seconds` to its kind's tally and its size's.
static void count_pass(Stats *st, PassKind kind, int T, double seconds) {
    PassTally *tally[2] = {&st->pass[kind], &st->size[T < PASS_SIZES - 1 ? T : PASS_SIZES - 1]};
    for (int i = 0; i < 2; i++) {
        tally[i]->passes++;
        tally[i]->tokens += T;
        tally[i]->seconds += seconds;
    }
}

// sum_x min(p(x), q(x)) over a row: the chance that a guess drawn from q passes
// u < min(1, p/q). Its mean over the judged positions is the papers' alpha.
double expected_acceptance(const float *p, const float *q, int V) {
    double sum = 0.0;
    for (int x = 0; x < V; x++) sum += fmin(p[x], q[x]);
    return sum;
}

// Counts a round that emitted n tokens: its verify pass, its draft, what accept/reject decided.
static void count_round(Stats *st, const Draft *d, const SpecBuffers *b, int n,
                        double draft_seconds, double verify_seconds) {
    int k = b->drafted;
    PassKind kind = b->restarted ? PASS_FOLDED : k > 0 ? PASS_VERIFY : PASS_STEP;
    count_pass(st, kind, b->lag + 1 + k, verify_seconds);
    st->draft_seconds += draft_seconds;
    if (d->kind == DRAFT_GPT) st->draft_passes += k; // a model draft ran one pass per guess
    int judged = b->rejected_at >= 0 ? b->rejected_at + 1 : k; // up to and including a rejected one
    for (int i = 0; i < judged; i++) {
        st->alpha_sum += expected_acceptance(b->p_target + (size_t)i * b->V,
                                             b->q_draft + (size_t)i * b->V, b->V);
        int slot = i < POSITIONS ? i : POSITIONS - 1; // acceptance by position
        st->judged_at[slot]++;
        st->accepted_at[slot] += i != b->rejected_at;
    }
    if (b->rejected_at >= 0) st->resampled++;
    if (n == k + 1 && k > 0) st->bonus++; // k+1 tokens only when all k passed
    if (k == 0 && b->asked > 0) st->empty_rounds++; // lookup found nothing: a plain step
    st->rounds++;
    st->drafted += k;
    st->judged += judged;
    st->accepted += b->rejected_at >= 0 ? b->rejected_at : k;
    st->round_tokens += n;
}

// Closes a generation's counters: the tokens it emitted and its wall time since t0.
static void finish_stats(Stats *st, long emitted, double t0) {
    st->emitted = emitted;
    st->seconds = now_seconds() - t0;
}

// ----------------------------------------------------------------------------
// Output: the text on stdout as it is made, coloured by where each token came from

// Where an emitted token came from; --color shows it on the terminal.
typedef enum {
    FROM_TARGET,    // sampled from a target pass: prefill, plain decoding, or a round with no guess
    FROM_ACCEPTED,  // a draft token that passed u < min(1, p/q)
    FROM_RESAMPLED, // drawn from norm(max(0, p - q)) after a rejection
    FROM_BONUS,     // drawn from p_target[k] after all k drafts passed
    N_SOURCES
} TokenSource;

// Where and how a generation's text streams (DecodeOptions.out).
struct Output {
    FILE *stream;          // where each token is written as it is decided, or NULL
    unsigned char *source; // (length of seq) NULL, or source[i]: seq[i]'s TokenSource
    int color;             // write with one ANSI colour per TokenSource (needs source)
};

// ANSI colours of the token sources, and their names for the legend.
static const char *const SOURCE_COLOR[N_SOURCES] = {"\033[35m", "\033[32m", "\033[33m", "\033[36m"};
static const char *const SOURCE_NAME[N_SOURCES] = {"target sample", "accepted draft",
                                                   "resampled", "bonus"};

// Writes n tokens as text; with color, each in its source's colour (a newline uncoloured).
void write_text(FILE *f, const Vocab *v, const int *toks, const unsigned char *source, int n,
                int color) {
    int current = -1; // the colour now in force, -1 for none
    for (int i = 0; i < n; i++) {
        unsigned char ch = decode(v, toks[i]);
        int want = color && source && ch != '\n' ? source[i] : -1; // newlines stay uncoloured
        if (want != current) fputs(want >= 0 ? SOURCE_COLOR[want] : "\033[0m", f);
        current = want;
        fputc(ch, f);
    }
    if (current >= 0) fputs("\033[0m", f);
}

// Records where seq[from .. from+n-1] came from, and writes them to the stream, if any.
static void show_tokens(const DecodeOptions *o, const int *seq, int from, int n, TokenSource src) {
    Output *out = o->out;
    if (!out) return; // nobody asked: a test, the bench, the self-test
    if (out->source) memset(out->source + from, src, (size_t)n);
    if (!out->stream || !o->vocab) return;
    write_text(out->stream, o->vocab, seq + from, out->source ? out->source + from : NULL, n,
               out->color);
    fflush(out->stream); // each token shows as it is decided
}

// Shows the n tokens a round b (NULL: one target sample) appended at seq[from], by source.
static void show_round(const DecodeOptions *o, const SpecBuffers *b, const int *seq, int from,
                       int n) {
    int n_acc = 0; // the drafts that passed: none, for a sample or a round with no guess
    TokenSource last = FROM_TARGET; // where the last token came from
    if (b && b->drafted > 0) {
        n_acc = b->rejected_at >= 0 ? b->rejected_at : b->drafted;
        last = b->rejected_at >= 0 ? FROM_RESAMPLED : FROM_BONUS;
    }
    show_tokens(o, seq, from, n_acc, FROM_ACCEPTED);
    if (n > n_acc) show_tokens(o, seq, from + n_acc, 1, last); // the round's last token
}

// True once the stream failed (a closed pipe, a full disk): the loops stop there.
static int output_failed(const DecodeOptions *o) {
    return o->out && o->out->stream && ferror(o->out->stream);
}

// ----------------------------------------------------------------------------
// Trace and stats (stderr)

// Writes a byte so that it can be seen: '\n', ' ', 'a', '\x07'.
void visible_char(char out[8], unsigned char b) {
    if (b == '\n' || b == '\t' || b == '\'' || b == '\\') // a backslash escape, as C writes it
        snprintf(out, 8, "'\\%c'", b == '\n' ? 'n' : b == '\t' ? 't' : b);
    else if (isprint(b)) snprintf(out, 8, "'%c'", b);
    else snprintf(out, 8, "'\\x%02x'", b);
}

// Prints the prefill: the prompt's pass, and the first token, sampled from its last row.
static void trace_prefill(const DecodeOptions *o, int n_tokens, int sampled) {
    char vis[8];
    visible_char(vis, decode(o->vocab, sampled));
    fprintf(stderr, "PREFILL  one target pass over %d token%s at positions 0..%d -> cache_len %d; "
            "sampled %s, the new current_token\n", n_tokens, n_tokens == 1 ? "" : "s",
            n_tokens - 1, n_tokens, vis);
}

// Prints a round's DRAFT lines: the bigram's chain, the model's passes or lookup's match.
static void trace_draft(const Draft *d, const Vocab *v, const SpecBuffers *b,
                        const char *current_vis) {
    int k = b->drafted, cache_before = b->cache_len;
    char vis[8];
    if (d->kind == DRAFT_BIGRAM) fprintf(stderr, "  DRAFT   %s", current_vis); // current -> c0 ..
    if (d->kind == DRAFT_LOOKUP && k == 0)
        fprintf(stderr, "  DRAFT   lookup: no earlier occurrence of the last %d tokens: "
                "nothing to guess, so the verify pass is a plain step", LOOKUP_MIN_N);
    if (d->kind == DRAFT_LOOKUP && k > 0)
        fprintf(stderr, "  DRAFT   lookup: the last %d tokens occurred before, ending at "
                "index %d; copy what followed", d->match_n, d->match_end);
    if (d->kind == DRAFT_GPT)
        fprintf(stderr, "  DRAFT   %d pass%s of the draft model on its own cache (draft cache_len "
                "%d -> %d)", k, k == 1 ? "" : "es", cache_before - b->draft_lag, cache_before + k);
    for (int i = 0; i < k; i++) {
        if (d->kind == DRAFT_GPT) { // one pass per guess; the first catches up, if it lags
            int pos0 = i == 0 ? cache_before - b->draft_lag : cache_before + i;
            int catch_up = pos0 < cache_before + i; // the first pass, when the draft lagged
            fprintf(stderr, "\n    pass %d at position%s ", i + 1, catch_up ? "s" : "");
            if (catch_up) fprintf(stderr, "%d..", pos0); // the tokens it caught up on, too
            fprintf(stderr, "%d", cache_before + i);
        }
        visible_char(vis, decode(v, b->candidates[i]));
        fprintf(stderr, " -> %s (q=%.3f)", vis, b->q_draft[(size_t)i * b->V + b->candidates[i]]);
    }
    fputc('\n', stderr);
}

// Prints one round the way the blog's worked example reads, with real numbers.
static void trace_round(const DecodeOptions *o, const Draft *d, const SpecBuffers *b, int n_out,
                        int cache_after) {
    const Vocab *v = o->vocab;
    int V = b->V, k = b->drafted, lag = b->lag, cache_before = b->cache_len;
    char current_vis[8], vis[8]; // current_token as printed: all_tokens[lag], after the lag
    visible_char(current_vis, decode(v, b->all_tokens[lag]));
    fprintf(stderr, "\nround %ld: current_token %s, ", o->st->rounds, current_vis); // this one too
    if (b->restarted) // the cache was full: this round's pass carries the refill
        fprintf(stderr, "cache full (cache_len = block_size), k %d\n  RESTART the window restarts "
                "from the last %d tokens, where plain decoding refills: the verify pass reruns the "
                "%d before current_token first\n", k, lag + 1, lag);
    else fprintf(stderr, "cache_len %d, k %d\n", cache_before, k);
    if (b->asked == 0) // current_token takes the last position: no room for a guess
        fprintf(stderr, "  DRAFT   none: current_token takes the cache's last position, and "
                "a guess would need the next\n");
    else trace_draft(d, v, b, current_vis);
    if (k < b->asked && d->kind != DRAFT_LOOKUP) // --draft-p-min stopped the draft early
        fprintf(stderr, "  (the draft stopped after %d of %d guesses: it gave guess %d less "
                "than --draft-p-min %g)\n", k, b->asked, k, d->p_min);
    fprintf(stderr, "  VERIFY  one target pass over %d token%s at positions %d..%d", lag + k + 1,
            lag + k ? "s" : "", cache_before - lag, cache_before + k);
    if (lag > 0) // what the pass held: the window again, then the round's own tokens
        fprintf(stderr, ": %d rerun, current_token, %d guess%s", lag, k, k == 1 ? "" : "es");
    fputc('\n', stderr);
    // ACCEPT/REJECT: one line per candidate that was checked
    int checked = b->rejected_at >= 0 ? b->rejected_at + 1 : k; // count_round's judged
    if (checked > 0) fprintf(stderr, "  ACCEPT/REJECT (accept when u < min(1, p/q))\n");
    for (int i = 0; i < checked; i++) {
        int c = b->candidates[i];
        double p = b->p_target[(size_t)i * V + c], q = b->q_draft[(size_t)i * V + c]; // as judged
        visible_char(vis, decode(v, c));
        fprintf(stderr, "    %-6s p=%.3f q=%.3f p/q=%.3f min(1,p/q)=%.3f u=%.3f -> %s\n", vis, p, q,
                p / q, fmin(1.0, p / q), b->u[i], i != b->rejected_at ? "ACCEPT" : "REJECT");
    }
    // how the round ended, with its last token: a resample at the rejection, a bonus, or
    // neither (a last round); that token is not cached: it is the next current_token
    int left = k - b->rejected_at - 1; // drafted after a rejected one
    visible_char(vis, decode(v, b->accepted[n_out - 1]));
    if (b->rejected_at >= 0)
        fprintf(stderr, "    resample from norm(max(0, p-q)) -> %s; discard the "
                "remaining %d candidate%s\n", vis, left, left == 1 ? "" : "s");
    else if (k == 0) // nothing was drafted
        fprintf(stderr, "  STEP    one token from p_target[0] -> %s, as plain decoding "
                "samples it\n", vis);
    else if (n_out == k + 1)
        fprintf(stderr, "  BONUS   all %d passed: one more token from p_target[%d] -> %s\n",
                k, k, vis);
    else // a last round, which allows no bonus
        fprintf(stderr, "  (all %d passed; no bonus: the round already gives every token "
                "still needed)\n", k);
    // RESULT and TRIM: what the round emitted, and the cache rolled back to match it
    fprintf(stderr, "  RESULT  emitted \"");
    for (int i = 0; i < n_out; i++) { // the text, with '\n' spelled out
        unsigned char ch = decode(v, b->accepted[i]);
        if (ch == '\n') fputs("\\n", stderr);
        else fputc(isprint(ch) ? ch : '?', stderr);
    }
    fprintf(stderr, "\": %d token%s from 1 target pass\n", n_out, n_out == 1 ? "" : "s");
    int kept = cache_after - cache_before - 1; // emitted tokens cached: all but the last
    int cache_verified = cache_before + k + 1; // the verify pass added k+1 positions
    int dropped = cache_verified - cache_after;
    fprintf(stderr, "  TRIM    cache_len %d -> %d ", cache_verified, cache_after);
    if (b->rejected_at < 0 && n_out == k && k > 0) // a last round: all k passed, no bonus
        fprintf(stderr, "(kept current + %d of the %d accepted; the last one, as every "
                "round's last token, is not cached); ", kept, k);
    else fprintf(stderr, "(kept current + %d accepted, dropped %d); ", kept, dropped);
    if (d->kind == DRAFT_GPT) // the draft's cache: the same positions, or one short after a bonus
        fprintf(stderr, "draft cache_len %d -> %d; ", k > 0 ? cache_before + k : cache_before -
                b->draft_lag, d->model.state.kv_len); // k = 0: the draft ran no pass
    fprintf(stderr, "%s is the new current_token\n", vis);
}

// a / b, or 0 when there is nothing to divide by: no round, no guess, no time measured.
static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The papers' alpha: the mean of sum min(p, q) over the judged candidates; steadier than
// accepted / judged, which estimates it by counting outcomes (notes/math.md).
double stats_alpha(const Stats *s) { return ratio(s->alpha_sum, s->judged); }

// Tokens a verify pass gives at draft length K if each guess passes with chance alpha.
double expected_tokens_per_pass(double alpha, int K) {
    return alpha < 1.0 ? (1.0 - pow(alpha, K + 1)) / (1.0 - alpha) : K + 1.0; // 0/0 at alpha 1
}

// Prints where a generation's wall time went: each kind of target pass, drafting, the rest.
static void print_time_table(const Stats *s, int speculative) {
    double wall = s->seconds > 0 ? s->seconds : 1.0, rest = s->seconds - s->draft_seconds;
    fprintf(stderr, "  where the time went     passes   tokens         ms   share\n");
    for (int i = 0; i < N_PASS_KINDS; i++) {
        const PassTally *t = &s->pass[i];
        rest -= t->seconds;
        if (t->passes == 0) continue; // a kind this decoder did not run
        fprintf(stderr, "    %-19s %7ld  %7ld  %9.3f  %5.1f%%\n", PASS_NAME[i], t->passes,
                t->tokens, 1e3 * t->seconds, 100.0 * t->seconds / wall);
    }
    if (speculative) // a model draft's passes; a table or lookup drafts without one
        fprintf(stderr, "    %-19s %7ld  %7ld  %9.3f  %5.1f%%   (draft passes, guesses)\n",
                "drafting", s->draft_passes, s->drafted, 1e3 * s->draft_seconds,
                100.0 * s->draft_seconds / wall);
    fprintf(stderr, "    %-19s %7s  %7s  %9.3f  %5.1f%%   (sampling, accept/reject, "
            "bookkeeping)\n", "the rest", "", "", 1e3 * rest, 100.0 * rest / wall);
}

// Prints the counters of one generation, one per line, on stderr.
void print_stats(const char *title, const Stats *s, int speculative, int K) {
    fprintf(stderr, "\n%s\n  tokens emitted          %ld\n", title, s->emitted);
    if (speculative) { // speculation's own counters: how much was guessed, kept and paid for
        double alpha = stats_alpha(s);
        fprintf(stderr, "  rounds                  %ld\n", s->rounds);
        fprintf(stderr, "  drafted                 %ld   (%.2f a round; judged %ld: %s)\n",
                s->drafted, ratio(s->drafted, s->rounds), s->judged,
                s->tree ? "the positions where a node's children were tried"
                        : "the rest followed a rejection");
        fprintf(stderr, "  accepted                %ld   acceptance rate %.3f (accepted/%s)\n",
                s->accepted, ratio(s->accepted, s->tree ? s->judged : s->drafted),
                s->tree ? "judged: a tree drafts siblings that cannot all pass" : "drafted");
        fprintf(stderr, "  alpha                   %.3f   (expected acceptance, the mean of "
                "sum min(p, q) over the judged %s)\n", alpha, s->tree ? "positions" : "candidates");
        fprintf(stderr, "  rounds ending           %ld in a resample, %ld in a bonus\n",
                s->resampled, s->bonus);
        // vLLM's mean acceptance length: the tokens a verify pass yields, the bonus counted
        fprintf(stderr, "  tokens per verify pass  %.3f   (the mean acceptance length",
                ratio(s->round_tokens, s->rounds));
        if (!s->tree) // a chain's expected length; notes/speed.md measures a tree's
            fprintf(stderr, "; (1 - alpha^(K+1)) / (1 - alpha) at K=%d: %.3f", K,
                    expected_tokens_per_pass(alpha, K));
        fputs(")\n", stderr);
        // acceptance by position: the rate at which guess i passed among the rounds that
        // judged it, i.e. given that guesses 1 .. i-1 passed (the last slot pools the rest)
        fprintf(stderr, "  acceptance by position ");
        for (int i = 0; i < K && i < POSITIONS; i++) {
            if (s->judged_at[i] == 0) fprintf(stderr, " %d:-", i + 1); // never reached
            else fprintf(stderr, " %d:%.2f", i + 1, (double)s->accepted_at[i] / s->judged_at[i]);
        }
        fprintf(stderr, "%s   (guess i passes, given 1 .. i-1 did)\n", K > POSITIONS ? "+" : "");
        if (s->empty_rounds > 0) // only prompt lookup ever drafts nothing
            fprintf(stderr, "  rounds with no guess    %ld   (prompt lookup found no match: "
                    "a plain step)\n", s->empty_rounds);
    }
    fprintf(stderr, "  target passes           %ld\n", target_passes(s));
    print_time_table(s, speculative);
    // the wall time covers prefill to last token, refills included; also the trace and
    // the streamed text when they are on (--compare turns streaming off for both decoders)
    fprintf(stderr, "  wall time               %.3f ms   %.0f tokens/s\n", 1e3 * s->seconds,
            ratio(s->emitted, s->seconds));
}

// The speedup model with the draft's cost: E tokens a verify pass over c(K+1) + K * c_draft;
// with c(K+1) = 1 and c_draft = 0 it is the papers' count of passes.
double predicted_speedup(double alpha, int K, double c_verify, double c_draft) {
    return expected_tokens_per_pass(alpha, K) / (c_verify + K * c_draft);
}

// A token's cost, in one-token passes of `unit` seconds: kind i's in cost[i], drafting's last.
static double cost_per_token(const Stats *s, double unit, double cost[N_PASS_KINDS + 1]) {
    double n = s->emitted > 0 ? (double)s->emitted : 1.0, sum = 0.0;
    for (int i = 0; i <= N_PASS_KINDS; i++) {
        double sec = i < N_PASS_KINDS ? s->pass[i].seconds : s->draft_seconds;
        cost[i] = sec / unit / n; // each pass at its measured c(T), over the tokens
        sum += cost[i];
    }
    return sum;
}

// Prints speculative against plain: passes, time, c(T), cost per token, three speedups.
void print_comparison(const Stats *spec, const Stats *plain, int K, int greedy, int identical) {
    // ratios below 1 are what speculation buys: fewer passes, and perhaps less time
    fprintf(stderr, "\ncomparison              speculative        plain    spec/plain\n");
    fprintf(stderr, "  target passes        %11ld  %11ld  %11.3f\n", target_passes(spec),
            target_passes(plain), (double)target_passes(spec) / target_passes(plain));
    fprintf(stderr, "  wall time (ms)       %11.3f  %11.3f  %11.3f\n", 1e3 * spec->seconds,
            1e3 * plain->seconds, ratio(spec->seconds, plain->seconds));
    // the unit of cost: one one-token pass of plain decoding; c(T) = a T-token pass in it
    double unit = ratio(plain->pass[PASS_STEP].seconds, plain->pass[PASS_STEP].passes);
    if (unit == 0.0) { // no one-token step to measure by: -n 1 decodes none
        fprintf(stderr, "  (no one-token pass of plain decoding to price the others by)\n");
    } else {
        fprintf(stderr, "  c(T), a T-token pass over a one-token pass, as measured here:");
        for (int T = 1; T < PASS_SIZES; T++) {
            long n = spec->size[T].passes + plain->size[T].passes;
            if (n > 0) // the sizes either decoder ran; the last slot pools the larger ones
                fprintf(stderr, " %d%s:%.2f", T, T == PASS_SIZES - 1 ? "+" : "",
                        (spec->size[T].seconds + plain->size[T].seconds) / n / unit);
        }
        double cs[N_PASS_KINDS + 1], cp[N_PASS_KINDS + 1];
        double spec_cost = cost_per_token(spec, unit, cs), plain_cost = cost_per_token(plain, unit, cp);
        fprintf(stderr, "\n  cost per token, in one-token passes\n");
        for (int i = 0; i <= N_PASS_KINDS; i++) {
            if (cs[i] == 0.0 && cp[i] == 0.0) continue; // neither decoder spent anything here
            fprintf(stderr, "    %-19s %11.3f  %11.3f\n", i < N_PASS_KINDS ? PASS_NAME[i] :
                    "drafting", cs[i], cp[i]);
        }
        fprintf(stderr, "    %-19s %11.3f  %11.3f  %11.3f\n", "every pass", spec_cost,
                plain_cost, spec_cost / plain_cost);
        // the papers' formula: a verify pass of K+1 tokens and K guesses per round (a folded
        // pass has S/2 + k tokens, so only K >= S/2 could mix one into c(K+1))
        const PassTally *full = &spec->size[K + 1 < PASS_SIZES ? K + 1 : PASS_SIZES - 1];
        double c_verify = ratio(full->seconds, full->passes) / unit;
        double c_draft = ratio(spec->draft_seconds, spec->drafted) / unit;
        double measured = ratio(plain->seconds, spec->seconds);
        fprintf(stderr, "  speedup              %6.3fx: speculative decoding took %.3f times "
                "plain decoding's wall time\n", measured, ratio(1.0, measured));
        fprintf(stderr, "  full model           %6.3fx: a token cost %.3f one-token passes "
                "against %.3f (every pass that ran, at its c(T))\n", plain_cost / spec_cost,
                spec_cost, plain_cost);
        if (spec->tree) { // its passes hold a tree's nodes, not K+1 tokens of a chain
            fputs("  papers' formula      (a chain's: notes/speed.md measures a tree's)\n", stderr);
        } else if (c_verify == 0.0) { // c(K+1) unmeasured: no round drafted all K guesses
            fprintf(stderr, "  papers' formula      (no round drafted K guesses to price it by)\n");
        } else {
            double textbook = predicted_speedup(stats_alpha(spec), K, c_verify, c_draft);
            fprintf(stderr, "  papers' formula      %6.3fx: E/(c(K+1) + K c_draft) prices a token "
                    "at %.3f; it leaves out the prefill, the refills and the rounds the cache or "
                    "the text cut short\n", textbook, 1.0 / textbook);
        }
    }
    // only greedy decoding promises equal texts; sampling promises equal distributions
    if (greedy) // and greedy text loops: the likeliest character, again and again
        fprintf(stderr, "  greedy outputs are %s (greedy text falls into loops: the likeliest "
                "character each time; -t 1 samples varied text)\n", identical ?
                "byte-identical" : "DIFFERENT (a bug)");
    else
        fprintf(stderr, "  (sampled texts %s: the decoders consume the random stream "
                "differently; their distributions are the same)\n", identical ? "agree" : "differ");
}

// ----------------------------------------------------------------------------
// Beyond the blog: a tree of guesses, verified in one pass
//
// A chain stakes each position on one guess: its first rejection ends the round. SpecInfer
// (Miao et al. 2024, arXiv:2305.09781), Medusa (Cai et al. 2024, arXiv:2401.10774) and EAGLE
// (Li et al. 2024, arXiv:2401.15077) draft a tree instead: several children per node, so that
// when one child is rejected a sibling may still pass. The whole tree goes through the target
// in ONE pass, each node at position cache_len + depth, attending to the cache and its own
// ancestors only (forward's parents; the mask in attention). Accept/reject then walks down
// from current_token, trying each node's children in order against Q, the row each was
// really drawn from (judge_children), and the path that passed keeps its rows of the KV
// cache (compact_kv_cache). `--tree 3,2,1,1` gives the children per node at each depth;
// `--tree 1,1,1,1` is the chain of K = 4.

#define TREE_MAX_DEPTH 16 // the most levels a --tree shape may have

// Head `head`'s logits from a hidden row of the target: Medusa's guesses (section after forward).
void medusa_logits(const MedusaHeads *m, const GPT *target, const float *hidden, int head,
                   float *logits);

// The shape of the trees a run drafts: width[d] children per node of depth d (current_token,
// the root, has depth 0). The rows of a tree are its nodes in breadth-first order.
typedef struct {
    int depth;                 // D: levels of guesses, e.g. 4
    int width[TREE_MAX_DEPTH]; // children per node at each level, e.g. {3, 2, 1, 1}
    int nodes;                 // the guesses of a whole tree: 3 + 3*2 + 6*1 + 6*1 = 21
} TreeShape;

// One round's tree, row by row: row 0 is current_token, rows 1 .. rows-1 the guesses in
// breadth-first order (a parent's row before its children's, so one pass runs them in row
// order, and a node's children sit in consecutive rows). One buffer per role: `p *tb`.
typedef struct {
    TreeShape shape;  //           what the run asked for (a round may get less: room, limit)
    int max_rows;     // N+1       the root and the nodes of a full tree
    int V;            //           vocabulary size
    int rows;         //           this round's rows: the root and its guesses
    int *token;       // (N+1)     row r's token: current_token at row 0
    int *parent;      // (N+1)     the row of its parent; -1 at the root
    int *depth;       // (N+1)     0 at the root, 1 for its children, ...
    int *first_child; // (N+1)     the row of its first child; the others follow it
    int *n_children;  // (N+1)     its children: 0 for a leaf
    float *q;         // (N+1, V)  q[r] = the draft's row that row r's children were drawn
                      //           from (at t = 0: ranked by, its top ones)
    float *p;         // (N+1, V)  p[r] = the target's served row after row r's token
    double *chance;   // (N+1)     the chance row r had to pass: min(1, p/Q) against the (p, Q)
                      //           it faced, after its earlier siblings' rejections
    double *u;        // (N+1)     the uniform that judged row r: it passed when u < chance
    char *verdict;    // (N+1)     'A' accepted, 'R' rejected, '.' never judged
    double *p_work;   // (V)       the p the next child is judged against: after each rejected
                      //           sibling, norm(max(p - Q, 0)) of the one before
    double *Q_work;   // (V)       the Q that child was drawn from: q without its earlier siblings
    int *path;        // (D+1)     rows of the accepted path: path[0] = 0, then one per depth
    int *accepted;    // (D+1)     tokens the round emits: the path's guesses, then one more
                      //           (none when the path already gives every token wanted)
    int *all_tokens;  // (S)       the verify pass's input: the lag tokens, then every row
    int *slots;       // (S)       the cache slot each of those tokens follows (forward's parents)
    int *draft_slots; // (S)       the same for a model draft's pass over one level of rows
    float *hidden;    // (C)       ln_f's output row (the hidden state) whose p current_token
                      //           was drawn from: Medusa's heads read it
    int greedy;       //           t = 0: children are the draft's top ones, each judged as a
                      //           sure guess (Q one-hot); else drawn from q without replacement
    int cache_len;    //           current_token's slot
    int restarted;    //           the cache was full: this round restarted the window
    int lag;          //           tokens before current_token the pass reran (a restart)
    int draft_ran;    //           rows 0 .. draft_ran-1 are in a model draft's cache, by row
    int room;         //           rows that fit this round: the cache's free slots from
                      //           current_token's on, at most max_rows
    int limit;        //           the deepest the path may go: the tokens still wanted
    int passed;       //           m: the guesses on the accepted path
} TreeBuffers;

// Draws up to `want` children of row r from the row q[r], appending them as new rows, and
// never more rows than `room`. Without replacement: each next child is drawn from q with
// the earlier ones removed, so siblings differ. At t = 0 they are q's top ones instead.
static void add_children(TreeBuffers *tb, int r, int want, int room, Rng *rng) {
    int V = tb->V;
    float left[256]; // q without the children drawn so far (V <= 256)
    memcpy(left, tb->q + (size_t)r * V, (size_t)V * sizeof(float));
    tb->first_child[r] = tb->rows;
    tb->n_children[r] = 0;
    for (int i = 0; i < want && tb->rows < room; i++) {
        int x = tb->greedy ? argmax(left, V) : sample_from(left, V, rng_uniform(rng));
        if (x < 0 || left[x] <= 0.0f) break; // q has no more tokens to give
        left[x] = 0.0f; // drawn: not again
        int c = tb->rows++; // the child's row, after every row so far: breadth-first
        tb->token[c] = x;
        tb->parent[c] = r;
        tb->depth[c] = tb->depth[r] + 1;
        tb->n_children[c] = 0;
        tb->verdict[c] = '.';
        tb->n_children[r]++;
    }
}

// The draft's rows after rows lo .. tb->rows-1 (one level), into tb->q: Medusa's head for
// the level; the bigram's row of each token; or the model draft's, from one pass over the
// level, each row attending to its own ancestors in the draft's cache, as the target's will.
static void tree_draft_rows(Draft *d, TreeBuffers *tb, const Tokens *text, int lo,
                            const Sampler *s) {
    int V = tb->V, hi = tb->rows;
    Sampler t1 = {1.0f, 0, 0.0f}; // at t = 0 the tree ranks the draft's own row at t = 1:
                                  // a served, one-hot q would leave room for one child only
    const Sampler *served = tb->greedy ? &t1 : s;
    if (d->kind == DRAFT_MEDUSA) { // one head per level, on the row current_token came from
        float logits[256];
        medusa_logits(d->medusa, d->target, tb->hidden, tb->depth[lo], logits);
        for (int r = lo; r < hi; r++) served_probs(tb->q + (size_t)r * V, logits, V, served);
        return;
    }
    if (d->kind != DRAFT_GPT) { // the bigram: a table row per node, no pass
        for (int r = lo; r < hi; r++)
            bigram_served_probs(tb->q + (size_t)r * V, &d->bigram, tb->token[r], served);
        return;
    }
    GPT *m = &d->model;
    const float *logits;
    if (lo == 0) { // the root: catch up on the tokens the draft lags, then current_token
        int lag = tb->cache_len - m->state.kv_len;
        logits = forward(m, text->tok + text->n - 1 - lag, lag + 1, NULL) + (size_t)lag * V;
    } else { // one pass over the level; each row follows its parent's slot
        for (int r = lo; r < hi; r++) tb->draft_slots[r - lo] = tb->cache_len + tb->parent[r];
        logits = forward(m, tb->token + lo, hi - lo, tb->draft_slots);
    }
    for (int r = lo; r < hi; r++) // each row as served (or at t = 1 for a greedy tree)
        served_probs(tb->q + (size_t)r * V, logits + (size_t)(r - lo) * V, V, served);
    tb->draft_ran = hi; // rows 0 .. hi-1 now sit in the draft's cache, at cache_len + row
}

// Phase 1 for a tree: grows it level by level from current_token, width[level] children per
// node, while the window has room (slots up to S-1) and the path could still be used.
static void draft_tree(Draft *d, TreeBuffers *tb, const Tokens *text, const Sampler *s,
                       Rng *rng) {
    int room = tb->room; // rows that fit: tree_round counts the cache's free slots
    tb->rows = 1; // the root, current_token
    tb->token[0] = text->tok[text->n - 1];
    tb->parent[0] = -1;
    tb->depth[0] = 0;
    tb->n_children[0] = 0;
    tb->draft_ran = 0;
    int lo = 0; // the first row of the level being grown
    for (int level = 0; level < tb->shape.depth && level < tb->limit; level++) {
        int hi = tb->rows;
        if (hi >= room) break; // no slot left for a child
        tree_draft_rows(d, tb, text, lo, s); // the draft's row after each node
        for (int r = lo; r < hi; r++) add_children(tb, r, tb->shape.width[level], room, rng);
        if (tb->rows == hi) break; // no child was added: the tree is done
        lo = hi;
    }
}

// Phase 2 for a tree: ONE target pass over current_token and every row (after the lag
// tokens of a restart), each row following its parent; p[r] = the served row after row r.
static void verify_tree(GPT *g, TreeBuffers *tb, const int *current, const Sampler *s) {
    int V = tb->V, lag = tb->lag, first = g->state.kv_len; // the pass's first slot
    for (int i = 0; i <= lag; i++) { // the rerun window and current_token: a chain
        tb->all_tokens[i] = current[i - lag];
        tb->slots[i] = first + i - 1;
    }
    for (int r = 1; r < tb->rows; r++) { // the guesses, each after its parent's slot
        tb->all_tokens[lag + r] = tb->token[r];
        tb->slots[lag + r] = tb->cache_len + tb->parent[r];
    }
    const float *logits = forward(g, tb->all_tokens, lag + tb->rows, tb->slots);
    for (int r = 0; r < tb->rows; r++)
        served_probs(tb->p + (size_t)r * V, logits + (size_t)(lag + r) * V, V, s);
}

// p := norm(max(p - Q, 0)), in place, in double: what is left of p for the next sibling
// once a child drawn from Q was rejected. Unchanged if nothing is left (p == Q).
static void subtract_and_normalise(double *p, const double *Q, int V) {
    double mass = 0.0;
    for (int x = 0; x < V; x++) mass += fmax(0.0, p[x] - Q[x]);
    if (mass <= 0.0) return; // p == Q up to rounding: the next child faces p itself
    for (int x = 0; x < V; x++) p[x] = fmax(0.0, p[x] - Q[x]) / mass;
}

// Q := Q without token x, renormalised: the row the next sibling was drawn from, when the
// children are drawn without replacement.
static void remove_token(double *Q, int x, int V) {
    Q[x] = 0.0;
    double mass = 0.0; // summed, not 1 - Q[x]: the shares the next draw really has
    for (int y = 0; y < V; y++) mass += Q[y];
    for (int y = 0; y < V; y++) Q[y] = mass > 0.0 ? Q[y] / mass : 0.0;
}

// A draw from a double row of weights with one uniform (inverse CDF, as sample_weights).
static int sample_double(const double *w, int V, double u) {
    double total = 0.0, cdf = 0.0;
    int last = -1;
    for (int x = 0; x < V; x++) total += w[x];
    for (int x = 0; x < V; x++) {
        if (w[x] <= 0.0) continue; // weight 0: never drawn
        cdf += w[x];
        last = x;
        if (u * total < cdf) return x;
    }
    return last;
}

// Loads row r's p and q into the working rows, in double and normalised (a float row sums
// to 1 +- 1e-7, and the draws use its true shares): the (p, Q) its first child faces.
static void start_node(TreeBuffers *tb, int r) {
    int V = tb->V;
    double p_sum = 0.0, q_sum = 0.0;
    for (int x = 0; x < V; x++) {
        p_sum += tb->p[(size_t)r * V + x];
        q_sum += tb->q[(size_t)r * V + x];
    }
    for (int x = 0; x < V; x++) {
        tb->p_work[x] = tb->p[(size_t)r * V + x] / p_sum;
        tb->Q_work[x] = tb->q[(size_t)r * V + x] / q_sum;
    }
}

// The chance that child c passes: min(1, p(x)/Q(x)) for its token x, against the (p, Q) it
// faces. A greedy tree's child is a sure guess: Q_work becomes one-hot at x first.
static double child_chance(TreeBuffers *tb, int c) {
    int x = tb->token[c];
    if (tb->greedy)
        for (int y = 0; y < tb->V; y++) tb->Q_work[y] = y == x;
    return fmin(1.0, tb->p_work[x] / tb->Q_work[x]); // Q(x) > 0: x was drawn from Q
}

// After child c failed: p := norm(max(p - Q, 0)), what the next sibling is judged against
// (p(x) < Q(x) for a failed x, so x gets 0), and Q := Q without x, the row the next sibling
// was really drawn from (without replacement; a greedy tree's Q is child_chance's one-hot).
static void reject_child(TreeBuffers *tb, int c) {
    subtract_and_normalise(tb->p_work, tb->Q_work, tb->V);
    if (!tb->greedy) remove_token(tb->Q_work, tb->token[c], tb->V);
}

// The exact rule at one node (row r): its children are tried in order, each passing with
// child_chance; a failure updates (p, Q) for the next (reject_child). Returns the accepted
// child's row, or -1 when all failed, with *token drawn from the p left over. Why it is
// exact: each child faces a (p, Q) for which accept_reject's identity holds (min(p, Q)
// kept plus max(0, p - Q) redrawn is p), so "this child, else a draw from what is left"
// emits that p; by induction over the siblings, the node's own p (notes/math.md, section 11).
static int judge_children(TreeBuffers *tb, int r, Rng *rng, int *token) {
    start_node(tb, r);
    for (int c = tb->first_child[r]; c < tb->first_child[r] + tb->n_children[r]; c++) {
        tb->chance[c] = child_chance(tb, c);
        tb->u[c] = rng_uniform(rng);
        if (tb->u[c] < tb->chance[c]) {
            tb->verdict[c] = 'A';
            return c;
        }
        tb->verdict[c] = 'R';
        reject_child(tb, c);
    }
    *token = sample_double(tb->p_work, tb->V, rng_uniform(rng)); // from what is left of p
    return -1;
}

// Phase 3 for a tree: walks down from current_token, judging each node's children, until a
// node's children all fail (a draw from its leftover p ends the round) or a leaf passes
// (a bonus from its p, unless the path already gives every token still wanted). Writes the
// tokens to tb->accepted and the path to tb->path; returns how many tokens: 1 .. depth+1.
static int accept_reject_tree(TreeBuffers *tb, Rng *rng) {
    int r = 0, m = 0; // the node reached, and the guesses accepted on the way
    tb->path[0] = 0;
    tb->passed = 0;
    while (tb->n_children[r] > 0) {
        int token = -1; // set by judge_children when every child fails
        int c = judge_children(tb, r, rng, &token);
        if (c < 0) { // every child failed: the leftover draw is the round's last token
            tb->accepted[m] = token;
            return m + 1;
        }
        tb->accepted[m++] = tb->token[c];
        tb->path[m] = c;
        tb->passed = m;
        r = c;
    }
    if (m == tb->limit) return m; // the last round: no bonus past the tokens wanted
    tb->accepted[m] = sample_from(tb->p + (size_t)r * tb->V, tb->V, rng_uniform(rng));
    return m + 1; // a leaf passed: its p came with the pass, so one more token
}

// Copies cache slot `from` to slot `to` in every layer, and makes `to` a chain's slot.
static void move_cache_row(GPT *g, int from, int to) {
    RunState *s = &g->state;
    size_t C = g->config.n_embd, S = g->config.block_size, row = C * sizeof(float);
    for (int l = 0; l < g->config.n_layer; l++) { // memmove: from may be to (a row in place)
        memmove(s->key_cache + (l * S + to) * C, s->key_cache + (l * S + from) * C, row);
        memmove(s->value_cache + (l * S + to) * C, s->value_cache + (l * S + from) * C, row);
    }
    s->parent[to] = to - 1; // the path is a chain now: slot order is text order
    s->position[to] = s->position[from]; // cache_len + depth == to: the position it was run at
}

// Phase 4 for a tree: the rows of the path's first m guesses (every token the round emits
// but its last, as in a chain) move into the slots right after current_token, in order, and
// the cache keeps current_token and them: trim_kv_cache's invariant. A node's keys depend
// on its position and ancestors only, both unchanged by the move. A model draft keeps the
// path's rows it ran. Moving slot path[d] down to cache_len + d never overwrites a row
// still to be moved: those sit in later slots.
static void compact_kv_cache(GPT *g, GPT *draft, const TreeBuffers *tb, int m) {
    for (int d = 1; d <= m; d++) move_cache_row(g, tb->cache_len + tb->path[d], tb->cache_len + d);
    roll_back_cache(g, tb->cache_len + 1 + m);
    if (!draft) return;
    int kept = 0; // the path's rows the draft ran: a prefix of the path
    while (kept < m && tb->path[kept + 1] < tb->draft_ran) {
        kept++;
        move_cache_row(draft, tb->cache_len + tb->path[kept], tb->cache_len + kept);
    }
    if (draft->state.kv_len > tb->cache_len + 1 + kept) roll_back_cache(draft, tb->cache_len + 1 + kept);
}

// Counts a tree round: its pass (and kind), the draft's passes and time, and by depth, the
// nodes whose children were judged and whether one passed (Stats.judged_at, accepted_at).
// alpha: each judged node's first child's chance, sum min(p, q) (a sure child's: p(x)).
static void count_tree_round(Stats *st, const Draft *d, const TreeBuffers *tb, int n,
                             double draft_seconds, double verify_seconds) {
    int nodes = tb->rows - 1;
    PassKind kind = tb->restarted ? PASS_FOLDED : nodes > 0 ? PASS_VERIFY : PASS_STEP;
    count_pass(st, kind, tb->lag + tb->rows, verify_seconds);
    st->draft_seconds += draft_seconds;
    if (d->kind == DRAFT_GPT) st->draft_passes += tb->draft_ran > 0 ? tb->depth[tb->rows - 1] : 0;
    int judged = tb->passed + (n > tb->passed && tb->n_children[tb->path[tb->passed]] > 0);
    for (int i = 0; i < judged; i++) { // depth i+1: the children of path[i] were judged
        int r = tb->path[i], x = tb->token[tb->first_child[r]]; // x: the node's first child
        const float *p = tb->p + (size_t)r * tb->V, *q = tb->q + (size_t)r * tb->V;
        st->alpha_sum += tb->greedy ? p[x] : expected_acceptance(p, q, tb->V); // sure: p(x)
        int slot = i < POSITIONS ? i : POSITIONS - 1;
        st->judged_at[slot]++;
        st->accepted_at[slot] += i < tb->passed;
    }
    st->resampled += judged > tb->passed; // all of a node's children failed
    st->bonus += n > tb->passed && judged == tb->passed && nodes > 0;
    st->rounds++;
    st->drafted += nodes;
    st->judged += judged;
    st->accepted += tb->passed;
    st->round_tokens += n;
}

// Prints row r (a guess) under its parent, with its q and p and its verdict, then its
// children: the tree drawn depth-first, indented by depth.
static void trace_node(const TreeBuffers *tb, const Vocab *v, int r) {
    if (r > 0) {
        char vis[8];
        int x = tb->token[r], par = tb->parent[r];
        visible_char(vis, decode(v, x));
        fprintf(stderr, "  %*s%-6s q=%.3f p=%.3f", 2 * tb->depth[r], "", vis,
                tb->q[(size_t)par * tb->V + x], tb->p[(size_t)par * tb->V + x]);
        if (tb->verdict[r] == '.')
            fprintf(stderr, "  not judged\n");
        else
            fprintf(stderr, "  chance=%.3f u=%.3f %s\n", tb->chance[r], tb->u[r],
                    tb->verdict[r] == 'A' ? "ACCEPT" : "REJECT");
    }
    for (int c = tb->first_child[r]; c < tb->first_child[r] + tb->n_children[r]; c++)
        trace_node(tb, v, c);
}

// Prints one tree round: the rows, the verdicts, what the round emitted and kept.
static void trace_tree(const DecodeOptions *o, const TreeBuffers *tb, int n) {
    char vis[8];
    int depth = tb->depth[tb->rows - 1]; // the last row is among the deepest
    visible_char(vis, decode(o->vocab, tb->token[0]));
    fprintf(stderr, "\ntree round %ld: current_token %s at slot %d, %d guesses in %d level%s\n",
            o->st->rounds, vis, tb->cache_len, tb->rows - 1, depth, depth == 1 ? "" : "s");
    if (tb->restarted) // the cache was full: the pass reruns the window first
        fprintf(stderr, "  RESTART the window restarts: the pass reruns %d tokens first\n", tb->lag);
    if (tb->rows > 1) // else current_token sits in the last slot: RESULT says a plain step
        fprintf(stderr, "  VERIFY  one target pass over %d tokens, each guess seeing its "
                "ancestors only\n  ACCEPT/REJECT children in order, each when u < chance = "
                "min(1, p/Q); q and p are the rows' own, and a later sibling faces p and Q after "
                "the earlier ones\n", tb->lag + tb->rows);
    trace_node(tb, o->vocab, 0);
    int drew = tb->n_children[tb->path[tb->passed]] > 0; // the last node's children all failed
    fprintf(stderr, "  RESULT  %d passed, then %s: %d token%s from 1 target pass\n", tb->passed,
            n == tb->passed ? "nothing more (every token wanted is there)"
            : tb->rows == 1 ? "a plain step from p (no slot for a guess)"
            : drew ? "a draw from the p left over" : "a bonus from the leaf's p",
            n, n == 1 ? "" : "s");
    if (n > 1) // the tokens emitted but the last are cached: compact_kv_cache's m
        fprintf(stderr, "  TRIM    the path's rows move to slots %d..%d; cache_len -> %d\n",
                tb->cache_len + 1, tb->cache_len + n - 1, tb->cache_len + n);
    else
        fprintf(stderr, "  TRIM    no row to move; cache_len -> %d\n", tb->cache_len + 1);
}

// Allocates the buffers of a tree of this shape for a target of block_size S and width C.
int build_tree_buffers(TreeBuffers *tb, const TreeShape *shape, int V, int S, int C) {
    *tb = (TreeBuffers){.shape = *shape, .max_rows = shape->nodes + 1, .V = V}; // +1: the root
    size_t N = (size_t)tb->max_rows, D = (size_t)shape->depth + 1;
    tb->token = calloc(N, sizeof(int));
    tb->parent = calloc(N, sizeof(int));
    tb->depth = calloc(N, sizeof(int));
    tb->first_child = calloc(N, sizeof(int));
    tb->n_children = calloc(N, sizeof(int));
    tb->q = calloc(N * V, sizeof(float));
    tb->p = calloc(N * V, sizeof(float));
    tb->chance = calloc(N, sizeof(double));
    tb->u = calloc(N, sizeof(double));
    tb->verdict = calloc(N, 1);
    tb->p_work = calloc((size_t)V, sizeof(double));
    tb->Q_work = calloc((size_t)V, sizeof(double));
    tb->path = calloc(D, sizeof(int));
    tb->accepted = calloc(D, sizeof(int));
    tb->all_tokens = calloc((size_t)S, sizeof(int));
    tb->slots = calloc((size_t)S, sizeof(int));
    tb->draft_slots = calloc((size_t)S, sizeof(int));
    tb->hidden = calloc((size_t)C, sizeof(float));
    return (tb->token && tb->parent && tb->depth && tb->first_child && tb->n_children &&
            tb->q && tb->p && tb->chance && tb->u && tb->verdict && tb->p_work && tb->Q_work && tb->path &&
            tb->accepted && tb->all_tokens && tb->slots && tb->draft_slots && tb->hidden) ? 0 : -1;
}

// Frees what build_tree_buffers allocated.
void free_tree_buffers(TreeBuffers *tb) {
    void *owned[] = {tb->token, tb->parent, tb->depth, tb->first_child, tb->n_children, tb->q,
                     tb->p, tb->chance, tb->u, tb->verdict, tb->p_work, tb->Q_work, tb->path, tb->accepted,
                     tb->all_tokens, tb->slots, tb->draft_slots, tb->hidden};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    memset(tb, 0, sizeof(*tb));
}

// One tree round: the four phases with a tree. The context rule is the chain's (a full cache
// restarts, and the pass reruns the window first); the tree is cut to the slots left.
// Returns how many tokens it emits, in tb->accepted.
static int tree_round(GPT *g, Draft *d, TreeBuffers *tb, const Tokens *text,
                      const DecodeOptions *o) {
    int S = g->config.block_size, C = g->config.n_embd;
    // 0. CONTEXT, as speculative_round: a full cache restarts, and the pass reruns the window
    tb->restarted = g->state.kv_len == S;
    tb->lag = tb->restarted ? restart_cache(g, d) : 0;
    tb->cache_len = g->state.kv_len + tb->lag; // current_token's slot
    int free_slots = S - tb->cache_len; // the root's slot and its guesses' must fit
    tb->room = free_slots < tb->max_rows ? free_slots : tb->max_rows;
    GPT *draft_model = d->kind == DRAFT_GPT ? &d->model : NULL;
    double t0 = now_seconds();
    draft_tree(d, tb, text, &o->sampler, o->rng); // 1. DRAFT, as many rows as fit
    double t1 = now_seconds();
    verify_tree(g, tb, text->tok + text->n - 1, &o->sampler); // 2. VERIFY every row in one pass
    double t2 = now_seconds();
    int n = accept_reject_tree(tb, o->rng); // 3. ACCEPT/REJECT down the tree
    // the hidden row of the node whose p gave the last token: Medusa guesses from it
    const float *h = g->state.ln_f + (size_t)(tb->lag + tb->path[tb->passed]) * C;
    memcpy(tb->hidden, h, (size_t)C * sizeof(float));
    compact_kv_cache(g, draft_model, tb, n - 1); // 4. TRIM: the path's rows into place
    count_tree_round(o->st, d, tb, n, t1 - t0, t2 - t1);
    if (o->trace) trace_tree(o, tb, n);
    return n;
}

// Speculative decoding with trees: speculative_generate's loop, with tree_round.
void tree_generate(GPT *g, Draft *d, TreeBuffers *tb, const Tokens *prompt,
                   const DecodeOptions *o, int *seq) {
    int V = g->config.vocab_size, S = g->config.block_size, C = g->config.n_embd;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, PASS_PREFILL, o->st);
    restart_draft_cache(d);
    int last = g->state.kv_len - 1; // the prefill's row the first token comes from
    memcpy(tb->hidden, g->state.ln_f + (size_t)last * C, (size_t)C * sizeof(float));
    if (o->n_new > 0) {
        float *p = tb->p; // row 0 is free until the first round's pass
        seq[n_seq] = sample_served(logits, V, &o->sampler, p, o->rng);
        if (o->trace) trace_prefill(o, g->state.kv_len, seq[n_seq]);
        show_round(o, NULL, seq, n_seq, 1);
        n_seq++;
    }
    while (n_seq - first < o->n_new && !output_failed(o)) {
        tb->limit = o->n_new - (n_seq - first); // the path may give every token still wanted
        Tokens text = {seq, n_seq}; // the text so far: current_token last
        int n = tree_round(g, d, tb, &text, o);
        memcpy(seq + n_seq, tb->accepted, (size_t)n * sizeof(int));
        show_tokens(o, seq, n_seq, tb->passed, FROM_ACCEPTED); // the path's guesses
        int drew = tb->n_children[tb->path[tb->passed]] > 0; // a leftover draw, else a bonus
        TokenSource last = drew ? FROM_RESAMPLED : tb->rows > 1 ? FROM_BONUS : FROM_TARGET;
        if (n > tb->passed) show_tokens(o, seq, n_seq + tb->passed, 1, last); // no guess: a sample
        n_seq += n;
    }
    finish_stats(o->st, n_seq - first, t0);
    // a tree with a level of two children or more: print_stats and print_comparison leave
    // out the chain's formulas (a tree of single children, Medusa's chain, is a chain)
    o->st->tree = tb->shape.nodes > tb->shape.depth;
}

// ----------------------------------------------------------------------------
// The target model: the lecture's GPT, in textbook loops, with a KV cache
//
// Everything here reads (T, in) rows and writes (T, out) rows, for the T tokens of one
// pass. Each token's sums run in the same order whatever T is, so a token's logits are
// bit-identical alone (plain decoding) or inside a verify pass of k+1 tokens.

// Fills sizes[i] with the float count of tensor i (checkpoint order); returns the sum.
size_t weight_sizes(const Config *c, size_t sizes[N_TENSORS]) {
    size_t L = c->n_layer, C = c->n_embd, V = c->vocab_size, S = c->block_size, H = c->ffn_width;
    size_t table[N_TENSORS] = {
        V * C, S * C,                    // token and position embeddings
        L * C, L * C,                    // ln1
        L * C * C, L * C * C, L * C * C, // query, key, value
        L * C * C, L * C,                // proj
        L * C, L * C,                    // ln2
        L * C * H, L * H,                // ffwd up
        L * H * C, L * C,                // ffwd down
        C, C,                            // ln_f
        C * V, V};                       // lm_head
    memcpy(sizes, table, sizeof(table));
    size_t total = 0; // P: 209,729 for the shipped model
    for (int i = 0; i < N_TENSORS; i++) total += sizes[i];
    return total;
}

// Points every Weights field at its slice of the one parameter block.
void point_weights(Weights *w, float *p, const size_t sizes[N_TENSORS]) {
    // the sizes table is the one place that knows the layout; this just walks it
    float **fields[N_TENSORS] = {
        &w->token_embedding, &w->position_embedding, &w->ln1_weight, &w->ln1_bias,
        &w->query, &w->key, &w->value, &w->proj_weight, &w->proj_bias,
        &w->ln2_weight, &w->ln2_bias, &w->ffwd_up_weight, &w->ffwd_up_bias,
        &w->ffwd_down_weight, &w->ffwd_down_bias, &w->ln_f_weight, &w->ln_f_bias,
        &w->lm_head_weight, &w->lm_head_bias};
    for (int i = 0; i < N_TENSORS; i++) {
        *fields[i] = p; // each tensor starts where the one before it ended: no gaps
        p += sizes[i];
    }
}

// n zeroed floats, or NULL.
static float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

// Allocates a block's buffers for up to S tokens, all but the residual arrays, which the
// caller provides (inference passes one array three times: the residual is updated in place).
int build_block_acts(BlockActs *a, const Config *c, float *x_in, float *x_mid, float *x_out) {
    size_t S = c->block_size, C = c->n_embd, NH = c->n_head, H = c->ffn_width;
    // the caches and the mask are views, not owned: the caller points them before each pass
    *a = (BlockActs){.x_in = x_in, .x_mid = x_mid, .x_out = x_out};
    // sized for a full context (T = S), so any pass, prefill included, fits
    a->ln1 = alloc_floats(S * C);
    a->q = alloc_floats(S * C);
    a->att = alloc_floats(NH * S * S);
    a->att_out = alloc_floats(S * C);
    a->attn = alloc_floats(S * C);
    a->ln2 = alloc_floats(S * C);
    a->hidden = alloc_floats(S * H);
    a->ffwd = alloc_floats(S * C);
    return (a->ln1 && a->q && a->att && a->att_out && a->attn && a->ln2 && a->hidden &&
            a->ffwd) ? 0 : -1;
}

// Frees what build_block_acts allocated (not the residual arrays, which are the caller's).
void free_block_acts(BlockActs *a) {
    void *owned[] = {a->ln1, a->q, a->att, a->att_out, a->attn, a->ln2, a->hidden, a->ffwd};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    memset(a, 0, sizeof(*a)); // NULLs: a second free is harmless
}

// Allocates the activations and the KV cache for a config; 0 on success.
int build_run_state(RunState *s, const Config *c) {
    size_t S = c->block_size, C = c->n_embd, V = c->vocab_size, L = c->n_layer;
    // zeroed, so that a cache position never written reads as zero in a debugger
    s->x = alloc_floats(S * C);
    s->ln_f = alloc_floats(S * C);
    s->logits = alloc_floats(S * V);
    s->key_cache = alloc_floats(L * S * C);   // 4 * 32 * 64 floats: 32 KiB per cache
    s->value_cache = alloc_floats(L * S * C);
    s->kv_len = 0;                            // empty: the first pass is a prefill
    s->parent = calloc(S, sizeof(int));
    s->position = calloc(S, sizeof(int));
    s->sees = calloc(S * S, 1);
    for (size_t i = 0; s->parent && s->position && i < S; i++) { // an empty cache is a chain
        s->parent[i] = (int)i - 1;
        s->position[i] = (int)i;
    }
    // one residual array serves as x_in, x_mid and x_out of every layer
    int blk = build_block_acts(&s->block, c, s->x, s->x, s->x);
    s->block.sees = s->sees; // every layer of a pass uses the pass's one mask
    return (blk == 0 && s->x && s->ln_f && s->logits && s->key_cache && s->value_cache &&
            s->parent && s->position && s->sees) ? 0 : -1;
}

// Frees what build_run_state allocated.
void free_run_state(RunState *s) {
    free_block_acts(&s->block);
    void *owned[] = {s->x, s->ln_f, s->logits, s->key_cache, s->value_cache, s->parent,
                     s->position, s->sees};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    memset(s, 0, sizeof(*s));
}

// Allocates parameters (zeroed) and run state for a config; 0 on success.
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
    free(g->params); // each is safe on NULLs: half-built is fine
    free_run_state(&g->state);
    memset(g, 0, sizeof(*g));
}

// out = LayerNorm(in) * weight + bias, per row of C features (eps 1e-5, biased variance,
// as torch.nn.LayerNorm computes it).
void layernorm(float *out, const float *in, const float *weight, const float *bias, int T,
               int C) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C; // row t of the input
        float *o = out + (size_t)t * C;
        float mean = 0.0f, var = 0.0f; // the row's mean and variance
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= C; // biased: divide by C, not C-1, as PyTorch does
        // normalise, then scale and shift
        float rstd = 1.0f / sqrtf(var + 1e-5f); // eps keeps a constant row finite
        for (int i = 0; i < C; i++) o[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
    }
}

// A Linear layer's parameters, as PyTorch's nn.Linear(in, out) holds them: y = x W + b.
typedef struct {
    const float *weight; // (in, out): PyTorch's weight transposed, so row i is input i's
    const float *bias;   // (out), or NULL for a Linear without one (query, key, value)
    int in, out;         // its input and output sizes
} Linear;

// out[t][o] = bias[o] + sum_i in[t][i] * weight[i][o]: the Linear lin on a pass's T tokens.
//
// The loop over tokens sits INSIDE the loop over weight rows: row i of the weight is read
// from memory once and used for all T tokens before row i+1 is touched. This is the one
// idea that can make a verify pass of k+1 tokens cheaper than k+1 one-token passes: when
// the weights must come from main memory, a one-token pass waits on them, and a verify
// pass fetches them once for all its tokens. The shipped model's 0.84 MB of weights sit in
// the CPU's L2 cache, so here a pass waits on arithmetic instead, which grows with T;
// --ffn-width pads the weights past the caches (notes/speed.md measures both).
// Each out[t][o] adds its terms for i = 0, 1, 2, ... in that order, whatever T is, so a
// token's output does not depend on the other tokens of the pass.
void matmul(float *out, const float *in, Linear lin, int T) {
    // every output starts at its bias
    for (int t = 0; t < T; t++)
        for (int o = 0; o < lin.out; o++)
            out[(size_t)t * lin.out + o] = lin.bias ? lin.bias[o] : 0.0f;
    // then one weight row at a time, added into every token's outputs
    for (int i = 0; i < lin.in; i++) {
        const float *w = lin.weight + (size_t)i * lin.out; // weight row i: read once per pass
        for (int t = 0; t < T; t++) {
            float x = in[(size_t)t * lin.in + i];
            float *y = out + (size_t)t * lin.out;
            for (int o = 0; o < lin.out; o++) y[o] += x * w[o]; // i ascending, whatever T is
        }
    }
}

// a[s] = softmax over s < n of a[s], in place (subtract the max so exp never overflows).
void softmax(float *a, int n) {
    float maxv = a[0];
    for (int s = 1; s < n; s++) maxv = a[s] > maxv ? a[s] : maxv;
    float sum = 0.0f;
    for (int s = 0; s < n; s++) {
        a[s] = expf(a[s] - maxv); // <= 1, as a[s] - maxv <= 0
        sum += a[s];
    }
    for (int s = 0; s < n; s++) a[s] /= sum;
}

// Multi-head attention of the T new tokens of a pass (slots pos0 .. pos0+T-1) against one
// layer's cache, which already holds their keys and values too. Token t attends to the
// slots a->sees[t] marks: every slot up to its own in a chain (the causal mask), only its
// ancestors in a tree. a->q: (T, C) in; a->att: (NH, S, S) and a->att_out: (T, C) out.
// The scores are scaled by 1/sqrt(HS), scaled dot-product attention's head_size ** -0.5
// (the lecture's gpt.py: k.shape[-1]**-0.5), so they keep unit variance per head.
void attention(const Config *c, BlockActs *a, int T, int pos0) {
    int C = c->n_embd, NH = c->n_head, S = c->block_size;
    int HS = C / NH; // each head sees its own HS-wide slice of q, k and v
    float scale = 1.0f / sqrtf((float)HS); // 1/4 for HS = 16
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            int n = pos0 + t + 1; // a token's ancestors all sit in earlier slots than its own
            const unsigned char *sees = a->sees + (size_t)t * S; // (S) its row of the mask
            const float *qh = a->q + (size_t)t * C + h * HS; // (HS) head h's query of token t
            float *w = a->att + ((size_t)h * S + t) * S; // its weights, att[h][t][0 .. n-1]
            // one score per visible slot: the dot product of the query and that key; a slot
            // it may not see scores -inf, which the softmax turns into a weight of exactly 0
            for (int s = 0; s < n; s++) {
                const float *kh = a->key_cache + (size_t)s * C + h * HS;
                float score = 0.0f;
                for (int i = 0; i < HS; i++) score += qh[i] * kh[i];
                w[s] = sees[s] ? score * scale : -INFINITY;
            }
            softmax(w, n); // a masked slot adds exp(-inf) = 0 to the sum: the sum is unchanged
            for (int s = n; s < S; s++) w[s] = 0.0f; // later slots: the causal mask, made visible
            // output: the attention-weighted sum of the visible values, slots in order, so a
            // chain's sums are the same whether or not the mask is there
            float *oh = a->att_out + (size_t)t * C + h * HS;
            for (int i = 0; i < HS; i++) oh[i] = 0.0f;
            for (int s = 0; s < n; s++) {
                if (!sees[s]) continue; // not an ancestor: it adds nothing, not even a 0
                const float *vh = a->value_cache + (size_t)s * C + h * HS;
                for (int i = 0; i < HS; i++) oh[i] += w[s] * vh[i];
            }
        }
}

// x = max(0, x), elementwise over n floats.
void relu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// out = x + y, elementwise over n floats: the residual connection (out may be x).
void residual_add(float *out, const float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
}

// x[t] = token_embedding[tokens[t]] + position_embedding[positions[t]].
void embed(float *x, const Weights *w, const int *tokens, const int *positions, int T, int C) {
    // the position is absolute: slot 20 of a chain gets row 20 (a tree node: cache_len + depth)
    for (int t = 0; t < T; t++) {
        const float *te = w->token_embedding + (size_t)tokens[t] * C;
        const float *pe = w->position_embedding + (size_t)positions[t] * C;
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = te[i] + pe[i];
    }
}

// One transformer block l:  x_mid = x_in + proj(attn(ln1(x_in)));
//                           x_out = x_mid + ffwd(ln2(x_mid)).
// The T tokens' keys and values are written into this layer's cache (a->key_cache and
// a->value_cache, (S, C)) at slots pos0 .., so that their queries, and every later token's,
// can attend to them.
void block_forward(const Config *c, const Weights *w, int l, BlockActs *a, int T, int pos0) {
    int C = c->n_embd, H = c->ffn_width;
    size_t CC = (size_t)C * C, CH = (size_t)C * H; // layer l's (C, C) and (C, H) matrices
    // layer l's six Linears, each {weight, bias, in, out}: `p up` in gdb shows one whole
    Linear query = {w->query + l * CC, NULL, C, C}; // C -> C, no bias, as key and value
    Linear key = {w->key + l * CC, NULL, C, C};
    Linear value = {w->value + l * CC, NULL, C, C};
    Linear proj = {w->proj_weight + l * CC, w->proj_bias + l * C, C, C};
    Linear up = {w->ffwd_up_weight + l * CH, w->ffwd_up_bias + l * H, C, H};       // C -> H
    Linear down = {w->ffwd_down_weight + l * CH, w->ffwd_down_bias + l * C, H, C}; // H -> C
    // attention sub-block: the new keys and values go straight into the cache, rows pos0 ..
    layernorm(a->ln1, a->x_in, w->ln1_weight + l * C, w->ln1_bias + l * C, T, C);
    matmul(a->q, a->ln1, query, T);
    matmul(a->key_cache + (size_t)pos0 * C, a->ln1, key, T);
    matmul(a->value_cache + (size_t)pos0 * C, a->ln1, value, T);
    attention(c, a, T, pos0);
    matmul(a->attn, a->att_out, proj, T);
    residual_add(a->x_mid, a->x_in, a->attn, (size_t)T * C);
    // MLP sub-block: Linear(C, H) -> ReLU -> Linear(H, C), H = 4C unless --ffn-width
    layernorm(a->ln2, a->x_mid, w->ln2_weight + l * C, w->ln2_bias + l * C, T, C);
    matmul(a->hidden, a->ln2, up, T);
    relu(a->hidden, (size_t)T * H);
    matmul(a->ffwd, a->hidden, down, T);
    residual_add(a->x_out, a->x_mid, a->ffwd, (size_t)T * C);
}

// Records where each new token of a pass sits: the slot it follows (parents[t], or the slot
// before its own when parents is NULL), its position, and the mask row of the slots it sees.
static void place_tokens(RunState *s, int T, const int *parents, int S) {
    int pos0 = s->kv_len;
    for (int t = 0; t < T; t++) {
        int slot = pos0 + t;
        s->parent[slot] = parents ? parents[t] : slot - 1; // a chain: the slot before
        if (s->parent[slot] >= slot) { // a parent comes first, or the walk below never ends
            fprintf(stderr, "specdec: internal error: slot %d follows slot %d\n", slot,
                    s->parent[slot]);
            abort();
        }
        // one position past its parent's: in a tree, cache length + depth, whatever the slot
        s->position[slot] = s->parent[slot] < 0 ? 0 : s->position[s->parent[slot]] + 1;
        // its mask row: itself and its ancestors, found by walking the parent slots down
        unsigned char *row = s->sees + (size_t)t * S;
        memset(row, 0, (size_t)S);
        for (int a = slot; a >= 0; a = s->parent[a]) row[a] = 1;
    }
}

// The target model's forward pass, the blog's target_model(idx, past_kvs): embed the T
// new tokens at their positions, run the L blocks (each appends its keys and values to its
// layer of the cache), then ln_f and lm_head. Returns the (T, V) logits.
float *forward(GPT *g, const int *tokens, int T, const int *parents) {
    const Config *c = &g->config;
    RunState *s = &g->state;
    int C = c->n_embd, pos0 = s->kv_len;
    // the new tokens go right after the cached ones, and must fit the context
    if (T < 1 || pos0 + T > c->block_size) {
        // callers keep to the context policy, so this is a bug, not bad input
        fprintf(stderr, "specdec: internal error: forward of %d tokens at kv_len %d "
                "exceeds block_size %d\n", T, pos0, c->block_size);
        abort();
    }
    // the blog's positions = torch.arange(cache_len, cache_len + T), for a chain
    place_tokens(s, T, parents, c->block_size);
    embed(s->x, &g->w, tokens, s->position + pos0, T, C);
    size_t layer = (size_t)c->block_size * C; // one layer's slice of each cache
    for (int l = 0; l < c->n_layer; l++) {
        s->block.key_cache = s->key_cache + l * layer; // this layer's cache
        s->block.value_cache = s->value_cache + l * layer;
        block_forward(c, &g->w, l, &s->block, T, pos0);
    }
    // final LayerNorm and the language-model head
    layernorm(s->ln_f, s->x, g->w.ln_f_weight, g->w.ln_f_bias, T, C);
    Linear lm_head = {g->w.lm_head_weight, g->w.lm_head_bias, C, c->vocab_size}; // C -> V
    matmul(s->logits, s->ln_f, lm_head, T);
    // the cache now holds these T positions too; trim_kv_cache may roll some back
    s->kv_len += T;
    return s->logits;
}

// ----------------------------------------------------------------------------
// Beyond the blog: Medusa heads, guesses from the target's own hidden state
//
// Medusa (Cai et al. 2024) drafts with no second model. The target's last hidden row h_j
// (ln_f's output at position j, RunState.ln_f) feeds its lm_head, which predicts token
// j+1; a few small heads read the same row and guess further ahead: head i (0-based)
// guesses token j+2+i. Each head is Medusa-1's residual block h' = h + SiLU(W h + b),
// then the target's own lm_head, frozen. W and b start at 0, so an untrained head is the
// target's next-token head. `tinyshakespeare/train medusa` trains them, load_medusa (in
// "Loading") reads them, and notes/training.md ("Medusa heads") measures their alpha.

// The Medusa heads of one target: n_heads small residual blocks on its hidden row.
struct MedusaHeads {
    int n_heads; // the heads: head i guesses i+2 tokens past h's     e.g. 4
    int C;       // the target's n_embd: the row each head reads      e.g. 64
    int V;       // the target's vocab_size: each head's logits       e.g. 65
    float *w;    // (n_heads, C, C) head i's W, stored (in, out) like every Linear; owns b
    float *b;    // (n_heads, C)    head i's bias, in w's allocation, after the matrices
};

// Head `head`'s logits (V) from one hidden row (C) of the target: lm_head(h + SiLU(W h + b)).
// Head 0 guesses the token 2 places after the one whose row this is (1 after current_token).
void medusa_logits(const MedusaHeads *m, const GPT *target, const float *hidden, int head,
                   float *logits) {
    int C = m->C, V = m->V;
    const float *W = m->w + (size_t)head * C * C; // this head's (C, C) matrix
    const float *b = m->b + (size_t)head * C;
    float u[4096]; // C <= 4096 (validate_config): W h + b, then h'
    matmul(u, hidden, (Linear){W, b, C, C}, 1); // u = W h + b: one token through the head's Linear
    // h' = h + SiLU(u), SiLU(u) = u * sigmoid(u): an exact 0 for a zero head, so h' = h
    for (int o = 0; o < C; o++) u[o] = hidden[o] + u[o] / (1.0f + expf(-u[o]));
    // the target's lm_head, run as forward runs it: a zero head gives its logits, bit for bit
    matmul(logits, u, (Linear){target->w.lm_head_weight, target->w.lm_head_bias, C, V}, 1);
}

// Frees what load_medusa allocated; safe on a zeroed MedusaHeads, and twice.
void free_medusa(MedusaHeads *m) {
    free(m->w); // b points into the same allocation
    memset(m, 0, sizeof(*m));
}

// ----------------------------------------------------------------------------
// Loading: the corpus and a checkpoint

// The training text, its tokens and the lecture's 90% / 10% train/validation split.
typedef struct {
    unsigned char *bytes; // (N) the raw file, N = 1,115,394 bytes for Tiny Shakespeare
    int *tokens;          // (N) encoded with the model's vocabulary
    size_t n;             // N
    size_t n_train;       // first 90% (int(0.9 * N) in the lecture): the bigram counts come from here
    size_t n_val;         // the last 10%
} Corpus;

// The largest file read_file accepts: 2 GiB (a checkpoint of 500 million parameters).
#define MAX_FILE_BYTES (1ULL << 31)

// Writes a printf-style message into err and returns -1: a refusal is one statement.
__attribute__((format(printf, 3, 4)))
int fail_with(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap); // a longer message is cut, never overrun
    va_end(ap);
    return -1;
}

// Reads a whole file into memory; fills err and returns NULL on any failure.
unsigned char *read_file(const char *path, size_t *n_out, const char *what,
                         const char *fix, char *err, size_t errlen) {
    struct stat st; // stat first: a directory opens fine with fopen and only fails later
    FILE *f = NULL; // opened only once stat's answers pass
    int found = stat(path, &st) == 0;
    if (found && !S_ISREG(st.st_mode))
        fail_with(err, errlen, "%s '%s' is not a regular file (%s)", what, path, fix);
    // refuse a huge file before allocating for it: nothing this program writes or needs is that big
    else if (found && (uint64_t)st.st_size > MAX_FILE_BYTES)
        fail_with(err, errlen, "%s '%s' is %lld bytes, more than the %llu this program reads (%s)",
                  what, path, (long long)st.st_size, MAX_FILE_BYTES, fix);
    // stat failed, or fopen did after it (no read permission, for instance)
    else if (!found || !(f = fopen(path, "rb")))
        fail_with(err, errlen, "cannot open %s '%s': %s (%s)", what, path, strerror(errno), fix);
    if (!f) return NULL;
    // one read of the whole file; a short read means it changed or broke underneath us
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1); // an empty file still gets a buffer
    int bad = !buf || fread(buf, 1, n, f) != n || ferror(f);
    fclose(f);
    if (bad) {
        fail_with(err, errlen, "cannot read %s '%s' (%s)", what, path, fix);
        free(buf);
        return NULL;
    }
    *n_out = n;
    return buf;
}

// Frees what load_corpus allocated; safe to call twice.
void free_corpus(Corpus *c) {
    free(c->bytes);
    free(c->tokens); // the memset below leaves NULLs for a second call
    memset(c, 0, sizeof(*c));
}

// Loads and encodes the corpus; vocab->size 0 builds the vocabulary from it. 0 on success.
int load_corpus(Corpus *c, const char *path, Vocab *vocab, char *err, size_t errlen) {
    memset(c, 0, sizeof(*c));
    c->bytes = read_file(path, &c->n, "corpus", "run 'make data' to fetch Tiny Shakespeare",
                         err, errlen);
    if (!c->bytes) return -1;
    // a refusal below writes err and frees at fail: (the caller's free_corpus stays harmless)
    if (c->n < 2) {
        snprintf(err, errlen, "corpus '%s' has %zu byte%s; it needs at least 2 to count a bigram "
                 "(run 'make data' for Tiny Shakespeare)", path, c->n, c->n == 1 ? "" : "s");
        goto fail;
    }
    // a model the trainer builds learns its vocabulary here; a checkpoint brought its own
    if (vocab->size == 0) build_vocab(vocab, c->bytes, c->n);
    if (!(c->tokens = malloc(c->n * sizeof(int)))) { // (N) ints: 4.5 MB for Tiny Shakespeare
        snprintf(err, errlen, "out of memory encoding corpus '%s'", path);
        goto fail;
    }
    // a byte the model has no token for cannot be counted in the bigram table
    long bad = encode(vocab, c->bytes, c->n, c->tokens);
    if (bad >= 0) {
        char vis[8];
        visible_char(vis, c->bytes[bad]);
        snprintf(err, errlen, "corpus '%s' has byte %s (0x%02x) at offset %ld, which is not "
                 "in the model's vocabulary (use the corpus the model was built with)",
                 path, vis, c->bytes[bad], bad);
        goto fail;
    }
    // the lecture's split: n = int(0.9 * len(data)); train_data = data[:n]
    c->n_train = (size_t)(0.9 * (double)c->n);
    c->n_val = c->n - c->n_train;
    return 0;
fail:
    free_corpus(c);
    return -1;
}

// Checkpoint format (every integer uint32 and every float float32, little-endian):
//   offset     size    field
//   0          4       magic "SPDC"
//   4          4       version = 1
//   8          20      n_layer, n_head, n_embd, block_size, vocab_size
//   28         V       the vocabulary: V distinct bytes, ascending (token i is the i-th)
//   28+V       4*P     the P parameters, tensor by tensor in TENSOR_NAMES order, each row-major
//                      with the shape in Weights (Linear weights as (in, out), PyTorch's weight.T)
//   28+V+4P    8       checksum: FNV-1a 64 of every byte before it
// So the file is exactly 36 + V + 4P bytes, checked first; tinyshakespeare/train.c writes it.
#define CKPT_MAGIC "SPDC"
#define CKPT_VERSION 1
#define CKPT_HEADER 28 // bytes before the vocabulary: magic, version, 5 sizes

// FNV-1a, 64-bit: a short, well-known hash; enough to catch a flipped byte.
uint64_t fnv1a64(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL; // 1a: xor the byte in first, then multiply
    return h;
}

// Little-endian byte order, read byte by byte: the same file on any host.
uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
// The same for 64-bit values: low half first.
uint64_t get_u64(const unsigned char *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

// Checks a config for sizes the model can be built with; fills err and returns -1 if not.
int validate_config(const Config *c, char *err, size_t errlen) {
    // generous bounds: every size product stays far below 2^63; block_size >= 2 leaves room
    // for current_token and one draft; vocab_size <= 256: a token per byte
    if (c->n_layer < 1 || c->n_layer > 64 || c->n_head < 1 || c->n_head > 64 ||
        c->n_embd < 1 || c->n_embd > 4096 || c->block_size < 2 || c->block_size > 4096 ||
        c->vocab_size < 1 || c->vocab_size > 256)
        return fail_with(err, errlen, "config out of range (n_layer %d, n_head %d, n_embd %d, "
                         "block_size %d, vocab_size %d)", c->n_layer, c->n_head, c->n_embd,
                         c->block_size, c->vocab_size);
    if (c->n_embd % c->n_head != 0) // heads split the embedding evenly: HS = C / NH is whole
        return fail_with(err, errlen, "n_embd %d is not a multiple of n_head %d", c->n_embd,
                         c->n_head);
    return 0;
}

// Parses a checkpoint in memory into g (built here) and vocab, checking every field first.
int parse_checkpoint(const unsigned char *buf, size_t n, GPT *g, Vocab *vocab,
                     char *err, size_t errlen) {
    if (n < CKPT_HEADER) // header: magic, version, config
        return fail_with(err, errlen, "file is %zu bytes, shorter than the %d-byte header", n,
                         CKPT_HEADER);
    if (memcmp(buf, CKPT_MAGIC, 4) != 0)
        return fail_with(err, errlen, "wrong magic (not a specdec checkpoint)");
    if (get_u32(buf + 4) != CKPT_VERSION)
        return fail_with(err, errlen, "version %u, this program reads version %d",
                         get_u32(buf + 4), CKPT_VERSION);
    // the five sizes, in Config's field order
    static const char *field[5] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"};
    Config c = {0}; // every size is read below; ffn_width follows from n_embd
    int *sizes_to[5] = {&c.n_layer, &c.n_head, &c.n_embd, &c.block_size, &c.vocab_size};
    for (int i = 0; i < 5; i++) {
        uint32_t f = get_u32(buf + 8 + 4 * i); // unsigned: a huge field must not wrap yet
        if (f > 4096) // it would wrap to a negative int: refuse it here, naming the real value
            return fail_with(err, errlen, "config out of range (%s %u)", field[i], f);
        *sizes_to[i] = (int)f;
    }
    c.ffn_width = 4 * c.n_embd; // the lecture's 4C: a checkpoint holds no other width
    if (validate_config(&c, err, errlen) != 0) return -1;
    // size: known exactly from the config, so check it before reading further
    size_t sizes[N_TENSORS], V = (size_t)c.vocab_size;
    size_t P = weight_sizes(&c, sizes);
    // one number covers truncation at any section and a config that lies about the tensors
    size_t expect = CKPT_HEADER + V + 4 * P + 8;
    if (n != expect)
        return fail_with(err, errlen, "file is %zu bytes, but its config (L=%d NH=%d C=%d S=%d "
                         "V=%d, %zu parameters) needs %zu: %s", n, c.n_layer, c.n_head, c.n_embd,
                         c.block_size, c.vocab_size, P, expect,
                         n < expect ? "truncated or mismatched"
                                    : "too long: mismatched, or bytes were appended");
    // checksum: the last 8 bytes, little-endian, over everything before them
    if (fnv1a64(buf, n - 8) != get_u64(buf + n - 8))
        return fail_with(err, errlen, "checksum mismatch: the file is corrupted");
    const unsigned char *vb = buf + CKPT_HEADER; // vocabulary: strictly ascending bytes
    for (size_t i = 1; i < V; i++)
        if (vb[i] <= vb[i - 1]) // else two tokens would share a byte, or decode out of order
            return fail_with(err, errlen, "vocabulary bytes are not distinct and ascending at "
                             "entry %zu", i);
    if (build_gpt(g, &c) != 0) {
        free_gpt(g); // the caller gets no half-built model
        return fail_with(err, errlen, "out of memory for %zu parameters and the activations of "
                         "a %d-token context", P, c.block_size);
    }
    // parameters, tensor by tensor so that a bad one can be named; each must be finite.
    // memcpy of the bits, not a cast: reinterpreting bytes as float is only defined this way
    size_t i = 0; // the parameter's index in the whole block, which starts after the vocabulary
    for (int t = 0; t < N_TENSORS; t++)
        for (size_t end = i + sizes[t]; i < end; i++) { // tensor t's parameters
            uint32_t bits = get_u32(vb + V + 4 * i);
            memcpy(&g->params[i], &bits, 4);
            if (isfinite(g->params[i])) continue;
            free_gpt(g); // the caller gets no half-loaded model
            return fail_with(err, errlen, "parameter %zu (in tensor %s) is not a finite number",
                             i, TENSOR_NAMES[t]);
        }
    // vocabulary: token i is the i-th byte, as building it from the bytes themselves gives
    build_vocab(vocab, vb, V);
    return 0;
}

// Reads and parses a checkpoint file into g and vocab; err names its role, path, problem and fix.
int read_checkpoint(const char *path, const char *what, const char *fix, GPT *g,
                    Vocab *vocab, char *err, size_t errlen) {
    size_t n = 0;
    unsigned char *buf = read_file(path, &n, what, fix, err, errlen);
    if (!buf) return -1;
    char why[256]; // the reason alone; the message below adds what, path and fix
    int rc = parse_checkpoint(buf, n, g, vocab, why, sizeof(why));
    free(buf); // the parameters were copied out of it
    if (rc != 0) snprintf(err, errlen, "%s '%s': %s (%s)", what, path, why, fix);
    return rc;
}

// Loads the target's checkpoint (-m); on failure err names the file, the problem, the fix.
int load_checkpoint(const char *path, GPT *g, Vocab *vocab, char *err, size_t errlen) {
    return read_checkpoint(path, "checkpoint", "point -m at a checkpoint: 'make train' trains one, "
                           "'tinyshakespeare/train init --seed S -o PATH' writes a random one", g,
                           vocab, err, errlen);
}

// Medusa heads' format, as tinyshakespeare/train medusa writes it (little-endian as above):
//   offset     size        field
//   0          4           magic "SPDM"
//   4          4           version = 1
//   8          12          n_heads N, n_embd C, vocab_size V (C and V: the target's)
//   20         8           the target's fingerprint (target_fingerprint): the heads read
//                          its hidden rows, so they fit that model and no other
//   28         4N(C+1)C    every head's W (N, C, C), then every head's b (N, C)
//   end-8      8           checksum: FNV-1a 64 of every byte before it
// So the file is exactly 36 + 4N(C+1)C bytes: 66,596 for 4 heads on the shipped target.
#define MEDUSA_MAGIC "SPDM"
#define MEDUSA_VERSION 1
#define MEDUSA_HEADER 28 // bytes before the floats: magic, version, 3 sizes, fingerprint
#define MEDUSA_MAX_HEADS TREE_MAX_DEPTH // a head per tree level, and a tree has at most 16

// A target's fingerprint: fnv1a64 of its parameters as its checkpoint stores them, no copy.
uint64_t target_fingerprint(const GPT *g) {
    if (g->padded_from) return g->padded_from; // the zeros change no hidden row, no logit
    uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a 64's offset basis, as in fnv1a64
    for (size_t i = 0; i < g->n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &g->params[i], 4);
        for (int k = 0; k < 4; k++) // low byte first, as put_u32 writes it
            h = (h ^ ((bits >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
    }
    return h;
}

// Reads Medusa heads for `target` from path into m; on failure err and -1, nothing allocated.
int load_medusa(const char *path, const GPT *target, MedusaHeads *m, char *err, size_t errlen) {
    static const char fix[] = "train heads for this model: 'make train-medusa', or "
                              "'tinyshakespeare/train medusa -m MODEL "
                              "-o tinyshakespeare/medusa.bin'";
    memset(m, 0, sizeof(*m)); // free_medusa is safe on it whatever fails
    size_t n = 0;
    unsigned char *buf = read_file(path, &n, "medusa heads", fix, err, errlen);
    if (!buf) return -1;
    char why[256] = ""; // the reason alone; empty while every check passes
    int C = target->config.n_embd, V = target->config.vocab_size;
    size_t N = n >= MEDUSA_HEADER ? get_u32(buf + 8) : 0, per = (size_t)(C + 1) * C;
    // the file's size for N heads: the header, their floats, the checksum (N < 2^32: no
    // overflow on a 64-bit size_t, and it is compared only once N is checked below)
    size_t expect = MEDUSA_HEADER + 4 * N * per + 8;
    // every field checked before it is used: each check may rely on the ones above it
    if (n < MEDUSA_HEADER)
        snprintf(why, sizeof(why), "file is %zu bytes, shorter than the %d-byte header", n,
                 MEDUSA_HEADER);
    else if (memcmp(buf, MEDUSA_MAGIC, 4) != 0)
        snprintf(why, sizeof(why), "wrong magic (not a specdec Medusa heads file)");
    else if (get_u32(buf + 4) != MEDUSA_VERSION)
        snprintf(why, sizeof(why), "version %u, this program reads version %d",
                 get_u32(buf + 4), MEDUSA_VERSION);
    else if (N < 1 || N > MEDUSA_MAX_HEADS)
        snprintf(why, sizeof(why), "n_heads %zu out of range (1 to %d)", N, MEDUSA_MAX_HEADS);
    // the sizes next: a mismatched pair gets its own words, before the file's size is compared
    else if (get_u32(buf + 12) != (uint32_t)C || get_u32(buf + 16) != (uint32_t)V)
        snprintf(why, sizeof(why), "heads for a model %u wide with %u tokens, but the target "
                 "is %d wide with %d", get_u32(buf + 12), get_u32(buf + 16), C, V);
    else if (n != expect)
        snprintf(why, sizeof(why), "file is %zu bytes, but %zu heads %d wide need %zu: %s", n,
                 N, C, expect, n < expect ? "truncated" : "too long: bytes were appended");
    // the file's integrity before the pairing: a damaged file must not be blamed on the target
    else if (fnv1a64(buf, n - 8) != get_u64(buf + n - 8))
        snprintf(why, sizeof(why), "checksum mismatch: the file is corrupted");
    else if (get_u64(buf + 20) != target_fingerprint(target))
        snprintf(why, sizeof(why), "trained on another target model (its fingerprint does "
                 "not match this one's)");
    else if (!(m->w = malloc(N * per * sizeof(float))))
        snprintf(why, sizeof(why), "out of memory for %zu heads", N);
    // the floats, each finite, or every logit of its head would be NaN
    for (size_t i = 0; !why[0] && i < N * per; i++) {
        uint32_t bits = get_u32(buf + MEDUSA_HEADER + 4 * i);
        memcpy(&m->w[i], &bits, 4);
        if (!isfinite(m->w[i]))
            snprintf(why, sizeof(why), "float %zu (head %zu's %s) is not a finite number", i,
                     i < N * C * C ? i / C / C : (i - N * C * C) / C, i < N * C * C ? "W" : "b");
    }
    free(buf); // the floats were copied out of it
    if (why[0]) {
        free_medusa(m);
        return fail_with(err, errlen, "medusa heads '%s': %s (%s)", path, why, fix);
    }
    *m = (MedusaHeads){(int)N, C, V, m->w, m->w + N * C * C};
    return 0;
}

// Widens the MLP to H2 >= H hidden units with zeros (--ffn-width): each new unit adds exact
// zeros, so the logits stay the same, bit for bit, but there is more to stream (notes/speed.md).
int widen_ffn(GPT *g, int H2) {
    if (H2 < g->config.ffn_width) return -1; // narrower would cut real units: another model
    Config c = g->config;
    c.ffn_width = H2;
    GPT wide;
    if (build_gpt(&wide, &c) != 0) {
        free_gpt(&wide); // whatever was built
        return -1;
    }
    // write the zeros: calloc's untouched pages all map the kernel's one zero page, which
    // sits in the cache, and the padded model would only pretend to stream its weights
    memset(wide.params, 0, wide.n_params * sizeof(float));
    size_t from[N_TENSORS], to[N_TENSORS], L = c.n_layer, C = c.n_embd;
    weight_sizes(&g->config, from);
    weight_sizes(&c, to);
    const float *src = g->params;
    float *dst = wide.params;
    for (int i = 0; i < N_TENSORS; i++) {
        // three tensors are made of rows that widen: up weight (L, C, H), L*C rows of H;
        // up bias (L, H), L rows of H; down weight (L, H, C), L layers of H*C, each unit's
        // row of C, the new units' rows after the old. The rest are copied whole, as one row.
        size_t rows = i == 11 ? L * C : i == 12 || i == 13 ? L : 1;
        for (size_t r = 0; r < rows; r++) // a row's real values first, then zeros to its new end
            memcpy(dst + r * (to[i] / rows), src + r * (from[i] / rows), from[i] / rows * sizeof(float));
        src += from[i]; // the next tensor, in both blocks
        dst += to[i];
    }
    wide.padded_from = target_fingerprint(g); // the heads trained on g fit wide as well
    free_gpt(g);
    *g = wide; // the Weights and RunState pointers point into wide's own allocations
    return 0;
}

// ----------------------------------------------------------------------------
// Self-test: greedy speculative decoding is plain greedy decoding, bit for bit, and one
// round samples the target exactly

// Greedy speculative vs greedy plain on one prompt and one K: the texts must be equal.
static int selftest_greedy_case(GPT *g, Draft *d, const char *label, const Tokens *prompt,
                                int K, int n_new) {
    int V = g->config.vocab_size, start = prompt->n > 0 ? prompt->n : 1; // seq[start..]: new text
    int *seq_spec = malloc((size_t)(start + n_new) * sizeof(int));
    int *seq_plain = malloc((size_t)(start + n_new) * sizeof(int));
    float p[256]; // plain decoding's row (V <= 256, validate_config)
    SpecBuffers b;
    Stats ss = {0}, sp = {0};
    Rng r1, r2; // different streams: greedy decoding must not depend on them
    rng_seed(&r1, 1);
    rng_seed(&r2, 2);
    DecodeOptions os = {.n_new = n_new, .K = K, .rng = &r1, .st = &ss}; // sampler 0: t = 0, greedy
    DecodeOptions op = {.n_new = n_new, .K = K, .rng = &r2, .st = &sp}; // no echo, no trace
    int same = seq_spec && seq_plain && build_spec_buffers(&b, K, V, g->config.block_size) == 0;
    if (same) { // both decoders from the same prompt; each refills its own cache from scratch
        speculative_generate(g, d, &b, prompt, &os, seq_spec);
        generate(g, prompt, &op, seq_plain, p);
        free_spec_buffers(&b);
        same = ss.emitted == n_new && sp.emitted == n_new && // the new text; the prompt is shared
               memcmp(seq_spec + start, seq_plain + start, (size_t)n_new * sizeof(int)) == 0;
    }
    printf("%s greedy %-6s %-14s K=%d: %d tokens %s (spec: %ld target passes, %ld with a "
           "refill, alpha %.3f; plain: %ld passes)\n", same ? "PASS" : "FAIL", d->name, label, K,
           n_new, same ? "byte-identical" : "DIFFER", target_passes(&ss), ss.pass[PASS_FOLDED].passes,
           stats_alpha(&ss), target_passes(&sp));
    free(seq_spec);
    free(seq_plain);
    return same;
}

// The logits of one T-token pass equal, bit for bit, those of the same tokens fed one
// at a time: the property that makes verification agree with plain decoding.
static int selftest_multi_vs_single(GPT *g, const int *tokens, int T) {
    size_t V = (size_t)g->config.vocab_size; // one row of logits
    float *multi = malloc(T * V * sizeof(float)); // the T rows of the one pass
    int same = multi != NULL;
    if (same) { // the same T tokens twice from an empty cache: once as one pass, once one by one
        g->state.kv_len = 0;
        memcpy(multi, forward(g, tokens, T, NULL), T * V * sizeof(float));
        g->state.kv_len = 0;
        // memcmp, not a tolerance: greedy equivalence needs every float exactly equal
        for (int t = 0; t < T; t++)
            same &= memcmp(multi + t * V, forward(g, tokens + t, 1, NULL), V * sizeof(float)) == 0;
    }
    printf("%s logits of one %d-token pass == %d one-token passes, bit for bit\n",
           same ? "PASS" : "FAIL", T, T);
    free(multi);
    return same;
}

// accept_reject's signature: the sampling check runs it, or a test's planted bug.
typedef int (*AcceptFn)(SpecBuffers *, int, int, Rng *);

// The smallest of rng_uniform's 2^53 values (index i: u = i / 2^53) at which one round of
// the one guess in b, its uniforms forced, passes `want`, by bisection. x = 0: u is the
// first uniform, and the output is whether the guess was rejected; x = 1: u is the resample's
// uniform after a first that rejects, and the output is the token drawn. Both rise with u.
static uint64_t first_above(AcceptFn accept, SpecBuffers *b, int x, int want) {
    uint64_t lo = 0, hi = (uint64_t)1 << 53; // hi = 2^53: the output never passes want
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        double u = (double)mid / 9007199254740992.0;
        double forced[2] = {x ? 0x1.fffffffffffffp-1 : u, u};
        Rng r;
        rng_seed(&r, 0); // a planted bug may draw more than the two forced values
        rng_force(&r, forced, 2);
        accept(b, 1, 0, &r);
        if ((x ? b->accepted[0] : b->rejected_at + 1) > want) hi = mid; // rejected: -1, or 0
        else lo = mid + 1;
    }
    return lo;
}

// Rounds a row to multiples of 2^-24, its largest entry taking the rest, so that it sums
// to exactly 1 in float and double alike: then the check below can ask for 1e-9.
static void round_row(float *row, int V) {
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        row[i] = (float)(round(row[i] * 16777216.0) / 16777216.0);
        sum += row[i];
    }
    row[argmax(row, V)] += (float)(1.0 - sum); // exact: every entry is a multiple of 2^-24
}

// Sampling is exact: the chance that one round of one guess emits each token, enumerated
// over every value its uniforms can take (first_above), equals the target's p, on the
// model's real rows: p after the corpus's first n tokens, q the bigram's row, both at t = 1.
// Returns the total variation between the two (test_exact.c runs it on a planted bug).
double selftest_sampling(GPT *g, const Draft *d, const int *context, int n, AcceptFn accept) {
    int V = g->config.vocab_size;
    Sampler t1 = {1.0f, 0, 0.0f};
    float p[2 * 256], q[256], residual[256]; // p_0, and a bonus row the round never reads
    double emit[256] = {0}, grid = 9007199254740992.0, u[1]; // emit[x]: the chance x comes out
    int guess[1], out[2]; // the round of one guess that first_above runs, in these buffers:
    SpecBuffers b = {.K = 1, .V = V, .candidates = guess, .q_draft = q, .p_target = p, .u = u,
                     .residual = residual, .accepted = out};
    g->state.kv_len = 0;
    served_probs(p, forward(g, context, n, NULL) + (size_t)(n - 1) * V, V, &t1);
    bigram_served_probs(q, &d->bigram, context[n - 1], &t1);
    round_row(p, V);
    round_row(q, V);
    memcpy(p + V, p, (size_t)V * sizeof(float));
    for (int c = 0; c < V; c++) { // the guess c, drawn with chance q(c)
        guess[0] = c;
        double pass = first_above(accept, &b, 0, 0) / grid; // u1 below it: accepted
        emit[c] += q[c] * pass;
        double below = 0.0; // the resample's u2 interval for token x: [below, above)
        for (int x = 0; pass < 1.0 && x < V; x++) {
            double above = first_above(accept, &b, 1, x) / grid;
            emit[x] += q[c] * (1.0 - pass) * (above - below);
            below = above;
        }
    }
    double tv = 0.0; // total variation: half the summed gaps
    for (int x = 0; x < V; x++) tv += 0.5 * fabs(emit[x] - p[x]);
    return tv;
}

// The corpus length the self-test needs: its longest prompt, 2S+7 tokens, comes from it.
size_t selftest_min_corpus(int S) { return (size_t)2 * S + 7; }

// Runs every self-test case, for each of the n_drafts drafts; returns the number of failures.
int selftest(GPT *g, Draft *drafts, int n_drafts, const Vocab *v, const Corpus *corpus) {
    int S = g->config.block_size, failures = 0, cases = 0;
    // prompts: empty, one char, the blog's, exactly S and longer (from the corpus), a name line
    const char *texts[] = {"", "\n", "To be or not to be, that is the ", NULL, NULL, "ROMEO:\n"};
    const char *labels[] = {"empty", "newline", "to-be", "exactly-S", "longer-than-S", "romeo"};
    int lens[] = {0, 0, 0, S, (int)selftest_min_corpus(S), 0};
    int tokens[64]; // a text prompt, encoded (texts[] are under 64 bytes); the corpus's
                    // prompts are read where they lie
    for (int c = 0; c < 6; c++) {
        int n_prompt = texts[c] ? (int)strlen(texts[c]) : lens[c];
        const int *prompt = texts[c] ? tokens : corpus->tokens;
        // a vocabulary without these bytes cannot run the required prompts: one failed case
        int cannot = texts[c] && encode(v, (const unsigned char *)texts[c], (size_t)n_prompt,
                                        tokens) >= 0;
        if (cannot)
            printf("FAIL greedy %-14s cannot run: the vocabulary lacks one of its bytes "
                   "(use Tiny Shakespeare)\n", labels[c]);
        failures += cannot;
        cases += cannot;
        // every draft, K = 1..8: short and long drafts; 300 tokens is several refills
        for (int d = 0; !cannot && d < n_drafts; d++)
            for (int K = 1; K <= 8 && K < S; K++, cases++)
                failures += !selftest_greedy_case(g, &drafts[d], labels[c],
                                                  &(Tokens){prompt, n_prompt}, K, 300);
    }
    int T[] = {2, 5, 9, S}; // one pass vs one token at a time, for several pass lengths
    for (int i = 0; i < 4; i++, cases++)
        failures += !selftest_multi_vs_single(g, corpus->tokens, T[i] < S ? T[i] : S);
    // the p/q rule and the residual, on real rows: drafts[0] is the bigram
    double tv = selftest_sampling(g, &drafts[0], corpus->tokens, S, accept_reject);
    printf("%s sampling: one round of one guess emits the target's p, enumerated over every forced "
           "draw (total variation %.1e, must be below 1e-9)\n", tv < 1e-9 ? "PASS" : "FAIL", tv);
    failures += !(tv < 1e-9);
    cases++;
    // the summary line is commentary for the test runner, which counts PASS/FAIL lines
    printf("selftest: %d of %d cases passed\n", cases - failures, cases);
    return failures;
}

// ----------------------------------------------------------------------------
// CLI: ./specdec [options], in the manner of llama2.c's run

// Prints "specdec: MESSAGE" on stderr as one line, newlines and raw bytes escaped (\n, \xNN).
__attribute__((format(printf, 1, 2)))
void error_line(const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap); // a longer message is cut, never overrun
    va_end(ap);
    fputs("specdec: ", stderr);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
        if (*c == '\n') fputs("\\n", stderr);
        else if (*c < 0x20 || *c >= 0x7f) fprintf(stderr, "\\x%02x", *c); // raw bytes too
        else fputc(*c, stderr);
    fputc('\n', stderr);
}

// Closes stdout; a write lost on the way (full disk, closed pipe) is one line on stderr, exit 1.
int close_stdout(void) {
    int failed = ferror(stdout);
    if (fclose(stdout) == 0 && !failed) return 0;
    error_line("cannot write to stdout: %s (a full disk or a closed pipe)", strerror(errno));
    return 1;
}

// What the command line asked for: each field is its option's value (usage lists them).
typedef struct {
    const char *model_path, *corpus_path, *prompt, *draft; // -m (NULL: the default), -i, -p, --draft
    const char *tree;               // --tree, e.g. "3,2,1,1", or NULL: a chain of K
    int n_new, K, top_k, ffn_width; // -n, -k, --top-k (0: off), --ffn-width (0: the model's own)
    float temperature, top_p, draft_p_min; // -t, --top-p (0: off), --draft-p-min (0: off)
    uint64_t seed;                  // -s
    int trace, compare, plain, run_selftest, help, no_prompt; // the flags of the same names
    int color; // --color 1, --no-color 0, or -1: on for a terminal if NO_COLOR is unset or empty
} Options;

#define DEFAULT_MODEL "tinyshakespeare/model.bin"
#define DEFAULT_CORPUS "tinyshakespeare/input.txt"
#define DEFAULT_PROMPT "To be or not to be, that is the "
#define DEFAULT_DRAFT "tinyshakespeare/draft.bin" // --draft gpt
#define DEFAULT_MEDUSA "tinyshakespeare/medusa.bin" // --draft medusa
#define MAX_NEW_TOKENS 10000000 // 10 bytes of buffers per token: 100 MB at most
#define MAX_FFN_WIDTH 16777216  // 2^24 hidden units: 32 GiB of weights for the lecture's model

// The help text of -h.
void usage(FILE *f) {
    fprintf(f, "usage: ./specdec [options]\n"
        "  -m PATH     checkpoint (default " DEFAULT_MODEL ")\n"
        "  -i PATH     corpus for the vocabulary and the bigram draft (default " DEFAULT_CORPUS ")\n"
        "  -p TEXT     prompt (default \"" DEFAULT_PROMPT "\"; may be empty)\n"
        "  -n N        tokens to generate, 1..%d (default 200)\n"
        "  -k K        draft length, 1..block_size-1 (default 4)\n"
        "  -t T        temperature >= 0; 0 = greedy (default 1.0)\n"
        "  -s SEED     sampling seed, a non-negative integer (default 42)\n"
        "  --draft D   bigram (default: the blog's table), gpt (" DEFAULT_DRAFT ",\n"
        "              a small GPT with its own KV cache), lookup (copies earlier text),\n"
        "              medusa (" DEFAULT_MEDUSA ": heads on the target's hidden row, for\n"
        "              trees; without --tree, a chain of -k levels), or the path of a\n"
        "              checkpoint with the target's vocabulary\n"
        "  --top-k N   keep the N most likely tokens, 1..V, in the target and the draft\n"
        "  --top-p P   keep the fewest most likely tokens whose mass reaches P, 0 < P <= 1;\n"
        "              both filter after the temperature; at -t 0 they change nothing\n"
        "  --tree W1,W2,..  draft a tree: W1 guesses after current_token, W2 after each of\n"
        "              those, ...; one masked pass verifies it (e.g. 3,2,1,1; 1,1,1,1 = -k 4)\n"
        "  --draft-p-min P  a guess the draft gives less than P (at t = 1, unfiltered) is its\n"
        "              round's last: fewer wasted guesses, the same output (0 = off)\n"
        "  --ffn-width H  widen the MLP to H hidden units with zeros: the same text, but\n"
        "              2 KB of weights per unit to stream (65536: 136 MB; notes/speed.md)\n"
        "  --trace     print every round's draft, verify, accept/reject and trim on stderr\n"
        "  --compare   also run plain decoding with the same seed; compare passes and time\n"
        "  --plain     plain autoregressive decoding only\n"
        "  --color     colour each character by its source (accepted draft, resampled, bonus,\n"
        "              target sample); the default on a terminal if NO_COLOR is unset or empty\n"
        "  --no-color  plain text even on a terminal\n"
        "  --no-prompt print only the generated text, not the prompt before it\n"
        "  --selftest  greedy equivalence and exact sampling checks, one PASS/FAIL line each\n"
        "  -h, --help  this text\n"
        "Generated text goes to stdout; config, trace and stats go to stderr. Beside it:\n"
        "tinyshakespeare/train, test/bench and test/explain, each with -h.\n", MAX_NEW_TOKENS);
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

// How an option's value is read: OPT_FLAG sets an int to lo; OPT_TEXT keeps the text as given;
// OPT_WHOLE is an int in [lo, hi], OPT_SEED a 64-bit seed, OPT_REAL a float in [lo, hi].
typedef enum { OPT_FLAG, OPT_TEXT, OPT_WHOLE, OPT_SEED, OPT_REAL } OptionKind;

// One option: its spelling, and where and how its value is kept.
typedef struct {
    const char *flag; // as typed: "-n", "--top-p"
    OptionKind kind;
    void *field;      // the Options field it sets
    double lo, hi;    // OPT_WHOLE, OPT_REAL: the range accepted; OPT_FLAG: the value set
    const char *rule; // the refusal's words: "FLAG must be RULE, got 'VALUE'"
} OptionSpec;

// Parses an option's value (a flag has none) into its field; -1 if it breaks the option's rule.
static int parse_value(const OptionSpec *opt, const char *val) {
    if (opt->kind == OPT_SEED) return parse_seed(val, opt->field);
    if (opt->kind == OPT_TEXT) {
        *(const char **)opt->field = val;
        return 0;
    }
    if (opt->kind == OPT_WHOLE) {
        long whole; // parse_int's result, range-checked before the cast
        if (parse_int(val, (long)opt->lo, (long)opt->hi, &whole) != 0) return -1;
        *(int *)opt->field = (int)whole;
        return 0;
    }
    // strtod alone accepts " 5", "nan" and "inf" (nan then fails v >= lo, inf v <= hi), and
    // a value a float cannot hold would become 0 without a word: -t 1e-50 is not greedy
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (!*val || isspace((unsigned char)*val) || *end || errno || !(v >= opt->lo && v <= opt->hi)
        || (v != 0.0 && fabs(v) < FLT_MIN))
        return -1;
    *(float *)opt->field = v == 0.0 ? 0.0f : (float)v; // -0 is 0 too, and prints as 0
    return 0;
}

// Parses a --tree shape, "3,2,1,1", whose nodes fit a window of S. 0, or -1 with err set.
int parse_tree_shape(const char *text, int V, int S, TreeShape *shape, char *err, size_t errlen) {
    memset(shape, 0, sizeof(*shape));
    const char *s = text;
    long level_nodes = 1; // nodes at the level above: the root alone
    while (1) {
        char *end;
        errno = 0;
        long w = strtol(s, &end, 10);
        if (!isdigit((unsigned char)*s) || errno || w < 1 || w > V || (*end != ',' && *end != '\0'))
            return fail_with(err, errlen, "--tree '%s': each width must be a whole number 1..%d, "
                             "comma-separated, e.g. --tree 3,2,1,1", text, V);
        if (shape->depth == TREE_MAX_DEPTH)
            return fail_with(err, errlen, "--tree '%s' has more than %d levels: give fewer",
                             text, TREE_MAX_DEPTH);
        shape->width[shape->depth++] = (int)w;
        level_nodes *= w;
        shape->nodes += (int)(level_nodes < S ? level_nodes : S); // no overflow past S
        if (shape->nodes > S - 1)
            return fail_with(err, errlen, "--tree '%s' has over %d guesses, more than the %d "
                             "slots after current_token in a window of %d: give fewer or "
                             "narrower levels", text, S - 1, S - 1, S);
        if (*end == '\0') return 0;
        s = end + 1;
    }
}

// Fills o from argv; on a bad argument writes one line to err and returns -1.
int parse_args(int argc, char **argv, Options *o, char *err, size_t errlen) {
    // defaults: the blog's prompt, K = 4, t = 1, a fixed seed so a run can be repeated
    // (K 0: no -k given; it becomes 4 below, once --tree has had its say)
    *o = (Options){.corpus_path = DEFAULT_CORPUS, .prompt = DEFAULT_PROMPT, .n_new = 200,
                   .temperature = 1.0f, .seed = 42, .color = -1, .draft = "bigram"};
    // every option; what needs the model is checked later: --ffn-width in setup_model,
    // -k < block_size, --top-k <= V and the prompt's bytes in check_inputs
    const OptionSpec options[] = {
        {"-h", OPT_FLAG, &o->help, 1, 0, NULL},
        {"--help", OPT_FLAG, &o->help, 1, 0, NULL},
        {"--trace", OPT_FLAG, &o->trace, 1, 0, NULL},
        {"--compare", OPT_FLAG, &o->compare, 1, 0, NULL},
        {"--plain", OPT_FLAG, &o->plain, 1, 0, NULL},
        {"--selftest", OPT_FLAG, &o->run_selftest, 1, 0, NULL},
        {"--color", OPT_FLAG, &o->color, 1, 0, NULL},
        {"--no-color", OPT_FLAG, &o->color, 0, 0, NULL},
        {"--no-prompt", OPT_FLAG, &o->no_prompt, 1, 0, NULL},
        {"-m", OPT_TEXT, &o->model_path, 0, 0, NULL},
        {"-i", OPT_TEXT, &o->corpus_path, 0, 0, NULL},
        {"-p", OPT_TEXT, &o->prompt, 0, 0, NULL},
        {"--draft", OPT_TEXT, &o->draft, 0, 0, NULL},
        {"--tree", OPT_TEXT, &o->tree, 0, 0, NULL},
        {"-n", OPT_WHOLE, &o->n_new, 1, MAX_NEW_TOKENS, "a whole number of tokens, 1 to 10000000"},
        {"-k", OPT_WHOLE, &o->K, 1, 4096, "a whole number from 1 to block_size-1"},
        {"--top-k", OPT_WHOLE, &o->top_k, 1, 256, "a whole number from 1 to the vocabulary's size"},
        {"--ffn-width", OPT_WHOLE, &o->ffn_width, 1, MAX_FFN_WIDTH, "a whole number of hidden "
         "units up to 16777216, at least the model's own (256 here)"},
        {"-s", OPT_SEED, &o->seed, 0, 0, "a non-negative whole number below 2^64"},
        {"-t", OPT_REAL, &o->temperature, 0.0, 1e6, "0 (greedy) or a finite temperature "
         "from 1.18e-38 (FLT_MIN, the smallest normal float) to 1e6"},
        {"--top-p", OPT_REAL, &o->top_p, FLT_MIN, 1.0, "a probability mass above 0 (at "
         "least FLT_MIN, 1.18e-38) and at most 1"},
        {"--draft-p-min", OPT_REAL, &o->draft_p_min, 0.0, 1.0, "0 (off) or a probability "
         "from 1.18e-38 (FLT_MIN) to 1"}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const OptionSpec *opt = NULL; // a's row of the table
        for (size_t j = 0; j < sizeof(options) / sizeof(options[0]); j++)
            if (!strcmp(a, options[j].flag)) opt = &options[j];
        if (!opt) // a typo, or the name of a tool beside it
            return fail_with(err, errlen, "unknown option '%s' (see ./specdec -h; the tools beside "
                             "it are tinyshakespeare/train, test/bench and test/explain)", a);
        if (opt->kind == OPT_FLAG) // -h too: a later error still wins, so no typo goes unseen
            *(int *)opt->field = (int)opt->lo;
        else if (i + 1 == argc) // a value is the next word, whatever it is ("-p -x" is a prompt)
            return fail_with(err, errlen, "option %s needs a value (see ./specdec -h)", a);
        else if (parse_value(opt, argv[++i]) != 0) // consumed; checked in full: no silent clamping
            return fail_with(err, errlen, "%s must be %s, got '%s'", a, opt->rule, argv[i]);
    }
    // combinations that cannot both hold; the first that applies is the one reported
    if (o->plain && o->compare)
        return fail_with(err, errlen, "--plain and --compare cannot be combined; --compare "
                         "already runs plain decoding");
    if (o->plain && o->trace) // plain decoding has no rounds to trace
        return fail_with(err, errlen, "--trace shows the rounds of speculative decoding; drop "
                         "--plain to see them");
    if (o->run_selftest && (o->trace || o->compare || o->plain || o->tree)) // one action a run
        return fail_with(err, errlen, "--selftest and generation (--trace, --compare, --plain, "
                         "--tree) are separate actions; give one per run");
    if (o->run_selftest && !strcmp(o->draft, "medusa")) // its chains are drafted guess by guess
        return fail_with(err, errlen, "--selftest checks the chain's drafts (bigram, lookup, a "
                         "model); medusa's heads draft trees, which test/test_tree checks");
    if (o->tree && o->K) // the tree's levels are its K, for the chain beside it too
        return fail_with(err, errlen, "-k %d sets a chain's length, and --tree %s a tree's "
                         "levels (--compare's chain beside it takes that depth); drop -k",
                         o->K, o->tree);
    o->K = o->K ? o->K : 4; // -k's default: 4 guesses a round
    return 0;
}

// Encodes the prompt; names the first byte not in the vocabulary. 0 on success.
int encode_prompt(const Vocab *v, const char *prompt, int *tokens, char *err, size_t errlen) {
    long bad = encode(v, (const unsigned char *)prompt, strlen(prompt), tokens);
    if (bad < 0) return 0;
    char vis[8]; // name the byte, visibly, and where it is: the user can find it and fix it
    visible_char(vis, (unsigned char)prompt[bad]);
    return fail_with(err, errlen, "prompt character %s (byte 0x%02x) at position %ld is not in "
                     "the model's vocabulary of %d characters; remove or replace it", vis,
                     (unsigned char)prompt[bad], bad, v->size);
}

// Prints the config and the parameter count (stderr).
void print_config(const GPT *g, const char *source) {
    const Config *c = &g->config;
    fprintf(stderr, "model: %s\nconfig: n_layer=%d n_head=%d n_embd=%d block_size=%d vocab_size=%d "
            "-> %zu parameters\n", source, c->n_layer, c->n_head, c->n_embd, c->block_size,
            c->vocab_size, g->n_params);
}

// What main loads and checks before it runs an action (its ld): the target and its inputs.
typedef struct {
    GPT g;            // the target (-m), its MLP widened by --ffn-width
    Vocab v;          // its vocabulary
    Corpus corpus;    // -i, encoded with v
    char source[256]; // the "model:" line: the path, and the widening if any
    int *prompt;      // (n_prompt) -p, a token per byte (check_inputs encodes it); --selftest: NULL
    TreeShape shape;  // --tree, parsed once by check_inputs; without it, a chain: depth -k;
                      // --selftest: zeroed (it brings its own Ks and runs no tree)
} Loaded;

// Loads the model and the corpus, then widens the MLP for --ffn-width H if H fits the model
// and memory; ld->source receives the model's description, printed once every input is checked.
int setup_model(const Options *o, Loaded *ld, char *err, size_t errlen) {
    const char *path = o->model_path ? o->model_path : DEFAULT_MODEL;
    if (load_checkpoint(path, &ld->g, &ld->v, err, errlen) != 0) return -1;
    if (load_corpus(&ld->corpus, o->corpus_path, &ld->v, err, errlen) != 0) return -1;
    int H = o->ffn_width, H_model = ld->g.config.ffn_width;
    double mb = 8.0 * ld->g.config.n_layer * ld->g.config.n_embd * H / 1e6; // the MLP's (C, H) pair
    double ram_mb = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) / 1e6;
    if (H > 0 && H < H_model) // padding only adds units: a narrower MLP is another model
        return fail_with(err, errlen, "--ffn-width %d is narrower than the model's MLP of %d "
                         "units; use %d or more", H, H_model, H_model);
    if (H > 0 && ram_mb > 0 && mb > ram_mb / 2) // leave room: the pages are written, not reserved
        return fail_with(err, errlen, "--ffn-width %d needs %.0f MB of MLP weights, more than half "
                         "of this machine's %.0f MB of memory; use a smaller width", H, mb, ram_mb);
    if (H > 0 && widen_ffn(&ld->g, H) != 0)
        return fail_with(err, errlen, "out of memory widening the MLP to %d units (%.0f MB); "
                         "use a smaller --ffn-width", H, mb);
    snprintf(ld->source, sizeof(ld->source), "%s", path); // and what the weights became, if widened
    size_t n = strlen(ld->source);
    if (H > 0)
        snprintf(ld->source + n, sizeof(ld->source) - n, ", MLP padded with zeros to %d units "
                 "(%.1f MB of weights)", H, ld->g.n_params * 4.0 / 1e6);
    return 0;
}

// Checks what needs the model: V, K, the prompt (encoded into ld->prompt), the tree (parsed
// into ld->shape) and the draft's options.
int check_inputs(const Options *o, Loaded *ld, char *err, size_t errlen) {
    int S = ld->g.config.block_size, V = ld->v.size, lookup = !strcmp(o->draft, "lookup");
    size_t n = strlen(o->prompt), need = selftest_min_corpus(S);
    if (o->run_selftest && ld->corpus.n < need)
        return fail_with(err, errlen, "the self-test takes prompts of up to %zu tokens from the "
                         "corpus, which has %zu; use Tiny Shakespeare (make data)", need,
                         ld->corpus.n);
    if (o->top_k > V)
        return fail_with(err, errlen, "--top-k %d is more than the vocabulary's %d tokens; use "
                         "--top-k 1..%d", o->top_k, V, V);
    if (o->run_selftest) return 0; // it brings its own prompts and Ks
    if (o->K >= S) // K+1 tokens must fit: K <= S-1
        return fail_with(err, errlen, "-k %d is too large: a verify pass of K+1 tokens must fit "
                         "block_size %d; use -k 1..%d", o->K, S, S - 1);
    ld->prompt = malloc((n + 1) * sizeof(int)); // a token per byte; +1: never malloc(0)
    if (!ld->prompt) return fail_with(err, errlen, "out of memory for a prompt of %zu bytes", n);
    if (encode_prompt(&ld->v, o->prompt, ld->prompt, err, errlen) != 0) return -1;
    if (lookup && o->draft_p_min > 0.0f)
        return fail_with(err, errlen, "--draft-p-min stops a draft that is unsure of its guess, "
                         "and lookup's copies have no chance below 1 to compare; drop "
                         "--draft-p-min, or use --draft bigram or gpt");
    ld->shape = (TreeShape){.depth = o->K}; // no --tree: a chain of K levels (Medusa's check)
    if (o->tree && parse_tree_shape(o->tree, V, S, &ld->shape, err, errlen) != 0) return -1;
    if (o->tree && lookup)
        return fail_with(err, errlen, "--tree needs several guesses per position, and lookup "
                         "copies one continuation; drop --tree, or use --draft bigram or gpt");
    if (!strcmp(o->draft, "medusa") && o->draft_p_min > 0.0f)
        return fail_with(err, errlen, "--draft-p-min ends a chain drafted guess by guess, and "
                         "medusa drafts every level at once from its heads; drop --draft-p-min");
    if (o->tree && o->draft_p_min > 0.0f)
        return fail_with(err, errlen, "--draft-p-min ends a chain at its last sure guess, and a "
                         "tree has no single last guess; drop one of --tree and --draft-p-min");
    if (lookup && n <= LOOKUP_MIN_N)
        return fail_with(err, errlen, "--draft lookup copies from the prompt, and a prompt of %zu "
                         "character%s holds no %d-gram to find again; give -p at least %d "
                         "characters, or another draft", n, n == 1 ? "" : "s", LOOKUP_MIN_N,
                         LOOKUP_MIN_N + 1);
    return 0;
}

// Builds the draft `kind` names: bigram, lookup, gpt (DEFAULT_DRAFT) or a checkpoint's path,
// which must share the target's vocabulary and block size (the caches restart together).
int setup_draft(const char *kind, const Vocab *v, const Corpus *corpus, int block_size,
                Draft *d, char *err, size_t errlen) {
    int lookup = !strcmp(kind, "lookup");
    // lookup or the bigram (a checkpoint's model becomes DRAFT_GPT below); every other field
    // zeroed, so free_draft is safe on d from here on
    *d = (Draft){.kind = lookup ? DRAFT_LOOKUP : DRAFT_BIGRAM, .name = kind, .V = v->size};
    if (lookup) return 0; // nothing to build: it drafts from the text itself
    if (!strcmp(kind, "bigram")) // counted from the training split, as the blog does
        return BigramDraftModel(&d->bigram, corpus->tokens, corpus->n_train, v->size) == 0 ? 0 :
               fail_with(err, errlen, "out of memory building the bigram table");
    d->kind = DRAFT_GPT;
    d->name = "gpt";
    const char *path = strcmp(kind, "gpt") ? kind : DEFAULT_DRAFT;
    Vocab dv;
    if (read_checkpoint(path, "draft checkpoint", "--draft takes bigram, gpt, lookup or a "
                        "checkpoint's path; make train-draft writes " DEFAULT_DRAFT, &d->model,
                        &dv, err, errlen) != 0)
        return -1;
    if (dv.size != v->size || memcmp(dv.chars, v->chars, (size_t)v->size) != 0)
        return fail_with(err, errlen, "draft '%s' has another vocabulary than the target's (%d "
                         "and %d characters): its token ids would mean other characters; train "
                         "the draft on the target's corpus", path, dv.size, v->size);
    if (d->model.config.block_size != block_size)
        return fail_with(err, errlen, "draft '%s' has block_size %d, the target %d: both caches "
                         "restart together; train the draft with --block %d", path,
                         d->model.config.block_size, block_size, block_size);
    return 0;
}

// Frees what setup_draft built.
void free_draft(Draft *d) {
    free_bigram_draft(&d->bigram);
    free_gpt(&d->model);
    if (d->medusa) free_medusa(d->medusa);
    free(d->medusa);
    d->medusa = NULL;
}

// --draft medusa: DEFAULT_MEDUSA's heads for target g, at least `depth` (tree levels or K).
int setup_medusa(const GPT *g, int depth, Draft *d, char *err, size_t errlen) {
    // the heads read the target's hidden rows and share its lm_head
    *d = (Draft){.kind = DRAFT_MEDUSA, .name = "medusa", .V = g->config.vocab_size, .target = g};
    d->medusa = calloc(1, sizeof(MedusaHeads));
    if (!d->medusa) return fail_with(err, errlen, "out of memory for the medusa heads");
    if (load_medusa(DEFAULT_MEDUSA, g, d->medusa, err, errlen) != 0) return -1;
    if (depth > d->medusa->n_heads)
        return fail_with(err, errlen, "--draft medusa has %d heads, one per level, and the "
                         "tree (or -k) asks for %d levels; give at most %d", d->medusa->n_heads,
                         depth, d->medusa->n_heads);
    return 0;
}

// The decoders a generation run may take, in the order it runs them: the tree (--tree), the
// chain of K, plain decoding.
enum { RUN_TREE, RUN_CHAIN, RUN_PLAIN, N_RUNS };

// Prints what a generation run will do (stderr): sampling, tree, filter, draft, colours.
void print_run_header(const Options *o, const Draft *d, const TreeShape *shape, int color) {
    fprintf(stderr, "sampling: seed %llu, temperature %g%s, K=%d, %d new tokens\n",
            (unsigned long long)o->seed, o->temperature, o->temperature == 0 ? " (greedy)" : "",
            shape->depth, o->n_new);
    if (o->tree && !o->plain) // the tree's shape, and what a whole one holds
        fprintf(stderr, "tree: %s, %d guesses in %d levels, cut to the window's free slots\n",
                o->tree, shape->nodes, shape->depth);
    if (o->draft_p_min > 0.0f && !o->plain) // the draft's stopping rule
        fprintf(stderr, "draft-p-min: %g (a guess the draft gives less is its round's last)\n",
                o->draft_p_min);
    if (o->top_k || o->top_p) // the served distribution, on both sides
        fprintf(stderr, "filter: top-k %d, top-p %g (0: off), applied to the target and the "
                "draft\n", o->top_k, o->top_p);
    if (!o->plain && d->kind == DRAFT_GPT) // which draft guesses, and a model's size: its cost
        fprintf(stderr, "draft: gpt, %s, n_layer=%d n_embd=%d -> %zu parameters\n",
                strcmp(o->draft, "gpt") ? o->draft : DEFAULT_DRAFT, d->model.config.n_layer,
                d->model.config.n_embd, d->model.n_params);
    else if (!o->plain)
        fprintf(stderr, "draft: %s\n", d->name);
    if (!color) return;
    fputs("colours:", stderr); // the legend, one line, each name in its own colour
    for (int i = 0; i < N_SOURCES; i++)
        fprintf(stderr, " %s%s\033[0m", SOURCE_COLOR[i], SOURCE_NAME[i]);
    fputc('\n', stderr);
}

// Runs the chosen decoder(s) and prints text to stdout, stats to stderr. Returns 0; 1 out
// of memory; 2 when stdout failed (a closed pipe, a full disk), where decoding stopped.
int run_generation(const Options *o, Loaded *ld, Draft *d) {
    GPT *g = &ld->g;
    int V = g->config.vocab_size, S = g->config.block_size, C = g->config.n_embd;
    int K = ld->shape.depth; // --tree: the chain beside it is as deep
    int n_prompt = (int)strlen(o->prompt), start = n_prompt > 0 ? n_prompt : 1;
    int cap = start + o->n_new; // the prompt (or the start token) and the new tokens
    int *text[N_RUNS]; // (cap) each run's text, prompt + output (refills read it), to compare
    for (int r = 0; r < N_RUNS; r++) text[r] = malloc((size_t)cap * sizeof(int));
    unsigned char *source = calloc((size_t)cap, 1); // each token's TokenSource (--color), per run
    float *p = malloc((size_t)V * sizeof(float));
    SpecBuffers b = {0}; // zeroed, so free_spec_buffers is safe however far building got
    TreeBuffers tb[N_RUNS] = {0}; // per run: [RUN_TREE] --tree's, [RUN_CHAIN] a Medusa chain's
    // Medusa's heads draft for trees only: its chain is the tree 1,1,..,1 of K levels
    int medusa = d->kind == DRAFT_MEDUSA;
    TreeShape ones = {.depth = K < TREE_MAX_DEPTH ? K : TREE_MAX_DEPTH}; // medusa: K <= 16 heads
    for (int i = 0; i < ones.depth; i++) ones.width[i] = 1;
    ones.nodes = ones.depth;
    int rc = 1; // 1 until every buffer exists; then 0, or 2 once stdout fails
    if (!text[RUN_TREE] || !text[RUN_CHAIN] || !text[RUN_PLAIN] || !source || !p ||
        build_spec_buffers(&b, K, V, S) != 0 ||
        (o->tree && build_tree_buffers(&tb[RUN_TREE], &ld->shape, V, S, C) != 0) ||
        (medusa && build_tree_buffers(&tb[RUN_CHAIN], &ones, V, S, C) != 0))
        goto out;
    rc = 0;
    // colour: as asked, or by default when stdout is a terminal and NO_COLOR says nothing
    const char *no_color = getenv("NO_COLOR");
    int color = o->color >= 0 ? o->color : isatty(fileno(stdout)) && !(no_color && *no_color);
    // streamed as made, except under --trace (the trace has the stage) or --compare (timing)
    FILE *stream = o->trace || o->compare ? NULL : stdout;
    Output out = {.stream = stream, .source = source, .color = color};
    Stats st[N_RUNS] = {0};
    tb[RUN_TREE].greedy = o->temperature == 0.0f; // a greedy tree's children: the top ones
    tb[RUN_CHAIN].greedy = tb[RUN_TREE].greedy;
    Rng rng; // seeded afresh before each decoder
    DecodeOptions opt = {.n_new = o->n_new, .K = K, .sampler = {o->temperature, o->top_k,
                         o->top_p}, .trace = o->trace, .vocab = &ld->v, .out = &out, .rng = &rng};
    print_run_header(o, d, &ld->shape, color);
    // the decoders this command runs: the tree (--tree), the chain (without --tree, or beside
    // it with --compare), plain decoding (--plain, or beside the others with --compare)
    int wanted[N_RUNS] = {[RUN_TREE] = !o->plain && o->tree,
                          [RUN_CHAIN] = !o->plain && (!o->tree || o->compare),
                          [RUN_PLAIN] = o->plain || o->compare};
    int ran = 0; // the runs so far: each after the first gets a heading
    for (int run = 0; run < N_RUNS; run++) {
        if (!wanted[run]) continue;
        int *seq = text[run];
        if (ran > 0) fprintf(stderr, run == RUN_PLAIN ? "\nplain decoding, same seed:\n"
                                                      : "\na chain of K=%d, same seed:\n", K);
        ran++;
        // stdout carries the prompt and the text; everything else goes to stderr
        if (!o->no_prompt) fputs(o->prompt, stdout);
        rng_seed(&rng, o->seed); // the same seed for each, so greedy texts compare byte for byte
        opt.st = &st[run];
        const Tokens *start_text = &(Tokens){ld->prompt, n_prompt};
        if (run == RUN_PLAIN) generate(g, start_text, &opt, seq, p);
        else if (run == RUN_TREE || medusa) tree_generate(g, d, &tb[run], start_text, &opt, seq);
        else speculative_generate(g, d, &b, start_text, &opt, seq);
        if (!stream) write_text(stdout, &ld->v, seq + start, source + start, o->n_new, color);
        fputc('\n', stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) rc = 2; // main says why
        if (rc == 2) goto out;
        print_stats(run == RUN_PLAIN ? "plain decoding" : run == RUN_TREE ? "tree decoding"
                    : "speculative decoding", opt.st, run != RUN_PLAIN, K);
    }
    int spec = o->tree ? RUN_TREE : RUN_CHAIN; // the speculative run --compare weighs
    if (o->compare) { // equal texts are required at t = 0 and merely possible at t > 0
        int same = memcmp(text[spec] + start, text[RUN_PLAIN] + start,
                          (size_t)o->n_new * sizeof(int)) == 0;
        print_comparison(&st[spec], &st[RUN_PLAIN], K, o->temperature == 0.0f, same);
    }
    const Stats *tree = &st[RUN_TREE], *chain = &st[RUN_CHAIN];
    if (o->compare && o->tree) // the tree against the chain of the same depth
        fprintf(stderr, "tree against chain      tokens per verify pass %.3f (tree) and %.3f "
                "(chain of K=%d); wall time %.3f, %.3f and %.3f ms (tree, chain, plain)\n",
                ratio(tree->round_tokens, tree->rounds), ratio(chain->round_tokens, chain->rounds),
                K,
                1e3 * tree->seconds, 1e3 * chain->seconds, 1e3 * st[RUN_PLAIN].seconds);
out:
    free_spec_buffers(&b);
    free_tree_buffers(&tb[RUN_TREE]);
    free_tree_buffers(&tb[RUN_CHAIN]);
    void *owned[] = {text[RUN_TREE], text[RUN_CHAIN], text[RUN_PLAIN], source, p};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    return rc;
}

#ifndef TESTING
// Parses the flags, loads the model and corpus, checks every input, runs one action.
int main(int argc, char **argv) {
    Options o;
    Loaded ld = {0}; // zeroed, as are the drafts, so that done: frees however far loading got
    Draft drafts[3] = {0}; // the one --draft names; the self-test takes every kind
    char err[512] = ""; // a refusal's one line; done: prints it if something failed
    int rc = 1; // stays 1 until an action has run and succeeded
    // 1. the command line: every flag checked before anything is loaded
    if (parse_args(argc, argv, &o, err, sizeof(err)) != 0) goto done;
    if (o.help) { // a bad flag beside -h still fails, above
        usage(stdout);
        return close_stdout();
    }
    setvbuf(stdout, NULL, _IOLBF, 0); // self-test lines survive a sanitizer abort
    // 2. the model and corpus, then the checks that need them
    if (setup_model(&o, &ld, err, sizeof(err)) != 0 || check_inputs(&o, &ld, err, sizeof(err)) != 0)
        goto done;
    // 3. the draft --draft names; the self-test runs one of each kind (gpt: --draft's model)
    int named_model = strcmp(o.draft, "bigram") && strcmp(o.draft, "lookup"); // medusa: refused
    const char *every_kind[3] = {"bigram", "lookup", named_model ? o.draft : "gpt"};
    const char **kinds = o.run_selftest ? every_kind : &o.draft;
    int n_drafts = o.run_selftest ? 3 : 1;
    int S = ld.g.config.block_size;
    for (int i = 0; i < n_drafts; i++) {
        int failed; // Medusa's heads read the target g itself; other drafts stand beside it
        if (!strcmp(kinds[i], "medusa"))
            failed = setup_medusa(&ld.g, ld.shape.depth, &drafts[i], err, sizeof(err));
        else
            failed = setup_draft(kinds[i], &ld.v, &ld.corpus, S, &drafts[i], err, sizeof(err));
        if (failed) goto done;
        drafts[i].p_min = o.draft_p_min; // lookup's copies have no chance to compare
    }
    // 4. every input is good: say what runs, then run it
    print_config(&ld.g, ld.source);
    rc = o.run_selftest ? selftest(&ld.g, drafts, n_drafts, &ld.v, &ld.corpus) != 0 // 1: a failure
                        : run_generation(&o, &ld, &drafts[0]);
    if (rc == 1 && !o.run_selftest) // generation fails only for want of memory
        snprintf(err, sizeof(err), "out of memory for %d tokens", o.n_new);
done:
    // rc 1: err holds the reason (a failed self-test printed its own); rc 2: stdout failed
    if (rc == 1 && err[0]) error_line("%s", err);
    for (int i = 0; i < 3; i++) free_draft(&drafts[i]);
    free(ld.prompt);
    free_corpus(&ld.corpus);
    free_gpt(&ld.g);
    return rc == 1 ? 1 : close_stdout();
}
#endif
