/*
 * specdec.c: speculative decoding, from scratch, in one C file.
 *
 * What this is: the lesson of Colin Zhou's blog post "Adding Speculative Decoding to Andrej
 *   Karpathy's NanoGPT", in C. Read it top to bottom with the post beside it, and step through
 *   it in a debugger. It holds the blog's Laplace bigram draft, the four phases of one round
 *   (draft, verify, accept/reject, trim the KV cache) and the loop around them, a trace of
 *   every p/q decision, plain decoding, and a self-test that greedy speculative decoding gives
 *   plain greedy decoding's text, byte for byte. The target model, which verify_candidates
 *   calls, is the character GPT of Karpathy's nanoGPT lecture ("the lecture": 4 layers, 4
 *   heads, 64 wide, 32 tokens of context, 65 characters, 209,729 parameters), in textbook loops.
 * What this is not: fast (here it runs slower than plain decoding, and matmul says why), a
 *   trainer, or the papers' additions. Its departures from the blog are listed in "The four phases".
 *
 * Build, run, step through
 *   make run  # build, get the corpus, run the demo; by hand: cc -O2 -ffp-contract=off specdec.c -lm
 *   ./specdec --trace -n 10 -s 277 -p "To be or not to be, "   # round 1: like the blog's
 *   ./specdec --trace -n 24 -s 277 -p "To be or not to be, "   # on to the window (make_room)
 *   make debug   # ./specdec_debug (-O0 -g3, sanitizers); then, to stop in round 1 above:
 *   ASAN_OPTIONS=detect_leaks=0 gdb -ex 'break accept_reject' -ex run --args ./specdec_debug \
 *       -n 10 -s 277 -p "To be or not to be, "
 *   (gdb) p b->candidates[0]@k   # the guesses, {46, 43, 57, 1}; then `finish`: how many it emits
 *   Ids are not ASCII (p/c would print 46 as '.'): 0 '\n', 1 ' ', 13..38 'A'..'Z', 39..64 'a'..'z';
 *   right after `finish` (in speculative_generate), p o->vocab->chars[46] prints 'h'.
 *   (gdb) p ((float(*)[65])b->target_probs)[2][57]   # a (K+1, V) buffer as rows: p of c2, 's'
 *
 * Map: the blog's Python, and where it is here, in reading order
 *   F.softmax(logits)            tempered_softmax()      Random numbers and sampling
 *   BigramDraftModel.__init__    BigramDraftModel()      The draft model
 *   BigramDraftModel.get_probs   bigram_get_probs()
 *   BigramDraftModel.sample      bigram_sample()         (+ tempered_bigram: q at temperature t)
 *   draft_tokens                 draft_tokens()          The four phases of one round
 *   verify_candidates            verify_candidates()     (its lists are SpecBuffers' fields)
 *   accept_reject                accept_reject()         (its accepted is SpecBuffers.emitted)
 *   trim_kv_cache                trim_kv_cache()
 *   speculative_generate         speculative_generate()  The loop
 *   (the blog has no window)     make_room()             The loop: the 32-token window
 *   target_model(input_ids, pos=positions, past_kvs=past_kvs)  forward()  The target model
 *   (the baseline it must match) generate()              Plain decoding; then plumbing to skip
 *
 * Size letters of the shape comments: T tokens in a pass; C n_embd 64; V vocab_size 65; L n_layer
 * 4; NH n_head 4, HS = C/NH 16; S block_size 32; K draft length 4, k <= K a round; H 4C; P params.
 * C11 with POSIX's stat and clock_gettime, libc and libm; one thread, batch size 1. No -ffast-math;
 * -ffp-contract=off (each product rounds first): a token's sums match alone or in a pass of k+1.
 */

#define _POSIX_C_SOURCE 200809L // clock_gettime and stat under -std=c11
#include <ctype.h>
#include <errno.h> // errno: strto*'s range errors, and why a file failed to open
#include <float.h> // FLT_MIN: the smallest normal float, the smallest -t allowed
#include <math.h>
#include <stdarg.h> // error_line's printf-style arguments
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h> // stat: read_file looks at a path before opening it
#include <time.h> // clock_gettime, for the wall times in the stats

// ----------------------------------------------------------------------------
// The target model's interface: its config, weights and run state
//
// The phases below need only this much of the target: forward() runs T new tokens on top
// of the KV cache and returns T rows of logits, and the cache is an array with a length,
// cache_len, that trim_kv_cache can lower. How forward computes them comes right after the
// loop, in "The target model".

typedef struct {
    int n_layer;    // L,  number of transformer blocks      e.g. 4
    int n_head;     // NH, attention heads per block         e.g. 4
    int n_embd;     // C,  residual stream width             e.g. 64
    int block_size; // S,  longest context, in tokens        e.g. 32
    int vocab_size; // V,  distinct characters               e.g. 65
    int ffn_width;  // H,  the MLP's hidden units, 4C        e.g. 256
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
static const char *TENSOR_NAMES[N_TENSORS] = {"token_embedding", "position_embedding", "ln1_weight",
    "ln1_bias", "query", "key", "value", "proj_weight", "proj_bias", "ln2_weight", "ln2_bias",
    "ffwd_up_weight", "ffwd_up_bias", "ffwd_down_weight", "ffwd_down_bias", "ln_f_weight",
    "ln_f_bias", "lm_head_weight", "lm_head_bias"};

// What one transformer block computes for the T tokens of a pass, one buffer per role.
// Inference shares ONE set among all layers: x_in is RunState.x, the residual stream, and
// forward copies x_out back into it for the next block (training keeps one set per layer).
typedef struct {
    float *x_in;    // (S, C)      residual stream entering the block
    float *ln1;     // (S, C)      ln1(x_in): the input of query, key and value
    float *q;       // (S, C)      queries of the T tokens, heads side by side
    float *att;     // (NH, S, S)  attention weights: head, token of the pass, cached position
    float *att_out; // (S, C)      attention output before proj, heads concatenated
    float *proj_out; // (S, C)      proj(att_out): what the attention sub-block adds
    float *x_mid;   // (S, C)      x_in + attn
    float *ln2;     // (S, C)      ln2(x_mid): the input of the MLP
    float *hidden;  // (S, H)      MLP hidden layer, after ReLU
    float *ffwd;    // (S, C)      what the MLP sub-block adds
    float *x_out;   // (S, C)      x_mid + ffwd: the next block's x_in
    float *keys;    // (S, C)      this layer's keys, by position: a view into RunState.key_cache
    float *values;  // (S, C)      its values: a view into RunState.value_cache (forward sets both)
} BlockActs;

// Activations of one inference pass of up to S tokens, and the KV cache: the blog's past_kvs.
typedef struct {
    float *x;           // (S, C)      residual stream of the T tokens in flight: block.x_in
    BlockActs block;    //             one block's buffers, a buffer per role, reused by every layer
    float *ln_f;        // (S, C)      ln_f(x): the input of lm_head
    float *logits;      // (S, V)      output: one row per token of the pass
    float *key_cache;   // (L, S, C)   keys of every cached token, per layer, by position
    float *value_cache; // (L, S, C)   values, the same way
    int cache_len;      //             positions 0 .. cache_len-1 of the caches are valid: the
                        //             blog's cache_len, past_kvs[0][0][0].shape[1]
} RunState;

// The target model: config, parameters (one block of floats) and run state.
typedef struct {
    Config config;   // the sizes, from the checkpoint's header
    Weights w;       // named views into params: owns no memory of its own
    float *params;   // (P) all parameters, in checkpoint order
    size_t n_params; // P, 209,729 for the shipped model
    RunState state;  // one sequence's activations and cache: batch size 1
} GPT;

// Runs T >= 1 new tokens at positions cache_len .. cache_len+T-1 on top of the cache,
// appends their keys and values to it (cache_len += T) and returns T rows of logits, (T, V).
float *forward(GPT *g, const int *tokens, int T);

// The tokenizer (one token per byte) is plumbing: it comes after the model.
typedef struct Vocab Vocab;

// ----------------------------------------------------------------------------
// Random numbers and sampling

// A small PRNG of our own (xorshift64*), so a seed gives the same text everywhere.
typedef struct {
    uint64_t state; // the generator's 64 bits; never 0
} Rng;

// Seeds the generator; splitmix64 spreads nearby seeds (1, 2, 3) far apart.
void rng_seed(Rng *r, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL; // splitmix64: step by 2^64 / golden ratio, then mix
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    r->state = z ? z : 0x2545F4914F6CDD1DULL; // xorshift must never hold 0
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

// A uniform draw in [0, 1) from 53 random bits. It is never 1, and can be exactly 0. Each
// value is a multiple of 2^-53, so the chance of a branch is how many such values take it.
double rng_uniform(Rng *r) {
    // the top 53 bits, exactly a double's mantissa, times 2^-53
    return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

// Inverse-CDF sampling from n weights w, any scale: in token-id order, the first index whose
// running sum exceeds u * total (-1 if every weight is 0). Zero weights are skipped; if rounding
// carries u * total past the last sum, the last index with weight is returned, never a 0 one.
int sample_weights(const double *w, int n, double u) {
    // scale u by the actual total: a float row may sum to 1 +- 1e-7, never exactly 1
    double total = 0.0;
    for (int i = 0; i < n; i++) total += fmax(0.0, w[i]);
    double target = u * total;
    double cdf = 0.0;
    int last = -1; // the last index with weight: the fallback
    for (int i = 0; i < n; i++) {
        if (w[i] <= 0.0) continue; // weight 0: can never be drawn
        cdf += w[i];
        last = i;
        if (target < cdf) return i; // strict <: u = 0 gives the first with weight
    }
    return last;
}

// A draw from a probability row (n <= 256) with a uniform u in [0, 1): torch.multinomial.
int sample_from(const float *probs, int n, double u) {
    double w[256]; // the row in double, the weights sample_weights takes
    for (int i = 0; i < n; i++) w[i] = probs[i];
    return sample_weights(w, n, u);
}

// Index of the largest entry; ties go to the lowest index, in every decoder alike.
int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// The first of n rows of V floats that holds a number that is not finite (NaN, +-inf), or -1.
int first_nonfinite(const float *rows, int n, int V) {
    for (size_t i = 0; i < (size_t)n * V; i++)
        if (!isfinite(rows[i])) return (int)(i / V);
    return -1;
}

// Writes a one-hot row at index i: how greedy decoding (t = 0) turns into a distribution.
void one_hot(float *out, int n, int i) {
    for (int j = 0; j < n; j++) out[j] = 0.0f;
    out[i] = 1.0f;
}

// p = softmax(logits / t): the target's distribution at the decoding temperature (departure 3).
// F.softmax(logits) is t = 1; t = 0 gives one-hot at the argmax (greedy). Parameters that are
// each finite can still overflow once the model runs. So a row of logits that is not finite
// makes p a row of NaN and returns -1, and the loops stop before they use it. Else 0.
int tempered_softmax(float *p, const float *logits, int V, float temperature) {
    if (first_nonfinite(logits, 1, V) >= 0) { // NaN or +-inf: the sums overflowed
        for (int i = 0; i < V; i++) p[i] = NAN; // no distribution: NaN, which no caller can use
        return -1;
    }
    if (temperature == 0.0f) { // greedy: the limit of the softmax as t -> 0
        one_hot(p, V, argmax(logits, V));
        return 0;
    }
    // subtract the max before exp: the largest term becomes exp(0) = 1, nothing overflows
    float maxv = logits[argmax(logits, V)];
    double e[256]; // V <= 256 (validate_config); each exp is taken once
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        e[i] = exp(((double)logits[i] - maxv) / temperature);
        sum += e[i];
    }
    for (int i = 0; i < V; i++) p[i] = (float)(e[i] / sum); // divide in double, round once
    return 0;
}

// Samples one token from a row of logits at the temperature, with one uniform; p: (V)
// receives the row it was drawn from. -1, drawing nothing, if the row is not finite.
int sample_token(const float *logits, int V, float temperature, float *p, Rng *rng) {
    if (tempered_softmax(p, logits, V, temperature) != 0) return -1;
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
// normalises each row (every row finite). The blog's BigramDraftModel.__init__. 0 on success.
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

// q = the draft's row after token at the decoding temperature: q^(1/t), renormalised (departure 3).
// Why temper at all: exactness holds for ANY draft q (accept/reject corrects whatever the
// draft proposes: accept_reject's proof), so this is a choice, made for acceptance. The target is
// sampled from softmax(logits / t); a bigram row raised to 1/t moves the same way, sharper
// for t < 1, flatter for t > 1. At t = 1 it is the table's row, the blog's; at t = 0,
// one-hot at its argmax, like greedy's p: a guess then passes exactly when it is the
// target's argmax.
void tempered_bigram(float *q, const BigramDraft *d, int token, float temperature) {
    const float *row = bigram_get_probs(d, token); // the untempered row P(next | token)
    int V = d->V;
    if (temperature == 0.0f) { // greedy: one-hot, as tempered_softmax does
        one_hot(q, V, argmax(row, V));
        return;
    }
    if (temperature == 1.0f) { // the blog's case: the table's row exactly
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
    tempered_bigram(q, d, token, temperature); // the row the ratio will use is the row we sample
    return sample_from(q, d->V, rng_uniform(rng)); // one uniform per guess
}

// ----------------------------------------------------------------------------
// The four phases of one round: draft, verify, accept/reject, trim
//
// Where these phases and their loop depart from the blog's, and why (each marked where it happens):
//  1. A window, whose whole rule is make_room's: the blog's loop has none, and the lecture's
//     model has 32 positions. The demo's prompt is 20 characters: the blog's 32 would fill all 32.
//  2. No bonus in the last round (allow_bonus), no prefill for 0 tokens: extras the blog slices off.
//  3. A temperature for both models (tempered_softmax, tempered_bigram). The blog's is t = 1;
//     t = 0 is greedy decoding, whose text the self-test compares byte for byte.
//  4. If adjusted has no mass (p == q up to rounding), draw from p; the blog would divide 0 by 0.
//  5. A row of logits not finite stops the run (verify_candidates' return); the blog samples NaN.
//  6. The cache is one array with a length, trimmed in place. The blog slices new_kvs; C has
//     no slices, and lowering the length is the whole rollback.
//  7. An empty prompt starts from token 0 (start_sequence), as the lecture's generate does.

// Buffers of one round, each with a single role, so a debugger shows the whole decision.
// The blog's lists and tensors keep their names: candidates, draft_probs, target_probs, adjusted.
typedef struct {
    int V;               //           vocabulary size: the width of every row below
    int *candidates;     // (K)       c0 .. c(k-1), drafted this round
    float *draft_probs;  // (K, V)    draft_probs[i] = the draft's row that c(i) was sampled from
    int *all_tokens;     // (K+1)     the verify pass's input: [current_token, c0 .. c(k-1)]
    float *target_probs; // (K+1, V)  target_probs[i] = the target's row after [current, c0..c(i-1)]
    double *u;           // (K)       the uniform draw that decided each candidate
    double u_last;       //           the uniform of the resample or the bonus; stale if neither
    double *adjusted;    // (V)       max(0, p - q) at the rejected position, unnormalised: the
                         //           weights the resample draws from (stale if none rejected)
    int *emitted;        // (K+1)     the round's tokens: accepted drafts, then a resample or a
                         //           bonus; the blog's list `accepted`, of length num_accepted
    float *prefill_probs; // (V)      the prefill's row, which the first token is sampled from
    int rejected_at;     //           index of the rejected candidate, or -1 if none was rejected
} SpecBuffers;

// Phase 1, DRAFT: the blog's draft_tokens(draft_model, current_token, K). Samples k tokens
// from the bigram table, each after the one before, into b->candidates, and keeps every row
// it drew from in b->draft_probs: accept_reject needs q(c_i), and the whole row for adjusted.
void draft_tokens(const BigramDraft *draft_model, int current_token, int k, float temperature,
                  Rng *rng, SpecBuffers *b) {
    int tok = current_token; // a bigram's whole context is one token
    for (int i = 0; i < k; i++) {
        float *probs = b->draft_probs + (size_t)i * b->V; // the row this guess is drawn from
        b->candidates[i] = bigram_sample(draft_model, tok, temperature, rng, probs);
        tok = b->candidates[i]; // the next guess follows this guess, not the target's view
    }
}

// Phase 2, VERIFY: the blog's verify_candidates(target_model, current_token, candidates,
// past_kvs). ONE target pass runs [current_token, c0 .. c(k-1)] at positions cache_len to
// cache_len+k (forward reads cache_len from the cache, as the blog reads past_kvs's shape).
// Row i of b->target_probs is the target's distribution after [.., current, c0 .. c(i-1)]:
// rows 0 to k-1 judge the candidates, and row k gives the bonus. Returns the first row that is
// not finite (the loop stops there: departure 5), or -1. What a pass of k+1 costs: matmul.
int verify_candidates(GPT *target_model, int current_token, int k, float temperature,
                      SpecBuffers *b) {
    int V = b->V;
    b->all_tokens[0] = current_token; // the blog's all_tokens = [current_token] + candidates
    for (int i = 0; i < k; i++) b->all_tokens[1 + i] = b->candidates[i];
    const float *logits = forward(target_model, b->all_tokens, k + 1); // the single pass
    // the blog's F.softmax of each row, at the decoding temperature: k+1 rows, the bonus's too
    for (int i = 0; i <= k; i++) {
        float *p = b->target_probs + (size_t)i * V; // row i: judges c(i), or gives the bonus
        if (tempered_softmax(p, logits + (size_t)i * V, V, temperature) != 0)
            return i; // departure 5: not finite, so accept/reject must not use it
    }
    return -1; // every row is a distribution
}

// The blog's resample after a rejection: a token from adjusted = norm(max(0, p - q)) (the
// papers' residual); or from p if that has no mass (p <= q everywhere, so p == q up to rounding,
// where the blog divides 0 by 0: departure 4). adjusted (V) gets max(0, p - q) in double, as drawn.
static int sample_adjusted(const float *p, const float *q, int V, double *adjusted, double u) {
    for (int j = 0; j < V; j++) // unnormalised: the draw scales u by the total anyway
        adjusted[j] = fmax(0.0, (double)p[j] - q[j]); // exact, or off by under 2^-53 of it
    int token = sample_weights(adjusted, V, u); // -1: every weight is 0, no mass
    if (token >= 0) // the usual case: a draw from the adjusted distribution
        return token;
    return sample_from(p, V, u); // p == q up to rounding: a draw from p itself
}

// Phase 3, ACCEPT/REJECT: the blog's accept_reject(candidates, draft_probs, target_probs), on the
// k candidates in b, left to right. Candidate i is accepted when u_i < min(1, p_i(c_i) / q_i(c_i)).
// The first rejection is replaced by a draw from norm(max(0, p_i - q_i)) and ends the round. If
// all k pass and allow_bonus is set, one bonus token is drawn from p_k (k = 0 needs allow_bonus:
// it is then one plain step from p_0). Writes the emitted tokens to b->emitted; returns how many,
// 1 .. k+1 (1 .. k if no bonus is allowed).
// Why one position emits exactly p: a guess x, drawn from q, passes with chance min(1, p(x)/q(x)),
// so x comes out that way with chance q(x) min(1, p(x)/q(x)) = min(p, q)(x). A rejection, of
// chance 1 - sum min(p, q), draws from norm(max(0, p - q)), whose mass sum max(0, p - q) is that
// same 1 - sum min(p, q). So, min(p, q) kept and max(0, p - q) redrawn:
//     P(emit x) = min(p, q)(x) + max(0, p - q)(x) = p(x).
int accept_reject(SpecBuffers *b, int k, int allow_bonus, Rng *rng) {
    int V = b->V;
    int *candidates = b->candidates;
    int *emitted = b->emitted; // the blog's `accepted`: the resample or bonus goes here too
    const float *draft_probs = b->draft_probs;   // (K, V)
    const float *target_probs = b->target_probs; // (K+1, V)
    double *u = b->u; // (K) the uniform that decides each candidate
    b->rejected_at = -1;
    for (int i = 0; i < k; i++) {
        int token = candidates[i];
        double q = draft_probs[(size_t)i * V + token]; // > 0: token was sampled from this row
        double p = target_probs[(size_t)i * V + token]; // the target's chance of the same token
        u[i] = rng_uniform(rng); // kept in u, so the trace can print it
        if (u[i] < fmin(1.0, p / q)) {
            emitted[i] = token; // the target agrees often enough: keep the draft's token
            continue;
        }
        b->rejected_at = i; // rejected: redraw this position from the mass q under-covered
        b->u_last = rng_uniform(rng); // the resample's own uniform
        emitted[i] = sample_adjusted(target_probs + (size_t)i * V, draft_probs + (size_t)i * V,
                                     V, b->adjusted, b->u_last);
        return i + 1; // later candidates were drafted after a wrong token: discard them
    }
    if (!allow_bonus) // departure 2: the last round's bonus would overshoot (the blog slices it)
        return k;
    // every candidate passed: p_k came free with the verify pass, so take one more token
    b->u_last = rng_uniform(rng); // the bonus's own uniform
    emitted[k] = sample_from(target_probs + (size_t)k * V, V, b->u_last);
    return k + 1;
}

// Phase 4, TRIM: the blog's trim_kv_cache(new_kvs, num_accepted, cache_len_before_verify), the
// last being the cache's length before the verify pass. It keeps cache_len_before_verify +
// num_accepted positions: current_token, and each token the round emitted except the last.
// That last token (a resample, a bonus, or in a final round the last accepted guess) is in
// num_accepted = len(accepted), but it is NOT cached: it becomes the next current_token.
// THE INVARIANT, between rounds: the cache holds exactly the tokens before current_token.
// The dropped positions are zeroed, so a debugger shows them gone (a next pass overwrites them).
void trim_kv_cache(GPT *target_model, int num_accepted, int cache_len_before_verify) {
    RunState *s = &target_model->state;
    const Config *c = &target_model->config;
    int keep = cache_len_before_verify + num_accepted; // departure 6: the blog slices k[:, :keep]
    size_t C = c->n_embd, S = c->block_size, dropped = (size_t)(s->cache_len - keep);
    for (int l = 0; l < c->n_layer; l++) {
        // rows keep .. s->cache_len-1, which the verify pass wrote: the rejected guess and those
        // after it, or, in a last round without a bonus, the last draft (the next current_token)
        memset(s->key_cache + (l * S + keep) * C, 0, dropped * C * sizeof(float));
        memset(s->value_cache + (l * S + keep) * C, 0, dropped * C * sizeof(float));
    }
    s->cache_len = keep; // the whole rollback: the next pass writes from here
}

// ----------------------------------------------------------------------------
// The loop: speculative decoding

// Token ids and how many, in one argument, as the blog's tensors carry their length.
typedef struct {
    const int *tok; // (n)
    int n;
} Tokens;

typedef struct Stats Stats; // a generation's counters (passes, rounds, acceptance): after the model

// The kinds of target pass, as the stats count and time them (count_pass).
enum { PREFILL_PASS, REFILL_PASS, VERIFY_PASS, STEP_PASS, PASS_KINDS };

// How a generation is run: shared by speculative_generate and generate (plain decoding).
typedef struct {
    int max_new_tokens; // tokens to generate after the prompt, as the blog's argument
    int K;              // draft length, e.g. 4: the blog's K
    float temperature;  // softmax(logits / t) for the target and the draft; 0 = greedy
    int trace;          // print the prefill and every speculative round on stderr
    const Vocab *vocab; // for the trace and the text
    FILE *out;          // where the text streams as it is made (stdout), or NULL
    Rng *rng;           // draws, in order: the prefill's token, then per round k guesses, a
                        // u per guess judged, the resample's or bonus's u (plain: 1 a token)
    Stats *st;          // the generation's counters
} DecodeOptions;

// Plumbing, after the model: counting, tracing, writing the text; called around the phases.
double now_seconds(void);
void count_pass(Stats *st, int kind, double seconds);
void finish_stats(Stats *st, long emitted, double t0);
int stop_nonfinite(Stats *st, int position, long emitted, int ahead, double t0);
void trace_prefill(const DecodeOptions *o, int n_tokens, int sampled, double p);
void trace_refill(int n_tokens);
void report_round(const DecodeOptions *o, const SpecBuffers *b, int k, int num_accepted,
                  int cache_len, double verify_seconds);
void show_tokens(const DecodeOptions *o, const int *tokens, int n);
int output_failed(const DecodeOptions *o);

// Empties the cache, runs the last `window` tokens of seq (all, if fewer) from position 0 and
// returns the logits row of the last of them: the blog's prefill, logits[0, -1, :].
const float *prefill(GPT *g, const int *seq, int n_seq, int window, Stats *st) {
    int n = n_seq < window ? n_seq : window; // a short prompt runs whole
    g->state.cache_len = 0; // positions restart at 0
    double t_pass = now_seconds(); // the pass's time, counted by kind
    const float *logits = forward(g, seq + n_seq - n, n);
    count_pass(st, PREFILL_PASS, now_seconds() - t_pass);
    return logits + (size_t)(n - 1) * g->config.vocab_size;
}

// The prompt as tokens into seq (room for max(prompt->n, 1) + max_new_tokens); returns their
// count. An empty prompt starts from token 0 ('\n' here), as the lecture's generate starts
// from torch.zeros((1, 1)) (departure 7: the blog starts from its prompt).
int start_sequence(int *seq, const Tokens *prompt) {
    if (prompt->n == 0) { // a round needs a current token to start from
        seq[0] = 0;
        return 1;
    }
    memcpy(seq, prompt->tok, (size_t)prompt->n * sizeof(int));
    return prompt->n;
}

// THE WINDOW RULE (departure 1). Both decoders call it before each pass on the cache; it
// returns the room, how many guesses fit after current_token (k <= room).
// Why: the lecture's model has S = 32 rows of position embeddings, so a pass at position 32
// would index past them. The blog's loop has no window (its positions grow by up to K+1 a
// round); the lecture's generate crops the text to its last 32 tokens and reruns them each step.
// The rule: the prefill keeps the prompt's last S tokens. The room is S-1-cache_len (current_token
// takes a position too): with S = 32, 2 at cache_len 29, and 0 at 31, a round of one step. At
// 32 the cache is full and the window restarts: the last S/2 tokens, current_token last, go
// again from position 0. This call runs the 15 before current_token; the next pass runs
// current_token at position 15 with up to 16 guesses. Both decoders restart at the same tokens,
// so each token is predicted from the same context in both: "exact" means exact under this rule.
int make_room(GPT *g, const int *seq, int n_seq, const DecodeOptions *o) {
    int S = g->config.block_size;
    if (g->state.cache_len < S) // room left: the window stays
        return S - 1 - g->state.cache_len;
    int n = S / 2 - 1; // the tokens before current_token, which is seq[n_seq - 1]
    g->state.cache_len = 0;
    if (n > 0) { // a pass of its own; its logits are not needed
        double t_pass = now_seconds(); // the refill's time, counted by kind
        forward(g, seq + n_seq - 1 - n, n);
        count_pass(o->st, REFILL_PASS, now_seconds() - t_pass);
    }
    if (o->trace) trace_refill(n);
    return S - 1 - n; // S/2 for an even S: the room after the restart
}

// Speculative decoding, the blog's speculative_generate: prefill, then rounds until
// max_new_tokens tokens exist, each drafting k = min(K, tokens still needed) guesses (fewer
// where the window has less room: make_room), then verify, accept/reject and trim. seq gets
// the prompt (or the start token), then the generated tokens: room for max(prompt->n, 1) +
// max_new_tokens.
// Returns 0; or -1 when it stopped at a row of logits that is not finite (o->st says where).
int speculative_generate(GPT *target_model, const BigramDraft *draft_model, SpecBuffers *b,
                         const Tokens *prompt, const DecodeOptions *o, int *seq) {
    int V = target_model->config.vocab_size, S = target_model->config.block_size;
    int K = o->K, max_new_tokens = o->max_new_tokens;
    float temperature = o->temperature;
    double t0 = now_seconds();
    int n_prompt = start_sequence(seq, prompt); // seq: prompt, then text (refills reread it)
    int *generated = seq + n_prompt; // the blog's list generated, after the prompt
    int n_generated = 0;
    if (max_new_tokens == 0) { // departure 2: nothing wanted, not even a prefill
        finish_stats(o->st, 0, t0);
        return 0;
    }
    // 1. prefill, and the first token, sampled from its last row (if that row is finite)
    const float *logits = prefill(target_model, seq, n_prompt, S, o->st);
    int current_token = sample_token(logits, V, temperature, b->prefill_probs, o->rng);
    if (current_token < 0) // the prefill's row is not finite: no token comes from it
        return stop_nonfinite(o->st, target_model->state.cache_len - 1, 0, 0, t0);
    generated[n_generated] = current_token;
    if (o->trace) // with the token's p in the row it was drawn from
        trace_prefill(o, target_model->state.cache_len, current_token,
                      b->prefill_probs[current_token]);
    show_tokens(o, generated, 1);
    n_generated++;
    // 2. the speculative loop; current_token is never in the cache
    while (n_generated < max_new_tokens && !output_failed(o)) {
        int room = make_room(target_model, seq, n_prompt + n_generated, o); // the window rule
        int cache_len = target_model->state.cache_len;
        int remaining = max_new_tokens - n_generated; // >= 1: the loop's condition
        int k = K < remaining ? K : remaining; // as the blog clamps k; departure 1 just below
        if (k > room) // the window rule: the guesses must fit (0 at the cache's last position)
            k = room;
        int allow_bonus = k < remaining; // departure 2: no overshoot (k = 0: always allowed)
        // the blog's four phases, one line each, and a stop at a row that is not finite
        draft_tokens(draft_model, current_token, k, temperature, o->rng, b);
        double t_verify = now_seconds(); // the verify pass is timed alone, as generate's steps
        int bad_row = verify_candidates(target_model, current_token, k, temperature, b);
        double verify_seconds = now_seconds() - t_verify; // what --compare's c(k+1) prices
        if (bad_row >= 0) // departure 5: that row is not finite, and accept/reject must not use it
            return stop_nonfinite(o->st, cache_len + bad_row, n_generated, bad_row, t0);
        int num_accepted = accept_reject(b, k, allow_bonus, o->rng);
        trim_kv_cache(target_model, num_accepted, cache_len);
        report_round(o, b, k, num_accepted, cache_len, verify_seconds); // stats, trace, text
        // update state: the blog's generated.extend(accepted) and current_token = accepted[-1]
        memcpy(generated + n_generated, b->emitted, (size_t)num_accepted * sizeof(int));
        n_generated += num_accepted;
        current_token = b->emitted[num_accepted - 1];
    }
    finish_stats(o->st, n_generated, t0);
    return 0;
}

// ----------------------------------------------------------------------------
// The target model: the lecture's GPT, in textbook loops, with a KV cache
// Each function reads (T, in) rows and writes (T, out) rows for a pass's T tokens, each
// token's sums in the same order whatever T is: its logits are bit-identical alone or in a
// verify pass of k+1.

// out = LayerNorm(in) * weight + bias per row of C features (eps 1e-5, biased variance: torch's).
void layernorm(float *out, const float *in, const float *weight, const float *bias, int T,
               int C) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C; // row t of the input
        float *y = out + (size_t)t * C; // row t of the output
        float mean = 0.0f, var = 0.0f; // the row's mean and variance
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= C; // biased: divide by C, not C-1, as PyTorch does
        float rstd = 1.0f / sqrtf(var + 1e-5f); // eps keeps a constant row finite
        for (int i = 0; i < C; i++) y[i] = (x[i] - mean) * rstd * weight[i] + bias[i];
    }
}

// A Linear layer's parameters, as PyTorch's nn.Linear(in, out) holds them: y = x W + b.
typedef struct {
    const float *weight; // (in, out): PyTorch's weight transposed, so row i is input i's
    const float *bias;   // (out), or NULL for a Linear without one (query, key, value)
    int in, out;         // its input and output sizes
} Linear;

// out[t][j] = bias[j] + sum_i in[t][i] * weight[i][j]: the Linear lin on a pass's T tokens.
// The loop over tokens sits INSIDE the loop over weight rows: row i of the weight is read from
// memory once and used for all T tokens before row i+1 is touched. This is the one idea that can
// make a verify pass of k+1 tokens cheaper than k+1 one-token passes: when the weights must come
// from main memory, a one-token pass waits on them, and a verify pass fetches them once for all its
// tokens. The shipped model's 0.84 MB of weights sit in the CPU's L2 cache, so here a pass waits on
// arithmetic instead, which grows with T (--compare prints a verify pass's cost). Each out[t][j] adds
// its terms for i = 0, 1, 2, ... in that order, whatever T is: a token's output ignores the others.
void matmul(float *out, const float *in, Linear lin, int T) {
    // every output starts at its bias
    for (int t = 0; t < T; t++)
        for (int j = 0; j < lin.out; j++)
            out[(size_t)t * lin.out + j] = lin.bias ? lin.bias[j] : 0.0f;
    // then one weight row at a time, added into every token's outputs
    for (int i = 0; i < lin.in; i++) {
        const float *w = lin.weight + (size_t)i * lin.out; // weight row i: read once per pass
        for (int t = 0; t < T; t++) {
            float x = in[(size_t)t * lin.in + i];
            float *y = out + (size_t)t * lin.out;
            for (int j = 0; j < lin.out; j++) y[j] += x * w[j]; // i ascending, whatever T is
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

// Causal multi-head attention of the T new tokens of a pass (positions pos0 .. pos0+T-1) against
// one layer's cache, which already holds their keys and values too: token t attends to every
// position up to its own, and never to a later one (the causal mask). This is why one verify pass
// scores every guess as if the guesses before it were the real text. a->q: (T, C) in; a->att
// (NH, S, S) and a->att_out (T, C) out. Scores are scaled by 1/sqrt(HS), the lecture's
// k.shape[-1]**-0.5, so they keep unit variance.
void attention(const Config *c, BlockActs *a, int T, int pos0) {
    int C = c->n_embd, NH = c->n_head, S = c->block_size;
    int HS = C / NH; // each head sees its own HS-wide slice of q, k and v
    float scale = 1.0f / sqrtf((float)HS); // 1/4 for HS = 16
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            int n = pos0 + t + 1; // the positions token t may see: 0 .. its own
            const float *qh = a->q + (size_t)t * C + h * HS; // (HS) head h's query of token t
            float *w = a->att + ((size_t)h * S + t) * S; // its weights, att[h][t][0 .. n-1]
            // one score per visible position: the dot product of the query and that key
            for (int s = 0; s < n; s++) {
                const float *kh = a->keys + (size_t)s * C + h * HS;
                float score = 0.0f;
                for (int i = 0; i < HS; i++) score += qh[i] * kh[i];
                w[s] = score * scale;
            }
            softmax(w, n);
            for (int s = n; s < S; s++) w[s] = 0.0f; // later positions: the mask, made visible
            // output: the attention-weighted sum of the visible values, positions in order
            float *oh = a->att_out + (size_t)t * C + h * HS;
            for (int i = 0; i < HS; i++) oh[i] = 0.0f;
            for (int s = 0; s < n; s++) {
                const float *vh = a->values + (size_t)s * C + h * HS;
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

// x[t] = token_embedding[tokens[t]] + position_embedding[pos0 + t]: cache position 20 gets row 20.
void embed(float *x, const Weights *w, const int *tokens, int T, int pos0, int C) {
    for (int t = 0; t < T; t++) {
        const float *te = w->token_embedding + (size_t)tokens[t] * C;
        const float *pe = w->position_embedding + (size_t)(pos0 + t) * C;
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = te[i] + pe[i];
    }
}

// One transformer block l:  x_mid = x_in + proj(attn(ln1(x_in)));
//                           x_out = x_mid + ffwd(ln2(x_mid)).
// The T tokens' keys and values are written into this layer's cache (a->keys and a->values,
// (S, C)) at positions pos0 .., so that their queries, and every later token's, can attend to
// them.
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
    matmul(a->keys + (size_t)pos0 * C, a->ln1, key, T);
    matmul(a->values + (size_t)pos0 * C, a->ln1, value, T);
    attention(c, a, T, pos0);
    matmul(a->proj_out, a->att_out, proj, T);
    residual_add(a->x_mid, a->x_in, a->proj_out, (size_t)T * C);
    // MLP sub-block: Linear(C, H) -> ReLU -> Linear(H, C)
    layernorm(a->ln2, a->x_mid, w->ln2_weight + l * C, w->ln2_bias + l * C, T, C);
    matmul(a->hidden, a->ln2, up, T);
    relu(a->hidden, (size_t)T * H);
    matmul(a->ffwd, a->hidden, down, T);
    residual_add(a->x_out, a->x_mid, a->ffwd, (size_t)T * C);
}

// Aborts on a pass that would not fit the context: the loops keep the context rule, so a bug.
void check_pass_fits(const GPT *g, int pos0, int T) {
    if (T >= 1 && pos0 >= 0 && pos0 + T <= g->config.block_size) return;
    fprintf(stderr, "specdec: internal error: a pass of %d tokens at position %d exceeds "
            "block_size %d\n", T, pos0, g->config.block_size);
    abort();
}

// The target model's forward pass, the blog's target_model(idx, pos=positions, past_kvs=past_kvs):
// embed the T new tokens at positions cache_len .., run the L blocks (each appends its keys and
// values to its layer of the cache), then ln_f and lm_head. Returns the (T, V) logits.
float *forward(GPT *g, const int *tokens, int T) {
    const Config *c = &g->config;
    RunState *s = &g->state;
    int C = c->n_embd, pos0 = s->cache_len;
    check_pass_fits(g, pos0, T);
    // the blog's positions = torch.arange(cache_len, cache_len + T)
    embed(s->x, &g->w, tokens, T, pos0, C);
    size_t layer = (size_t)c->block_size * C; // one layer's slice of each cache
    for (int l = 0; l < c->n_layer; l++) {
        s->block.keys = s->key_cache + l * layer; // this layer's slice of the cache
        s->block.values = s->value_cache + l * layer;
        block_forward(c, &g->w, l, &s->block, T, pos0);
        memcpy(s->x, s->block.x_out, (size_t)T * C * sizeof(float)); // the next block's x_in
    }
    // final LayerNorm and the language-model head
    layernorm(s->ln_f, s->x, g->w.ln_f_weight, g->w.ln_f_bias, T, C);
    Linear lm_head = {g->w.lm_head_weight, g->w.lm_head_bias, C, c->vocab_size}; // C -> V
    matmul(s->logits, s->ln_f, lm_head, T);
    // the cache now holds these T positions too; trim_kv_cache may roll some back
    s->cache_len += T;
    return s->logits;
}

// ----------------------------------------------------------------------------
// Plain decoding: the baseline speculative decoding must match
//
// The same model, cache and context rule, one target pass per token. With the same seed and
// t = 0 it gives speculative decoding's text byte for byte (the self-test, and --compare).

// Plain decoding with the same cache, one target pass per token: the baseline speculation
// must match. seq gets the prompt (or the start token), then o->max_new_tokens tokens;
// p: (V) holds each step's row. 0; or -1, as speculative_generate, at a row not finite.
int generate(GPT *g, const Tokens *prompt, const DecodeOptions *o, int *seq, float *p) {
    int V = g->config.vocab_size, S = g->config.block_size;
    double t0 = now_seconds();
    int n_prompt = start_sequence(seq, prompt); // seq: prompt, then text (refills reread it)
    int *generated = seq + n_prompt; // the new tokens, after the prompt
    int n_generated = 0;
    const float *logits = prefill(g, seq, n_prompt, S, o->st);
    while (n_generated < o->max_new_tokens && !output_failed(o)) {
        // sample the next token from the logits of the current token
        generated[n_generated] = sample_token(logits, V, o->temperature, p, o->rng);
        if (generated[n_generated] < 0) // the row is not finite: no token comes from it
            return stop_nonfinite(o->st, g->state.cache_len - 1, n_generated, 0, t0);
        show_tokens(o, generated + n_generated, 1);
        n_generated++;
        if (n_generated == o->max_new_tokens) // the last token needs no pass
            break;
        // feed it back: one token on top of the cache, after the window rule made room
        make_room(g, seq, n_prompt + n_generated, o); // its room is for guesses: none here
        double t_pass = now_seconds(); // a step's time: the unit of --compare's c(k+1)
        logits = forward(g, &generated[n_generated - 1], 1);
        count_pass(o->st, STEP_PASS, now_seconds() - t_pass);
    }
    finish_stats(o->st, n_generated, t0);
    return 0;
}

// ----------------------------------------------------------------------------
// Plumbing: the model's memory, the tokenizer and the round's buffers
// From here on, the file is plumbing, which a blog reader can skip (the trace's printers, in
// "Trace and stats", show what a round decided). Most of its length is one rule: every bad input
// gets one line naming the problem and the fix, and an exit code; never a crash, hang or clamp.

// Frees each of the n pointers in owned (NULLs are fine): one call per struct's buffers.
void free_all(void *const *owned, size_t n) {
    for (size_t i = 0; i < n; i++) free(owned[i]);
}

// Fills sizes[i] with the float count of tensor i (checkpoint order); returns the sum.
size_t weight_sizes(const Config *c, size_t sizes[N_TENSORS]) {
    size_t L = c->n_layer, C = c->n_embd, V = c->vocab_size, S = c->block_size, H = c->ffn_width;
    size_t table[N_TENSORS] = {
        V * C, S * C,                                  // token and position embeddings
        L * C, L * C, L * C * C, L * C * C, L * C * C, // ln1; query, key, value
        L * C * C, L * C, L * C, L * C,                // proj; ln2
        L * C * H, L * H, L * H * C, L * C,            // ffwd up; ffwd down
        C, C, C * V, V};                               // ln_f; lm_head
    memcpy(sizes, table, sizeof(table));
    size_t total = 0; // P: 209,729 for the shipped model
    for (int i = 0; i < N_TENSORS; i++) total += sizes[i];
    return total;
}

// Points every Weights field at its slice of the one parameter block.
void point_weights(Weights *w, float *p, const size_t sizes[N_TENSORS]) {
    float **fields[N_TENSORS] = {&w->token_embedding, &w->position_embedding, &w->ln1_weight,
        &w->ln1_bias, &w->query, &w->key, &w->value, &w->proj_weight, &w->proj_bias, &w->ln2_weight,
        &w->ln2_bias, &w->ffwd_up_weight, &w->ffwd_up_bias, &w->ffwd_down_weight, &w->ffwd_down_bias,
        &w->ln_f_weight, &w->ln_f_bias, &w->lm_head_weight, &w->lm_head_bias}; // checkpoint order
    for (int i = 0; i < N_TENSORS; i++) {
        *fields[i] = p; // each tensor starts where the one before it ended: no gaps
        p += sizes[i];
    }
}

// n zeroed floats, or NULL.
float *alloc_floats(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

// Points *bufs[i] at n[i] zeroed floats, i < count; 0 if all succeeded (the caller frees).
static int alloc_each(float **const *bufs, const size_t *n, size_t count) {
    int ok = 1;
    for (size_t i = 0; i < count; i++) ok &= (*bufs[i] = alloc_floats(n[i])) != NULL;
    return ok ? 0 : -1;
}

// Allocates parameters, activations and KV cache, zeroed: 0; or -1, and free_gpt still frees it.
int build_gpt(GPT *g, const Config *c) {
    size_t S = c->block_size, C = c->n_embd, V = c->vocab_size, L = c->n_layer, sizes[N_TENSORS];
    size_t NH = c->n_head, H = c->ffn_width;
    *g = (GPT){.config = *c, .n_params = weight_sizes(c, sizes)}; // cache_len 0: a prefill next
    RunState *s = &g->state;
    BlockActs *a = &s->block; // sized for a full context (T = S): any pass, prefill included, fits
    // one allocation for all parameters: one copy in, one copy out, one free; a cache
    // position never written reads as zero in a debugger (a cache: 4 * 32 * 64 floats, 32 KiB)
    float **bufs[] = {&g->params, &s->x, &s->ln_f, &s->logits, &s->key_cache, &s->value_cache,
                      &a->ln1, &a->q, &a->att, &a->att_out, &a->proj_out, &a->x_mid, &a->ln2,
                      &a->hidden, &a->ffwd, &a->x_out};
    size_t n[] = {g->n_params, S * C, S * C, S * V, L * S * C, L * S * C,
                  S * C, S * C, NH * S * S, S * C, S * C, S * C, S * C, S * H, S * C, S * C};
    if (alloc_each(bufs, n, sizeof(n) / sizeof(n[0])) != 0) return -1;
    point_weights(&g->w, g->params, sizes);
    a->x_in = s->x; // every layer reads x and writes x_mid and x_out; forward copies x_out to x
    return 0;
}

// Frees what build_gpt allocated; safe on a zeroed or half-built GPT (free takes NULLs).
void free_gpt(GPT *g) {
    RunState *s = &g->state;
    BlockActs *a = &s->block;
    free_all((void *[]){g->params, s->x, s->ln_f, s->logits, s->key_cache, s->value_cache,
                        a->ln1, a->q, a->att, a->att_out, a->proj_out, a->x_mid, a->ln2,
                        a->hidden, a->ffwd, a->x_out}, 16);
    memset(g, 0, sizeof(*g));
}

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
        v->id[b] = seen[b] ? v->size : -1; // the next token number, or none: not in the text
        if (seen[b]) v->chars[v->size++] = (unsigned char)b; // so tokens go in byte order
    }
}

// Encodes n bytes into tokens; returns the index of the first byte not in the vocabulary, or -1.
long encode(const Vocab *v, const unsigned char *text, size_t n, int *tokens) {
    for (size_t i = 0; i < n; i++)
        if ((tokens[i] = v->id[text[i]]) < 0) return (long)i; // the -1 there is no token
    return -1;
}

// Decodes one token to its byte.
unsigned char decode(const Vocab *v, int token) { return v->chars[token]; }

// Allocates a round's buffers for drafts of up to K tokens; 0 on success.
int build_spec_buffers(SpecBuffers *b, int K, int V) {
    *b = (SpecBuffers){.V = V, .rejected_at = -1}; // rows stay V wide for any k <= K
    // K rows for the guesses, K+1 for the verify pass and the output: the bonus needs one more
    float **rows[] = {&b->draft_probs, &b->target_probs, &b->prefill_probs};
    size_t n[] = {(size_t)K * V, (size_t)(K + 1) * V, (size_t)V};
    int ok = alloc_each(rows, n, 3) == 0;
    b->candidates = calloc((size_t)K, sizeof(int));
    b->all_tokens = calloc((size_t)K + 1, sizeof(int));
    b->u = calloc((size_t)K, sizeof(double));
    b->adjusted = calloc((size_t)V, sizeof(double));
    b->emitted = calloc((size_t)K + 1, sizeof(int));
    return ok && b->candidates && b->all_tokens && b->u && b->adjusted && b->emitted ? 0 : -1;
}

// Frees what build_spec_buffers allocated.
void free_spec_buffers(SpecBuffers *b) {
    free_all((void *[]){b->candidates, b->draft_probs, b->all_tokens, b->target_probs, b->u,
                        b->adjusted, b->emitted, b->prefill_probs}, 8);
    memset(b, 0, sizeof(*b)); // NULLs: a second free is harmless
}

// ----------------------------------------------------------------------------
// Trace and stats (stderr)

// Counters of one generation: what the stats print, and what --compare sets side by side.
struct Stats {
    long rounds;        // speculative rounds: one verify pass each
    long drafted;       // candidates drafted: the sum of k
    long judged;        // candidates accept_reject decided on: accepted + rejected
    long guesses_accepted; // candidates that passed (num_accepted adds the resample or bonus)
    double alpha_sum;   // sum min(p, q) over the judged candidates: alpha_sum / judged = alpha
    long resampled;     // rounds that ended in a rejection and a draw from adjusted
    long bonus;         // rounds where all k passed and a bonus token was drawn
    long round_tokens;  // tokens the rounds emitted: accepted drafts, resamples and bonuses
    long target_passes; // every forward pass of the target: prefill, refills, verify, steps
    long passes[PASS_KINDS];  // the same, by kind: prefill, refills, verify (a round), steps
    double seconds_in[PASS_KINDS]; // their wall time by kind (a verify pass: with its softmaxes)
    long emitted;       // tokens generated
    double seconds;     // wall time of the whole generation, prefill to last token
    long nonfinite_token;   // 0; or N: the output's N-th token was to come from a row of
    int nonfinite_position; // logits that was not finite, at this position, and the run stopped
};

// Wall-clock seconds from a monotonic clock (never jumps with the date).
double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Counts one target pass of a kind (PREFILL_PASS ..) that took `seconds`: what speculation cuts.
void count_pass(Stats *st, int kind, double seconds) {
    st->target_passes++;
    st->passes[kind]++;
    st->seconds_in[kind] += seconds;
}

// sum_x min(p(x), q(x)) over a row: the chance that a guess drawn from q passes
// u < min(1, p/q). Its mean over the judged positions is the papers' alpha.
double expected_acceptance(const float *p, const float *q, int V) {
    double sum = 0.0;
    for (int x = 0; x < V; x++) sum += fmin(p[x], q[x]);
    return sum;
}

// Closes a generation's counters: the tokens it emitted and its wall time since t0.
void finish_stats(Stats *st, long emitted, double t0) {
    st->emitted = emitted;
    st->seconds = now_seconds() - t0;
}

// Stops a decoder at a row of logits that is not finite: notes its position and the output
// token it was to decide (the emitted ones, then `ahead` more), closes the counters; -1.
int stop_nonfinite(Stats *st, int position, long emitted, int ahead, double t0) {
    st->nonfinite_position = position;
    st->nonfinite_token = emitted + ahead + 1;
    finish_stats(st, emitted, t0);
    return -1;
}

// Writes the n tokens to the text's stream, if any, as they are decided.
void show_tokens(const DecodeOptions *o, const int *tokens, int n) {
    if (!o->out) return; // nobody asked: a test, the self-test, or --compare (timing)
    for (int i = 0; i < n; i++) fputc(decode(o->vocab, tokens[i]), o->out);
    fflush(o->out); // each token shows as it is decided
}

// True once the stream failed (a closed pipe, a full disk): the loops stop there.
int output_failed(const DecodeOptions *o) { return o->out && ferror(o->out); }

// Writes a byte so that it can be seen: '\n', ' ', 'a', '\x07'; returns out, for a printf.
char *visible_char(char out[8], unsigned char b) {
    int escaped = b == '\n' || b == '\t' || b == '\'' || b == '\\'; // a backslash, as C writes it
    const char *format = escaped ? "'\\%c'" : isprint(b) ? "'%c'" : "'\\x%02x'";
    snprintf(out, 8, format, b == '\n' ? 'n' : b == '\t' ? 't' : b);
    return out;
}

// Prints the prefill: the prompt's pass, and the first token, with its p in the row drawn from.
void trace_prefill(const DecodeOptions *o, int n_tokens, int sampled, double p) {
    char vis[8];
    fprintf(stderr, "PREFILL  one target pass over %d token%s at positions 0..%d -> cache_len %d; "
            "sampled %s (p=%.4f), the new current_token\n", n_tokens, n_tokens == 1 ? "" : "s",
            n_tokens - 1, n_tokens, visible_char(vis, decode(o->vocab, sampled)), p);
}

// Prints a refill: the cache was full, and the window restarted (make_room).
void trace_refill(int n_tokens) {
    fprintf(stderr, "\nREFILL   the cache is full (cache_len = block_size): the window restarts "
            "from the last %d tokens, as plain decoding's refill does; one target pass over the "
            "%d before current_token at positions 0..%d\n", n_tokens + 1, n_tokens, n_tokens - 1);
}

// Prints the ACCEPT/REJECT lines: one per candidate judged, then how the round ended.
static void trace_decisions(const DecodeOptions *o, const SpecBuffers *b, int k, int num_accepted) {
    int V = b->V, judged = b->rejected_at >= 0 ? b->rejected_at + 1 : k, left = k - judged;
    char vis[8];
    if (judged > 0) // the stats' alpha is the last column's mean over the run's judged guesses
        fprintf(stderr, "  ACCEPT/REJECT (accept when u < min(1, p/q); sum min(p,q): the "
                "chance to pass)\n");
    for (int i = 0; i < judged; i++) {
        int c = b->candidates[i];
        const float *p_row = b->target_probs + (size_t)i * V, *q_row = b->draft_probs + (size_t)i * V;
        double p = p_row[c], q = q_row[c], pass = expected_acceptance(p_row, q_row, V); // its chance
        fprintf(stderr, "    %-6s p=%.4f q=%.4f p/q=%.3f min(1,p/q)=%.3f u=%.3f -> %s   sum "
                "min(p,q)=%.3f\n", visible_char(vis, decode(o->vocab, c)), p, q, p / q,
                fmin(1.0, p / q), b->u[i], i != b->rejected_at ? "ACCEPT" : "REJECT", pass);
    }
    int last = b->emitted[num_accepted - 1]; // a resample, a bonus, or neither (a last round)
    visible_char(vis, decode(o->vocab, last));
    if (b->rejected_at >= 0) { // and the guesses after the rejected one, if any, are dropped
        double mass = 0.0, upto = 0.0; // adjusted's sum, and its running sum at the draw
        for (int x = 0; x < V; x++) mass += b->adjusted[x]; // 1 - sum min(p, q): P(rejected here)
        for (int x = 0; x <= last; x++) upto += b->adjusted[x]; // as sample_weights sums them
        fprintf(stderr, "    resample from norm(max(0, p-q)) (mass %.3f) with u=%.3f, u*mass=%.3f "
                "-> %s", mass, b->u_last, b->u_last * mass, vis);
        if (mass > 0.0) // the draw: in token-id order, the first whose running sum passes u*mass
            fprintf(stderr, ", the first in id order whose running sum passes u*mass: %.3f "
                    "before it, %.3f with it", upto - b->adjusted[last], upto);
        else // departure 4: an adjusted distribution with no mass draws from p
            fprintf(stderr, ", drawn from p: adjusted has no mass");
        if (left > 0) // drafted after the rejected one, never judged
            fprintf(stderr, "; discard the remaining %d candidate%s", left, left == 1 ? "" : "s");
    } else if (k == 0) // nothing was drafted
        fprintf(stderr, "  STEP    one token from target_probs[0] with u=%.3f -> %s, as plain "
                "decoding samples it", b->u_last, vis);
    else if (num_accepted == k + 1)
        fprintf(stderr, "  BONUS   all %d passed: one more token from target_probs[%d] with "
                "u=%.3f -> %s", k, k, b->u_last, vis);
    else // a last round, which allows no bonus
        fprintf(stderr, "  (all %d passed; no bonus: the round already gives every token "
                "still needed)", k);
    fputc('\n', stderr); // each branch's line ends here
}

// Prints one round the way the blog's worked example reads, with real numbers.
void trace_round(const DecodeOptions *o, const SpecBuffers *b, int k, int num_accepted,
                 int cache_len) {
    char vis[8]; // current_token, then each guess, then the new current_token
    fprintf(stderr, "\nround %ld: current_token %s, cache_len %d, k %d\n", o->st->rounds,
            visible_char(vis, decode(o->vocab, b->all_tokens[0])), cache_len, k);
    // current_token -> c0 -> c1 .., or none; the VERIFY line's "\n" ends this line
    fprintf(stderr, "  DRAFT   %s", k ? vis : "none: current_token takes the cache's last "
            "position, and a guess would need the next");
    for (int i = 0; i < k; i++) // each guess, and the draft's probability of it
        fprintf(stderr, " -> %s (q=%.4f)", visible_char(vis, decode(o->vocab, b->candidates[i])),
                b->draft_probs[(size_t)i * b->V + b->candidates[i]]);
    fprintf(stderr, "\n  VERIFY  one target pass over %d token%s at positions %d..%d\n", k + 1,
            k ? "s" : "", cache_len, cache_len + k);
    trace_decisions(o, b, k, num_accepted);
    fprintf(stderr, "  RESULT  emitted \"");
    for (int i = 0; i < num_accepted; i++) { // the text, as a C string literal spells it
        unsigned char ch = decode(o->vocab, b->emitted[i]);
        int escaped = ch == '\n' || ch == '"' || ch == '\\'; // a tab, unlike visible_char's: \x09
        fprintf(stderr, escaped ? "\\%c" : isprint(ch) ? "%c" : "\\x%02x", ch == '\n' ? 'n' : ch);
    }
    fprintf(stderr, "\": %d token%s from 1 target pass\n", num_accepted,
            num_accepted == 1 ? "" : "s");
    // TRIM: the verify pass added k+1 positions; trim_kv_cache keeps current + num_accepted - 1
    fprintf(stderr, "  TRIM    cache_len %d + %d = %d -> %d (kept the round's current_token + %d, "
            "dropped %d); %s is the new current_token\n", cache_len, k + 1, cache_len + k + 1,
            cache_len + num_accepted, num_accepted - 1, k + 1 - num_accepted,
            visible_char(vis, decode(o->vocab, b->emitted[num_accepted - 1])));
}

// The loop's bookkeeping after a round's four phases, in one call: counts the round (its verify
// pass and that pass's seconds, its verdicts), prints it (--trace), writes its tokens to the text.
void report_round(const DecodeOptions *o, const SpecBuffers *b, int k, int num_accepted,
                  int cache_len, double verify_seconds) {
    Stats *st = o->st;
    count_pass(st, VERIFY_PASS, verify_seconds); // forward and its k+1 softmaxes
    int judged = b->rejected_at >= 0 ? b->rejected_at + 1 : k; // up to and including a rejection
    for (int i = 0; i < judged; i++)
        st->alpha_sum += expected_acceptance(b->target_probs + (size_t)i * b->V,
                                             b->draft_probs + (size_t)i * b->V, b->V);
    st->resampled += b->rejected_at >= 0;
    st->bonus += k > 0 && num_accepted == k + 1; // k+1 tokens only when all k passed
    st->rounds++;
    st->drafted += k;
    st->judged += judged;
    st->guesses_accepted += b->rejected_at >= 0 ? b->rejected_at : k;
    st->round_tokens += num_accepted;
    if (o->trace) trace_round(o, b, k, num_accepted, cache_len);
    show_tokens(o, b->emitted, num_accepted);
}

// a / b, or 0 when there is nothing to divide by: no round, no guess, no time measured.
double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The papers' alpha: the mean of sum min(p, q) over the judged candidates, each guess's
// chance to pass; accepted / judged counts how many did.
double stats_alpha(const Stats *s) { return ratio(s->alpha_sum, s->judged); }

// Tokens a verify pass gives at draft length K if each guess passes with chance alpha
// (Leviathan et al. 2023): 1 + alpha + .. + alpha^K. K may be a mean, and so not whole.
double expected_tokens_per_pass(double alpha, double K) {
    return alpha < 1.0 ? (1.0 - pow(alpha, K + 1)) / (1.0 - alpha) : K + 1.0; // 0/0 at alpha 1
}

// Prints a generation's counters on stderr, a line each; "\n" starts a line, so lines can grow.
void print_stats(const char *title, const Stats *s, int speculative) {
    fprintf(stderr, "\n%s\n  tokens emitted          %ld", title, s->emitted);
    if (speculative) { // speculation's own counters: how much was guessed, kept and paid for
        double alpha = stats_alpha(s), mean_k = ratio(s->drafted, s->rounds);
        fprintf(stderr, "   (1 from the prefill, %ld from the rounds)", s->round_tokens);
        fprintf(stderr, "\n  rounds                  %ld   (%ld ending in a resample, %ld in a "
                "bonus, %ld in neither: no room for a guess, or a last round)", s->rounds,
                s->resampled, s->bonus, s->rounds - s->resampled - s->bonus);
        fprintf(stderr, "\n  drafted                 %ld   (k = %.2f a round, on average)",
                s->drafted, mean_k);
        fprintf(stderr, "\n  accepted                %ld of %ld judged: acceptance rate %.3f (a "
                "rejection ends its round: the guesses after it are never judged)",
                s->guesses_accepted, s->judged, ratio(s->guesses_accepted, s->judged));
        fprintf(stderr, "\n  alpha                   %.3f   (the mean of sum min(p, q) over the "
                "judged: each guess's chance to pass; the rate counts passes, and differs from "
                "alpha by chance)", alpha);
        fprintf(stderr, "\n  tokens per verify pass  %.3f   (%ld tokens / %ld passes; predicted "
                "(1 - alpha^(k+1)) / (1 - alpha) at the mean k: %.3f)",
                ratio(s->round_tokens, s->rounds), s->round_tokens, s->rounds,
                expected_tokens_per_pass(alpha, mean_k));
    }
    fprintf(stderr, "\n  target passes           %ld   (%ld prefill, %ld refill, %ld %s)\n",
            s->target_passes, s->passes[PREFILL_PASS], s->passes[REFILL_PASS],
            s->passes[speculative ? VERIFY_PASS : STEP_PASS], speculative ? "verify" : "one-token");
    fprintf(stderr, "  wall time               %.3f ms   %.0f tokens/s\n", 1e3 * s->seconds,
            ratio(s->emitted, s->seconds));
}

// Prints speculative against plain: target passes and wall time, whether the texts agree,
// and why time can go the other way: c(k+1), the measured cost of a round in one-token steps.
void print_comparison(const Stats *spec, const Stats *plain, int greedy, int identical) {
    // ratios below 1 are what speculation buys: fewer passes, and perhaps less time
    fprintf(stderr, "\ncomparison              speculative        plain    spec/plain\n");
    fprintf(stderr, "  target passes        %11ld  %11ld  %11.3f\n", spec->target_passes,
            plain->target_passes, ratio(spec->target_passes, plain->target_passes));
    fprintf(stderr, "  wall time (ms)       %11.3f  %11.3f  %11.3f\n", 1e3 * spec->seconds,
            1e3 * plain->seconds, ratio(spec->seconds, plain->seconds));
    // c(k+1): a verify pass of k+1 tokens (forward and its softmaxes) in one-token steps
    double c = ratio(ratio(spec->seconds_in[VERIFY_PASS], spec->passes[VERIFY_PASS]),
                     ratio(plain->seconds_in[STEP_PASS], plain->passes[STEP_PASS]));
    fprintf(stderr, "  why time can differ: a verify pass of k+1 = %.2f tokens took c(k+1) = %.2f "
            "one-token steps in this run, and a round gave %.2f tokens: time falls only where "
            "the tokens exceed c(k+1)\n", 1.0 + ratio(spec->drafted, spec->rounds), c,
            ratio(spec->round_tokens, spec->rounds));
    if (greedy) // only greedy decoding promises equal texts; sampling, equal distributions
        fprintf(stderr, "  greedy outputs are %s (greedy text falls into loops: the likeliest "
                "character each time; -t 1 samples varied text)\n", identical ?
                "byte-identical" : "DIFFERENT (a bug)");
    else
        fprintf(stderr, "  (sampled texts %s: the decoders consume the random stream "
                "differently; their distributions are the same)\n", identical ? "agree" : "differ");
}

// ----------------------------------------------------------------------------
// Loading: the corpus and a checkpoint

// The training text, its tokens and the lecture's split: 90% to train (n_train), 10% to validate.
typedef struct {
    unsigned char *bytes; // (N) the raw file, N = 1,115,394 bytes for Tiny Shakespeare
    int *tokens;          // (N) encoded with the model's vocabulary
    size_t n, n_train;    // N; the first int(0.9 * N), as in the lecture, feed the bigram counts
} Corpus;

// Formats a message into out (n bytes), each quoted value ('VALUE', no space) over 64 bytes
// cut in its middle: a long path or value never pushes the reason and the fix off the end.
void format_whole(char *out, size_t n, const char *fmt, va_list ap) {
    va_list again; // the arguments, once to measure and once to write
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    char *full = len < 0 ? NULL : malloc((size_t)len + 1); // no memory: out, cut, never overrun
    vsnprintf(full ? full : out, full ? (size_t)len + 1 : n, fmt, again);
    va_end(again);
    for (char *q = full ? strchr(full, '\'') : NULL; q; q = strchr(q + 1, '\'')) {
        char *end = strpbrk(q + 1, "' "); // the closing quote, or a space: then not a value
        if (end && *end == '\'' && end - q > 65) { // keep its first and last 30 bytes
            memcpy(q + 31, "...", 3);
            memmove(q + 34, end - 30, strlen(end - 30) + 1); // the last 30, the quote, the rest
            q += 64; // at the closing quote
        }
    }
    if (full) snprintf(out, n, "%s", full);
    free(full);
}

// Writes a printf-style message into err and returns -1: a refusal is one statement.
__attribute__((format(printf, 3, 4)))
int fail_with(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    format_whole(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

// Reads a whole file into memory; NULL and err ("cannot open WHAT 'PATH': why (FIX)") if not.
unsigned char *read_file(const char *path, size_t *n_out, const char *what,
                         const char *fix, char *err, size_t errlen) {
    struct stat st; // stat first: a directory opens fine with fopen, and a FIFO's read blocks
    // over 2 GiB (500 million parameters) is refused before allocating: nothing here is that big
    const char *why = NULL; // the first problem found, in this order
    if (stat(path, &st) != 0) why = strerror(errno);
    else if (!S_ISREG(st.st_mode)) why = "not a regular file";
    else if ((uint64_t)st.st_size > (1ULL << 31)) why = "over 2 GiB, more than this program reads";
    FILE *f = why ? NULL : fopen(path, "rb");
    if (!why && !f) why = strerror(errno); // stat passed and fopen did not: no read permission
    size_t n = f ? (size_t)st.st_size : 0; // the size, then the bytes in one read
    unsigned char *buf = f ? malloc(n ? n : 1) : NULL; // an empty file still gets a buffer
    if (f && (!buf || fread(buf, 1, n, f) != n || ferror(f)))
        why = buf ? "a short read: the file changed or broke while read" : "out of memory";
    if (f) fclose(f);
    if (why) fail_with(err, errlen, "cannot open %s '%s': %s (%s)", what, path, why, fix);
    if (why) free(buf); // a refusal leaves nothing allocated
    else *n_out = n;
    return why ? NULL : buf;
}

// Frees what load_corpus allocated; safe to call twice.
void free_corpus(Corpus *c) {
    free(c->bytes);
    free(c->tokens); // the memset below leaves NULLs for a second call
    memset(c, 0, sizeof(*c));
}

// Loads the corpus and encodes it with the model's vocabulary. 0; or -1, err set and c empty
// (free_corpus harmless).
int load_corpus(Corpus *c, const char *path, Vocab *vocab, char *err, size_t errlen) {
    const char *fix = "run 'make data' to fetch Tiny Shakespeare";
    memset(c, 0, sizeof(*c));
    if (!(c->bytes = read_file(path, &c->n, "corpus", fix, err, errlen))) return -1;
    c->tokens = c->n >= 2 ? malloc(c->n * sizeof(int)) : NULL; // (N) ints: 4.5 MB for Shakespeare
    long bad = c->tokens ? encode(vocab, c->bytes, c->n, c->tokens) : -1; // a byte with no token
    char vis[8]; // that byte, as a message shows it (the bigram table could not count it)
    int rc = 0; // or -1 at the first problem, in this order
    if (c->n < 2) rc = fail_with(err, errlen, "corpus '%s' has %zu byte%s; it needs at least 2 to "
                                 "count a bigram (%s)", path, c->n, c->n == 1 ? "" : "s", fix);
    else if (!c->tokens) rc = fail_with(err, errlen, "out of memory encoding corpus '%s'", path);
    else if (bad >= 0) rc = fail_with(err, errlen, "corpus '%s' has byte %s (0x%02x) at offset "
                                      "%ld, not in the model's vocabulary (use the model's corpus)",
                                      path, visible_char(vis, c->bytes[bad]), c->bytes[bad], bad);
    c->n_train = (size_t)(0.9 * (double)c->n); // the lecture's n = int(0.9 * len(data))
    if (rc != 0) free_corpus(c);
    return rc;
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
// So the file is exactly 36 + V + 4P bytes, which is checked first.
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

// Checks a config's sizes, in Config's order and held wide (a huge uint32 is named, not wrapped).
int validate_config(const long long v[5], char *err, size_t errlen) {
    // generous bounds: every size product stays far below 2^63; block_size >= 2 leaves room
    // for current_token and one draft; vocab_size <= 256: a token per byte
    static const char *name[5] = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size"};
    static const int lo[5] = {1, 1, 1, 2, 1}, hi[5] = {64, 64, 4096, 4096, 256};
    for (int i = 0; i < 5; i++)
        if (v[i] < lo[i] || v[i] > hi[i])
            return fail_with(err, errlen, "config out of range: %s %lld, not %d..%d", name[i],
                             v[i], lo[i], hi[i]);
    if (v[2] % v[1] != 0) // heads split the embedding evenly: HS = C / NH is whole
        return fail_with(err, errlen, "n_embd %lld is not a multiple of n_head %lld", v[2], v[1]);
    return 0;
}

// Parses a checkpoint in memory into g (built here) and vocab, checking every field first.
int parse_checkpoint(const unsigned char *buf, size_t n, GPT *g, Vocab *vocab,
                     char *err, size_t errlen) {
    if (n < CKPT_HEADER) // header: magic, version, config
        return fail_with(err, errlen, "%zu bytes, shorter than the %d-byte header", n, CKPT_HEADER);
    if (memcmp(buf, CKPT_MAGIC, 4) != 0)
        return fail_with(err, errlen, "wrong magic (not a specdec checkpoint)");
    if (get_u32(buf + 4) != CKPT_VERSION)
        return fail_with(err, errlen, "version %u, this program reads version %d",
                         get_u32(buf + 4), CKPT_VERSION);
    long long s[5] = {get_u32(buf + 8), get_u32(buf + 12), get_u32(buf + 16), get_u32(buf + 20),
                      get_u32(buf + 24)}; // the five sizes in Config's order, read unsigned
    if (validate_config(s, err, errlen) != 0) return -1;
    // in range, so whole ints; ffn_width is the lecture's 4C: a checkpoint holds no other
    Config c = {(int)s[0], (int)s[1], (int)s[2], (int)s[3], (int)s[4], 4 * (int)s[2]};
    // the size follows from the config: one number covers truncation at any section and a
    // config that lies about the tensors, checked before reading further
    size_t sizes[N_TENSORS], V = (size_t)c.vocab_size, P = weight_sizes(&c, sizes);
    size_t expect = CKPT_HEADER + V + 4 * P + 8; // header, vocabulary, parameters, checksum
    if (n != expect)
        return fail_with(err, errlen, "file is %zu bytes, but its config (L=%d NH=%d C=%d S=%d "
                         "V=%d, %zu parameters) needs %zu: %s", n, c.n_layer, c.n_head, c.n_embd,
                         c.block_size, c.vocab_size, P, expect, n < expect ? "truncated or "
                         "mismatched" : "too long: mismatched, or bytes were appended");
    if (fnv1a64(buf, n - 8) != get_u64(buf + n - 8))
        return fail_with(err, errlen, "checksum mismatch: the file is corrupted");
    const unsigned char *vb = buf + CKPT_HEADER; // vocabulary: strictly ascending bytes
    for (size_t i = 1; i < V; i++)
        if (vb[i] <= vb[i - 1]) // else two tokens would share a byte, or decode out of order
            return fail_with(err, errlen, "vocabulary not strictly ascending at entry %zu", i);
    build_vocab(vocab, vb, V); // token i is the i-th byte, as building it from them gives
    int rc = build_gpt(g, &c) == 0 ? 0 : fail_with(err, errlen, "out of memory for %zu "
                   "parameters and the activations of a %d-token context", P, c.block_size);
    // parameters, tensor by tensor so that a bad one can be named; each must be finite.
    // memcpy of the bits, not a cast: reinterpreting bytes as float is only defined this way
    for (size_t t = 0, i = 0; rc == 0 && t < N_TENSORS; t++) // i: the index in all P parameters
        for (size_t end = i + sizes[t]; rc == 0 && i < end; i++) { // tensor t's parameters
            uint32_t bits = get_u32(vb + V + 4 * i);
            memcpy(&g->params[i], &bits, 4);
            if (!isfinite(g->params[i]))
                rc = fail_with(err, errlen, "parameter %zu (in tensor %s) is not a finite number",
                               i, TENSOR_NAMES[t]);
        }
    if (rc != 0) free_gpt(g); // the caller gets no half-built or half-loaded model
    return rc;
}

// Loads the target's checkpoint (-m); on failure err names the file, the problem, the fix.
int load_checkpoint(const char *path, GPT *g, Vocab *vocab, char *err, size_t errlen) {
    const char *fix = "point -m at a checkpoint: 'make train' trains one, "
                      "'tinyshakespeare/train init --seed S -o PATH' writes a random one";
    size_t n = 0;
    unsigned char *buf = read_file(path, &n, "checkpoint", fix, err, errlen);
    char why[256]; // the reason alone; the message below adds the path and the fix
    int rc = buf ? parse_checkpoint(buf, n, g, vocab, why, sizeof(why)) : -1;
    if (buf && rc != 0) fail_with(err, errlen, "checkpoint '%s': %s (%s)", path, why, fix);
    free(buf); // the parameters were copied out of it
    return rc;
}

// ----------------------------------------------------------------------------
// Self-test: greedy speculative decoding is plain greedy decoding, bit for bit

// Greedy speculative vs greedy plain on one prompt and one K: the texts must be equal.
int selftest_greedy_case(GPT *g, const BigramDraft *d, const char *label, const Tokens *prompt,
                         int K, int n) {
    int V = g->config.vocab_size, start = prompt->n > 0 ? prompt->n : 1; // seq[start..]: new text
    size_t len = (size_t)(start + n); // a decoder's sequence: the prompt (or a start), n new
    int *seq = malloc(2 * len * sizeof(int)); // speculative's, then plain's at seq + len
    float p[256]; // plain decoding's row (V <= 256, validate_config)
    SpecBuffers b = {0}; // zeroed: freed below even when never built
    Stats ss = {0}, sp = {0};
    Rng r1 = {1}, r2 = {2}; // different streams: greedy decoding must not depend on them
    DecodeOptions os = {.max_new_tokens = n, .K = K, .rng = &r1, .st = &ss}; // t = 0: greedy
    DecodeOptions op = {.max_new_tokens = n, .K = K, .rng = &r2, .st = &sp}; // no text, no trace
    int same = seq && build_spec_buffers(&b, K, V) == 0;
    if (same) { // both decoders from the same prompt; each refills its own cache from scratch
        speculative_generate(g, d, &b, prompt, &os, seq);
        generate(g, prompt, &op, seq + len, p);
        same = ss.emitted == n && sp.emitted == n && // the new text; the prompt is shared
               memcmp(seq + start, seq + len + start, (size_t)n * sizeof(int)) == 0;
    }
    free_spec_buffers(&b); // a half-built b too
    printf("%s greedy %-14s K=%d: %d tokens %s (spec: %ld target passes, alpha %.3f; "
           "plain: %ld passes)\n", same ? "PASS" : "FAIL", label, K, n,
           same ? "byte-identical" : "DIFFER", ss.target_passes, stats_alpha(&ss), sp.target_passes);
    free(seq);
    return same;
}

// The corpus length the self-test needs: its longest prompt, 2S+7 tokens, comes from it.
size_t selftest_min_corpus(int S) { return (size_t)2 * S + 7; }

// Runs every self-test case with the bigram draft d; returns the number of failures.
int selftest(GPT *g, const BigramDraft *d, const Vocab *v, const Corpus *corpus) {
    int S = g->config.block_size, passed = 0, cases = 0;
    // prompts: empty, one char, the blog's, exactly S and longer (from the corpus), a name line
    const char *texts[] = {"", "\n", "To be or not to be, that is the ", NULL, NULL, "ROMEO:\n"};
    const char *labels[] = {"empty", "newline", "to-be", "exactly-S", "longer-than-S", "romeo"};
    int tokens[64]; // a text prompt, encoded (each under 64 bytes); corpus prompts are read in place
    for (int c = 0; c < 6; c++) {
        Tokens prompt = {texts[c] ? tokens : corpus->tokens, texts[c] ? (int)strlen(texts[c]) :
                         c == 3 ? S : (int)selftest_min_corpus(S)}; // exactly S, or longer
        int cannot = texts[c] && encode(v, (const unsigned char *)texts[c], (size_t)prompt.n,
                                        tokens) >= 0;
        if (cannot) printf("FAIL greedy %-14s cannot run: the vocabulary lacks one of its bytes "
                           "(use Tiny Shakespeare)\n", labels[c]);
        cases += cannot; // a vocabulary without its bytes cannot run the prompt: a failed case
        for (int K = 1; !cannot && K <= 8 && K < S; K++, cases++) // short and long drafts
            passed += selftest_greedy_case(g, d, labels[c], &prompt, K, 300); // many refills
    }
    printf("selftest: %d of %d cases passed\n", passed, cases); // the runner counts PASS/FAIL
    return cases - passed;
}

// ----------------------------------------------------------------------------
// Command line: ./specdec [options], in the manner of llama2.c's run

// The name a message starts with: each program that includes this file sets its own.
const char *program_name = "specdec";

// Prints "specdec: MESSAGE" on stderr as one line, newlines and raw bytes escaped (\n, \xNN).
__attribute__((format(printf, 1, 2)))
void error_line(const char *fmt, ...) {
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    format_whole(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: ", program_name);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) // \n, \xNN, or the byte
        fprintf(stderr, *c == '\n' ? "\\n" : *c < 0x20 || *c >= 0x7f ? "\\x%02x" : "%c", *c);
    fputc('\n', stderr);
}

// Closes stdout; a write lost on the way (full disk, closed pipe) is one line on stderr, exit 1.
// A lost stderr (the trace, the stats) is exit 1 too, with no line: it has nowhere to go.
int close_stdout(void) {
    if (fflush(stderr) != 0 || ferror(stderr)) return 1;
    int failed = ferror(stdout);
    if (fclose(stdout) == 0 && !failed) return 0;
    error_line("cannot write to stdout: %s (a full disk or a closed pipe)", strerror(errno));
    return 1;
}

// What the command line asked for: each field is its option's value (usage lists them).
typedef struct {
    const char *model_path, *corpus_path, *prompt; // -m, -i, -p
    int max_new_tokens, K, K_default; // -n, -k (0 until parsed: not given); 1: no -k, K is 4
    float temperature;      // -t
    uint64_t seed;          // -s
    int trace, compare, plain, run_selftest, help, no_prompt; // the flags of the same names
} Options;

#define DEFAULT_MODEL "tinyshakespeare/model.bin"
#define DEFAULT_CORPUS "tinyshakespeare/input.txt"
#define DEFAULT_PROMPT "To be or not to be, that is the "
#define MAX_NEW_TOKENS 10000000 // 8 bytes a token (two texts of ints): 80 MB at most

// The help text of -h, for ./program_name.
void usage(FILE *f) {
    fprintf(f, "usage: ./%s [options]\n"
        "  -m PATH     checkpoint (default " DEFAULT_MODEL ")\n"
        "  -i PATH     the bigram draft's corpus (default " DEFAULT_CORPUS "; not with --plain)\n"
        "  -p TEXT     prompt (default \"" DEFAULT_PROMPT "\"; may be empty)\n"
        "  -n N        tokens to generate, 1..%d (default 200)\n"
        "  -k K        draft length, 1..block_size-1 (default 4)\n"
        "  -t T        temperature >= 0; 0 = greedy (default 1.0)\n"
        "  -s SEED     sampling seed, a non-negative integer (default 42)\n"
        "  --trace     print every round's draft, verify, accept/reject and trim on stderr\n"
        "  --compare   also run plain decoding with the same seed; compare passes and time\n"
        "  --plain     plain autoregressive decoding only\n"
        "  --no-prompt print only the generated text, not the prompt before it\n"
        "  --selftest  greedy equivalence checks, one PASS/FAIL line each (sampling: make test)\n"
        "  -h, --help  this text\n"
        "Generated text goes to stdout; config, trace and stats go to stderr. An option given\n"
        "twice takes its last value; one that the action (--selftest, --plain) has no use for\n"
        "is refused.\n", program_name, MAX_NEW_TOKENS);
}

// Parses a whole decimal number within [lo, hi] (a seed: 0 to UINT64_MAX); -1 if it is not one.
int parse_whole(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    // strtoull alone takes "", " 5", "+5", "5x", and "-1" as 2^64-1: digits, first byte to last
    if (!isdigit((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v < lo || v > hi) return -1;
    *out = (uint64_t)v;
    return 0;
}

// How an option's value is read: OPT_FLAG sets an int to lo; OPT_TEXT keeps the text as given;
// OPT_WHOLE is an int in [lo, hi], OPT_SEED a 64-bit seed, OPT_REAL a float in [lo, hi].
typedef enum { OPT_FLAG, OPT_TEXT, OPT_WHOLE, OPT_SEED, OPT_REAL } OptionKind;

// The actions an option may have no use in (OptionSpec.idle_in): there it is refused.
enum { IN_SELFTEST = 1, IN_PLAIN = 2 }; // idle_in's bits

// One option: its spelling, and where and how its value is kept.
typedef struct {
    const char *flag; // as typed: "-n", "--trace"
    OptionKind kind;
    void *field;      // the Options field it sets
    double lo, hi;    // OPT_WHOLE, OPT_REAL: the range accepted; OPT_FLAG: the value set
    const char *rule; // the refusal's words: "FLAG must be RULE, got 'VALUE'"
    int idle_in;      // IN_SELFTEST, IN_PLAIN: the actions that have no use for it
} OptionSpec;

// Parses a number option's value into its field; -1 if it breaks the option's rule.
static int parse_value(const OptionSpec *opt, const char *val) {
    if (opt->kind == OPT_SEED) return parse_whole(val, 0, UINT64_MAX, opt->field);
    if (opt->kind == OPT_WHOLE) {
        uint64_t whole; // range-checked before the cast
        if (parse_whole(val, (uint64_t)opt->lo, (uint64_t)opt->hi, &whole) != 0) return -1;
        *(int *)opt->field = (int)whole;
        return 0;
    }
    // strtod alone accepts " 5", "nan", "inf" and hex ("0x1p-3"): decimal digits only here;
    // and a value a float cannot hold would become 0 without a word: -t 1e-50 is not greedy
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    const char *d = val + (*val == '-'); // its digits: "0.5", ".5", "-0"
    if (!isdigit((unsigned char)d[*d == '.']) || strspn(val, "0123456789.eE+-") != strlen(val) ||
        *end || errno || !(v >= opt->lo && v <= opt->hi) || (v != 0.0 && fabs(v) < FLT_MIN))
        return -1;
    *(float *)opt->field = v == 0.0 ? 0.0f : (float)v; // -0 is 0 too, and prints as 0
    return 0;
}

// Reads argv against tables[0]'s rows, then tables[1]'s (NULL: none); a repeated option keeps its
// last value; one the action (IN_SELFTEST, IN_PLAIN; 0: none) has no use for is refused. 0, or -1.
static int parse_table(int argc, char **argv, const OptionSpec *const tables[2], int action,
                       char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const OptionSpec *opt = NULL; // a's row
        for (int t = 0; t < 2; t++)
            for (size_t j = 0; tables[t] && tables[t][j].flag; j++)
                if (!strcmp(a, tables[t][j].flag)) opt = &tables[t][j];
        if (!opt) // a typo, an option of ./beyond given to ./specdec, or the name of a tool
            return fail_with(err, errlen, "unknown option '%s' (./specdec -h lists the blog's "
                             "options, ./beyond -h the papers' too; the tools beside them are "
                             "tinyshakespeare/train, test/bench and test/explain)", a);
        if (opt->idle_in & action) // never ignored: the user meant something by it
            return fail_with(err, errlen, "%s has no effect with %s; drop %s", a, action ==
                             IN_SELFTEST ? "--selftest, an action of its own (its own prompts, "
                             "lengths, drafts, temperatures and seeds)" : "--plain, which drafts "
                             "nothing (no rounds to trace or compare, no bigram table from -i)", a);
        if (opt->kind == OPT_FLAG) // -h too: a later error still wins, so no typo goes unseen
            *(int *)opt->field = (int)opt->lo;
        else if (i + 1 == argc) // a value is the next word, whatever it is ("-p -x" is a prompt)
            return fail_with(err, errlen, "option %s needs a value (see -h)", a);
        else if (opt->kind == OPT_TEXT) // kept as given
            *(const char **)opt->field = argv[++i];
        else if (parse_value(opt, argv[++i]) != 0) // consumed; checked in full: no silent clamping
            return fail_with(err, errlen, "%s must be %s, got '%s'", a, opt->rule, argv[i]);
    }
    return 0;
}

// Fills o from argv: ./specdec's options, then more's rows (NULL: none). An option the action
// (--selftest, --plain) has no use for is refused, never ignored, as is a second action. 0, or -1.
int parse_args(int argc, char **argv, Options *o, const OptionSpec *more, char *err,
               size_t errlen) {
    *o = (Options){.model_path = DEFAULT_MODEL, .corpus_path = DEFAULT_CORPUS,
                   .prompt = DEFAULT_PROMPT, .max_new_tokens = 200, .temperature = 1.0f,
                   .seed = 42}; // a fixed seed: repeatable runs; K: 0 until a -k (or below)
    const OptionSpec table[] = { // its end: the row without a flag
        {"-h", OPT_FLAG, &o->help, 1, 0, NULL, 0},
        {"--help", OPT_FLAG, &o->help, 1, 0, NULL, 0},
        {"--trace", OPT_FLAG, &o->trace, 1, 0, NULL, IN_SELFTEST | IN_PLAIN},
        {"--compare", OPT_FLAG, &o->compare, 1, 0, NULL, IN_SELFTEST | IN_PLAIN},
        {"--plain", OPT_FLAG, &o->plain, 1, 0, NULL, IN_SELFTEST}, // one action a run
        {"--selftest", OPT_FLAG, &o->run_selftest, 1, 0, NULL, 0},
        {"--no-prompt", OPT_FLAG, &o->no_prompt, 1, 0, NULL, IN_SELFTEST},
        {"-m", OPT_TEXT, &o->model_path, 0, 0, NULL, 0},
        {"-i", OPT_TEXT, &o->corpus_path, 0, 0, NULL, IN_PLAIN},
        {"-p", OPT_TEXT, &o->prompt, 0, 0, NULL, IN_SELFTEST},
        {"-n", OPT_WHOLE, &o->max_new_tokens, 1, MAX_NEW_TOKENS, "a whole number, 1 to 10000000",
         IN_SELFTEST},
        {"-k", OPT_WHOLE, &o->K, 1, 4096, "a whole number, 1 to block_size-1",
         IN_SELFTEST | IN_PLAIN},
        {"-s", OPT_SEED, &o->seed, 0, 0, "a non-negative whole number below 2^64", IN_SELFTEST},
        {"-t", OPT_REAL, &o->temperature, 0.0, 1e6, "0 (greedy) or a finite temperature "
         "from 1.18e-38 (FLT_MIN, the smallest normal float) to 1e6", IN_SELFTEST}, {0}};
    const OptionSpec *const tables[2] = {table, more};
    if (parse_table(argc, argv, tables, 0, err, errlen) != 0) return -1; // every value checked
    int action = o->run_selftest ? IN_SELFTEST : o->plain ? IN_PLAIN : 0; // leaves options idle
    // read again, the action known (it may come last): the first option it leaves idle is refused
    if (action && parse_table(argc, argv, tables, action, err, errlen) != 0) return -1;
    o->K_default = o->K == 0;
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

// What main loads and checks before it runs an action: the target and its inputs.
typedef struct {
    GPT g;            // the target (-m)
    Vocab v;          // its vocabulary
    Corpus corpus;    // -i, encoded with v
    Tokens prompt;    // -p, a token per byte (load_inputs mallocs them); --selftest: none
} Loaded;

// Loads the model, the corpus and draft (the bigram table of its training split; NULL: none), and
// checks what needs them: -k, the prompt (into ld->prompt), the self-test's corpus. 0, or -1, err.
int load_inputs(const Options *o, Loaded *ld, BigramDraft *draft, char *err, size_t errlen) {
    if (load_checkpoint(o->model_path, &ld->g, &ld->v, err, errlen) != 0) return -1;
    if (!o->plain && load_corpus(&ld->corpus, o->corpus_path, &ld->v, err, errlen) != 0)
        return -1; // (plain decoding reads no corpus and drafts nothing: -i is refused with it)
    if (draft && BigramDraftModel(draft, ld->corpus.tokens, ld->corpus.n_train, ld->v.size) != 0)
        return fail_with(err, errlen, "out of memory building the bigram table");
    int S = ld->g.config.block_size;
    size_t n = strlen(o->prompt), need = selftest_min_corpus(S);
    if (o->run_selftest) // it brings its own prompts and Ks, some of them from the corpus
        return ld->corpus.n >= need ? 0 : fail_with(err, errlen, "the self-test takes prompts of "
                         "up to %zu tokens from the corpus, which has %zu; use Tiny Shakespeare "
                         "(make data)", need, ld->corpus.n);
    if (o->K >= S && !o->plain) // K+1 tokens must fit: K <= S-1 (plain decoding drafts none)
        return fail_with(err, errlen, "%s-k %d is too large: a verify pass of K+1 tokens must "
                         "fit block_size %d; give -k 1..%d", o->K_default ? "the default " : "",
                         o->K, S, S - 1);
    int *tokens = malloc((n + 1) * sizeof(int)); // a token per byte; +1: never malloc(0)
    ld->prompt = (Tokens){tokens, (int)n};
    if (!tokens) return fail_with(err, errlen, "out of memory for a prompt of %zu bytes", n);
    return encode_prompt(&ld->v, o->prompt, tokens, err, errlen);
}

// Prints the config and the parameter count (stderr).
void print_config(const GPT *g, const char *source) {
    const Config *c = &g->config;
    fprintf(stderr, "model: %s\nconfig: n_layer=%d n_head=%d n_embd=%d block_size=%d vocab_size=%d "
            "-> %zu parameters\n", source, c->n_layer, c->n_head, c->n_embd, c->block_size,
            c->vocab_size, g->n_params);
}

// The one-line refusal, into err, of a run stopped by logits not finite from path (st: where); 1.
int refuse_nonfinite(const char *path, const Stats *st, char *err, size_t errlen) {
    fail_with(err, errlen, "%s gives a non-finite logit at position %d (token %ld of the output): "
              "its weights are each finite, but overflow when they run; retrain it or use another",
              path, st->nonfinite_position, st->nonfinite_token);
    return 1; // the callers' rc 1: err holds the reason
}

// Runs speculative decoding, plain decoding, or both (--compare): text to stdout, stats to stderr.
// 0; 1: err says why (no memory, or a row of logits not finite: text so far out); 2: stdout lost.
int run_generation(const Options *o, Loaded *ld, const BigramDraft *d, char *err, size_t errlen) {
    int V = ld->g.config.vocab_size, start = ld->prompt.n > 0 ? ld->prompt.n : 1;
    int cap = start + o->max_new_tokens; // the prompt (or the start token) and the new tokens
    int *text = malloc(2 * (size_t)cap * sizeof(int)); // each decoder's text, prompt + output
    SpecBuffers b = {0}; // zeroed, so free_spec_buffers is safe however far building got
    int rc = !text || build_spec_buffers(&b, o->K, V) != 0; // 1: no memory, and err says so
    if (rc) fail_with(err, errlen, "out of memory for %d tokens", o->max_new_tokens);
    Stats st[2] = {{0}}; // speculative decoding's, then plain decoding's
    float p[256]; // plain decoding's row of probabilities (V <= 256, validate_config)
    Rng rng; // seeded afresh before each decoder: the same seed, so greedy texts compare
    // streamed as made, except under --trace (the trace has the stage) or --compare (timing)
    DecodeOptions opt = {.max_new_tokens = o->max_new_tokens, .K = o->K, .rng = &rng,
                         .temperature = o->temperature, .trace = o->trace, .vocab = &ld->v,
                         .out = o->trace || o->compare ? NULL : stdout};
    fprintf(stderr, "sampling: seed %llu, temperature %g%s, K=%d, %d new tokens; draft: bigram\n",
            (unsigned long long)o->seed, o->temperature, o->temperature == 0 ? " (greedy)" : "",
            o->K, o->max_new_tokens);
    // run 0: speculative decoding, the lesson (no --plain); run 1: plain (--plain, --compare)
    for (int run = o->plain; rc == 0 && run <= (o->plain || o->compare); run++) {
        int *seq = text + run * cap, *gen = seq + start; // gen: the new tokens, unless streamed
        if (run == 1 && o->compare) fprintf(stderr, "\nplain decoding, same seed:\n");
        if (!o->no_prompt) fputs(o->prompt, stdout); // stdout: the prompt, then the text
        rng_seed(&rng, o->seed);
        opt.st = &st[run];
        int stopped = run ? generate(&ld->g, &ld->prompt, &opt, seq, p)
                          : speculative_generate(&ld->g, d, &b, &ld->prompt, &opt, seq);
        for (int i = 0; !opt.out && i < st[run].emitted; i++) fputc(decode(&ld->v, gen[i]), stdout);
        if (!stopped) fputc('\n', stdout); // a stopped text ends at its last whole token
        rc = fflush(stdout) != 0 || ferror(stdout) ? 2 : 0; // 2: stdout failed (a full disk, ...)
        if (rc == 0 && stopped) rc = refuse_nonfinite(o->model_path, &st[run], err, errlen);
        if (rc == 0) print_stats(run ? "plain decoding" : "speculative decoding", &st[run], !run);
    }
    if (rc == 0 && o->compare) // equal texts are required at t = 0 and merely possible at t > 0
        print_comparison(&st[0], &st[1], o->temperature == 0.0f, memcmp(text + start,
                         text + cap + start, (size_t)o->max_new_tokens * sizeof(int)) == 0);
    free_spec_buffers(&b);
    free(text);
    return rc;
}

#ifndef TESTING // a program that includes this file (a test, a tool) brings its own main
// Parses the flags, loads the model and corpus, checks every input, runs one action.
int main(int argc, char **argv) {
    Options o;
    Loaded ld = {0}; // zeroed, as is the draft, so that done: frees however far loading got
    BigramDraft draft = {0};
    char err[512] = ""; // a refusal's one line; done: prints it if something failed
    int rc = 1; // stays 1 until an action has run and succeeded
    // 1. the command line: every flag checked before anything is loaded
    if (parse_args(argc, argv, &o, NULL, err, sizeof(err)) != 0) goto done;
    if (o.help) { // a bad flag beside -h still fails, above; then where the rest is
        usage(stdout);
        printf("What the papers add (other drafts, top-k/top-p, trees, Medusa heads) is in "
               "./beyond: make beyond, then ./beyond -h.\n");
        return close_stdout();
    }
    setvbuf(stdout, NULL, _IOLBF, 0); // self-test lines survive a sanitizer abort
    // 2. the model and corpus, the blog's bigram table, and the checks that need them
    if (load_inputs(&o, &ld, o.plain ? NULL : &draft, err, sizeof(err)) != 0) goto done;
    // 3. every input is good: say what runs, then run it
    print_config(&ld.g, o.model_path);
    rc = o.run_selftest ? selftest(&ld.g, &draft, &ld.v, &ld.corpus) != 0 // 1: a FAIL line
                        : run_generation(&o, &ld, &draft, err, sizeof(err));
done: // rc 1: err holds the reason, or is empty after a self-test's FAIL lines; rc 2: stdout failed
    if (rc == 1)
        error_line("%s", *err ? err : "the self-test failed: its FAIL lines are on stdout");
    free_bigram_draft(&draft);
    free((int *)ld.prompt.tok); // load_inputs's malloc
    free_corpus(&ld.corpus);
    free_gpt(&ld.g);
    return rc == 1 ? 1 : close_stdout();
}
#endif
