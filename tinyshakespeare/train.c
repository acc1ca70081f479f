/*
 * tinyshakespeare/train.c — the trainer that made tinyshakespeare/model.bin.
 *
 * It includes specdec.c whole and trains its target model with the lecture's recipe:
 * batches of 16 random 32-token windows of the training split, next-character
 * cross-entropy, AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01), 5000
 * steps, PyTorch's default initialisation, seed 2 (notes/training.md says why that seed:
 * the validation loss spreads over 0.05 between seeds). The forward pass is specdec.c's own
 * block_forward, so the trainer trains exactly the function the decoder runs; this file
 * adds the backward passes, the optimiser, batches, evaluation, checkpoint writing and an
 * exact --resume.
 *
 * With --teacher PATH it distils instead: the student (a small model, the speculative
 * decoder's draft) learns the teacher's whole next-character distribution at every position
 * of the same windows, the teacher run through specdec.c's own forward pass.
 *
 * `medusa` trains Medusa heads instead (beyond.c's Medusa heads): the
 * target stays frozen, and each head learns to guess a token further ahead from the
 * target's last hidden row; `medusa-eval` measures a heads file (loss, alpha, top-1).
 *
 * `exit` trains beyond.c's ExitHead: a LayerNorm and a Linear(C, V) of its own on the frozen
 * target's residual after its first L blocks, distilled from the full target's rows;
 * `exit-eval` measures one beside the untrained exit. `eagle` trains beyond.c's EagleHead
 * (Li et al. 2024, arXiv:2401.15077): a Linear and one block that predict the target's next
 * top feature; `eagle-eval` measures one (alpha by depth, feature error by depth). `eagle
 * --eagle3` trains EAGLE-3's kind (Li et al. 2025, arXiv:2503.01840): three of the target's
 * rows fused, and the draft trained on its own unrolled guesses (training-time test).
 *
 *   make train                                  # = tinyshakespeare/train (the defaults)
 *   tinyshakespeare/train --iters 200 -o /tmp/m.bin
 *   tinyshakespeare/train --resume -o /tmp/m.bin --iters 400
 *   tinyshakespeare/train --layers 1 --teacher tinyshakespeare/model.bin -o /tmp/d.bin
 *   tinyshakespeare/train eval [-m PATH] [-i PATH]    # the whole validation split's loss
 *   tinyshakespeare/train init [--seed S] -o PATH     # a seeded random model, untrained
 *   tinyshakespeare/train medusa -o PATH              # 4 Medusa heads (make train-medusa)
 *   tinyshakespeare/train medusa-eval [-M PATH]       # their loss and alpha per head
 *   tinyshakespeare/train exit [--layer 1] -o PATH    # a trained early exit (make train-exit)
 *   tinyshakespeare/train exit-eval [-X PATH]         # its loss and alpha, and the untrained's
 *   tinyshakespeare/train eagle -o PATH               # the EAGLE draft (make train-eagle)
 *   tinyshakespeare/train eagle-eval [-E PATH]        # its loss, alpha and feature error by depth
 *   tinyshakespeare/train eagle --eagle3 -o PATH      # EAGLE-3: fused rows, unrolled steps
 *
 * The backward matmuls use fmaf: a fused multiply-add, one rounding, one instruction with
 * -march=native (the build keeps -ffp-contract=off, so the compiler fuses nothing itself).
 *
 * broken builds: -DBREAK_LAYERNORM_BACKWARD (test/test_train.c) drops a term of
 * layernorm_backward, -DBREAK_MEDUSA_BACKWARD (test/test_medusa.c) one of the heads' SiLU
 * backward, -DBREAK_EXIT_BACKWARD (test/test_eagle.c) the exit head's bias gradient, and
 * -DBREAK_EAGLE_BACKWARD (test/test_eagle.c) the EAGLE loss's feature-regression term,
 * and -DBREAK_EAGLE3_BACKWARD (test/test_eagle.c) the gradient EAGLE-3's unrolled steps send
 * back through the draft's own fed-back h, so that each gradient check can be seen to fail.
 */
#ifndef TESTING
#define TESTING    // leaves out beyond.c's and specdec.c's main: this file has its own ...
#define TRAIN_MAIN // ... unless a test includes this file (with TESTING defined)
#endif
#ifndef BEYOND_C
#define BEYOND_C "../beyond.c" // a test's mutant build includes an edited copy instead
#endif
#include BEYOND_C // specdec.c, and beyond.c's Medusa heads (medusa_logits, load_medusa)

#include <signal.h> // sigaction: Ctrl-C ends training at a clean, resumable step

// ----------------------------------------------------------------------------
// The random initialisation: where training starts (tinyshakespeare/train init writes it)

// The lecture's model, the blog's target: 4 layers, 4 heads, 64 wide, 32 context, 65 chars.
#define DEFAULT_CONFIG {4, 4, 64, 32, 65, 256}

// A standard normal draw (Box-Muller), for the random initialisation.
double rng_normal(Rng *r) {
    double u1 = 1.0 - rng_uniform(r); // in (0, 1], so log(u1) is finite
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2); // the cos half; the sin half unused
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
    size_t sizes[N_TENSORS]; // indexed like TENSOR_NAMES: sizes[4] is query's, and so on
    weight_sizes(c, sizes);
    size_t L = c->n_layer, C = c->n_embd;
    double bc = 1.0 / sqrt((double)C), bh = 1.0 / sqrt((double)c->ffn_width); // fan_in C or H
    memset(g->params, 0, g->n_params * sizeof(float)); // what is not set below stays 0
    // embeddings
    for (size_t i = 0; i < sizes[0]; i++) w->token_embedding[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < sizes[1]; i++) w->position_embedding[i] = (float)rng_normal(&r);
    // LayerNorms start as the identity: weight 1, bias 0
    for (size_t i = 0; i < L * C; i++) {
        w->ln1_weight[i] = 1.0f;
        w->ln2_weight[i] = 1.0f;
    }
    for (size_t i = 0; i < C; i++) w->ln_f_weight[i] = 1.0f;
    // Linears, each bounded by its fan-in
    init_uniform(w->query, sizes[4], bc, &r); // query, key, value: no bias
    init_uniform(w->key, sizes[5], bc, &r);
    init_uniform(w->value, sizes[6], bc, &r);
    init_uniform(w->proj_weight, sizes[7], bc, &r);
    init_uniform(w->proj_bias, sizes[8], bc, &r);
    init_uniform(w->ffwd_up_weight, sizes[11], bc, &r);
    init_uniform(w->ffwd_up_bias, sizes[12], bc, &r);
    init_uniform(w->ffwd_down_weight, sizes[13], bh, &r); // fan_in H: the MLP's hidden width
    init_uniform(w->ffwd_down_bias, sizes[14], bh, &r);
    init_uniform(w->lm_head_weight, sizes[17], bc, &r);
    init_uniform(w->lm_head_bias, sizes[18], bc, &r);
}

// ----------------------------------------------------------------------------
// A training pass: every activation of B windows, and the gradients

// A training pass over B windows of S tokens: every block's activations for every window
// (the backward pass needs them all), each window's own cache, and the gradients.
typedef struct {
    int B;              //                windows per batch, e.g. 16
    int n_blocks;       //                B * L block records
    float *resid;       // (B, L+1, S, C) resid[b][l] enters block l; resid[b][L] leaves the last
    float *mid;         // (B, L, S, C)   x_mid of every block
    BlockActs *blocks;  // (B*L)          the blocks' records, window by window
    float *key;         // (B, L, S, C)   each window's keys and values, by position,
    float *value;       // (B, L, S, C)   as the cache keeps them, from position 0
    float *ln_f;        // (B, S, C)      ln_f output
    float *logits;      // (B, S, V)
    float *probs;       // (B, S, V)      softmax(logits), kept for the backward pass
    float *soft;        // (B, S, V)      soft targets: the teacher's probabilities at each
                        //                position, or NULL: the next character (see train)
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

// Allocates one block's record for up to S tokens, all but its residual arrays, which the
// caller provides: a training pass keeps a record per layer and window, its stream in resid.
int build_block_acts(BlockActs *a, const Config *c, float *x_in, float *x_mid, float *x_out) {
    size_t S = c->block_size, C = c->n_embd, NH = c->n_head, H = c->ffn_width;
    // keys and values are views into the pass's own caches, set by the caller
    *a = (BlockActs){.x_in = x_in, .x_mid = x_mid, .x_out = x_out};
    float **bufs[] = {&a->ln1, &a->q, &a->att, &a->att_out, &a->proj_out, &a->ln2, &a->hidden,
                      &a->ffwd};
    size_t n[] = {S * C, S * C, NH * S * S, S * C, S * C, S * C, S * H, S * C};
    return alloc_each(bufs, n, sizeof(n) / sizeof(n[0]));
}

// Frees what build_block_acts allocated (not the residual arrays, which are the caller's).
void free_block_acts(BlockActs *a) {
    free_all((void *[]){a->ln1, a->q, a->att, a->att_out, a->proj_out, a->ln2, a->hidden,
                        a->ffwd}, 8);
    memset(a, 0, sizeof(*a)); // NULLs: a second free is harmless
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
    ts->key = alloc_floats((size_t)B * L * SC);
    ts->value = alloc_floats((size_t)B * L * SC);
    ts->ln_f = alloc_floats((size_t)B * SC);
    ts->logits = alloc_floats((size_t)B * S * V);
    ts->probs = alloc_floats((size_t)B * S * V);
    ts->grads = alloc_floats(weight_sizes(c, sizes));
    ts->weights_t = alloc_floats(weight_sizes(c, sizes));
    if (!ts->resid || !ts->mid || !ts->blocks || !ts->key || !ts->value || !ts->ln_f ||
        !ts->logits || !ts->probs || !ts->grads ||
        !ts->weights_t)
        return -1;
    point_weights(&ts->dw, ts->grads, sizes);
    point_weights(&ts->wt, ts->weights_t, sizes);
    // block l of window b reads resid[b][l] and writes resid[b][l+1]: the stream is kept
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t l = 0; l < L; l++) {
            float *r = ts->resid + (b * (L + 1) + l) * SC;
            BlockActs *a = &ts->blocks[b * L + l];
            if (build_block_acts(a, c, r, ts->mid + (b * L + l) * SC, r + SC) != 0)
                return -1;
            a->keys = ts->key + (b * L + l) * SC; // this window's keys at this layer
            a->values = ts->value + (b * L + l) * SC;
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
            ts->d_ln2 && ts->d_att_out && ts->d_q && ts->d_k && ts->d_v && ts->d_weights &&
            ts->d_scores && ts->d_ln1) ? 0 : -1;
}

// Frees what build_train_state allocated; safe on a half-built one.
void free_train_state(TrainState *ts) {
    // blocks is calloc'd, so a record never built holds NULLs and frees as nothing
    for (int i = 0; ts->blocks && i < ts->n_blocks; i++) free_block_acts(&ts->blocks[i]);
    free(ts->resid); free(ts->mid); free(ts->blocks); free(ts->key); free(ts->value);
    free(ts->ln_f); free(ts->logits); free(ts->probs); free(ts->soft); free(ts->grads);
    free(ts->weights_t);
    free(ts->d_logits); free(ts->d_ln_f); free(ts->d_resid); free(ts->d_mid);
    free(ts->d_hidden); free(ts->d_ln2); free(ts->d_att_out); free(ts->d_q); free(ts->d_k);
    free(ts->d_v); free(ts->d_weights); free(ts->d_scores); free(ts->d_ln1);
    memset(ts, 0, sizeof(*ts));
}

// ----------------------------------------------------------------------------
// Backward passes of the layers, each accumulating (+=) into its gradients

// The trainer's own matmul kernel, for the backward pass (specdec.c's textbook matmul runs
// the forward): a register-tiled loop nest, about five times faster here.
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
static void gemm_acc(float *restrict c, const float *restrict a, size_t a_m, size_t a_k,
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

// Backward of matmul, accumulating (+=): dweight[i][o] += sum_t in[t][i] * dout[t][o],
// dbias[o] += sum_t dout[t][o], din[t][i] += sum_o dout[t][o] * weight_t[o][i].
// weight_t is the weight transposed to (out, in), PyTorch's own layout, so that the
// input gradient, too, is a gemm_acc with a contiguous innermost loop.
// din and dbias may be NULL (an input that needs no gradient, a Linear without bias).
static void matmul_backward(float *din, float *dweight, float *dbias, const float *dout,
                     const float *in, const float *weight_t, int T, int in_dim, int out_dim) {
    // dweight = in^T dout: in read transposed (row i of in^T is column i of in)
    gemm_acc(dweight, in, 1, in_dim, dout, in_dim, T, out_dim);
    if (dbias)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < out_dim; o++) dbias[o] += dout[(size_t)t * out_dim + o];
    // din = dout weight^T
    if (din) gemm_acc(din, dout, out_dim, 1, weight_t, T, out_dim, in_dim);
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

// Backward of layernorm, into din, dweight, dbias. With xhat = (x - mean) * rstd and
// g = dout * weight, the input gradient is  din = rstd * (g - mean(g) - xhat * mean(g * xhat))
// (the two means come from the mean and the variance depending on every input). The
// row's mean and rstd are recomputed from in, exactly as layernorm computed them.
void layernorm_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int T, int C) {
    for (int t = 0; t < T; t++) {
        const float *x = in + (size_t)t * C, *dy = dout + (size_t)t * C;
        float *dx = din + (size_t)t * C;
        float mean = 0.0f, var = 0.0f;
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= C;
        float rstd = 1.0f / sqrtf(var + 1e-5f);
        // the two row means the input gradient needs
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            g_mean += dy[i] * weight[i];
            gx_mean += dy[i] * weight[i] * (x[i] - mean) * rstd;
        }
        g_mean /= C;
        gx_mean /= C;
#ifdef BREAK_LAYERNORM_BACKWARD
        gx_mean = 0.0f; // test-only build: drops a term, so the gradient check must fail
#endif
        // parameter gradients, then the input gradient
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - mean) * rstd;
            dweight[i] += dy[i] * xhat;
            dbias[i] += dy[i];
            dx[i] += rstd * (dy[i] * weight[i] - g_mean - xhat * gx_mean);
        }
    }
}

// Backward of attention (a window from position 0), into dq (T, C) and the gradients of
// the window's keys and values dk, dv (T, C). For one token and head, with weights
// a = softmax(z) and out = sum_s a[s] v_s:  da[s] = dout . v_s,
// dz[s] = a[s] (da[s] - sum_j a[j] da[j]), and z[s] = scale * q . k_s spreads dz to q and
// to every k_s it saw. key, value: (T, C), by position. da: (S), dz: (S, S) scratch.
void attention_backward(float *dq, float *dk, float *dv, float *da, float *dz,
                        const float *dout, const float *att, const float *q, const float *key,
                        const float *value, int T, int C, int NH, int S) {
    int HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS); // as in attention
    for (int h = 0; h < NH; h++) {
        for (int t = 0; t < T; t++) {
            const float *a = att + ((size_t)h * S + t) * S;
            const float *dy = dout + (size_t)t * C + h * HS;
            // through the weighted sum: da for every weight, dv for every value
            float da_dot_a = 0.0f;
            for (int s = 0; s <= t; s++) {
                const float *vh = value + (size_t)s * C + h * HS;
                float *dvh = dv + (size_t)s * C + h * HS;
                da[s] = 0.0f;
                for (int i = 0; i < HS; i++) da[s] += dy[i] * vh[i];
                for (int i = 0; i < HS; i++) dvh[i] += a[s] * dy[i];
                da_dot_a += da[s] * a[s];
            }
            // through the softmax to the scores, and from each score to its key and the query
            const float *qh = q + (size_t)t * C + h * HS;
            float *dqh = dq + (size_t)t * C + h * HS;
            for (int s = 0; s <= t; s++) {
                float g = a[s] * (da[s] - da_dot_a) * scale;
                const float *kh = key + (size_t)s * C + h * HS;
                float *dkh = dk + (size_t)s * C + h * HS;
                for (int i = 0; i < HS; i++) dkh[i] += g * qh[i];
                for (int i = 0; i < HS; i++) dqh[i] += g * kh[i];
                dz[(size_t)t * S + s] = g;
            }
        }
    }
}

// Backward of relu, in place: the gradient passes where the output was positive.
void relu_backward(float *dx, const float *out, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = out[i] > 0.0f ? dx[i] : 0.0f;
}

// ----------------------------------------------------------------------------
// The loss and its gradient

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

// Cross-entropy of one row of logits against a whole distribution over the next character,
// sum_v -target[v] log softmax(z)[v]: the distillation loss, with the teacher's probabilities
// as target (a one-hot target would give cross_entropy's value). In double with the max
// taken out first, as there; probs (V), if not NULL, receives softmax(z).
static double soft_cross_entropy(const float *z, int V, const float *target, float *probs) {
    double m = z[0], sum = 0.0, loss = 0.0;
    for (int v = 1; v < V; v++) m = z[v] > m ? z[v] : m;
    for (int v = 0; v < V; v++) sum += exp((double)z[v] - m);
    if (probs)
        for (int v = 0; v < V; v++) probs[v] = (float)(exp((double)z[v] - m) / sum);
    // log softmax(z)[v] = z[v] - m - log(sum), weighed by the target's probability of v
    double log_sum = log(sum);
    for (int v = 0; v < V; v++) loss -= (double)target[v] * ((double)z[v] - m - log_sum);
    return loss;
}

// The soft targets of B windows of S tokens, into ts->soft: each window runs through the
// teacher from an empty cache, with specdec.c's forward as eval_loss runs it, and each
// position's logits become the teacher's softmax at temperature 1 (cross_entropy computes
// it, in double; the loss it returns is not needed here). inputs: (B, S).
void teacher_targets(GPT *teacher, TrainState *ts, const int *inputs) {
    int S = teacher->config.block_size, V = teacher->config.vocab_size;
    size_t SV = (size_t)S * V;
    for (int b = 0; b < ts->B; b++) {
        teacher->state.cache_len = 0;
        const float *logits = forward(teacher, inputs + (size_t)b * S, S);
        for (int t = 0; t < S; t++)
            cross_entropy(logits + (size_t)t * V, V, 0, ts->soft + b * SV + (size_t)t * V);
    }
    teacher->state.cache_len = 0;
}

// Mean next-character cross-entropy of B windows of S tokens: each window runs from
// position 0 through specdec.c's block_forward, with its own record per block, so every
// activation stays for train_backward. inputs, targets: (B, S). Returns the mean loss.
// When distilling (ts->soft is not NULL), the loss at each position is the cross-entropy
// against the teacher's distribution there instead, and targets is not read.
double train_forward(const GPT *g, TrainState *ts, const int *inputs, const int *targets) {
    const Config *c = &g->config;
    int S = c->block_size, V = c->vocab_size, L = c->n_layer, C = c->n_embd;
    size_t SC = (size_t)S * C, SV = (size_t)S * V;
    double loss = 0.0;
    for (int b = 0; b < ts->B; b++) {
        BlockActs *layer = ts->blocks + (size_t)b * L;
        embed(layer[0].x_in, &g->w, inputs + (size_t)b * S, S, 0, C); // a window from position 0
        for (int l = 0; l < L; l++)
            block_forward(c, &g->w, l, &layer[l], S, 0);
        layernorm(ts->ln_f + b * SC, layer[L - 1].x_out, g->w.ln_f_weight, g->w.ln_f_bias, S, C);
        matmul(ts->logits + b * SV, ts->ln_f + b * SC,
               (Linear){g->w.lm_head_weight, g->w.lm_head_bias, C, V}, S);
        // every position predicts its next token; the softmax is kept for the backward
        for (int t = 0; t < S; t++) {
            const float *z = ts->logits + b * SV + (size_t)t * V;
            float *p = ts->probs + b * SV + (size_t)t * V;
            if (ts->soft) // distilling: the teacher's whole distribution at this position
                loss += soft_cross_entropy(z, V, ts->soft + b * SV + (size_t)t * V, p);
            else
                loss += cross_entropy(z, V, targets[(size_t)b * S + t], p);
        }
    }
    return loss / ((double)ts->B * S);
}

// One block's backward pass for one window: d_resid holds dLoss/dx_out on entry and
// dLoss/dx_in on return; the parameter gradients of layer l accumulate into ts->dw.
static void block_backward(const Config *c, const Weights *w, TrainState *ts, int l,
                           const BlockActs *a, const float *key, const float *value) {
    int C = c->n_embd, T = c->block_size;
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
                       a->x_mid, w->ln2_weight + l * C, T, C);
    // x_mid = x_in + proj(attn(ln1(x_in))): the same split, through attention
    memcpy(ts->d_resid, ts->d_mid, TC * sizeof(float));
    memset(ts->d_att_out, 0, TC * sizeof(float));
    matmul_backward(ts->d_att_out, dw->proj_weight + l * CC, dw->proj_bias + l * C, ts->d_mid,
                    a->att_out, wt->proj_weight + l * CC, T, C, C);
    memset(ts->d_q, 0, TC * sizeof(float));
    memset(ts->d_k, 0, TC * sizeof(float));
    memset(ts->d_v, 0, TC * sizeof(float));
    attention_backward(ts->d_q, ts->d_k, ts->d_v, ts->d_weights, ts->d_scores, ts->d_att_out,
                       a->att, a->q, key, value, T, C, c->n_head, c->block_size);
    // query, key and value all read ln1's output: their input gradients add up
    memset(ts->d_ln1, 0, TC * sizeof(float));
    matmul_backward(ts->d_ln1, dw->query + l * CC, NULL, ts->d_q, a->ln1, wt->query + l * CC, T,
                    C, C);
    matmul_backward(ts->d_ln1, dw->key + l * CC, NULL, ts->d_k, a->ln1, wt->key + l * CC, T, C, C);
    matmul_backward(ts->d_ln1, dw->value + l * CC, NULL, ts->d_v, a->ln1, wt->value + l * CC, T,
                    C, C);
    layernorm_backward(ts->d_resid, dw->ln1_weight + l * C, dw->ln1_bias + l * C, ts->d_ln1,
                       a->x_in, w->ln1_weight + l * C, T, C);
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
        // cross-entropy through softmax: dLoss/dlogits = (p - onehot(target)) / (B*S), or,
        // distilling, (p - p_teacher) / (B*S): the same formula with a soft target
        for (int t = 0; t < S; t++) {
            const float *p = ts->probs + b * SV + (size_t)t * V;
            float *dz = ts->d_logits + (size_t)t * V;
            for (int v = 0; v < V; v++) dz[v] = p[v] * scale;
            if (ts->soft) {
                const float *soft = ts->soft + b * SV + (size_t)t * V;
                for (int v = 0; v < V; v++) dz[v] -= soft[v] * scale;
            } else
                dz[targets[(size_t)b * S + t]] -= scale;
        }
        // lm_head and ln_f, into the residual stream that left the last block
        memset(ts->d_ln_f, 0, SC * sizeof(float));
        matmul_backward(ts->d_ln_f, dw->lm_head_weight, dw->lm_head_bias, ts->d_logits,
                        ts->ln_f + b * SC, ts->wt.lm_head_weight, S, C, V);
        const BlockActs *layer = ts->blocks + (size_t)b * L;
        memset(ts->d_resid, 0, SC * sizeof(float));
        layernorm_backward(ts->d_resid, dw->ln_f_weight, dw->ln_f_bias, ts->d_ln_f,
                           layer[L - 1].x_out, w->ln_f_weight, S, C);
        // the blocks, last to first
        for (int l = L - 1; l >= 0; l--)
            block_backward(c, w, ts, l, &layer[l], ts->key + (b * L + l) * SC,
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
// Writing checkpoints: the format is in specdec.c ("Loading"); files are replaced atomically

// Little-endian byte order, written byte by byte: the same file on any host.
static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
// The same for 64-bit values: low half first.
static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

// Refuses a path the writer must not replace: an empty one, a symbolic link, or anything
// that is not a regular file (a directory, a device such as /dev/full, a FIFO). The
// rename that publishes a finished file would replace the node itself: a device would
// become a plain file, a link would be cut from its target. 0 if path is free to write.
static int check_target(const char *path, const char *what, char *err, size_t errlen) {
    struct stat st;
    if (!*path) {
        snprintf(err, errlen, "the %s path is empty; give -o the path of a file", what);
        return -1;
    }
    if (lstat(path, &st) != 0) return 0; // nothing there yet (or unreachable: the write says)
    if (S_ISLNK(st.st_mode))
        snprintf(err, errlen, "%s '%s' is a symbolic link; train writes only regular files "
                 "(give -o the path the link points to)", what, path);
    else if (!S_ISREG(st.st_mode))
        snprintf(err, errlen, "%s '%s' is not a regular file (a directory, device or FIFO); "
                 "train replaces only regular files: give -o another path", what, path);
    else
        return 0;
    return -1;
}

// A file a run reads, for check_not_input: its path (NULL: not given), what it is, its option.
typedef struct {
    const char *path; // e.g. "tinyshakespeare/input.txt"
    const char *role; // e.g. "the corpus"
    const char *flag; // e.g. "-i"
} RunInput;

// Refuses an output path that names one of the n files this run reads: publishing the output
// renames it over that name, so `-o` naming the corpus or the target would replace it and
// still report success. Compared by device and inode, not by name, so another spelling of
// the path, a link to the file or a hard link is caught too. what names the output ("-o").
// 0 if out is none of them; nothing is there yet (stat fails) means no input lives there.
static int check_not_input(const char *out, const char *what, const RunInput *ins, int n,
                           char *err, size_t errlen) {
    struct stat so, si;
    if (stat(out, &so) != 0) return 0; // nothing there yet: no input lives at that name
    for (int i = 0; i < n; i++) {
        // an input that cannot be stat'ed is not this file (its load will say why)
        if (!ins[i].path || stat(ins[i].path, &si) != 0) continue;
        if (si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return fail_with(err, errlen, "%s '%s' names %s this run reads (%s '%s'): writing "
                             "there would replace it; give -o another path", what, out,
                             ins[i].role, ins[i].flag, ins[i].path);
    }
    return 0;
}

// What to do about a write that failed with errno e: a full disk, a file size limit and a
// missing directory each want something else done.
static const char *write_fix(int e) {
    if (e == ENOSPC) return "free space on that filesystem, or give -o a path on another"; // full
#ifdef EDQUOT
    if (e == EDQUOT) return "the disk quota is used up: free space, or give -o a path on another";
#endif
    if (e == EFBIG) return "a file size limit (ulimit -f) stops it: raise the limit";
    if (e == EROFS) return "the filesystem is read-only: give -o a path on another";
    if (e == EACCES || e == EPERM) return "give -o a path in a directory you may write";
    if (e == ENOENT) return "create the directory first, or give -o another path";
    if (e == ENOTDIR) return "a part of the path is not a directory: give -o another path";
    return "check the directory exists and is writable";
}

// Writes n bytes to a new temporary file beside path (path.tmp.XXXXXX) and flushes
// them to disk. Returns the temporary file's name (malloc'd), or NULL with err set and
// nothing left behind. what names the kind of file ("checkpoint", "training state").
static char *write_temp(const char *path, const unsigned char *buf, size_t n,
                        const char *what, char *err, size_t errlen) {
    if (check_target(path, what, err, errlen) != 0) return NULL; // never over a device
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
        int e = saved ? saved : errno; // the first failure's errno, else fclose's
        snprintf(err, errlen, "cannot write %s '%s': %s (%s)", what, path, strerror(e),
                 write_fix(e));
        if (fd >= 0) unlink(tmp);
        free(tmp);
        return NULL;
    }
    return tmp;
}

// Renames a finished temporary file over path (the atomic step) and frees its name.
static int publish_temp(char *tmp, const char *path, const char *what, char *err,
                        size_t errlen) {
    int ok = rename(tmp, path) == 0, e = errno; // errno before another call can change it
    if (!ok) {
        snprintf(err, errlen, "cannot write %s '%s': %s (%s)", what, path, strerror(e),
                 write_fix(e));
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

// How many floats at the start of x[0..n) are finite numbers: n when all of them are.
static size_t finite_prefix(const float *x, size_t n) {
    size_t i = 0;
    while (i < n && isfinite(x[i])) i++; // stops at the first NaN or inf
    return i;
}

// Fills err with the refusal of a writer whose float i (as the file numbers them) is not a
// finite number: every loader refuses such a file, so writing it would only replace a good
// one with one nothing can read. what and path name the file. Returns -1.
static int refuse_float(const char *what, const char *path, size_t i, char *err,
                        size_t errlen) {
    return fail_with(err, errlen, "%s '%s' not written: float %zu is not a finite number (the "
                     "training diverged, or what it learned from was NaN); the file there, if "
                     "any, is as it was", what, path, i);
}

// Refuses to write floats x[0..n) unless all are finite numbers (refuse_float); 0 if they are.
static int check_finite(const float *x, size_t n, const char *what, const char *path,
                        char *err, size_t errlen) {
    size_t i = finite_prefix(x, n);
    return i == n ? 0 : refuse_float(what, path, i, err, errlen);
}

// Writes a checkpoint atomically (see write_file_atomic), if its parameters are all finite.
int save_checkpoint(const GPT *g, const Vocab *vocab, const char *path, char *err, size_t errlen) {
    size_t n = 0;
    if (check_finite(g->params, g->n_params, "checkpoint", path, err, errlen) != 0) return -1;
    unsigned char *buf = serialize_checkpoint(g, vocab, &n);
    return write_file_atomic(path, buf, n, "checkpoint", err, errlen);
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

// The validation split's length: the corpus's last 10%, after the n_train tokens.
size_t val_tokens(const Corpus *c) { return c->n - c->n_train; }

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
        g->state.cache_len = 0;
        const float *logits = forward(g, tokens + start, T);
        // each row predicts the next token, scored as in training
        for (int t = 0; t < T; t++)
            total += cross_entropy(logits + (size_t)t * V, V, tokens[start + t + 1], NULL);
        scored += (size_t)T;
    }
    g->state.cache_len = 0;
    return total / (double)scored;
}

// The training state file, PATH.state beside the checkpoint PATH: what the checkpoint
// does not hold and an exact resume needs. Integers little-endian, floats float32:
//   offset     size    field
//   0          4       magic "SPDS"
//   4          4       version = 1
//   8          4       batch: windows per step
//   12         4       1 if the run distils from a teacher (--resume refuses it), else 0
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
    int distilled;      // 1: trained against a teacher (--teacher), which the state does
                        // not record, so --resume cannot go on with it
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
    put_u32(buf + 12, (uint32_t)p->distilled);
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
             get_u64(buf + 16) > 10000000 || get_u32(buf + 12) > 1)
        snprintf(why, sizeof(why), "batch, step, generator state or teacher flag out of range");
    else
        ok = 1;
    if (ok) {
        p->batch = (int)get_u32(buf + 8);
        p->opt.step = (long)get_u64(buf + 16);
        p->rng.state = get_u64(buf + 24);
        p->ckpt_sum = ckpt_sum;
        p->distilled = (int)get_u32(buf + 12);
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

// What `tinyshakespeare/train` is asked to do.
typedef struct {
    int iters;         // optimisation steps, in all                  e.g. 5000
    int batch;         // windows per step, B                         e.g. 16
    int eval_interval; // steps between validation losses/checkpoints e.g. 500
    int log_interval;  // steps between progress lines                e.g. 100
    uint64_t seed;     // initialisation and batch sampling           e.g. 2
    const char *out;   // checkpoint path, rewritten at every evaluation; PATH.state too
    int resume;        // 1: continue from out and out.state
    GPT *teacher;      // --teacher: the model to distil, or NULL: learn the next character
    const char *teacher_path; // where the teacher was read from, for messages
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
    p->distilled = 0;
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
    // nothing non-finite on disk: the parameters, and the moments --resume would go on with
    if (check_finite(g->params, g->n_params, "checkpoint", path, err, errlen) != 0 ||
        check_finite(p->opt.m, g->n_params, "training state", state_path, err, errlen) != 0 ||
        check_finite(p->opt.v, g->n_params, "training state", state_path, err, errlen) != 0)
        return -1;
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
    // both targets checked before either temporary file is made (write_temp checks each)
    char *tmp_ckpt = NULL, *tmp_state = NULL;
    if (check_target(path, "checkpoint", err, errlen) != 0 ||
        check_target(state_path, "training state", err, errlen) != 0) goto done;
    // both files whole on disk before either name changes
    tmp_ckpt = write_temp(path, ckpt, n_ckpt, "checkpoint", err, errlen);
    if (tmp_ckpt) tmp_state = write_temp(state_path, state, n_state, "training state", err, errlen);
    if (!tmp_state) goto done;
    // the state first: if the checkpoint's rename then failed, the old checkpoint would
    // stay, and --resume would refuse the new state beside it (checksum mismatch). A
    // second Ctrl-C, which stops the trainer at once, waits until both names have moved.
    sigset_t stops, old;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigprocmask(SIG_BLOCK, &stops, &old);
    int rc = publish_temp(tmp_state, state_path, "training state", err, errlen);
    if (rc == 0) rc = publish_temp(tmp_ckpt, path, "checkpoint", err, errlen); // frees it
    else { unlink(tmp_ckpt); free(tmp_ckpt); }
    sigprocmask(SIG_SETMASK, &old, NULL); // a signal that came meanwhile lands here
    free(ckpt);
    free(state);
    return rc;
done:
    if (tmp_ckpt) { unlink(tmp_ckpt); free(tmp_ckpt); }
    free(ckpt);
    free(state);
    return -1;
}

// SIGINT and SIGTERM seen during training. The first asks train() to stop after the
// step it is in, with a checkpoint to resume from; the second stops the program at once
// (the files on disk are the last good pair: every write is to a temporary file first).
static volatile sig_atomic_t stop_signals;

// The handler of both signals: count the first (and say so: write is safe in a
// handler, stdio is not), die of the second.
static void on_stop_signal(int sig) {
    static const char msg[] = ": stopping after this step, with a checkpoint "
                              "(Ctrl-C again stops at once)\n";
    if (stop_signals++ == 0) {
        // after the program's name, as error_line starts the line the run will end with
        // (strlen is async-signal-safe; the write calls' failures leave nothing to do)
        ssize_t ignored = write(2, "\n", 1);
        ignored = write(2, program_name, strlen(program_name));
        ignored = write(2, msg, sizeof(msg) - 1);
        (void)ignored;
        return;
    }
    signal(sig, SIG_DFL); // the default action, death by this signal, ...
    raise(sig);           // ... now, whatever the trainer was doing
}

// Checks that the checkpoint and its .state can be written at path (not a device, a
// link, a directory; the directory writable) by making and removing a temporary file
// beside each, so a bad -o is one line before any work. 0 on success.
static int probe_outputs(const char *path, char *err, size_t errlen) {
    char state_path[4096];
    if (state_path_of(path, state_path, sizeof(state_path), err, errlen) != 0) return -1;
    const char *paths[2] = {path, state_path}, *whats[2] = {"checkpoint", "training state"};
    for (int i = 0; i < 2; i++) {
        char *tmp = write_temp(paths[i], (const unsigned char *)"", 0, whats[i], err, errlen);
        if (!tmp) return -1;
        unlink(tmp); // nothing is published: the old files, if any, stay as they were
        free(tmp);
    }
    return 0;
}

// The megabytes a training run of config c with B windows a step holds, counted as they are
// allocated: mb[0] the model (its parameters and run state: build_gpt), mb[1] AdamW's two
// moments and, at each save, the checkpoint and .state laid out in memory (3 floats a
// parameter), mb[2] the training pass (build_train_state: every block's record for every
// window, logits and softmax, the gradients and transposed weights, the backward's scratch;
// the teacher's targets when distilling). In double: a refused config may overflow size_t.
static void train_run_mb(const Config *c, int B, int distil, double mb[3]) {
    double S = c->block_size, C = c->n_embd, V = c->vocab_size, L = c->n_layer;
    double acts = 6 * S * C + c->n_head * S * S + S * c->ffn_width; // one block record
    size_t sizes[N_TENSORS]; // weight_sizes fills it; only the total P counts here
    double P = (double)weight_sizes(c, sizes);
    // per window: the residual stream, x_mid, keys and values, ln_f, logits and softmax
    double window = (L + 1) * S * C + L * (3 * S * C + acts) + S * C + (2 + distil) * S * V;
    double scratch = S * V + 13 * S * C + S + S * S; // one window's backward at a time
    mb[0] = 4.0 * (P + (2 + 2 * L) * S * C + S * V + acts) / 1e6; // + x, ln_f, caches, logits
    mb[1] = 4.0 * (2 + 3) * P / 1e6;
    mb[2] = 4.0 * (B * window + 2 * P + scratch) / 1e6; // + the gradients, the transposes
}

// Builds the training pass of B windows for config c (and the teacher's targets when
// distilling) before anything is printed, so that running out of memory is one line with
// the size and what to reduce. 0, or -1 with err set and nothing left allocated.
static int build_train_pass(TrainState *ts, const Config *c, int B, int distil, char *err,
                            size_t errlen) {
    double mb[3];
    train_run_mb(c, B, distil, mb); // for the message: mb[2] is this pass
    int ok = build_train_state(ts, c, B) == 0;
    // distilling: the teacher's probabilities for every position of a batch are the targets
    if (ok && distil) ts->soft = alloc_floats((size_t)B * c->block_size * c->vocab_size);
    if (ok && (!distil || ts->soft)) return 0;
    free_train_state(ts); // safe on a half-built one
    return fail_with(err, errlen, "out of memory for a training pass of %d windows of %d tokens "
                     "(%.0f MB); use a smaller --batch or --block", B, c->block_size, mb[2]);
}

// Trains g on the corpus with the lecture's recipe from p->opt.step up to to->iters
// steps, with the training pass ts (build_train_pass), printing progress on stderr and
// writing a checkpoint and its training state (atomically) at every evaluation after step 0
// and at the end. With to->teacher, every batch's targets are the teacher's distributions
// (distillation); the evaluations stay next-character losses. A loss that is not a finite
// number stops the run before the update it would poison, with nothing written. 0 on
// success; 2 when a signal stopped it early, after a whole step and a checkpoint of it
// (stop_signals); -1 with err set.
int train(GPT *g, const Vocab *vocab, const Corpus *corpus, const TrainOptions *to,
          TrainProgress *p, TrainState *ts, char *err, size_t errlen) {
    int S = g->config.block_size, B = p->batch;
    int *inputs = malloc((size_t)B * S * sizeof(int)), *targets = malloc((size_t)B * S * sizeof(int));
    int rc = -1;
    if (!inputs || !targets) {
        snprintf(err, errlen, "out of memory for a batch of %d windows of %d tokens", B, S);
        goto done;
    }
    double t_start = now_seconds(), t_log = t_start, recent = 0.0;
    int recent_n = 0, first = (int)p->opt.step;
    // what stays on disk if the run must stop: a resumed run's checkpoint, then each one
    // saved; and where a loss that is not a finite number would come from
    char kept[4200] = "", cause[4200] = "the model diverged";
    if (to->resume) snprintf(kept, sizeof(kept), ", the checkpoint of step %d stays in %s",
                             first, to->out);
    if (to->teacher) snprintf(cause, sizeof(cause), "are the teacher's rows NaN? "
                              "tinyshakespeare/train eval -m %s tells", to->teacher_path);
    for (int it = first; it <= to->iters; it++) {
        // evaluate and save every eval_interval steps and after the last one (a resumed
        // run's first step was evaluated and saved before it stopped)
        if ((it % to->eval_interval == 0 || it == to->iters) && !(to->resume && it == first)) {
            double t0 = now_seconds();
            double val = eval_loss(g, corpus->tokens + corpus->n_train, val_tokens(corpus));
            if (!isfinite(val)) {
                fail_with(err, errlen, "step %d: the validation loss is not a finite number "
                          "(its logits overflow); nothing written%s", it, kept);
                goto done;
            }
            // step 0's random weights are never saved: they must not replace a model
            if (it > 0 && save_training(g, vocab, p, to->out, err, errlen) != 0) goto done;
            if (it > 0) snprintf(kept, sizeof(kept), ", the checkpoint of step %d stays in %s",
                                 it, to->out);
            fprintf(stderr, "step %5d: val loss %.4f (whole validation split, %.1f s); %s%s\n",
                    it, val, now_seconds() - t0, it > 0 ? "checkpoint written to " :
                    "the random start, not saved", it > 0 ? to->out : "");
            t_log += now_seconds() - t0; // evaluation time is not training time
        }
        if (it == to->iters) break;
        // one step: a batch (and the teacher's targets for it), the loss, its gradient, the update
        get_batch(corpus, B, S, &p->rng, inputs, targets);
        if (to->teacher) teacher_targets(to->teacher, ts, inputs);
        double loss = train_forward(g, ts, inputs, targets);
        // NaN or inf (a teacher whose rows overflow, a run that diverged) would reach every
        // parameter through the update: stop before it
        if (!isfinite(loss)) {
            fail_with(err, errlen, "step %d: the %s is not a finite number (%s); nothing "
                      "written%s", it + 1, to->teacher ? "loss against the teacher" : "loss",
                      cause, kept);
            goto done;
        }
        recent += loss; // the progress line's mean
        recent_n++;
        train_backward(g, ts, inputs, targets);
        adamw_update(&p->opt, g->params, ts->grads, g->n_params);
        // progress: mean train loss since the last line, speed, and time left
        if ((it + 1) % to->log_interval == 0) {
            double now = now_seconds(), ms = 1e3 * (now - t_log) / recent_n;
            // the work of a step: the student's pass and its backward, and the teacher's
            // forward pass (a third of what a training step of it would be)
            double flops = train_step_flops(&g->config, B);
            if (to->teacher) flops += train_step_flops(&to->teacher->config, B) / 3.0;
            fprintf(stderr, "step %5d: %s %.4f, %.1f ms/step (%.1f GFLOP/s), ETA %.0f s\n",
                    it + 1, to->teacher ? "loss against the teacher" : "train loss",
                    recent / recent_n, ms, flops / ms / 1e6,
                    ms * (to->iters - it - 1) / 1e3);
            recent = 0.0;
            recent_n = 0;
            t_log = now;
        }
        // Ctrl-C or SIGTERM: stop after this whole step, saved so that --resume goes on
        // exactly as if nothing had happened (the state holds the moments and the sampler)
        if (stop_signals && it + 1 < to->iters) {
            if (save_training(g, vocab, p, to->out, err, errlen) != 0) goto done;
            rc = 2;
            goto done;
        }
    }
    fprintf(stderr, "trained %d steps in %.1f s\n", to->iters - first, now_seconds() - t_start);
    rc = 0;
done:
    free(inputs);
    free(targets);
    return rc;
}

// ----------------------------------------------------------------------------
// The command line

// Says how vocabulary a (of the file named an) differs from b (named bn), into out: the
// sizes when they differ; else the first entry that does, with its byte, since "65 and 65
// characters" would not say what is wrong. 0 if they are the same vocabulary.
static int vocab_difference(const Vocab *a, const char *an, const Vocab *b, const char *bn,
                            char *out, size_t n) {
    if (a->size != b->size)
        return fail_with(out, n, "%d and %d characters", a->size, b->size);
    int i = 0; // the first entry where they part
    while (i < a->size && a->chars[i] == b->chars[i]) i++;
    if (i == a->size) return 0; // the same characters in the same order
    // each byte as a character where it prints, always as its value
    int ca = a->chars[i], cb = b->chars[i];
    return fail_with(out, n, "entry %d is '%c' (0x%02x) in the %s and '%c' (0x%02x) in the %s",
                     i, isgraph(ca) ? ca : '?', ca, an, isgraph(cb) ? cb : '?', cb, bn);
}

// --resume: loads the checkpoint to->out and its training state to->out.state into g
// and p, after checking they match each other, the corpus's vocabulary v and the steps
// asked for. Fills err and returns -1 on the first problem.
static int resume_training(GPT *g, const Vocab *v, TrainProgress *p, const TrainOptions *to,
                           char *err, size_t errlen) {
    Vocab cv;
    if (load_checkpoint(to->out, g, &cv, err, errlen) != 0) return -1;
    char why[128];
    if (vocab_difference(&cv, "checkpoint", v, "corpus", why, sizeof(why)) != 0)
        return fail_with(err, errlen, "checkpoint '%s' has another vocabulary than the corpus "
                         "(%s); resume with the corpus it was trained on (-i)", to->out, why);
    // the checksum pairs the state with this checkpoint: the same model, the same bytes
    size_t n;
    unsigned char *buf = serialize_checkpoint(g, &cv, &n);
    if (!buf || build_train_progress(p, g->n_params, 1, 0) != 0) {
        free(buf);
        snprintf(err, errlen, "out of memory for AdamW's moments (%.0f MB) of checkpoint '%s'",
                 8.0 * g->n_params / 1e6, to->out);
        return -1;
    }
    uint64_t sum = get_u64(buf + n - 8);
    free(buf);
    char state_path[4096];
    if (state_path_of(to->out, state_path, sizeof(state_path), err, errlen) != 0) return -1;
    if (load_train_state(p, g->n_params, sum, state_path, err, errlen) != 0) return -1;
    if (p->distilled) {
        snprintf(err, errlen, "checkpoint '%s' was distilled from a teacher, which its .state "
                 "does not record, so --resume cannot go on with it; run the --teacher "
                 "command again from the start", to->out);
        return -1;
    }
    if (p->opt.step >= to->iters) {
        snprintf(err, errlen, "checkpoint '%s' has already had %ld steps; ask for more with "
                 "--iters N (N > %ld)", to->out, p->opt.step, p->opt.step);
        return -1;
    }
    return 0;
}

// Checks a config for sizes the model can be built with (specdec.c's validate_config);
// fills err and returns -1 if not.
int check_config(const Config *c, char *err, size_t errlen) {
    long long size[5] = {c->n_layer, c->n_head, c->n_embd, c->block_size, c->vocab_size};
    return validate_config(size, err, errlen);
}

// --teacher PATH: loads the model to distil into t and checks that it can teach a student
// of config c on the corpus of vocabulary v: the same characters in the same order (its
// probabilities are over token ids) and the same block size (it reads the student's
// windows, position for position). Fills err with one line and returns -1 on a problem.
static int load_teacher(const char *path, const Config *c, const Vocab *v, GPT *t,
                        char *err, size_t errlen) {
    FileRole role = {"teacher checkpoint", "--teacher takes a trained checkpoint of this "
                                           "corpus, e.g. " DEFAULT_MODEL};
    Vocab tv;
    char why[256]; // how the vocabularies differ
    if (read_checkpoint(path, role, t, &tv, err, errlen) != 0) return -1;
    if (vocab_difference(&tv, "teacher", v, "corpus", why, sizeof(why)) != 0)
        return fail_with(err, errlen, "teacher '%s' has another vocabulary than the corpus (%s): "
                         "its probabilities are over other characters; give --teacher a model "
                         "trained on this corpus (-i)", path, why);
    if (t->config.block_size != c->block_size)
        return fail_with(err, errlen, "teacher '%s' has block_size %d, the student %d: it must "
                         "read the same windows; train the student with --block %d", path,
                         t->config.block_size, c->block_size, t->config.block_size);
    return 0;
}

// Loads the corpus of a model this program builds: its vocabulary is the corpus's sorted
// distinct bytes (build_vocab, as the lecture's), learnt here first, since load_corpus
// encodes with a vocabulary it is given. 0; or -1 and err.
static int load_corpus_learning_vocab(Corpus *c, const char *path, Vocab *v, char *err,
                                      size_t errlen) {
    size_t n = 0;
    unsigned char *bytes = read_file(path, &n, "corpus", "run 'make data' to fetch Tiny "
                                     "Shakespeare", err, errlen);
    memset(c, 0, sizeof(*c)); // empty, as load_corpus leaves it when it fails: free_corpus is safe
    if (!bytes) return -1;
    if (n >= 2) build_vocab(v, bytes, n); // fewer: load_corpus refuses the file, by its size
    free(bytes);
    return load_corpus(c, path, v, err, errlen);
}

// Where training writes without -o: beside the shipped model, never over it. Replacing
// tinyshakespeare/model.bin takes -o tinyshakespeare/model.bin, which make train gives.
#define TRAIN_OUT "tinyshakespeare/retrained.bin"

// `tinyshakespeare/train [flags]`: trains a model from a seeded initialisation, or goes
// on with --resume. Returns the exit status; every bad flag is one line on stderr.
int main_train(int argc, char **argv) {
    // seed 2: notes/training.md says why
    TrainOptions to = {5000, 16, 500, 100, 2, TRAIN_OUT, 0, NULL, NULL};
    Config c = DEFAULT_CONFIG;
    const char *corpus_path = DEFAULT_CORPUS, *fixed_flag = NULL, *teacher_path = NULL;
    char err[512];
    // flags: --resume alone, every other one with one value, checked in full
    for (int i = 1; i < argc; i += 2) {
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
        int known = !strcmp(a, "--seed") || !strcmp(a, "-o") || !strcmp(a, "-i") ||
                    !strcmp(a, "--teacher");
        for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) known |= !strcmp(a, ints[k].flag);
        if (!known) {
            error_line("unknown train option '%s' (see tinyshakespeare/train -h)", a);
            return 1;
        }
        if (!val) {
            error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
            return 1;
        }
        if (!strcmp(a, "--seed")) {
            if (parse_whole(val, 0, UINT64_MAX, &to.seed) != 0) {
                error_line("--seed must be a non-negative whole number, got '%s'", val);
                return 1;
            }
        } else if (!strcmp(a, "-o")) to.out = val;
        else if (!strcmp(a, "-i")) corpus_path = val;
        else if (!strcmp(a, "--teacher")) teacher_path = val;
        else
            for (size_t k = 0; k < sizeof(ints) / sizeof(ints[0]); k++) {
                uint64_t v;
                if (strcmp(a, ints[k].flag)) continue;
                if (parse_whole(val, ints[k].lo, ints[k].hi, &v) != 0) {
                    error_line("%s must be a whole number from %ld to %ld, got '%s'",
                               a, ints[k].lo, ints[k].hi, val);
                    return 1;
                }
                *ints[k].dst = (int)v;
            }
    }
    if (to.resume && teacher_path) {
        error_line("train --resume cannot go on with a distillation (its .state does not "
                   "record the teacher); drop --resume and run the --teacher command afresh");
        return 1;
    }
    if (to.resume && fixed_flag) {
        error_line("train --resume takes the model size, batch and seed from "
                   "the checkpoint and its .state file; drop %s", fixed_flag);
        return 1;
    }
    // neither output may be a file the run reads (--resume reads -o itself, by design)
    RunInput ins[2] = {{corpus_path, "the corpus", "-i"},
                       {teacher_path, "the teacher", "--teacher"}};
    char state_path[4096]; // -o's .state: the second file a run writes
    if (state_path_of(to.out, state_path, sizeof(state_path), err, sizeof(err)) != 0 ||
        check_not_input(to.out, "-o", ins, 2, err, sizeof(err)) != 0 ||
        check_not_input(state_path, "-o's training state", ins, 2, err, sizeof(err)) != 0) {
        error_line("%s", err);
        return 1;
    }
    // the corpus gives the vocabulary; then the config must hold together
    Vocab v;
    Corpus corpus;
    GPT g, teacher;
    TrainProgress p;
    memset(&v, 0, sizeof(v));
    memset(&g, 0, sizeof(g));
    memset(&teacher, 0, sizeof(teacher));
    memset(&p, 0, sizeof(p));
    if (load_corpus_learning_vocab(&corpus, corpus_path, &v, err, sizeof(err)) != 0) {
        error_line("%s", err);
        return 1;
    }
    int rc = 1;
    TrainState ts;
    memset(&ts, 0, sizeof(ts)); // zeroed, so the free at done: is safe whatever failed
    if (to.resume) {
        if (resume_training(&g, &v, &p, &to, err, sizeof(err)) != 0) goto done;
        goto ready; // the config, the model and the optimiser come from the two files
    }
    c.vocab_size = v.size;
    c.ffn_width = 4 * c.n_embd; // the lecture's MLP, whatever --embd chose (checkpoints hold 4C)
    if (check_config(&c, err, sizeof(err)) != 0) goto done;
    // distilling: the teacher must share the corpus's vocabulary and the student's block
    if (teacher_path) {
        if (load_teacher(teacher_path, &c, &v, &teacher, err, sizeof(err)) != 0) goto done;
        to.teacher = &teacher;
        to.teacher_path = teacher_path; // for the refusal of a loss that is not finite
    }
    if (val_tokens(&corpus) < 2 || corpus.n_train <= (size_t)c.block_size) {
        snprintf(err, sizeof(err), "corpus '%s' is too short to train with block_size %d; use "
                 "Tiny Shakespeare (make data)", corpus_path, c.block_size);
        goto done;
    }
    // a run larger than this machine's memory is refused before any of it is allocated:
    // the pages are all written, so it would end in the kernel's OOM killer or in swap
    double mb[3], ram_mb = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) / 1e6;
    train_run_mb(&c, to.batch, to.teacher != NULL, mb);
    if (ram_mb > 0 && mb[0] + mb[1] + mb[2] > ram_mb) {
        snprintf(err, sizeof(err), "training this model needs %.0f MB (the model %.0f, AdamW and "
                 "saving %.0f, a pass of %d windows %.0f), more than this machine's %.0f MB of "
                 "memory; use a smaller %s", mb[0] + mb[1] + mb[2], mb[0], mb[1], to.batch,
                 mb[2], ram_mb, mb[2] > mb[0] + mb[1] ? "--batch, --block, --layers or --embd" :
                 "--layers, --embd or --block");
        goto done;
    }
    if (build_gpt(&g, &c) != 0) {
        snprintf(err, sizeof(err), "out of memory for the model: %zu parameters and a run "
                 "state, %.0f MB; use a smaller --layers, --embd or --block", g.n_params, mb[0]);
        goto done;
    }
    // PyTorch's default initialisation, from the seed
    init_gpt_random(&g, to.seed);
    if (build_train_progress(&p, g.n_params, to.batch, to.seed) != 0) {
        snprintf(err, sizeof(err), "out of memory for AdamW's moments (%.0f MB); use a smaller "
                 "--layers or --embd", 8.0 * g.n_params / 1e6);
        goto done;
    }
    p.distilled = to.teacher != NULL; // the .state says so, and --resume refuses it
ready:
    // both output paths and the memory of a training pass are checked before anything is
    // printed, so that a bad -o or a pass too large is one line of error (nothing is
    // written until step 500, the end, or a Ctrl-C: step 0's random weights never are)
    if (probe_outputs(to.out, err, sizeof(err)) != 0 ||
        build_train_pass(&ts, &g.config, p.batch, to.teacher != NULL, err, sizeof(err)) != 0)
        goto done;
    print_config(&g, to.resume ? to.out : "training from a random initialisation");
    if (to.resume)
        fprintf(stderr, "resuming at step %ld of %d, %d windows per step (optimiser moments and "
                "batch sampler restored from %s)\n", p.opt.step, to.iters, p.batch, state_path);
    else
        fprintf(stderr, "recipe: %d steps of %d windows of %d tokens, AdamW lr 1e-3 betas "
                "0.9/0.999 eps 1e-8 weight decay 0.01, seed %llu\n", to.iters, to.batch,
                c.block_size, (unsigned long long)to.seed);
    if (to.teacher)
        fprintf(stderr, "distilling: the loss is the cross-entropy against the softmax "
                "(temperature 1) of teacher %s (%d layers, %zu parameters); val loss stays "
                "the next character's\n", teacher_path, teacher.config.n_layer,
                teacher.n_params);
    // say what will be replaced, and how a run can be stopped without losing it
    struct stat st;
    fprintf(stderr, "writes %s and %s.state every %d steps, at the end and on Ctrl-C%s\n",
            to.out, to.out, to.eval_interval, stat(to.out, &st) != 0 ? "" :
            strcmp(to.out, DEFAULT_MODEL) ? ", replacing the files there" :
            ", replacing the shipped model (git checkout " DEFAULT_MODEL " restores it)");
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int trc = train(&g, &v, &corpus, &to, &p, &ts, err, sizeof(err));
    if (trc == 2 && to.teacher) { // stopped by a signal; a distillation cannot be resumed
        snprintf(err, sizeof(err), "interrupted after step %ld of %d; the checkpoint is in %s, "
                 "but --resume cannot go on with a distillation: run the command again",
                 p.opt.step, to.iters, to.out);
        rc = 130; // as a shell reports a run that Ctrl-C ended
        goto done;
    }
    if (trc == 2) { // stopped by a signal, after a whole step that is saved
        snprintf(err, sizeof(err), "interrupted after step %ld of %d; the checkpoint and its "
                 "state are in %s and %s.state: go on with tinyshakespeare/train --resume "
                 "--iters %d -o %s%s%s", p.opt.step, to.iters, to.out, to.out, to.iters, to.out,
                 strcmp(corpus_path, DEFAULT_CORPUS) ? " -i " : "",
                 strcmp(corpus_path, DEFAULT_CORPUS) ? corpus_path : "");
        rc = 130; // as a shell reports a run that Ctrl-C ended
        goto done;
    }
    if (trc != 0) goto done;
    rc = 0;
    err[0] = '\0';
done:
    if (rc != 0) error_line("%s", err);
    free_train_state(&ts);
    free_train_progress(&p);
    free_gpt(&g);
    free_gpt(&teacher);
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
        error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
        return -1;
    }
    if (!strcmp(a, "-m")) *model = argv[i + 1];
    else *corpus = argv[i + 1];
    return 0;
}

// `tinyshakespeare/train eval [-m model] [-i corpus]`: the mean cross-entropy of a checkpoint over
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
    if (val_tokens(&corpus) < 2 || corpus.n_train < 2) {
        error_line("corpus '%s' is too short to evaluate: its splits have %zu "
                   "(train) and %zu (validation) tokens, and each needs at least 2 (use a longer "
                   "corpus, e.g. Tiny Shakespeare)", corpus_path, corpus.n_train,
                   val_tokens(&corpus));
        free_gpt(&g);
        free_corpus(&corpus);
        return 1;
    }
    // validation first: it is the number that matters, and it is ten times shorter; a loss
    // that is not a finite number (logits that overflow, in a file whose every float is
    // finite) is one line of refusal, before anything is printed
    double t0 = now_seconds();
    double val = eval_loss(&g, corpus.tokens + corpus.n_train, val_tokens(&corpus));
    int rc = isfinite(val) ? 0 : 1;
    if (rc)
        error_line("model '%s': its loss on the validation split is not a finite number (its "
                   "logits overflow: a weight too large); retrain it", model_path);
    if (!rc) {
        print_config(&g, model_path);
        fprintf(stderr, "val loss   %.4f  (%zu tokens, %.1f s)\n", val, val_tokens(&corpus),
                now_seconds() - t0);
        t0 = now_seconds();
        double tr = eval_loss(&g, corpus.tokens, corpus.n_train);
        rc = isfinite(tr) ? 0 : 1; // the same refusal, after the validation split's line
        if (rc)
            error_line("model '%s': its loss on the training split is not a finite number "
                       "(its logits overflow: a weight too large); retrain it", model_path);
        else
            fprintf(stderr, "train loss %.4f  (%zu tokens, %.1f s)\n", tr, corpus.n_train,
                    now_seconds() - t0);
    }
    free_gpt(&g);
    free_corpus(&corpus);
    return rc;
}

// `tinyshakespeare/train init [--seed S] [-o PATH] [-i corpus]`: writes the seeded random
// initialisation training starts from as a checkpoint, for ./specdec -m PATH.
int main_init(int argc, char **argv) {
    const char *out = NULL, *corpus_path = DEFAULT_CORPUS;
    uint64_t seed = 1337;
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i];
        if (strcmp(a, "--seed") && strcmp(a, "-o") && strcmp(a, "-i")) {
            error_line("unknown init option '%s' (init takes --seed, -o and -i)", a);
            return 1;
        }
        if (i + 1 >= argc) {
            error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
            return 1;
        }
        if (!strcmp(a, "-o")) out = argv[i + 1];
        else if (!strcmp(a, "-i")) corpus_path = argv[i + 1];
        else if (parse_whole(argv[i + 1], 0, UINT64_MAX, &seed) != 0) {
            error_line("--seed must be a non-negative whole number, got '%s'", argv[i + 1]);
            return 1;
        }
    }
    if (!out) {
        error_line("init needs -o PATH, the checkpoint to write");
        return 1;
    }
    // the corpus gives the vocabulary, as for training; the output must not replace it
    char err[512];
    RunInput corpus_in = {corpus_path, "the corpus", "-i"};
    if (check_not_input(out, "-o", &corpus_in, 1, err, sizeof(err)) != 0) {
        error_line("%s", err);
        return 1;
    }
    Vocab v;
    Corpus corpus;
    GPT g;
    Config c = DEFAULT_CONFIG;
    memset(&v, 0, sizeof(v));
    memset(&g, 0, sizeof(g));
    int rc = load_corpus_learning_vocab(&corpus, corpus_path, &v, err, sizeof(err));
    if (rc == 0) {
        c.vocab_size = v.size;
        rc = build_gpt(&g, &c);
        if (rc != 0) snprintf(err, sizeof(err), "out of memory for the model");
    }
    if (rc == 0) {
        init_gpt_random(&g, seed);
        rc = save_checkpoint(&g, &v, out, err, sizeof(err));
    }
    if (rc == 0) fprintf(stderr, "wrote %s: the random initialisation of seed %llu, untrained\n",
                         out, (unsigned long long)seed);
    else error_line("%s", err);
    free_gpt(&g);
    free_corpus(&corpus);
    return rc != 0;
}

// ----------------------------------------------------------------------------
// Medusa heads: trained on the frozen target (tinyshakespeare/train medusa)
//
// beyond.c's section "The drafts" has the heads and medusa_logits, and
// its "Loading" the file format and load_medusa. Here: the heads' gradient, the training
// loop (the target only runs forward, its weights never change), the evaluation (loss and
// top-1 against the true tokens, alpha and top-1 agreement against the target) and the
// file writer. notes/training.md ("Medusa heads") has the run that made medusa.bin.

// Where `train medusa` writes without -o: beside the shipped heads, never over them.
#define MEDUSA_OUT "tinyshakespeare/medusa_retrained.bin"
#define DEFAULT_MEDUSA "tinyshakespeare/medusa.bin"
// Adam's learning rate for the heads (no weight decay: W and b start at 0 anyway); build
// with -DMEDUSA_LR=... to try another (notes/training.md has the ones tried)
#ifndef MEDUSA_LR
#define MEDUSA_LR 1e-3f
#endif

// Allocates n_heads heads for target, all zero: W = 0 and b = 0 make each one the
// target's own next-token head, Medusa-1's initialisation. 0 on success, -1 out of memory.
int build_medusa(MedusaHeads *m, const GPT *target, int n_heads) {
    int C = target->config.n_embd;
    m->n_heads = n_heads;
    m->C = C;
    m->V = target->config.vocab_size;
    // one allocation, laid out as load_medusa lays it: every W, then every b
    m->w = alloc_floats((size_t)n_heads * (C + 1) * C);
    m->b = m->w ? m->w + (size_t)n_heads * C * C : NULL;
    return m->w ? 0 : -1;
}

// The cross-entropy of head `head` at one hidden row h (C) of the target for the true
// token y, from beyond.c's medusa_logits. If grad is not NULL, scale times its gradient
// is added into grad, laid out like m->w (every head's W, then every head's b). The target
// is frozen: nothing flows into lm_head or into h.
double medusa_loss_grad(const MedusaHeads *m, const GPT *target, const float *h, int head,
                        int y, float scale, float *grad) {
    int C = m->C, V = m->V;
    float z[256], p[256], u[4096], du[4096]; // V <= 256 and C <= 4096 (validate_config)
    medusa_logits(m, target, h, head, z);
    double loss = cross_entropy(z, V, y, p); // p = softmax(z), for the gradient
    if (!grad) return loss;
    // u = W h + b once more: the SiLU's input (medusa_logits keeps nothing)
    const float *W = m->w + (size_t)head * C * C, *b = m->b + (size_t)head * C;
    for (int o = 0; o < C; o++) u[o] = b[o];
    for (int i = 0; i < C; i++)
        for (int o = 0; o < C; o++) u[o] += h[i] * W[(size_t)i * C + o];
    // dLoss/dz = p - onehot(y); through the frozen lm_head (C, V): dh'[i] = sum_v lm[i][v] dz[v]
    p[y] -= 1.0f;
    const float *lw = target->w.lm_head_weight;
    for (int i = 0; i < C; i++) {
        float s = 0.0f;
        for (int v = 0; v < V; v++) s += lw[(size_t)i * V + v] * p[v];
        du[i] = s * scale;
    }
    // h' = h + SiLU(u), and SiLU'(u) = sig(u) (1 + u (1 - sig(u))): du = dh' SiLU'(u)
    for (int o = 0; o < C; o++) {
        float sig = 1.0f / (1.0f + expf(-u[o]));
#ifdef BREAK_MEDUSA_BACKWARD
        du[o] *= sig; // test-only build: drops the u (1 - sig) term, so the check must fail
#else
        du[o] *= sig * (1.0f + u[o] * (1.0f - sig));
#endif
    }
    // u = W h + b with W stored (in, out): dW[i][o] += h[i] du[o], db[o] += du[o]
    float *gw = grad + (size_t)head * C * C, *gb = grad + ((size_t)m->n_heads * C + head) * C;
    for (int i = 0; i < C; i++)
        for (int o = 0; o < C; o++) gw[(size_t)i * C + o] += h[i] * du[o];
    for (int o = 0; o < C; o++) gb[o] += du[o];
    return loss;
}

// Writes heads m, trained on target, to path atomically, in load_medusa's format, if every
// float is finite.
int save_medusa(const MedusaHeads *m, const GPT *target, const char *path, char *err,
                size_t errlen) {
    size_t P = (size_t)m->n_heads * (m->C + 1) * m->C, n = MEDUSA_HEADER + 4 * P + 8;
    if (check_finite(m->w, P, "medusa heads", path, err, errlen) != 0) return -1;
    unsigned char *buf = malloc(n); // NULL: write_file_atomic says out of memory
    if (buf) {
        // header, the floats (every W, then every b), checksum
        memcpy(buf, MEDUSA_MAGIC, 4);
        put_u32(buf + 4, MEDUSA_VERSION);
        put_u32(buf + 8, (uint32_t)m->n_heads);
        put_u32(buf + 12, (uint32_t)m->C);
        put_u32(buf + 16, (uint32_t)m->V);
        put_u64(buf + 20, target_fingerprint(target));
        for (size_t i = 0; i < P; i++) {
            uint32_t bits;
            memcpy(&bits, &m->w[i], 4);
            put_u32(buf + MEDUSA_HEADER + 4 * i, bits);
        }
        put_u64(buf + n - 8, fnv1a64(buf, n - 8));
    }
    return write_file_atomic(path, buf, n, "medusa heads", err, errlen);
}

// Each head's figures over a split, as eval_medusa measures them.
typedef struct {
    double loss[MEDUSA_MAX_HEADS];     // mean cross-entropy against the true token j+2+head
    double top1[MEDUSA_MAX_HEADS];     // share of those where the head's argmax is that token
    size_t n_true[MEDUSA_MAX_HEADS];   // positions scored against the true token
    double alpha[MEDUSA_MAX_HEADS];    // mean of sum_x min(p_head(x), p_target(x)), t = 1
    double agree[MEDUSA_MAX_HEADS];    // share where the head's argmax is the target's argmax
    size_t n_target[MEDUSA_MAX_HEADS]; // positions compared with the target's own row
} MedusaEval;

// Measures every head over tokens[0..n) in eval_loss's windows (consecutive, up to S tokens
// with a next token, each from an empty cache). At position j of a window, head k guesses
// token j+2+k from the hidden row h_j. Against the truth: when that token lies in tokens.
// Against the target: when the target's row for it, the row at position j+1+k, which has
// seen the true tokens up to there, lies in the same window (so head k gets T-1-k of a
// window's T positions); alpha is then sum_x min(p_head, p_target) at t = 1, the chance a
// head's guess passes accept/reject (notes/math.md), and the agreement what greedy accepts.
void eval_medusa(const MedusaHeads *m, GPT *target, const int *tokens, size_t n,
                 MedusaEval *e) {
    int S = target->config.block_size, V = m->V, C = m->C;
    memset(e, 0, sizeof(*e));
    float z[256], ph[256], pt[256]; // a head's logits, its softmax, the target's softmax
    for (size_t start = 0; start + 1 < n; start += (size_t)S) {
        int T = n - 1 - start < (size_t)S ? (int)(n - 1 - start) : S; // the last may be short
        target->state.cache_len = 0;
        const float *logits = forward(target, tokens + start, T); // (T, V); ln_f rows (T, C)
        for (int j = 0; j < T; j++)
            for (int k = 0; k < m->n_heads; k++) {
                medusa_logits(m, target, target->state.ln_f + (size_t)j * C, k, z);
                // against the true token, where the split still has it
                if (start + j + 2 + k < n) {
                    int y = tokens[start + j + 2 + k];
                    e->loss[k] += cross_entropy(z, V, y, NULL);
                    e->top1[k] += argmax(z, V) == y;
                    e->n_true[k]++;
                }
                if (j + 1 + k >= T) continue; // the target's row for that token: next window
                // against the target's distribution for the same token, at t = 1
                const float *row = logits + (size_t)(j + 1 + k) * V;
                tempered_softmax(ph, z, V, 1.0f);
                tempered_softmax(pt, row, V, 1.0f);
                for (int x = 0; x < V; x++) e->alpha[k] += ph[x] < pt[x] ? ph[x] : pt[x];
                e->agree[k] += argmax(z, V) == argmax(row, V);
                e->n_target[k]++;
            }
    }
    target->state.cache_len = 0;
    // sums to means
    for (int k = 0; k < m->n_heads; k++) {
        e->loss[k] /= e->n_true[k] ? (double)e->n_true[k] : 1.0;
        e->top1[k] /= e->n_true[k] ? (double)e->n_true[k] : 1.0;
        e->alpha[k] /= e->n_target[k] ? (double)e->n_target[k] : 1.0;
        e->agree[k] /= e->n_target[k] ? (double)e->n_target[k] : 1.0;
    }
}

// Prints eval_medusa's figures for the validation split (stderr): the summed loss, then a
// line per head.
static void print_medusa_eval(const MedusaEval *e, int n_heads, const char *when, double secs) {
    double sum = 0.0;
    for (int k = 0; k < n_heads; k++) sum += e->loss[k];
    fprintf(stderr, "%s: val loss %.4f (summed over the %d heads; whole validation split, "
            "%.1f s)\n", when, sum, n_heads, secs);
    for (int k = 0; k < n_heads; k++)
        fprintf(stderr, "  head %d (token j+%d): val loss %.4f, top-1 %.3f (%zu positions); "
                "against the target: alpha %.3f, top-1 agreement %.3f (%zu positions)\n", k,
                k + 2, e->loss[k], e->top1[k], e->n_true[k], e->alpha[k], e->agree[k],
                e->n_target[k]);
}

// 0 if eval_medusa's figures for n_heads heads are all finite numbers (a NaN or inf in
// the target's rows or the heads' floats makes them NaN); -1 if one is not.
static int medusa_eval_finite(const MedusaEval *e, int n_heads) {
    double sum = 0.0; // NaN or inf anywhere makes the sum NaN or inf
    for (int k = 0; k < n_heads; k++) sum += e->loss[k] + e->top1[k] + e->alpha[k] + e->agree[k];
    return isfinite(sum) ? 0 : -1;
}

// What `tinyshakespeare/train medusa` is asked to do.
typedef struct {
    int n_heads;   // N, the heads                          e.g. 4
    int iters;     // Adam steps                            e.g. 5000
    int batch;     // windows of S tokens per step, B       e.g. 16
    uint64_t seed; // the batch sampler's generator         e.g. 2
} MedusaOptions;

// Fills err with the refusal of a trainer of the frozen target whose loss at step `step` is
// not a finite number, found before the update that would carry it into every float; -1.
static int target_loss_nonfinite(char *err, size_t errlen, int step) {
    return fail_with(err, errlen, "step %d: the loss is not a finite number (are the target's "
                     "rows NaN? tinyshakespeare/train eval -m TARGET tells); nothing written",
                     step);
}

// Trains m's heads on the training split, the target frozen. Each step: B random windows
// of S tokens (starts drawn as get_batch draws them), each run through specdec.c's forward
// from an empty cache; at every position j, head k's cross-entropy against token j+2+k
// counts when that token lies inside the split. The loss is summed over heads and averaged
// over the B*S positions; then one Adam step. Progress on stderr. 0, or -1 with err set
// (out of memory, or a loss that is not a finite number).
int train_medusa(MedusaHeads *m, GPT *target, const Corpus *corpus, const MedusaOptions *o,
                 char *err, size_t errlen) {
    int S = target->config.block_size, C = m->C, B = o->batch;
    size_t P = (size_t)m->n_heads * (C + 1) * C, starts = corpus->n_train - (size_t)S;
    float *grad = alloc_floats(P);
    AdamW opt = {MEDUSA_LR, 0.9f, 0.999f, 1e-8f, 0.0f, alloc_floats(P), alloc_floats(P), 0};
    int ok = grad && opt.m && opt.v;
    if (!ok)
        fail_with(err, errlen, "out of memory for the heads' gradient and Adam's moments "
                  "(%.1f MB); give fewer --heads", 12.0 * P / 1e6);
    Rng rng;
    rng_seed(&rng, o->seed);
    double t_start = now_seconds(), t_log = t_start, recent = 0.0;
    for (int it = 0; ok && it < o->iters; it++) {
        memset(grad, 0, P * sizeof(float));
        double loss = 0.0; // this step's, summed over every head and position
        for (int b = 0; b < B; b++) {
            size_t start = (size_t)(rng_u64(&rng) % starts); // torch.randint(len - block_size)
            target->state.cache_len = 0;
            forward(target, corpus->tokens + start, S); // leaves the ln_f rows in state.ln_f
            // every head at every position whose guessed token is still in the split
            for (int j = 0; j < S; j++)
                for (int k = 0; k < m->n_heads; k++) {
                    size_t y = start + (size_t)j + 2 + (size_t)k; // the token head k guesses
                    if (y >= corpus->n_train) continue;
                    loss += medusa_loss_grad(m, target, target->state.ln_f + (size_t)j * C,
                                             k, corpus->tokens[y], 1.0f / ((float)B * S), grad);
                }
        }
        // NaN or inf (the target's rows) would reach every float of the heads at the update
        if (!isfinite(loss)) {
            ok = target_loss_nonfinite(err, errlen, it + 1) == 0;
            break;
        }
        recent += loss;
        adamw_update(&opt, m->w, grad, P); // weight decay 0: plain Adam
        // progress every 100 steps: the mean summed loss, speed and time left
        if ((it + 1) % 100 == 0) {
            double now = now_seconds(), ms = 1e3 * (now - t_log) / 100.0;
            fprintf(stderr, "step %5d: train loss %.4f (summed over heads), %.1f ms/step, "
                    "ETA %.0f s\n", it + 1, recent / (100.0 * B * S), ms,
                    ms * (o->iters - it - 1) / 1e3);
            recent = 0.0;
            t_log = now;
        }
    }
    target->state.cache_len = 0;
    if (ok) fprintf(stderr, "trained %d steps in %.1f s\n", o->iters, now_seconds() - t_start);
    free(grad);
    free(opt.m);
    free(opt.v);
    return ok ? 0 : -1;
}

// `tinyshakespeare/train medusa [--heads 4] [--iters N] [--batch 16] [--seed 2] [-m MODEL]
// [-i CORPUS] [-o PATH]` trains heads and writes them; `tinyshakespeare/train medusa-eval
// [-m MODEL] [-M HEADS] [-i CORPUS]` measures a heads file. Returns the exit status; every
// bad flag or file is one line on stderr.
int main_medusa(int argc, char **argv, int eval_only) {
    MedusaOptions mo = {4, 5000, 16, 2};
    const char *model_path = DEFAULT_MODEL, *corpus_path = DEFAULT_CORPUS;
    const char *heads_path = DEFAULT_MEDUSA, *out = MEDUSA_OUT, *cmd = argv[1];
    const char *takes = eval_only ? "-m, -M and -i" : "--heads, --iters, --batch, --seed, -m, -i and -o";
    char err[512];
    // flags: each with one value; the whole numbers checked in full
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        struct { const char *flag; int *dst; long lo, hi; } ints[] = {
            {"--heads", &mo.n_heads, 1, MEDUSA_MAX_HEADS}, {"--iters", &mo.iters, 1, 10000000},
            {"--batch", &mo.batch, 1, 4096}};
        int known = !strcmp(a, "-m") || !strcmp(a, "-i"), whole = -1;
        if (eval_only) known |= !strcmp(a, "-M");
        else known |= !strcmp(a, "-o") || !strcmp(a, "--seed");
        for (int k = 0; !eval_only && k < 3; k++)
            if (!strcmp(a, ints[k].flag)) whole = k;
        if (!known && whole < 0) {
            error_line("unknown %s option '%s' (%s takes %s)", cmd, a, cmd, takes);
            return 1;
        }
        if (!val) {
            error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
            return 1;
        }
        uint64_t v;
        if (whole >= 0 && parse_whole(val, ints[whole].lo, ints[whole].hi, &v) != 0) {
            error_line("%s must be a whole number from %ld to %ld, got '%s'", a,
                       ints[whole].lo, ints[whole].hi, val);
            return 1;
        }
        if (whole >= 0) *ints[whole].dst = (int)v;
        else if (!strcmp(a, "--seed") && parse_whole(val, 0, UINT64_MAX, &mo.seed) != 0) {
            error_line("--seed must be a non-negative whole number, got '%s'", val);
            return 1;
        } else if (!strcmp(a, "-m")) model_path = val;
        else if (!strcmp(a, "-i")) corpus_path = val;
        else if (!strcmp(a, "-M")) heads_path = val;
        else if (!strcmp(a, "-o")) out = val;
    }
    // the target, then the heads (loaded, or zero), then the corpus in the target's vocabulary
    GPT g;
    Vocab v;
    Corpus corpus;
    MedusaHeads m;
    memset(&g, 0, sizeof(g)); // zeroed, so the frees at done: are safe whatever failed
    memset(&corpus, 0, sizeof(corpus));
    memset(&m, 0, sizeof(m));
    int rc = 1;
    // the heads must not be written over the target or the corpus the run reads
    RunInput ins[2] = {{model_path, "the target", "-m"}, {corpus_path, "the corpus", "-i"}};
    if (!eval_only && check_not_input(out, "-o", ins, 2, err, sizeof(err)) != 0) goto done;
    if (load_checkpoint(model_path, &g, &v, err, sizeof(err)) != 0) goto done;
    if (eval_only && load_medusa(heads_path, &g, &m, err, sizeof(err)) != 0) goto done;
    if (!eval_only && build_medusa(&m, &g, mo.n_heads) != 0) {
        snprintf(err, sizeof(err), "out of memory for %d heads (%.1f MB); give fewer --heads",
                 mo.n_heads, 4.0 * mo.n_heads * (g.config.n_embd + 1) * g.config.n_embd / 1e6);
        goto done;
    }
    if (load_corpus(&corpus, corpus_path, &v, err, sizeof(err)) != 0) goto done;
    // a training window needs S tokens and a guessed token after them
    int S = g.config.block_size, H = m.n_heads;
    if (corpus.n_train <= (size_t)S + 2) {
        snprintf(err, sizeof(err), "corpus '%s' is too short for Medusa heads on a model of "
                 "block_size %d; use Tiny Shakespeare (make data)", corpus_path, S);
        goto done;
    }
    // every head must have a position to score, or its figures would read 0 over nothing:
    // at position j of a window head k guesses token j+2+k, and the target's row for it is
    // j+1+k, in the same window; so the last head needs H+2 tokens and H+1 rows a window
    if (val_tokens(&corpus) < (size_t)H + 2) {
        snprintf(err, sizeof(err), "corpus '%s': its validation split of %zu tokens gives head "
                 "%d no position to score (%d heads need %d); use a longer corpus (make data)",
                 corpus_path, val_tokens(&corpus),
                 val_tokens(&corpus) < 3 ? 0 : (int)val_tokens(&corpus) - 2, H, H + 2);
        goto done;
    }
    if (S < H + 1) {
        snprintf(err, sizeof(err), "model '%s' has block_size %d: head %d's token lies past the "
                 "window the target verifies, so it has no position to compare; %s %d", model_path,
                 S, S - 1, eval_only ? "these heads need a block_size of" : "give --heads at most",
                 eval_only ? H + 1 : S - 1);
        goto done;
    }
    // the output is checked before any work: a bad -o is one line, not a lost run
    char *probe = eval_only ? NULL : write_temp(out, (const unsigned char *)"", 0,
                                                "medusa heads", err, sizeof(err));
    if (!eval_only && !probe) goto done;
    if (probe) unlink(probe);
    free(probe);
    // the heads as they start (or as read), measured before anything is printed: figures
    // that are not finite numbers are one line of refusal, never a "val loss nan"
    MedusaEval e;
    double t0 = now_seconds();
    eval_medusa(&m, &g, corpus.tokens + corpus.n_train, val_tokens(&corpus), &e);
    if (medusa_eval_finite(&e, H) != 0) {
        snprintf(err, sizeof(err), eval_only ? "heads '%s' give figures on the validation split "
                 "that are not finite numbers (their floats or the target's rows overflow); "
                 "retrain them (make train-medusa)" : "target '%s' gives rows on the validation "
                 "split that are not finite numbers (its logits overflow), so no head can learn "
                 "from it; tinyshakespeare/train eval -m TARGET tells", eval_only ? heads_path :
                 model_path);
        goto done;
    }
    print_config(&g, model_path);
    fprintf(stderr, "medusa: %d heads, each lm_head(h + SiLU(W h + b)) with W %dx%d and b %d "
            "and the target's frozen lm_head; %zu parameters%s%s\n", m.n_heads, m.C, m.C, m.C,
            (size_t)m.n_heads * (m.C + 1) * m.C, eval_only ? " from " : ", all zero at the start",
            eval_only ? heads_path : "");
    print_medusa_eval(&e, m.n_heads, eval_only ? heads_path : "step 0", now_seconds() - t0);
    if (eval_only) {
        rc = 0;
        goto done;
    }
    fprintf(stderr, "recipe: %d steps of %d windows of %d tokens from the training split, the "
            "target frozen, Adam lr %g, seed %llu; writes %s at the end\n", mo.iters, mo.batch,
            g.config.block_size, (double)MEDUSA_LR, (unsigned long long)mo.seed, out);
    if (train_medusa(&m, &g, &corpus, &mo, err, sizeof(err)) != 0) goto done;
    if (save_medusa(&m, &g, out, err, sizeof(err)) != 0) goto done;
    fprintf(stderr, "wrote %s\n", out);
    t0 = now_seconds();
    eval_medusa(&m, &g, corpus.tokens + corpus.n_train, val_tokens(&corpus), &e);
    print_medusa_eval(&e, m.n_heads, "trained", now_seconds() - t0);
    rc = 0;
done:
    if (rc != 0) error_line("%s", err);
    free_medusa(&m);
    free_gpt(&g);
    free_corpus(&corpus);
    return rc;
}

// ----------------------------------------------------------------------------
// The trained early exit (tinyshakespeare/train exit)
//
// beyond.c's ExitHead: the exit after block L reads the target's residual row r after its
// first L blocks and gives logits = head(LayerNorm(r)) with a LayerNorm and a Linear(C, V)
// of its own (LayerSkip: Elhoushi et al. 2024, arXiv:2404.16710, trains such exits; here the
// target stays frozen and only the exit learns). It starts as the target's own ln_f and
// lm_head, the untrained exit test/early_exit.c measures. The loss is distillation: the
// cross-entropy against the full target's softmax row p at every position, because what a
// guess is worth is alpha = sum_x min(p(x), q(x)), which is 1 exactly when q = p; the data
// label would pull q towards the corpus's next character, which p itself only guesses.
// notes/training.md ("The trained early exit") has the run that made exit.bin.

// The exit's file, in beyond.c's format (little-endian, as every file here):
//   0 magic "SPDX", 4 version 1, 8 layer L, 12 n_embd C, 16 vocab_size V, 20 the target's
//   fingerprint (8), 28 the floats ln_weight (C), ln_bias (C), head_weight (C, V) stored
//   (in, out), head_bias (V), then at end-8 the FNV-1a 64 of every byte before it.
// (EXIT_MAGIC, EXIT_VERSION, EXIT_HEADER and DEFAULT_EXIT are beyond.c's.)
// Where `train exit` writes without -o: beside the shipped exit, never over it.
#define EXIT_OUT "tinyshakespeare/exit_retrained.bin"
// Adam's learning rate for the exit (build with -DEXIT_LR=... to try another)
#ifndef EXIT_LR
#define EXIT_LR 1e-3f // the Medusa heads' rate: the 300-step trial already passed 0.54
#endif

// An exit being trained: the head, its gradient, and one window's rows and scratch.
typedef struct {
    ExitHead head;    //         the exit, its floats in one allocation (head.ln_weight owns it)
    size_t P;         //         2C + CV + V floats
    float *grad;      // (P)     dLoss/d each float of head, in the same layout
    float *head_t;    // (V, C)  head_weight transposed, for the input gradient
    float *r;         // (S, C)  a window's residual rows after block L (the exit's input)
    float *p;         // (S, V)  the full target's softmax rows: the soft targets
    float *ln;        // (S, C)  LayerNorm(r), kept for the backward
    float *logits;    // (S, V)  the exit's logits
    float *d_logits;  // (S, V)  their gradient
    float *d_ln;      // (S, C)  LayerNorm's output gradient
    float *d_r;       // (S, C)  the input gradient, not used (the target is frozen)
} ExitTrainer;

// Allocates an exit after block `layer` of target, initialised as the target's own ln_f and
// lm_head, with the scratch of a window of S rows. 0 on success, -1 out of memory.
int exit_trainer_init(ExitTrainer *x, const GPT *target, int layer) {
    memset(x, 0, sizeof(*x));
    const Config *c = &target->config; // the exit is sized by the target it reads
    size_t C = c->n_embd, V = c->vocab_size, S = c->block_size; // S: a window's rows
    x->P = 2 * C + C * V + V; // ln_weight, ln_bias, head_weight, head_bias
    // one allocation laid out as the file lays the floats out
    float *w = alloc_floats(x->P); // zeroed; filled below
    x->head = (ExitHead){layer, (int)C, (int)V, w, w ? w + C : NULL,
                         w ? w + 2 * C : NULL, w ? w + 2 * C + C * V : NULL};
    if (!w) return -1; // the caller frees a half-built trainer
    // step 0 is the untrained exit:
    memcpy(x->head.ln_weight, target->w.ln_f_weight, C * sizeof(float));
    memcpy(x->head.ln_bias, target->w.ln_f_bias, C * sizeof(float)); // ... ln_f, then lm_head
    memcpy(x->head.head_weight, target->w.lm_head_weight, C * V * sizeof(float));
    memcpy(x->head.head_bias, target->w.lm_head_bias, V * sizeof(float));
    // the gradient and a window's buffers
    float **bufs[] = {&x->grad, &x->head_t, &x->r, &x->p, &x->ln, &x->logits, &x->d_logits,
                      &x->d_ln, &x->d_r};
    size_t n[] = {x->P, C * V, S * C, S * V, S * C, S * V, S * V, S * C, S * C};
    return alloc_each(bufs, n, sizeof(n) / sizeof(n[0]));
}

// Frees what exit_trainer_init allocated; safe on a zeroed or half-built one.
void exit_trainer_free(ExitTrainer *x) {
    void *owned[] = {x->head.ln_weight, x->grad, x->head_t, x->r, x->p, x->ln, x->logits,
                     x->d_logits, x->d_ln, x->d_r};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    memset(x, 0, sizeof(*x));
}

// The exit's logits for T rows of x->r into x->logits (and LayerNorm(r) into x->ln), with
// specdec.c's layernorm and matmul: the function the runtime computes.
void exit_trainer_logits(ExitTrainer *x, int T) {
    const ExitHead *e = &x->head; // the weights the runtime reads from exit.bin
    layernorm(x->ln, x->r, e->ln_weight, e->ln_bias, T, e->C);
    matmul(x->logits, x->ln, (Linear){e->head_weight, e->head_bias, e->C, e->V}, T);
}

// The exit's summed distillation loss over T rows of x->r against x->p (the cross-entropy
// against the target's row at each position). With scale > 0, scale times its gradient is
// added into x->grad (which head_t must match: see exit_trainer_transpose).
double exit_loss_grad(ExitTrainer *x, int T, float scale) {
    int C = x->head.C, V = x->head.V; // the exit's sizes: the target's
    exit_trainer_logits(x, T); // the forward, keeping LayerNorm(r) for the backward
    double loss = 0.0; // summed over the rows
    // soft cross-entropy per row; its gradient at the logits is q - p
    for (int t = 0; t < T; t++) {
        float *q = x->d_logits + (size_t)t * V;
        const float *p = x->p + (size_t)t * V;
        loss += soft_cross_entropy(x->logits + (size_t)t * V, V, p, q); // q = softmax(z), in double
        for (int v = 0; v < V; v++) q[v] = (q[v] - p[v]) * scale; // dLoss/dz, in place
    }
    if (scale <= 0.0f) return loss; // the loss alone (evaluation)
    // the head (C -> V), then the LayerNorm; the gradient laid out as the floats are
    float *g = x->grad, *g_head_b = g + 2 * C + (size_t)C * V;
#ifdef BREAK_EXIT_BACKWARD
    g_head_b = NULL; // test-only build: drops the head bias's term, so the check must fail
#endif
    memset(x->d_ln, 0, (size_t)T * C * sizeof(float));
    matmul_backward(x->d_ln, g + 2 * C, g_head_b, x->d_logits, x->ln, x->head_t, T, C, V);
    memset(x->d_r, 0, (size_t)T * C * sizeof(float));
    layernorm_backward(x->d_r, g, g + C, x->d_ln, x->r, x->head.ln_weight, T, C);
    return loss;
}

// Refreshes head_t, the head's weight transposed, after the weights changed.
void exit_trainer_transpose(ExitTrainer *x) {
    transpose(x->head_t, x->head.head_weight, x->head.C, x->head.V);
}

// The residual rows after block `layer` of T tokens (a window from an empty cache) into r
// (T, C): forward runs blocks 0 .. layer-1 when n_layer is lowered for one call, and leaves
// the residual in state.x (ln_f writes its own buffer). Returns that call's logits, the
// untrained exit's (T, V), valid until the next forward.
const float *exit_target_residual(GPT *g, const int *tokens, int T, int layer, float *r) {
    int L = g->config.n_layer; // restored right after the call
    g->config.n_layer = layer; // forward runs blocks 0 .. layer-1 only
    g->state.cache_len = 0;
    const float *logits = forward(g, tokens, T); // blocks, then ln_f and lm_head
    g->config.n_layer = L; // the model is whole again
    g->state.cache_len = 0;
    memcpy(r, g->state.x, (size_t)T * g->config.n_embd * sizeof(float)); // the residual
    return logits;
}

// The full target's softmax rows (t = 1) for T tokens from an empty cache into p (T, V).
void target_softmax_rows(GPT *g, const int *tokens, int T, float *p) {
    int V = g->config.vocab_size; // one row of V per token
    g->state.cache_len = 0;
    const float *logits = forward(g, tokens, T);
    g->state.cache_len = 0;
    for (int t = 0; t < T; t++)
        tempered_softmax(p + (size_t)t * V, logits + (size_t)t * V, V, 1.0f);
}

// Writes exit e, trained on target, to path atomically, in beyond.c's exit format, if every
// float is finite.
int save_exit_head(const ExitHead *e, const GPT *target, const char *path, char *err,
                   size_t errlen) {
    size_t P = 2 * (size_t)e->C + (size_t)e->C * e->V + e->V, n = EXIT_HEADER + 4 * P + 8;
    if (check_finite(e->ln_weight, P, "exit head", path, err, errlen) != 0) return -1;
    unsigned char *buf = malloc(n); // NULL: write_file_atomic says out of memory
    if (buf) { // filled only if the allocation worked
        // header, the floats (one allocation, in the file's order), checksum
        memcpy(buf, EXIT_MAGIC, 4); // "SPDX"
        put_u32(buf + 4, EXIT_VERSION);
        put_u32(buf + 8, (uint32_t)e->layer); // L: the blocks the exit runs after
        put_u32(buf + 12, (uint32_t)e->C);
        put_u32(buf + 16, (uint32_t)e->V);
        put_u64(buf + 20, target_fingerprint(target)); // the exit fits this target only
        for (size_t i = 0; i < P; i++) { // ln_weight .. head_bias: one allocation
            uint32_t bits;
            memcpy(&bits, &e->ln_weight[i], 4);
            put_u32(buf + EXIT_HEADER + 4 * i, bits);
        }
        put_u64(buf + n - 8, fnv1a64(buf, n - 8)); // the checksum of all the bytes before
    }
    return write_file_atomic(path, buf, n, "exit head", err, errlen);
}

// Reads an exit file written by save_exit_head for target into x->head (which
// exit_trainer_init allocated for the same target), checking size, magic, version, sizes,
// fingerprint and checksum. beyond.c has the runtime's loader; this one is for exit-eval.
int read_exit_head(ExitTrainer *x, const GPT *target, const char *path, char *err,
                   size_t errlen) {
    size_t n = 0, want = EXIT_HEADER + 4 * x->P + 8; // the only size a good file has
    unsigned char *buf = read_file(path, &n, "exit head", "make train-exit writes "
                                   DEFAULT_EXIT, err, errlen);
    if (!buf) return -1; // read_file has said why in err
    int L = n >= EXIT_HEADER ? (int)get_u32(buf + 8) : 0; // the layer, once the header is there
    const char *why = n != want ? "wrong size (truncated, or for another model)" :
        memcmp(buf, EXIT_MAGIC, 4) ? "wrong magic (not an exit head)" :
        get_u32(buf + 4) != EXIT_VERSION ? "unknown version" :
        L < 1 || L >= target->config.n_layer ? "layer out of range" :
        get_u64(buf + 20) != target_fingerprint(target) ? "trained for another target" :
        fnv1a64(buf, n - 8) != get_u64(buf + n - 8) ? "checksum mismatch (corrupted)" : NULL;
    if (why) snprintf(err, errlen, "exit head '%s': %s; make train-exit writes one for %s, "
                      "tinyshakespeare/train exit -m MODEL for another", path, why, DEFAULT_MODEL);
    // the floats, bit for bit
    for (size_t i = 0; !why && i < x->P; i++) {
        uint32_t bits = get_u32(buf + EXIT_HEADER + 4 * i);
        memcpy(&x->head.ln_weight[i], &bits, 4);
    }
    if (!why) x->head.layer = L; // the file says where the exit reads
    free(buf);
    return why ? -1 : 0;
}

// What exit_eval_split measures over a split, for the trained exit [0] and the untrained [1].
typedef struct {
    double loss[2];  // mean cross-entropy on the true next character
    double soft[2];  // mean cross-entropy against the target's row (the training loss)
    double alpha[2]; // mean sum_x min(p(x), q(x)) at t = 1
    double agree[2]; // share of positions where argmax q == argmax p
    size_t n;        // positions
} ExitEval;

// Scores one row q's logits z against the target's row p and the true token y into slot k.
static void exit_eval_score(ExitEval *e, int k, const float *z, const float *p, int V, int y) {
    float q[256]; // softmax(z): V <= 256 (validate_config)
    e->loss[k] += cross_entropy(z, V, y, q);
    e->soft[k] += soft_cross_entropy(z, V, p, NULL);
    e->alpha[k] += expected_acceptance(p, q, V); // sum_x min(p, q), as specdec counts it
    e->agree[k] += argmax(q, V) == argmax(p, V); // what a t = 0 round accepts
}

// Measures the trained exit and the untrained one (the target's ln_f and lm_head after the
// same blocks) over tokens[0..n), in test/early_exit.c's windows: consecutive, up to S
// tokens with a next one, each from an empty cache; row t is judged against the full
// target's row t and the true token t+1.
void exit_eval_split(ExitTrainer *x, GPT *target, const int *tokens, size_t n, ExitEval *e) {
    int S = target->config.block_size, V = x->head.V; // windows of S, rows of V
    memset(e, 0, sizeof(*e));
    for (size_t start = 0; start + 1 < n; start += (size_t)S) {
        int T = n - 1 - start < (size_t)S ? (int)(n - 1 - start) : S; // the last may be short
        const int *w = tokens + start; // this window's tokens
        // the untrained exit's logits come with the residual rows; p from the full model
        const float *plain = exit_target_residual(target, w, T, x->head.layer, x->r);
        memcpy(x->d_logits, plain, (size_t)T * V * sizeof(float));
        target_softmax_rows(target, w, T, x->p); // the full target's rows: the judge
        exit_trainer_logits(x, T); // the trained exit on the same rows
        for (int t = 0; t < T; t++) {
            size_t o = (size_t)t * V;
            exit_eval_score(e, 0, x->logits + o, x->p + o, V, w[t + 1]);
            exit_eval_score(e, 1, x->d_logits + o, x->p + o, V, w[t + 1]);
        }
        e->n += (size_t)T; // every row had a next token
    }
    // sums to means
    for (int k = 0; k < 2; k++) {
        e->loss[k] /= e->n ? (double)e->n : 1.0;
        e->soft[k] /= e->n ? (double)e->n : 1.0;
        e->alpha[k] /= e->n ? (double)e->n : 1.0;
        e->agree[k] /= e->n ? (double)e->n : 1.0;
    }
}

// Prints exit_eval_split's figures (stderr), the trained exit beside the untrained one.
static void print_exit_eval(const ExitEval *e, int layer, const char *when, double secs) {
    fprintf(stderr, "%s: the exit after block %d on the whole validation split (%zu positions, "
            "%.1f s)\n", when, layer, e->n, secs);
    const char *names[2] = {"this exit", "untrained exit (the target's ln_f, lm_head)"};
    for (int k = 0; k < 2; k++)
        fprintf(stderr, "  %-44s val loss %.4f, loss against the target %.4f, alpha %.4f, "
                "greedy agreement %.4f\n", names[k], e->loss[k], e->soft[k], e->alpha[k],
                e->agree[k]);
}

// What `tinyshakespeare/train exit` is asked to do.
typedef struct {
    int layer;     // L: the exit reads the residual after blocks 0 .. L-1   e.g. 1
    int iters;     // Adam steps                                           e.g. 3000
    int batch;     // windows of S tokens per step, B                       e.g. 16
    uint64_t seed; // the batch sampler's generator                         e.g. 2
} ExitOptions;

// Trains x's exit on the training split, the target frozen: each step B random windows of
// S tokens (drawn as get_batch draws them), the distillation loss averaged over the B*S
// positions, one Adam step. Progress on stderr. 0, or -1 with err set (out of memory, or a
// loss that is not a finite number).
int train_exit_head(ExitTrainer *x, GPT *target, const Corpus *corpus, const ExitOptions *o,
                    char *err, size_t errlen) {
    int S = target->config.block_size, B = o->batch; // B windows of S tokens a step
    size_t starts = corpus->n_train - (size_t)S; // torch.randint(len - block_size)
    AdamW opt = {EXIT_LR, 0.9f, 0.999f, 1e-8f, 0.0f, alloc_floats(x->P), alloc_floats(x->P), 0};
    int ok = opt.m && opt.v; // no moments, no training: -1
    if (!ok)
        fail_with(err, errlen, "out of memory for the exit's Adam moments (%.1f MB)",
                  8.0 * x->P / 1e6);
    Rng rng;
    rng_seed(&rng, o->seed);
    double t_start = now_seconds(), t_log = t_start, recent = 0.0; // for the progress lines
    for (int it = 0; ok && it < o->iters; it++) {
        memset(x->grad, 0, x->P * sizeof(float));
        exit_trainer_transpose(x); // the head's weight as the backward reads it
        // each window: the residual after block L, the full target's rows, the exit's loss
        double loss = 0.0; // this step's, summed over its B*S rows
        for (int b = 0; b < B; b++) {
            const int *w = corpus->tokens + rng_u64(&rng) % starts;
            exit_target_residual(target, w, S, x->head.layer, x->r); // the exit's input
            target_softmax_rows(target, w, S, x->p); // its soft targets
            loss += exit_loss_grad(x, S, 1.0f / ((float)B * S));
        }
        // NaN or inf (the target's rows) would reach every float of the exit at the update
        if (!isfinite(loss)) {
            ok = target_loss_nonfinite(err, errlen, it + 1) == 0;
            break;
        }
        recent += loss;
        adamw_update(&opt, x->head.ln_weight, x->grad, x->P); // weight decay 0: plain Adam
        // progress every 100 steps: the mean loss against the target, speed, time left
        if ((it + 1) % 100 == 0) {
            double now = now_seconds(), ms = 1e3 * (now - t_log) / 100.0;
            fprintf(stderr, "step %5d: loss against the target %.4f, %.1f ms/step, ETA %.0f s\n",
                    it + 1, recent / (100.0 * B * S), ms, ms * (o->iters - it - 1) / 1e3);
            recent = 0.0; // the next line's mean starts afresh
            t_log = now;
        }
    }
    if (ok) fprintf(stderr, "trained %d steps in %.1f s\n", o->iters, now_seconds() - t_start);
    free(opt.m);
    free(opt.v);
    return ok ? 0 : -1;
}

// The flags of `train exit` and `train exit-eval` into o and the paths (paths[0] the model,
// [1] the corpus, [2] the exit to read, [3] the file to write). 0, or -1 after one line.
static int exit_flags(int argc, char **argv, int eval_only, ExitOptions *o, const char **paths) {
    const char *cmd = argv[1], *takes = eval_only ? "-m, -X and -i" :
                      "--layer, --iters, --batch, --seed, -m, -i and -o";
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        struct { const char *flag; int *dst; long lo, hi; } ints[] = {
            {"--layer", &o->layer, 1, 63}, {"--iters", &o->iters, 1, 10000000},
            {"--batch", &o->batch, 1, 4096}};
        // which flag: a path (its slot), a whole number (its row), or --seed
        int slot = !strcmp(a, "-m") ? 0 : !strcmp(a, "-i") ? 1 : -1, whole = -1;
        if (eval_only && !strcmp(a, "-X")) slot = 2; // the exit to measure
        if (!eval_only && !strcmp(a, "-o")) slot = 3; // the file to write
        for (int k = 0; !eval_only && k < 3; k++)
            if (!strcmp(a, ints[k].flag)) whole = k;
        int seed = !eval_only && !strcmp(a, "--seed"); // the sampler's seed: a 64-bit value
        if (slot < 0 && whole < 0 && !seed) {
            error_line("unknown %s option '%s' (%s takes %s)", cmd, a, cmd, takes);
            return -1;
        }
        if (!val) {
            error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
            return -1;
        }
        // the value, checked in full
        uint64_t v;
        if (whole >= 0 && parse_whole(val, ints[whole].lo, ints[whole].hi, &v) != 0) {
            error_line("%s must be a whole number from %ld to %ld, got '%s'", a,
                       ints[whole].lo, ints[whole].hi, val);
            return -1;
        }
        if (seed && parse_whole(val, 0, UINT64_MAX, &o->seed) != 0) {
            error_line("--seed must be a non-negative whole number, got '%s'", val);
            return -1;
        }
        if (whole >= 0) *ints[whole].dst = (int)v; // in range, as parse_whole checked
        if (slot >= 0) paths[slot] = val; // paths are checked when opened
    }
    return 0;
}

// Loads the target and the corpus for `train exit`/`exit-eval` and checks the layer and the
// corpus fit; fills err and returns -1 on the first problem.
static int exit_inputs(GPT *g, Corpus *corpus, const char **paths, int layer, char *err,
                       size_t errlen) {
    Vocab v;
    if (load_checkpoint(paths[0], g, &v, err, errlen) != 0) return -1;
    if (load_corpus(corpus, paths[1], &v, err, errlen) != 0) return -1;
    int L = g->config.n_layer; // an exit after the last block would be the target
    if (L < 2)
        return fail_with(err, errlen, "model '%s' has 1 block: an early exit needs at least "
                         "2 (it reads the residual after block L < n_layer); give -m a deeper "
                         "model", paths[0]);
    if (layer >= L)
        return fail_with(err, errlen, "--layer must be from 1 to %d (the exit reads the "
                         "residual after that many of the target's %d blocks), got %d", L - 1,
                         L, layer);
    if (corpus->n_train <= (size_t)g->config.block_size || val_tokens(corpus) < 2)
        return fail_with(err, errlen, "corpus '%s' is too short for an exit on a model of "
                         "block_size %d; use Tiny Shakespeare (make data)", paths[1],
                         g->config.block_size);
    return 0;
}

// `tinyshakespeare/train exit [--layer 1] [--iters N] [--batch 16] [--seed 2] [-m MODEL]
// [-i CORPUS] [-o PATH]` trains an exit and writes it; `train exit-eval [-m MODEL] [-X EXIT]
// [-i CORPUS]` measures one. Returns the exit status; every bad input is one line on stderr.
int main_exit(int argc, char **argv, int eval_only) {
    ExitOptions o = {1, 3000, 16, 2}; // layer 1, 3000 steps, 16 windows, seed 2
    const char *paths[4] = {DEFAULT_MODEL, DEFAULT_CORPUS, DEFAULT_EXIT, EXIT_OUT};
    if (exit_flags(argc, argv, eval_only, &o, paths) != 0) return 1;
    char err[512];
    GPT g;
    Corpus corpus;
    ExitTrainer x;
    memset(&g, 0, sizeof(g)); // zeroed, so the frees at done: are safe whatever failed
    memset(&corpus, 0, sizeof(corpus));
    memset(&x, 0, sizeof(x));
    int rc = 1;
    // the file written must be neither the target nor the corpus the run reads
    RunInput ins[2] = {{paths[0], "the target", "-m"}, {paths[1], "the corpus", "-i"}};
    if (!eval_only && check_not_input(paths[3], "-o", ins, 2, err, sizeof(err)) != 0) goto done;
    if (exit_inputs(&g, &corpus, paths, o.layer, err, sizeof(err)) != 0) goto done;
    if (exit_trainer_init(&x, &g, o.layer) != 0) {
        snprintf(err, sizeof(err), "out of memory for the exit head and a window's rows (%.1f "
                 "MB)", 4.0 * (3 * x.P + 5.0 * g.config.block_size * (g.config.n_embd +
                 g.config.vocab_size)) / 1e6);
        goto done;
    }
    if (eval_only && read_exit_head(&x, &g, paths[2], err, sizeof(err)) != 0) goto done;
    // the output is checked before any work: a bad -o is one line, not a lost run
    char *probe = eval_only ? NULL : write_temp(paths[3], (const unsigned char *)"", 0,
                                                "exit head", err, sizeof(err));
    if (!eval_only && !probe) goto done;
    if (probe) unlink(probe);
    free(probe);
    // the exit as it starts (or as read), measured before anything is printed: figures that
    // are not finite numbers are one line of refusal, never a "val loss nan"
    ExitEval e;
    double t0 = now_seconds();
    exit_eval_split(&x, &g, corpus.tokens + corpus.n_train, val_tokens(&corpus), &e);
    if (!isfinite(e.loss[0] + e.soft[0] + e.alpha[0] + e.loss[1] + e.soft[1] + e.alpha[1])) {
        snprintf(err, sizeof(err), eval_only ? "exit head '%s' gives figures on the validation "
                 "split that are not finite numbers (its floats or the target's rows overflow); "
                 "retrain it (make train-exit)" : "target '%s' gives rows on the validation "
                 "split that are not finite numbers (its logits overflow), so no exit can learn "
                 "from it; tinyshakespeare/train eval -m TARGET tells", paths[eval_only ? 2 : 0]);
        goto done;
    }
    print_config(&g, paths[0]); // which target, on stderr
    print_exit_eval(&e, x.head.layer, eval_only ? paths[2] : "step 0", now_seconds() - t0);
    // then training, the file, and the trained exit
    if (!eval_only) {
        fprintf(stderr, "recipe: exit after block %d, LayerNorm + Linear(%d, %d) from the "
                "target's ln_f and lm_head; %d steps of %d windows of %d tokens, loss the "
                "cross-entropy against the target's row, Adam lr %g, seed %llu; writes %s at "
                "the end\n", o.layer, x.head.C, x.head.V, o.iters, o.batch,
                g.config.block_size, (double)EXIT_LR, (unsigned long long)o.seed, paths[3]);
        if (train_exit_head(&x, &g, &corpus, &o, err, sizeof(err)) != 0) goto done;
        if (save_exit_head(&x.head, &g, paths[3], err, sizeof(err)) != 0) goto done;
        fprintf(stderr, "wrote %s\n", paths[3]);
        t0 = now_seconds(); // the evaluation's own time
        exit_eval_split(&x, &g, corpus.tokens + corpus.n_train, val_tokens(&corpus), &e);
        print_exit_eval(&e, x.head.layer, "trained", now_seconds() - t0);
    }
    rc = 0;
done:
    if (rc != 0) error_line("%s", err);
    exit_trainer_free(&x); // safe whatever failed
    free_gpt(&g);
    free_corpus(&corpus);
    return rc;
}

// ----------------------------------------------------------------------------
// EAGLE: a draft of the target's own features (tinyshakespeare/train eagle)
//
// beyond.c's EagleHead (EAGLE: Li et al. 2024, arXiv:2401.15077). In a window whose target
// features are f_0 .. f_{T-1} (the residual after ALL the target's blocks, the row ln_f
// reads) and tokens x_0 .. x_{T-1}, draft row i = 0 .. T-2 takes
//     u_i = fc([f_i, E[x_{i+1}]])     E the target's token embedding, frozen; no position
//     h_i = block(u_0 .. u_i)          one block like the target's, causal, its own cache
// h_i predicts f_{i+1}, and the target's frozen ln_f and lm_head turn it into the logits of
// x_{i+2}, the draft's q. The loss of row i is
//     EAGLE_W_CE * CE(p_{i+1}, q_i) + EAGLE_W_REG * mean_c SmoothL1(h_i - f_{i+1})
// with the target's softmax row p_{i+1} (the distribution of x_{i+2}) as the soft target:
// the paper's classification term is against the data token, but alpha = sum min(p, q)
// rewards matching p itself (notes/training.md, "EAGLE", says why these weights).
// The trainer's copy of the block has block_size S-1: a window of S target rows gives S-1
// draft rows. Its 13 tensors do not depend on block_size; the file holds only those.

// (EAGLE_MAGIC, EAGLE_VERSION, EAGLE_HEADER and DEFAULT_EAGLE are beyond.c's.)
// Where `train eagle` writes without -o: beside the shipped draft, never over it.
#define EAGLE_OUT "tinyshakespeare/eagle_retrained.bin"
// The loss's weights and Adam's learning rate (build with -D... to try others)
#ifndef EAGLE_W_CE
#define EAGLE_W_CE 1.0f // the term alpha measures: weight 1
#endif
#ifndef EAGLE_W_REG
#define EAGLE_W_REG 1.0f // notes/training.md: 0, 1 and 10 tried
#endif
#ifndef EAGLE_LR
#define EAGLE_LR 1e-3f // the trainer's rate for every model here
#endif
// The draft depths eagle-eval measures: depth d feeds back its own feature d-1 times.
#define EAGLE_EVAL_DEPTH 4
// The block's 13 tensors sit in checkpoint order from tensor 2 (ln1_weight) to 14
#define EAGLE_BLOCK_FIRST 2
#define EAGLE_BLOCK_LAST 14

// An EAGLE draft being trained: fc, the block, a batch of windows' rows and the gradients.
typedef struct {
    int B, S, C, V;   //             windows per step, target rows per window, sizes
    Config bc;        //             the block's config: n_layer 1, block_size S-1
    float *fc;        // (2C+1, C)   fc_weight (2C, C), then fc_bias (C): one allocation
    float *fc_grad;   // (2C+1, C)   their gradient, the same layout
    GPT block;        //             the block (its embeddings, ln_f and lm_head unused)
    size_t off, n;    //             the block's 13 tensors: params[off .. off+n)
    TrainState ts;    //             the block's pass over B windows, and its gradients
    float *feat;      // (B, S, C)   the target's features f
    float *p;         // (B, S, V)   the target's softmax rows
    float *cat;       // (B, S-1, 2C) [f_i, E[x_{i+1}]]: fc's input
    float *lnf;       // (B, S-1, C) the target's ln_f of h
    float *q;         // (B, S-1, V) softmax of the draft's logits
    float *logits;    // (S-1, V)    one window's logits (scratch)
    float *lm_t;      // (V, C)      the target's lm_head transposed, for the input gradient
    float *d_ln;      // (S-1, C)    the gradient of ln_f's output
    float *scratch;   // (2C)        the frozen ln_f's parameter gradients, discarded
    // EAGLE-3 (section "EAGLE-3" below); n_feat 1 leaves these NULL and rows = S-1
    int n_feat;       //             1 (EAGLE: the top feature) or 3 (EAGLE-3: fused)
    int low, mid;     //             EAGLE-3: the rows after blocks low and mid, and the top
    int steps, rows;  //             unrolled steps K (1 for EAGLE), draft rows per window
    float *fuse;      // (3C+1, C)   fuse_weight (3C, C), then fuse_bias (C)
    float *fuse_grad; // (3C+1, C)   their gradient
    float *fused_in;  // (B, S, 3C)  [r_low, r_mid, f] of each position: fuse's input
    float *g;         // (B, S, C)   the fused rows, step 1's features
    float *tap;       // (S, C)      one of the target's lower rows (scratch)
    float *fc_t;      // (C, 2C)     fc_weight transposed: the gradient reaching h and g
    float *d_cat;     // (rows, 2C)  the gradient of fc's input rows
    int *at;          // (rows)      row r reads token x_at[r] and is judged against p_at[r]
    int *from;        // (rows)      the row whose h it reads, or -1: the fused g of its chain
    int *chain;       // (rows)      its chain i: step k of chain i sits at position i+k-1
    unsigned char *sees; // (rows, rows) which rows each row attends to
} EagleTrainer;

// What kind of EAGLE draft to build: EAGLE, or EAGLE-3's fused rows and unrolled steps.
typedef struct {
    int n_feat;   // 1 (EAGLE) or 3 (EAGLE-3)
    int low, mid; // EAGLE-3: the target's rows after blocks low < mid < n_layer
    int steps;    // EAGLE-3: the unrolled steps of training-time test (1 for EAGLE)
} EagleShape;

// The block's floats [off, off+n): tensors EAGLE_BLOCK_FIRST .. EAGLE_BLOCK_LAST of a config.
static void eagle_train_block_range(const Config *c, size_t *off, size_t *n) {
    size_t sizes[N_TENSORS];
    weight_sizes(c, sizes); // the one table that knows the layout
    *off = 0;
    *n = 0;
    for (int i = 0; i < EAGLE_BLOCK_FIRST; i++) *off += sizes[i];
    for (int i = EAGLE_BLOCK_FIRST; i <= EAGLE_BLOCK_LAST; i++) *n += sizes[i];
}

// Allocates an EAGLE draft for target and B windows per step and initialises it from seed
// with PyTorch's defaults (init_gpt_random for the block; fc uniform in +-1/sqrt(2C)).
// 0 on success, -1 out of memory.
// ----------------------------------------------------------------------------
// EAGLE-3: fused rows and training-time test (tinyshakespeare/train eagle --eagle3)
//
// EAGLE-3 (Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language
// Models via Training-Time Test", arXiv:2503.01840) changes two things, both of which
// beyond.c's EagleHead runs:
//   g_i = fuse([r_low_i, r_mid_i, f_i])   the target's rows after blocks low, mid and all,
//                                         fused by a Linear (3C -> C); step 1 reads g_i
// and training-time test: the draft is trained on its own unrolled guesses, with the
// cross-entropy alone. Step k of chain i (k = 1 .. K, i = 0 .. S-1-k) sits at position
// i+k-1: it reads [h of step k-1 of chain i (g_i at k = 1), E[x_{i+k}]] and is judged
// against the target's row p_{i+k}. Its row attends to step 1's rows of chains 0 .. i (the
// runtime's cache, made from true features) and to its own chain's steps 2 .. k (the
// runtime's ancestors in the tree): the mask the runtime and eagle-eval's depths see.
// All K steps of a window sit in one block record of `rows` rows, step after step, so
// every row a row attends to sits before it.

// The longest list of rows one row may attend to (a stack array in the attention).
#define EAGLE3_MAX_ROWS 1024

// EAGLE-3's parts of et: fuse, U(+-1/sqrt(3C)) from seed + 3, its buffers, and the map
// of the rows: what each reads, what judges it, what it attends to. 0, or -1.
static int eagle3_train_setup(EagleTrainer *et, uint64_t seed) {
    int C = et->C, S = et->S, R = et->rows, n = S - 1; // n: step 1's rows
    size_t nfuse = (size_t)(3 * C + 1) * C;
    float **bufs[] = {&et->fuse, &et->fuse_grad, &et->fused_in, &et->g, &et->tap, &et->fc_t,
                      &et->d_cat};
    size_t sz[] = {nfuse, nfuse, (size_t)et->B * S * 3 * C, (size_t)et->B * S * C,
                   (size_t)S * C, (size_t)2 * C * C, (size_t)R * 2 * C};
    if (R > EAGLE3_MAX_ROWS || alloc_each(bufs, sz, sizeof(sz) / sizeof(sz[0])) != 0) return -1;
    et->at = malloc((size_t)R * sizeof(int));
    et->from = malloc((size_t)R * sizeof(int));
    et->chain = malloc((size_t)R * sizeof(int));
    et->sees = calloc((size_t)R * R, 1);
    if (!et->at || !et->from || !et->chain || !et->sees) return -1;
    Rng r;
    rng_seed(&r, seed + 3); // its own stream: fc's is seed + 1
    init_uniform(et->fuse, nfuse, 1.0 / sqrt(3.0 * C), &r);
    // step k of chain i: row off_k + i, where step k-1 of the chain sits n-k+2 rows before
    int row = 0;
    for (int k = 1; k <= et->steps; k++)
        for (int i = 0; i <= n - k; i++, row++) {
            et->at[row] = i + k; // reads x_{i+k}, judged against p_{i+k}
            et->chain[row] = i;
            et->from[row] = k == 1 ? -1 : row - (n - k + 2);
        }
    // each row sees step 1 of chains 0 .. i, and its own chain's later steps up to itself
    for (int t = 0; t < R; t++) {
        for (int j = 0; j <= et->chain[t]; j++) et->sees[(size_t)t * R + j] = 1;
        for (int s = t; et->from[s] >= 0; s = et->from[s]) et->sees[(size_t)t * R + s] = 1;
    }
    return 0;
}

// EAGLE-3's attention of rows t0 .. t0+T-1 of record a, each to the rows et->sees marks,
// in increasing order: specdec.c's attention with another mask, its sums in the same order
// (the runtime's cache holds the same rows in the same order). Masked weights are 0.
static void eagle3_train_attention(const EagleTrainer *et, BlockActs *a, int t0, int T) {
    int C = et->C, NH = et->bc.n_head, R = et->rows, HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS); // as specdec.c scales
    int seen[EAGLE3_MAX_ROWS]; // the rows one row attends to, in order
    for (int t = t0; t < t0 + T; t++) {
        int m = 0;
        for (int s = 0; s < R; s++)
            if (et->sees[(size_t)t * R + s]) seen[m++] = s;
        for (int h = 0; h < NH; h++) {
            const float *qh = a->q + (size_t)t * C + h * HS;
            float *w = a->att + ((size_t)h * R + t) * R; // its weights: compact, then spread
            // the visible scores, packed at w[0 .. m-1], and their softmax
            for (int j = 0; j < m; j++) {
                const float *kh = a->keys + (size_t)seen[j] * C + h * HS;
                float score = 0.0f;
                for (int i = 0; i < HS; i++) score += qh[i] * kh[i];
                w[j] = score * scale;
            }
            softmax(w, m);
            // spread to their rows (seen[j] >= j: from the end), the rest masked to 0
            for (int j = m - 1, s = R - 1; s >= 0; s--) {
                int mine = j >= 0 && seen[j] == s;
                w[s] = mine ? w[j] : 0.0f;
                j -= mine;
            }
            float *oh = a->att_out + (size_t)t * C + h * HS;
            for (int i = 0; i < HS; i++) oh[i] = 0.0f;
            for (int j = 0; j < m; j++) {
                const float *vh = a->values + (size_t)seen[j] * C + h * HS;
                for (int i = 0; i < HS; i++) oh[i] += w[seen[j]] * vh[i];
            }
        }
    }
}

// specdec.c's block_forward for rows t0 .. t0+T-1 of record a (their keys and values into
// its cache rows t0 ..), with EAGLE-3's mask in place of the causal one.
static void eagle3_train_block_forward(const EagleTrainer *et, BlockActs *a, int t0, int T) {
    const Weights *w = &et->block.w; // layer 0, the one block
    int C = et->C, H = et->bc.ffn_width;
    size_t o = (size_t)t0 * C, oh = (size_t)t0 * H, TC = (size_t)T * C;
    Linear query = {w->query, NULL, C, C};
    Linear key = {w->key, NULL, C, C};
    Linear value = {w->value, NULL, C, C};
    Linear proj = {w->proj_weight, w->proj_bias, C, C};
    Linear up = {w->ffwd_up_weight, w->ffwd_up_bias, C, H};
    Linear down = {w->ffwd_down_weight, w->ffwd_down_bias, H, C};
    // attention sub-block, as block_forward: the keys and values into the window's cache
    layernorm(a->ln1 + o, a->x_in + o, w->ln1_weight, w->ln1_bias, T, C);
    matmul(a->q + o, a->ln1 + o, query, T);
    matmul(a->keys + o, a->ln1 + o, key, T);
    matmul(a->values + o, a->ln1 + o, value, T);
    eagle3_train_attention(et, a, t0, T);
    matmul(a->proj_out + o, a->att_out + o, proj, T);
    residual_add(a->x_mid + o, a->x_in + o, a->proj_out + o, TC);
    // MLP sub-block
    layernorm(a->ln2 + o, a->x_mid + o, w->ln2_weight, w->ln2_bias, T, C);
    matmul(a->hidden + oh, a->ln2 + o, up, T);
    relu(a->hidden + oh, (size_t)T * H);
    matmul(a->ffwd + o, a->hidden + oh, down, T);
    residual_add(a->x_out + o, a->x_mid + o, a->ffwd + o, TC);
}

// The draft rows of one window of S target rows with K unrolled steps: step k has S-k.
static int eagle_train_rows_of(int S, int K) {
    int n = S - 1, rows = 0; // step 1: the S-1 rows of EAGLE
    for (int k = 1; k <= K; k++) rows += n - k + 1;
    return rows;
}

// Allocates an EAGLE draft of the given shape for target and B windows per step and
// initialises it from seed with PyTorch's defaults (init_gpt_random for the block; fc and
// EAGLE-3's fuse uniform in +-1/sqrt(fan_in)). 0 on success, -1 out of memory.
int eagle_trainer_setup(EagleTrainer *et, GPT *target, int B, uint64_t seed,
                        const EagleShape *sh) {
    memset(et, 0, sizeof(*et));
    const Config *c = &target->config; // the block is shaped like one of the target's
    int C = c->n_embd, S = c->block_size, V = c->vocab_size;
    int rows = eagle_train_rows_of(S, sh->steps); // S-1 for EAGLE: S target rows give S-1
    *et = (EagleTrainer){.B = B, .S = S, .C = C, .V = V, .bc = *c, .n_feat = sh->n_feat,
                         .low = sh->low, .mid = sh->mid, .steps = sh->steps, .rows = rows};
    et->bc.n_layer = 1; // ONE block
    et->bc.block_size = rows; // every unrolled row of a window in one record
    eagle_train_block_range(&et->bc, &et->off, &et->n);
    if (build_gpt(&et->block, &et->bc) != 0 || build_train_state(&et->ts, &et->bc, B) != 0)
        return -1;
    init_gpt_random(&et->block, seed); // LayerNorm 1/0, Linear U(+-1/sqrt(fan_in))
    size_t nfc = (size_t)(2 * C + 1) * C, R = (size_t)B * rows;
    size_t most = (size_t)(rows > S ? rows : S); // rows of one window's scratch
    float **bufs[] = {&et->fc, &et->fc_grad, &et->feat, &et->p, &et->cat, &et->lnf, &et->q,
                      &et->logits, &et->lm_t, &et->d_ln, &et->scratch};
    size_t n[] = {nfc, nfc, (size_t)B * S * C, (size_t)B * S * V, R * 2 * C, R * C, R * V,
                  most * V, (size_t)V * C, most * C, 2 * (size_t)C};
    if (alloc_each(bufs, n, sizeof(n) / sizeof(n[0])) != 0) return -1;
    // fc: Linear(2C, C), both weight and bias bounded by 1/sqrt(fan_in), its own stream
    Rng r;
    rng_seed(&r, seed + 1);
    init_uniform(et->fc, nfc, 1.0 / sqrt(2.0 * C), &r);
    transpose(et->lm_t, target->w.lm_head_weight, C, V); // frozen: transposed once
    return sh->n_feat == 3 ? eagle3_train_setup(et, seed) : 0;
}

// Allocates an EAGLE draft (the top feature, no unrolled steps) for target and B windows.
int eagle_trainer_init(EagleTrainer *et, GPT *target, int B, uint64_t seed) {
    EagleShape eagle = {1, target->config.n_layer, 0, 1}; // the top feature, one step
    return eagle_trainer_setup(et, target, B, seed, &eagle);
}

// Frees what eagle_trainer_init allocated; safe on a zeroed or half-built one.
void eagle_trainer_free(EagleTrainer *et) {
    void *owned[] = {et->fc, et->fc_grad, et->feat, et->p, et->cat, et->lnf, et->q,
                     et->logits, et->lm_t, et->d_ln, et->scratch, et->fuse, et->fuse_grad,
                     et->fused_in, et->g, et->tap, et->fc_t, et->d_cat, et->at, et->from,
                     et->chain, et->sees};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    free_gpt(&et->block);
    free_train_state(&et->ts);
    memset(et, 0, sizeof(*et));
}

// The target's features and softmax rows of window b's T tokens (from an empty cache) into
// et->feat and et->p: forward leaves the last block's residual in state.x.
void eagle_train_targets(EagleTrainer *et, GPT *target, const int *tokens, int T, int b) {
    float *f = et->feat + (size_t)b * et->S * et->C, *p = et->p + (size_t)b * et->S * et->V;
    target->state.cache_len = 0; // every window from an empty cache
    const float *logits = forward(target, tokens, T);
    target->state.cache_len = 0;
    memcpy(f, target->state.x, (size_t)T * et->C * sizeof(float)); // the rows ln_f reads
    for (int t = 0; t < T; t++)
        tempered_softmax(p + (size_t)t * et->V, logits + (size_t)t * et->V, et->V, 1.0f);
}

// fc's input row [f, E[token]] (2C) into cat: the feature first, then the embedding.
static void eagle_fc_input(float *cat, const float *f, const GPT *target, int token, int C) {
    memcpy(cat, f, (size_t)C * sizeof(float));
    memcpy(cat + C, target->w.token_embedding + (size_t)token * C, (size_t)C * sizeof(float));
}

// The loss of draft row h (C) against the target's next feature f (C) and row p (V), its
// logits z (V) given: returns EAGLE_W_CE * CE(p, q) + EAGLE_W_REG * mean SmoothL1(h - f);
// q (V), if not NULL, receives softmax(z).
static double eagle_train_row_loss(const float *h, const float *f, const float *p, const float *z,
                             int C, int V, float *q) {
    double reg = 0.0; // summed over the C features, then averaged
    // SmoothL1 with beta 1, PyTorch's default: 0.5 d^2 inside |d| < 1, |d| - 0.5 outside
    for (int i = 0; i < C; i++) {
        double d = fabs((double)h[i] - (double)f[i]);
        reg += d < 1.0 ? 0.5 * d * d : d - 0.5;
    }
    return EAGLE_W_CE * soft_cross_entropy(z, V, p, q) + EAGLE_W_REG * reg / C;
}

// The draft's rows of window b, whose T target rows eagle_train_targets filled: fc, the block
// (ts's record of window b, positions 0 .. T-2), the target's ln_f and lm_head. Keeps what
// the backward needs; returns the window's summed loss. tokens: the window's T tokens.
double eagle_train_forward(EagleTrainer *et, const GPT *target, const int *tokens, int T, int b) {
    int C = et->C, V = et->V, n = T - 1, S1 = et->S - 1; // n draft rows of T target rows
    const float *f = et->feat + (size_t)b * et->S * C, *p = et->p + (size_t)b * et->S * V;
    float *cat = et->cat + (size_t)b * S1 * 2 * C, *lnf = et->lnf + (size_t)b * S1 * C;
    BlockActs *a = &et->ts.blocks[b]; // window b's own record: the backward reads it
    // u_i = fc([f_i, E[x_{i+1}]]) straight into the block's input rows
    for (int i = 0; i < n; i++) eagle_fc_input(cat + (size_t)i * 2 * C, f + (size_t)i * C, target,
                                             tokens[i + 1], C);
    matmul(a->x_in, cat, (Linear){et->fc, et->fc + (size_t)2 * C * C, 2 * C, C}, n);
    block_forward(&et->bc, &et->block.w, 0, a, n, 0); // specdec.c's block, positions 0 ..
    // h_i through the target's frozen ln_f and lm_head: row i guesses x_{i+2}
    layernorm(lnf, a->x_out, target->w.ln_f_weight, target->w.ln_f_bias, n, C);
    matmul(et->logits, lnf, (Linear){target->w.lm_head_weight, target->w.lm_head_bias, C, V}, n);
    double loss = 0.0;
    for (int i = 0; i < n; i++)
        loss += eagle_train_row_loss(a->x_out + (size_t)i * C, f + (size_t)(i + 1) * C,
                               p + (size_t)(i + 1) * V, et->logits + (size_t)i * V, C, V,
                               et->q + ((size_t)b * S1 + i) * V);
    return loss;
}

// The gradient at h of window b's S-1 rows into ts->d_resid: through lm_head and ln_f (the
// cross-entropy's q - p), plus the regression's clamp(h - f, -1, 1) / C; each times scale.
static void eagle_train_head_backward(EagleTrainer *et, const GPT *target, int b, float scale) {
    int C = et->C, V = et->V, n = et->S - 1; // a training window's S-1 rows
    const float *f = et->feat + (size_t)b * et->S * C, *p = et->p + (size_t)b * et->S * V;
    const float *q = et->q + (size_t)b * n * V, *h = et->ts.blocks[b].x_out;
    float *dz = et->ts.d_logits, *dh = et->ts.d_resid; // dLoss/dlogits, dLoss/dh
    // dLoss/dlogits of row i = EAGLE_W_CE (q_i - p_{i+1}), then back through lm_head
    for (int i = 0; i < n; i++)
        for (int v = 0; v < V; v++)
            dz[(size_t)i * V + v] = EAGLE_W_CE * scale * (q[(size_t)i * V + v] -
                                                          p[(size_t)(i + 1) * V + v]);
    memset(et->d_ln, 0, (size_t)n * C * sizeof(float));
    gemm_acc(et->d_ln, dz, V, 1, et->lm_t, n, V, C); // d ln_f = dz lm_head^T
    // through ln_f (its own parameters are frozen: their gradient is dropped)
    memset(dh, 0, (size_t)n * C * sizeof(float));
    layernorm_backward(dh, et->scratch, et->scratch + C, et->d_ln, h, target->w.ln_f_weight,
                       n, C);
#ifdef BREAK_EAGLE_BACKWARD
    (void)f; // test-only build: drops the regression's term, so the gradient check must fail
    return;
#endif
    // SmoothL1's derivative: d inside |d| < 1, sign(d) outside; row i's target is f_{i+1}
    float k = EAGLE_W_REG * scale / (float)C; // the mean over C features
    for (size_t i = 0; i < (size_t)n * C; i++) {
        float d = h[i] - f[C + i];
        dh[i] += k * (d > 1.0f ? 1.0f : d < -1.0f ? -1.0f : d);
    }
}

// Adds scale times the gradient of window b's loss (after eagle_train_forward on all S rows)
// into et->fc_grad and the block's gradients (ts.dw); ts.wt must hold the block's
// matrices transposed (eagle_train_prepare).
void eagle_train_backward(EagleTrainer *et, const GPT *target, int b, float scale) {
    int C = et->C, n = et->S - 1; // a training window's S-1 rows
    size_t SC = (size_t)n * C; // one window's slice of the caches
    eagle_train_head_backward(et, target, b, scale); // dLoss/dh into ts.d_resid
    block_backward(&et->bc, &et->block.w, &et->ts, 0, &et->ts.blocks[b], et->ts.key + b * SC,
                   et->ts.value + b * SC);
    // fc: only its parameters learn (the features and the embedding are the target's)
    float *cat = et->cat + (size_t)b * n * 2 * C; // window b's fc inputs
    matmul_backward(NULL, et->fc_grad, et->fc_grad + (size_t)2 * C * C, et->ts.d_resid, cat,
                    NULL, n, 2 * C, C);
}

// Zeroes the gradients and transposes the block's matrices, before a step's backward.
void eagle_train_prepare(EagleTrainer *et) {
    memset(et->ts.grads, 0, et->block.n_params * sizeof(float));
    memset(et->fc_grad, 0, (size_t)(2 * et->C + 1) * et->C * sizeof(float));
    transpose_matrices(&et->bc, &et->block.w, &et->ts.wt); // block_backward reads wt
    if (et->n_feat != 3) return;
    // EAGLE-3: fuse learns, and fc's input gradient reaches the fed-back h
    memset(et->fuse_grad, 0, (size_t)(3 * et->C + 1) * et->C * sizeof(float));
    transpose(et->fc_t, et->fc, 2 * et->C, et->C);
}

// ----------------------------------------------------------------------------
// EAGLE-3's training: the target's three rows, the unrolled steps, their gradient

// The target's rows of window b's T tokens for EAGLE-3: f and p (eagle_train_targets), the
// rows after blocks low and mid, and the fused rows g = fuse([r_low, r_mid, f]).
void eagle3_train_targets(EagleTrainer *et, GPT *target, const int *tokens, int T, int b) {
    int C = et->C, layers[2] = {et->low, et->mid};
    size_t S = et->S;
    float *in = et->fused_in + (size_t)b * S * 3 * C;
    eagle_train_targets(et, target, tokens, T, b); // f (the top row) and p
    const float *f = et->feat + (size_t)b * S * C;
    // the lower rows: forward with n_layer lowered, as the exit's trainer reads them
    for (int k = 0; k < 2; k++) {
        exit_target_residual(target, tokens, T, layers[k], et->tap);
        for (int t = 0; t < T; t++)
            memcpy(in + (size_t)t * 3 * C + k * C, et->tap + (size_t)t * C, C * sizeof(float));
    }
    for (int t = 0; t < T; t++)
        memcpy(in + (size_t)t * 3 * C + 2 * C, f + (size_t)t * C, C * sizeof(float));
    matmul(et->g + (size_t)b * S * C, in, (Linear){et->fuse, et->fuse + (size_t)3 * C * C,
                                                   3 * C, C}, T);
}

// The target's rows of a window, as the draft's kind reads them (EAGLE or EAGLE-3).
static void eagle_train_window_targets(EagleTrainer *et, GPT *target, const int *tokens, int T,
                                 int b) {
    if (et->n_feat == 3)
        eagle3_train_targets(et, target, tokens, T, b);
    else
        eagle_train_targets(et, target, tokens, T, b);
}

// EAGLE-3's rows of window b (a whole window of S tokens, after eagle3_train_targets): step by
// step fc and the masked block, then the target's ln_f and lm_head on every row. Step 1
// reads g_i, step k > 1 its chain's h of step k-1. Returns the summed soft cross-entropy.
double eagle3_train_forward(EagleTrainer *et, const GPT *target, const int *tokens, int b) {
    int C = et->C, V = et->V, R = et->rows, n = et->S - 1;
    const float *g = et->g + (size_t)b * et->S * C, *p = et->p + (size_t)b * et->S * V;
    float *cat = et->cat + (size_t)b * R * 2 * C, *lnf = et->lnf + (size_t)b * R * C;
    BlockActs *a = &et->ts.blocks[b]; // window b's record: every step's rows
    Linear fc = {et->fc, et->fc + (size_t)2 * C * C, 2 * C, C};
    // step k's n-k+1 rows at once: their inputs are the rows step k-1 just made
    for (int k = 1, t0 = 0; k <= et->steps; t0 += n - k + 1, k++) {
        int T = n - k + 1;
        for (int r = t0; r < t0 + T; r++) {
            const float *h = et->from[r] < 0 ? g + (size_t)et->chain[r] * C :
                             a->x_out + (size_t)et->from[r] * C;
            eagle_fc_input(cat + (size_t)r * 2 * C, h, target, tokens[et->at[r]], C);
        }
        matmul(a->x_in + (size_t)t0 * C, cat + (size_t)t0 * 2 * C, fc, T);
        eagle3_train_block_forward(et, a, t0, T);
    }
    // every row through the target's frozen ln_f and lm_head, judged against p_at
    layernorm(lnf, a->x_out, target->w.ln_f_weight, target->w.ln_f_bias, R, C);
    matmul(et->logits, lnf, (Linear){target->w.lm_head_weight, target->w.lm_head_bias, C, V}, R);
    double loss = 0.0;
    for (int r = 0; r < R; r++)
        loss += soft_cross_entropy(et->logits + (size_t)r * V, V, p + (size_t)et->at[r] * V,
                                   et->q + ((size_t)b * R + r) * V);
    return loss;
}

// The backward of eagle3_train_attention for rows t0 .. t0+T-1: into ts.d_q of those rows and
// ts.d_k, ts.d_v of every row they saw (accumulated: later steps' rows see earlier ones).
static void eagle3_train_attention_backward(EagleTrainer *et, const BlockActs *a, int t0, int T) {
    TrainState *ts = &et->ts;
    int C = et->C, NH = et->bc.n_head, R = et->rows, HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS), *da = ts->d_weights; // da: (R)
    for (int h = 0; h < NH; h++)
        for (int t = t0; t < t0 + T; t++) {
            const float *w = a->att + ((size_t)h * R + t) * R;
            const unsigned char *sees = et->sees + (size_t)t * R;
            const float *dy = ts->d_att_out + (size_t)t * C + h * HS;
            // through the weighted sum: da for every weight, dv for every value
            float da_dot_w = 0.0f;
            for (int s = 0; s < R; s++) {
                if (!sees[s]) continue;
                const float *vh = a->values + (size_t)s * C + h * HS;
                float *dvh = ts->d_v + (size_t)s * C + h * HS;
                da[s] = 0.0f;
                for (int i = 0; i < HS; i++) da[s] += dy[i] * vh[i];
                for (int i = 0; i < HS; i++) dvh[i] += w[s] * dy[i];
                da_dot_w += da[s] * w[s];
            }
            // through the softmax to the scores, then to the query and each key
            const float *qh = a->q + (size_t)t * C + h * HS;
            float *dqh = ts->d_q + (size_t)t * C + h * HS;
            for (int s = 0; s < R; s++) {
                if (!sees[s]) continue;
                float gs = w[s] * (da[s] - da_dot_w) * scale;
                const float *kh = a->keys + (size_t)s * C + h * HS;
                float *dkh = ts->d_k + (size_t)s * C + h * HS;
                for (int i = 0; i < HS; i++) dkh[i] += gs * qh[i];
                for (int i = 0; i < HS; i++) dqh[i] += gs * kh[i];
            }
        }
}

// train.c's block_backward for rows t0 .. t0+T-1 of window b: ts.d_resid's rows hold
// dLoss/dx_out on entry and dLoss/dx_in on return. Their keys' and values' gradients must be
// whole (every later step done); the weights' gradients accumulate into ts.dw.
static void eagle3_train_block_backward(EagleTrainer *et, int b, int t0, int T) {
    TrainState *ts = &et->ts;
    const BlockActs *a = &ts->blocks[b];
    const Weights *w = &et->block.w, *wt = &ts->wt;
    Weights *dw = &ts->dw;
    int C = et->C, H = et->bc.ffn_width;
    size_t o = (size_t)t0 * C, oh = (size_t)t0 * H, TC = (size_t)T * C;
    float *dres = ts->d_resid + o, *dmid = ts->d_mid + o, *dhid = ts->d_hidden + oh;
    float *dln2 = ts->d_ln2 + o, *datt = ts->d_att_out + o, *dln1 = ts->d_ln1 + o;
    // x_out = x_mid + ffwd(ln2(x_mid))
    memcpy(dmid, dres, TC * sizeof(float));
    memset(dhid, 0, (size_t)T * H * sizeof(float));
    matmul_backward(dhid, dw->ffwd_down_weight, dw->ffwd_down_bias, dres, a->hidden + oh,
                    wt->ffwd_down_weight, T, H, C);
    relu_backward(dhid, a->hidden + oh, (size_t)T * H);
    memset(dln2, 0, TC * sizeof(float));
    matmul_backward(dln2, dw->ffwd_up_weight, dw->ffwd_up_bias, dhid, a->ln2 + o,
                    wt->ffwd_up_weight, T, C, H);
    layernorm_backward(dmid, dw->ln2_weight, dw->ln2_bias, dln2, a->x_mid + o, w->ln2_weight,
                       T, C);
    // x_mid = x_in + proj(attn(ln1(x_in)))
    memcpy(dres, dmid, TC * sizeof(float));
    memset(datt, 0, TC * sizeof(float));
    matmul_backward(datt, dw->proj_weight, dw->proj_bias, dmid, a->att_out + o,
                    wt->proj_weight, T, C, C);
    memset(ts->d_q + o, 0, TC * sizeof(float));
    eagle3_train_attention_backward(et, a, t0, T);
    // query, key and value of these rows all read ln1's output
    memset(dln1, 0, TC * sizeof(float));
    matmul_backward(dln1, dw->query, NULL, ts->d_q + o, a->ln1 + o, wt->query, T, C, C);
    matmul_backward(dln1, dw->key, NULL, ts->d_k + o, a->ln1 + o, wt->key, T, C, C);
    matmul_backward(dln1, dw->value, NULL, ts->d_v + o, a->ln1 + o, wt->value, T, C, C);
    layernorm_backward(dres, dw->ln1_weight, dw->ln1_bias, dln1, a->x_in + o, w->ln1_weight,
                       T, C);
}

// Adds scale times the gradient of window b's EAGLE-3 loss (after eagle3_train_forward) into
// fc_grad, fuse_grad and the block's gradients; needs eagle_train_prepare's transposes.
// The steps go last to first: step k's input h gets its gradient from step k+1's fc.
void eagle3_train_backward(EagleTrainer *et, const GPT *target, int b, float scale) {
    TrainState *ts = &et->ts;
    int C = et->C, V = et->V, R = et->rows, n = et->S - 1;
    const float *p = et->p + (size_t)b * et->S * V, *q = et->q + (size_t)b * R * V;
    const float *cat = et->cat + (size_t)b * R * 2 * C;
    // every row's cross-entropy: dz = q - p_at, through lm_head and ln_f into d_resid
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++)
            ts->d_logits[(size_t)r * V + v] = scale * (q[(size_t)r * V + v] -
                                                       p[(size_t)et->at[r] * V + v]);
    memset(et->d_ln, 0, (size_t)R * C * sizeof(float));
    gemm_acc(et->d_ln, ts->d_logits, V, 1, et->lm_t, R, V, C);
    memset(ts->d_resid, 0, (size_t)R * C * sizeof(float));
    layernorm_backward(ts->d_resid, et->scratch, et->scratch + C, et->d_ln,
                       ts->blocks[b].x_out, target->w.ln_f_weight, R, C);
    memset(ts->d_k, 0, (size_t)R * C * sizeof(float)); // summed over every step's rows
    memset(ts->d_v, 0, (size_t)R * C * sizeof(float));
    // steps K .. 1: the block, fc, then the gradient of the h (or g) the step read
    for (int k = et->steps; k >= 1; k--) {
        int T = n - k + 1, t0 = eagle_train_rows_of(et->S, k - 1); // step k's rows
        eagle3_train_block_backward(et, b, t0, T);
        memset(et->d_cat, 0, (size_t)T * 2 * C * sizeof(float));
        matmul_backward(et->d_cat, et->fc_grad, et->fc_grad + (size_t)2 * C * C,
                        ts->d_resid + (size_t)t0 * C, cat + (size_t)t0 * 2 * C, et->fc_t, T,
                        2 * C, C);
        // the feature half of fc's input gradient: to step k-1's h, or step 1's g
        for (int r = t0; r < t0 + T; r++) {
            const float *dh = et->d_cat + (size_t)(r - t0) * 2 * C;
            float *to = et->from[r] >= 0 ? ts->d_resid + (size_t)et->from[r] * C :
                        et->d_ln + (size_t)et->chain[r] * C;
#ifdef BREAK_EAGLE3_BACKWARD
            if (et->from[r] >= 0) continue; // test-only: the fed-back h gets no gradient
#endif
            for (int c = 0; c < C; c++) to[c] = et->from[r] >= 0 ? to[c] + dh[c] : dh[c];
        }
    }
    // fuse: only its parameters learn (the target's rows are frozen)
    matmul_backward(NULL, et->fuse_grad, et->fuse_grad + (size_t)3 * C * C, et->d_ln,
                    et->fused_in + (size_t)b * et->S * 3 * C, NULL, n, 3 * C, C);
}

// The i-th float of et's file: fuse (nfuse floats, EAGLE-3), fc (up to nfc), the block.
static float *eagle_train_float(const EagleTrainer *et, size_t i, size_t nfuse, size_t nfc) {
    if (i < nfuse) return &et->fuse[i];
    if (i < nfc) return &et->fc[i - nfuse];
    return &et->block.params[et->off + i - nfc];
}

// Writes et's draft, trained on target, to path atomically in beyond.c's EAGLE format, if
// every float is finite.
int save_eagle_head(const EagleTrainer *et, const GPT *target, const char *path, char *err,
                    size_t errlen) {
    size_t nfuse = et->n_feat == 3 ? (size_t)(3 * et->C + 1) * et->C : 0; // EAGLE-3's first
    size_t nfc = nfuse + (size_t)(2 * et->C + 1) * et->C, P = nfc + et->n;
    // its three parts in the file's order, fuse (EAGLE-3), fc, the block: i counts the
    // finite floats before the first that is not, as the file numbers them
    size_t i = finite_prefix(et->fuse, nfuse);
    if (i == nfuse) i += finite_prefix(et->fc, nfc - nfuse);
    if (i == nfc) i += finite_prefix(et->block.params + et->off, et->n);
    if (i < P) return refuse_float("eagle draft", path, i, err, errlen);
    size_t n = EAGLE_HEADER + 4 * P + 8; // header, floats, checksum
    unsigned char *buf = malloc(n); // NULL: write_file_atomic says out of memory
    uint32_t L = (uint32_t)target->config.n_layer, three = et->n_feat == 3;
    if (buf) {
        // header: the top feature (n_layer, 0, 0) or three rows (low, mid, n_layer), the sizes
        uint32_t head[10] = {EAGLE_VERSION, three ? 3 : 1, three ? (uint32_t)et->low : L,
                             three ? (uint32_t)et->mid : 0, three ? L : 0,
                             (uint32_t)et->C, (uint32_t)et->V, (uint32_t)et->bc.ffn_width,
                             (uint32_t)et->bc.n_head, 0};
        memcpy(buf, EAGLE_MAGIC, 4); // "SPDE"
        for (int i = 0; i < 9; i++) put_u32(buf + 4 + 4 * i, head[i]); // offsets 4 .. 39
        put_u64(buf + 40, target_fingerprint(target)); // the draft fits this target only
        // the floats: EAGLE-3's fuse, fc_weight and fc_bias, then the block's 13 tensors
        for (size_t i = 0; i < P; i++) { // fuse, fc, then the block, in checkpoint order
            const float *x = eagle_train_float(et, i, nfuse, nfc);
            uint32_t bits;
            memcpy(&bits, x, 4);
            put_u32(buf + EAGLE_HEADER + 4 * i, bits);
        }
        put_u64(buf + n - 8, fnv1a64(buf, n - 8));
    }
    return write_file_atomic(path, buf, n, "eagle draft", err, errlen);
}

// Reads an EAGLE file written by save_eagle_head for target into et (allocated for the
// same target), checking size, magic, version, the header's fields, fingerprint and
// checksum. beyond.c has the runtime's loader; this one is for eagle-eval.
int read_eagle_head(EagleTrainer *et, const GPT *target, const char *path, char *err,
                    size_t errlen) {
    size_t nfuse = et->n_feat == 3 ? (size_t)(3 * et->C + 1) * et->C : 0; // EAGLE-3's first
    size_t n = 0, nfc = nfuse + (size_t)(2 * et->C + 1) * et->C;
    size_t want = EAGLE_HEADER + 4 * (nfc + et->n) + 8; // the only size a good file has
    uint32_t L = (uint32_t)target->config.n_layer, three = et->n_feat == 3;
    unsigned char *buf = read_file(path, &n, "eagle draft", "make train-eagle writes "
                                   DEFAULT_EAGLE, err, errlen);
    if (!buf) return -1;
    int fields_ok = n == want && get_u32(buf + 8) == (three ? 3u : 1u) &&
                    get_u32(buf + 12) == (three ? (uint32_t)et->low : L) &&
                    get_u32(buf + 16) == (three ? (uint32_t)et->mid : 0) &&
                    get_u32(buf + 20) == (three ? L : 0) &&
                    get_u32(buf + 32) == (uint32_t)et->bc.ffn_width &&
                    get_u32(buf + 36) == (uint32_t)et->bc.n_head;
    const char *why = n != want ? "wrong size (truncated, or for another model)" :
        memcmp(buf, EAGLE_MAGIC, 4) ? "wrong magic (not an EAGLE draft)" :
        get_u32(buf + 4) != EAGLE_VERSION ? "unknown version" :
        !fields_ok ? "a header field does not fit (the rows it reads, the target's sizes)" :
        get_u64(buf + 40) != target_fingerprint(target) ? "trained for another target" :
        fnv1a64(buf, n - 8) != get_u64(buf + n - 8) ? "checksum mismatch (corrupted)" : NULL;
    if (why) snprintf(err, errlen, "eagle draft '%s': %s; make train-eagle writes one for %s, "
                      "tinyshakespeare/train eagle -m MODEL for another", path, why, DEFAULT_MODEL);
    // the floats, bit for bit, where save_eagle_head took them
    for (size_t i = 0; !why && i < nfc + et->n; i++) {
        uint32_t bits = get_u32(buf + EAGLE_HEADER + 4 * i);
        memcpy(eagle_train_float(et, i, nfuse, nfc), &bits, 4);
    }
    free(buf);
    return why ? -1 : 0;
}

// One draft row at position pos, on top of the block's cache (rows 0 .. pos-1, from earlier
// calls): fc([f, E[token]]), the block, ln_f and lm_head. Returns h (C), in ts's record of
// window 0; the logits go to et->logits (V). f may be the h an earlier call returned.
const float *eagle_eval_row(EagleTrainer *et, const GPT *target, const float *f, int token,
                        int pos) {
    int C = et->C, V = et->V; // the target's sizes
    BlockActs *a = &et->ts.blocks[0]; // window 0's record, reused row by row
    eagle_fc_input(et->cat, f, target, token, C); // copied before the block overwrites h
    matmul(a->x_in, et->cat, (Linear){et->fc, et->fc + (size_t)2 * C * C, 2 * C, C}, 1);
    block_forward(&et->bc, &et->block.w, 0, a, 1, pos); // one row on the cache
    layernorm(et->lnf, a->x_out, target->w.ln_f_weight, target->w.ln_f_bias, 1, C);
    Linear lm_head = {target->w.lm_head_weight, target->w.lm_head_bias, C, V};
    matmul(et->logits, et->lnf, lm_head, 1);
    return a->x_out;
}

// What eagle_eval_split measures, by depth d = 1 .. EAGLE_EVAL_DEPTH (index d-1).
typedef struct {
    double alpha[EAGLE_EVAL_DEPTH]; // mean sum_x min(p(x), q(x)) at t = 1
    double agree[EAGLE_EVAL_DEPTH]; // share of argmax q == argmax p
    double soft[EAGLE_EVAL_DEPTH];  // mean cross-entropy against the target's row p
    double loss[EAGLE_EVAL_DEPTH];  // mean cross-entropy on the true token
    double ferr[EAGLE_EVAL_DEPTH];  // mean over positions and features of (h - f)^2
    size_t n[EAGLE_EVAL_DEPTH];     // positions scored
    double fsq;                // mean of f^2 over the target's features: the error's scale
    size_t nf;                 // features counted in fsq
} EagleEval;

// Scores depth d's guess at row i of window 0 (h and et->logits from eagle_eval_row) against
// the target's feature and row at i+d and the true token y.
static void eagle_eval_score(EagleEval *e, const EagleTrainer *et, const float *h, int i,
                             int d, int y) {
    int C = et->C, V = et->V, k = d - 1; // slot k holds depth d
    const float *f = et->feat + (size_t)(i + d) * C, *p = et->p + (size_t)(i + d) * V;
    float q[256];
    e->loss[k] += cross_entropy(et->logits, V, y, q);
    e->soft[k] += soft_cross_entropy(et->logits, V, p, NULL); // the training CE
    e->alpha[k] += expected_acceptance(p, q, V);
    e->agree[k] += argmax(q, V) == argmax(p, V);
    for (int c = 0; c < C; c++) e->ferr[k] += ((double)h[c] - f[c]) * ((double)h[c] - f[c]) / C;
    e->n[k]++; // one more position at this depth
}

// Measures the draft over tokens[0..n) in eval_medusa's windows (consecutive, up to S tokens
// with a next one, each from an empty cache). At row i, depth 1 reads the true f_i and x_{i+1}
// and guesses x_{i+2} (judged against p_{i+1}); depth d feeds back its own last h with the
// true x_{i+d}, at position i+d-1, and is judged against p_{i+d}: the guess EAGLE's tree makes
// once the d-1 before it were accepted. Row i's depth-1 pass rewrites cache row i, so the
// rows later depths left there never reach a later i.
void eagle_eval_split(EagleTrainer *et, GPT *target, const int *tokens, size_t n, EagleEval *e) {
    int S = et->S; // the target's block_size
    memset(e, 0, sizeof(*e));
    for (size_t start = 0; start + 1 < n; start += (size_t)S) {
        int T = n - 1 - start < (size_t)S ? (int)(n - 1 - start) : S; // the last may be short
        const int *w = tokens + start;
        eagle_train_window_targets(et, target, w, T, 0); // f, p (and g) of this window, in slot 0
        for (size_t i = 0; i < (size_t)T * et->C; i++) e->fsq += (double)et->feat[i] * et->feat[i];
        e->nf += (size_t)T * et->C; // the features summed into fsq
        // every row, then its chain of own features, while the target has a row to judge by
        for (int i = 0; i + 1 < T; i++) {
            // depth 1 reads the top feature (EAGLE) or the fused row (EAGLE-3)
            const float *h = (et->n_feat == 3 ? et->g : et->feat) + (size_t)i * et->C;
            for (int d = 1; d <= EAGLE_EVAL_DEPTH && i + d < T; d++) {
                h = eagle_eval_row(et, target, h, w[i + d], i + d - 1);
                eagle_eval_score(e, et, h, i, d, w[i + d + 1]);
            }
        }
    }
    // sums to means
    e->fsq /= e->nf ? (double)e->nf : 1.0; // the scale of the feature error
    for (int k = 0; k < EAGLE_EVAL_DEPTH; k++) {
        double m = e->n[k] ? (double)e->n[k] : 1.0;
        e->alpha[k] /= m;
        e->agree[k] /= m;
        e->soft[k] /= m;
        e->loss[k] /= m;
        e->ferr[k] /= m;
    }
}

// Prints eagle_eval_split's figures (stderr) for a draft of n_feat rows: a line per depth.
static void print_eagle_eval(const EagleEval *e, const char *when, double secs, int n_feat) {
    fprintf(stderr, "%s: %s on the whole validation split (%.1f s); mean f^2 of the target's "
            "features %.4f\n", when, n_feat == 3 ? "EAGLE-3" : "EAGLE", secs, e->fsq);
    for (int k = 0; k < EAGLE_EVAL_DEPTH; k++) {
        if (!e->n[k]) { // eagle_inputs saw to the corpus: only a short window leaves none
            fprintf(stderr, "  depth %d: no position (it needs windows of %d rows: a larger "
                    "block_size)\n", k + 1, k + 2);
            continue;
        }
        fprintf(stderr, "  depth %d: alpha %.4f, greedy agreement %.4f, loss against the target "
                "%.4f, val loss %.4f, feature error (h - f)^2 %.4f (%zu positions)\n", k + 1,
                e->alpha[k], e->agree[k], e->soft[k], e->loss[k], e->ferr[k], e->n[k]);
    }
}

// 0 if eagle_eval_split's figures are all finite numbers (a NaN or inf in the target's rows
// or the draft's floats makes them NaN); -1 if one is not.
static int eagle_eval_finite(const EagleEval *e) {
    double sum = e->fsq; // NaN or inf anywhere makes the sum NaN or inf
    for (int k = 0; k < EAGLE_EVAL_DEPTH; k++)
        sum += e->alpha[k] + e->agree[k] + e->soft[k] + e->loss[k] + e->ferr[k];
    return isfinite(sum) ? 0 : -1;
}

// What `tinyshakespeare/train eagle` is asked to do.
typedef struct {
    int iters;     // Adam steps                                  e.g. 6000
    int batch;     // windows of S tokens per step, B              e.g. 16
    uint64_t seed; // the initialisation and the batch sampler     e.g. 2
    EagleShape shape; // EAGLE, or EAGLE-3 (--eagle3, --taps LOW,MID, --steps K)
    int asked;     // which of --eagle3 (1), --taps (2), --steps (4) were given
} EagleOptions;

// One training step over B random windows of the training split: the loss (returned, summed
// over the rows), its gradient as a mean over the B*(S-1) rows, one Adam step of each part
// (none if the loss is not a finite number).
static double eagle_train_step(EagleTrainer *et, GPT *target, const Corpus *corpus, Rng *rng,
                               AdamW *opt) {
    int S = et->S;
    size_t starts = corpus->n_train - (size_t)S, nfc = (size_t)(2 * et->C + 1) * et->C;
    double loss = 0.0;
    float scale = 1.0f / ((float)et->B * et->rows); // the mean over every draft row
    eagle_train_prepare(et); // zero gradients, transposed matrices
    // each window: the target's rows, the draft's, the backward
    for (int b = 0; b < et->B; b++) {
        const int *w = corpus->tokens + rng_u64(rng) % starts; // drawn as get_batch draws
        eagle_train_window_targets(et, target, w, S, b); // the frozen target
        if (et->n_feat == 3) { // the unrolled steps, the cross-entropy alone
            loss += eagle3_train_forward(et, target, w, b);
            eagle3_train_backward(et, target, b, scale);
            continue;
        }
        loss += eagle_train_forward(et, target, w, S, b); // the draft, kept for the backward
        eagle_train_backward(et, target, b, scale);
    }
    // NaN or inf (the target's rows) would reach every float at the update: none is made,
    // and the caller stops the run
    if (!isfinite(loss)) return loss;
    adamw_update(&opt[0], et->fc, et->fc_grad, nfc); // fc
    adamw_update(&opt[1], et->block.params + et->off, et->ts.grads + et->off, et->n);
    if (et->n_feat == 3) // EAGLE-3's fuse
        adamw_update(&opt[2], et->fuse, et->fuse_grad, (size_t)(3 * et->C + 1) * et->C);
    return loss;
}

// Trains et on the training split, the target frozen: each step B random windows of S
// tokens, Adam (lr EAGLE_LR, no weight decay) on fc and the block. Progress on stderr every
// 100 steps. 0, or -1 with err set (out of memory, or a loss that is not a finite number).
int train_eagle(EagleTrainer *et, GPT *target, const Corpus *corpus, const EagleOptions *o,
                char *err, size_t errlen) {
    size_t nfc = (size_t)(2 * et->C + 1) * et->C; // fc_weight and fc_bias
    size_t nfuse = et->n_feat == 3 ? (size_t)(3 * et->C + 1) * et->C : 1; // EAGLE-3's fuse
    AdamW opt[3] = {{EAGLE_LR, 0.9f, 0.999f, 1e-8f, 0.0f, alloc_floats(nfc), alloc_floats(nfc), 0},
                    {EAGLE_LR, 0.9f, 0.999f, 1e-8f, 0.0f, alloc_floats(et->n),
                     alloc_floats(et->n), 0},
                    {EAGLE_LR, 0.9f, 0.999f, 1e-8f, 0.0f, alloc_floats(nfuse),
                     alloc_floats(nfuse), 0}};
    int ok = opt[0].m && opt[0].v && opt[1].m && opt[1].v && opt[2].m && opt[2].v;
    if (!ok)
        fail_with(err, errlen, "out of memory for the EAGLE draft's Adam moments (%.1f MB)",
                  8.0 * (nfc + et->n + nfuse) / 1e6);
    Rng rng;
    rng_seed(&rng, o->seed);
    double t_start = now_seconds(), t_log = t_start, recent = 0.0;
    for (int it = 0; ok && it < o->iters; it++) {
        double loss = eagle_train_step(et, target, corpus, &rng, opt); // summed over rows
        if (!isfinite(loss)) { // the step made no update; the run stops, writing nothing
            ok = target_loss_nonfinite(err, errlen, it + 1) == 0;
            break;
        }
        recent += loss;
        // progress: the mean loss per row since the last line, speed, time left
        if ((it + 1) % 100 == 0) {
            double now = now_seconds(), ms = 1e3 * (now - t_log) / 100.0;
            fprintf(stderr, "step %5d: train loss %.4f, %.1f ms/step, ETA %.0f s\n", it + 1,
                    recent / (100.0 * et->B * et->rows), ms, ms * (o->iters - it - 1) / 1e3);
            recent = 0.0;
            t_log = now;
        }
    }
    target->state.cache_len = 0;
    if (ok) fprintf(stderr, "trained %d steps in %.1f s\n", o->iters, now_seconds() - t_start);
    for (int k = 0; k < 3; k++) {
        free(opt[k].m);
        free(opt[k].v);
    }
    return ok ? 0 : -1;
}

// `train eagle`'s EAGLE-3 flag a (value val) into o: --eagle3, --taps LOW,MID, --steps K.
// Returns how many arguments it took (0: not one of them), or -1 after one line.
static int eagle3_flag(const char *a, const char *val, EagleOptions *o) {
    if (!strcmp(a, "--eagle3")) {
        o->asked |= 1;
        o->shape.n_feat = 3;
        return 1;
    }
    int taps = !strcmp(a, "--taps"), steps = !strcmp(a, "--steps");
    if (!taps && !steps) return 0;
    if (!val) {
        error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
        return -1;
    }
    // --taps LOW,MID: two whole numbers, checked against the model once it is loaded
    uint64_t v, w;
    char low[16];
    const char *comma = strchr(val, ',');
    size_t len = comma ? (size_t)(comma - val) : 0;
    if (len > 0 && len < sizeof(low)) {
        memcpy(low, val, len);
        low[len] = '\0';
    }
    int ok = taps ? len > 0 && len < sizeof(low) && parse_whole(low, 1, 1000, &v) == 0 &&
                    parse_whole(comma + 1, 1, 1000, &w) == 0
                  : parse_whole(val, 1, 4, &v) == 0;
    if (!ok) {
        error_line(taps ? "--taps must be two block counts LOW,MID (e.g. 1,2), got '%s'" :
                   "--steps must be a whole number from 1 to 4, got '%s'", val);
        return -1;
    }
    o->asked |= taps ? 2 : 4;
    o->shape.low = taps ? (int)v : o->shape.low;
    o->shape.mid = taps ? (int)w : o->shape.mid;
    o->shape.steps = taps ? o->shape.steps : (int)v;
    return 2;
}

// The flags of `train eagle` and `train eagle-eval` into o and the paths (paths[0] the model,
// [1] the corpus, [2] the draft to read, [3] the file to write). 0, or -1 after one line.
static int eagle_flags(int argc, char **argv, int eval_only, EagleOptions *o, const char **paths) {
    const char *cmd = argv[1], *takes = eval_only ? "-m, -E and -i" :
                      "--iters, --batch, --seed, --eagle3, --taps, --steps, -m, -i and -o";
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        // EAGLE-3: --eagle3 takes no value, --taps and --steps one each
        int e3 = eval_only ? 0 : eagle3_flag(a, val, o);
        if (e3 < 0) return -1;
        if (e3 > 0) {
            i += e3 - 2; // past the flag and its value, if any
            continue;
        }
        int slot = !strcmp(a, "-m") ? 0 : !strcmp(a, "-i") ? 1 : -1;
        if (eval_only && !strcmp(a, "-E")) slot = 2; // the draft to measure
        if (!eval_only && !strcmp(a, "-o")) slot = 3;
        int *whole = eval_only ? NULL : !strcmp(a, "--iters") ? &o->iters :
                     !strcmp(a, "--batch") ? &o->batch : NULL;
        int seed = !eval_only && !strcmp(a, "--seed");
        if (slot < 0 && !whole && !seed) {
            error_line("unknown %s option '%s' (%s takes %s)", cmd, a, cmd, takes);
            return -1;
        }
        if (!val) {
            error_line("option %s needs a value (see tinyshakespeare/train -h)", a);
            return -1;
        }
        // the value, checked in full
        uint64_t v;
        if (whole && parse_whole(val, 1, whole == &o->batch ? 4096 : 10000000, &v) != 0) {
            error_line("%s must be a whole number from 1 to %d, got '%s'", a,
                       whole == &o->batch ? 4096 : 10000000, val);
            return -1;
        }
        if (seed && parse_whole(val, 0, UINT64_MAX, &o->seed) != 0) {
            error_line("--seed must be a non-negative whole number, got '%s'", val);
            return -1;
        }
        if (whole) *whole = (int)v; // in range, as parse_whole checked
        if (slot >= 0) paths[slot] = val;
    }
    return 0;
}

// Loads the target and the corpus for `train eagle`/`eagle-eval` and checks they fit an EAGLE
// draft (the trainer's block backward needs the lecture's MLP, H = 4C); -1 with err set.
static int eagle_inputs(GPT *g, Corpus *corpus, const char **paths, char *err, size_t errlen) {
    Vocab v;
    if (load_checkpoint(paths[0], g, &v, err, errlen) != 0) return -1;
    if (load_corpus(corpus, paths[1], &v, err, errlen) != 0) return -1;
    if (g->config.ffn_width != 4 * g->config.n_embd)
        return fail_with(err, errlen, "model '%s' has ffn_width %d, not 4 x n_embd: the "
                         "trainer's block backward needs the lecture's MLP; give -m a model "
                         "train wrote", paths[0], g->config.ffn_width);
    int S = g->config.block_size;
    if (corpus->n_train <= (size_t)S)
        return fail_with(err, errlen, "corpus '%s' is too short for EAGLE on a model of "
                         "block_size %d; use Tiny Shakespeare (make data)", paths[1], S);
    // depth d scores row i of a window against the target's row i+d, so it needs windows of
    // d+1 rows with a next token: every depth a window of S rows holds must get a position,
    // or its figures would read 0 over nothing (the deeper ones print as having none)
    int depths = S - 1 < EAGLE_EVAL_DEPTH ? S - 1 : EAGLE_EVAL_DEPTH;
    if (val_tokens(corpus) < (size_t)depths + 2)
        return fail_with(err, errlen, "corpus '%s': its validation split of %zu tokens gives "
                         "depth %d no position to score (depths 1 to %d need %d); use a longer "
                         "corpus (make data)", paths[1], val_tokens(corpus),
                         (int)val_tokens(corpus) - 1, depths, depths + 2);
    return 0;
}

// Completes sh for target: EAGLE's top feature, or EAGLE-3's rows checked against its
// n_layer. With path (eagle-eval) the shape is the file's own when it holds an EAGLE-3 draft
// (read_eagle_head checks the rest). 0, or -1 with err set.
static int eagle_train_shape(EagleShape *sh, const GPT *target, const char *path, char *err,
                       size_t errlen) {
    int L = target->config.n_layer;
    unsigned char head[24] = {0};
    FILE *f = path ? fopen(path, "rb") : NULL;
    // eagle-eval: the header's n_feat and rows, if it is an EAGLE file at all
    if (f) {
        size_t got = fread(head, 1, sizeof(head), f);
        fclose(f);
        int three = got == sizeof(head) && !memcmp(head, EAGLE_MAGIC, 4) && get_u32(head + 8) == 3;
        *sh = three ? (EagleShape){3, (int)get_u32(head + 12), (int)get_u32(head + 16), 1} :
              (EagleShape){1, L, 0, 1};
        if (!three) return 0;
    }
    if (path && !f) *sh = (EagleShape){1, L, 0, 1}; // read_eagle_head says why it cannot
    if (sh->n_feat == 1) {
        sh->low = L; // the top feature alone
        sh->mid = 0;
        sh->steps = 1;
        return 0;
    }
    if (sh->low < 1 || sh->low >= sh->mid || sh->mid >= L)
        return fail_with(err, errlen, "EAGLE-3 reads the rows after blocks %d and %d and the "
                         "top one: they must rise, 1 <= LOW < MID < %d (the model's n_layer)",
                         sh->low, sh->mid, L);
    if (eagle_train_rows_of(target->config.block_size, sh->steps) > EAGLE3_MAX_ROWS)
        return fail_with(err, errlen, "EAGLE-3 with %d steps on block_size %d: more than %d "
                         "rows a window", sh->steps, target->config.block_size, EAGLE3_MAX_ROWS);
    return 0;
}

// `tinyshakespeare/train eagle [--iters N] [--batch 16] [--seed 2] [-m MODEL] [-i CORPUS]
// [-o PATH]` trains an EAGLE draft and writes it; `train eagle-eval [-m MODEL] [-E PATH]
// [-i CORPUS]` measures one. Returns the exit status; every bad input is one line on stderr.
int main_eagle(int argc, char **argv, int eval_only) {
    // 6000 steps, 16 windows, seed 2; EAGLE-3's defaults: rows after blocks 1 and 2, 3 steps
    EagleOptions o = {6000, 16, 2, {1, 1, 2, 3}, 0};
    const char *paths[4] = {DEFAULT_MODEL, DEFAULT_CORPUS, DEFAULT_EAGLE, EAGLE_OUT};
    if (eagle_flags(argc, argv, eval_only, &o, paths) != 0) return 1;
    if (o.asked == 2 || o.asked == 4 || o.asked == 6) {
        error_line("--taps and --steps shape an EAGLE-3 draft: give --eagle3 too");
        return 1;
    }
    char err[512];
    GPT g;
    Corpus corpus;
    EagleTrainer et;
    memset(&g, 0, sizeof(g)); // zeroed, so the frees at done: are safe whatever failed
    memset(&corpus, 0, sizeof(corpus));
    memset(&et, 0, sizeof(et));
    int rc = 1;
    // the file written must be neither the target nor the corpus the run reads
    RunInput ins[2] = {{paths[0], "the target", "-m"}, {paths[1], "the corpus", "-i"}};
    if (!eval_only && check_not_input(paths[3], "-o", ins, 2, err, sizeof(err)) != 0) goto done;
    if (eagle_inputs(&g, &corpus, paths, err, sizeof(err)) != 0) goto done;
    const char *shape_of = eval_only ? paths[2] : NULL; // eagle-eval: the file's own shape
    if (eagle_train_shape(&o.shape, &g, shape_of, err, sizeof(err)) != 0) goto done;
    if (eagle_trainer_setup(&et, &g, o.batch, o.seed, &o.shape) != 0) {
        // the block's model and pass (as train_run_mb counts them), and the target's rows
        double mb[3], C = g.config.n_embd, V = g.config.vocab_size;
        train_run_mb(&et.bc, o.batch, 0, mb);
        snprintf(err, sizeof(err), "out of memory for the EAGLE draft and a pass of %d windows "
                 "(%.0f MB); use a smaller --batch", o.batch, mb[0] + mb[2] + 4.0 * o.batch *
                 (et.S * (C + V) + et.rows * (3 * C + V)) / 1e6);
        goto done;
    }
    if (eval_only && read_eagle_head(&et, &g, paths[2], err, sizeof(err)) != 0) goto done;
    // the output is checked before any work: a bad -o is one line, not a lost run
    char *probe = eval_only ? NULL : write_temp(paths[3], (const unsigned char *)"", 0,
                                                "eagle draft", err, sizeof(err));
    if (!eval_only && !probe) goto done;
    if (probe) unlink(probe);
    free(probe);
    // eagle-eval: the figures, measured before anything is printed: figures that are not
    // finite numbers are one line of refusal, never an "alpha nan"
    EagleEval e;
    double t0 = now_seconds();
    if (eval_only) {
        eagle_eval_split(&et, &g, corpus.tokens + corpus.n_train, val_tokens(&corpus), &e);
        if (eagle_eval_finite(&e) != 0) {
            snprintf(err, sizeof(err), "eagle draft '%s' gives figures on the validation split "
                     "that are not finite numbers (its floats or the target's rows overflow); "
                     "retrain it (make train-eagle)", paths[2]);
            goto done;
        }
        print_config(&g, paths[0]);
        print_eagle_eval(&e, paths[2], now_seconds() - t0, et.n_feat);
        rc = 0;
        goto done;
    }
    print_config(&g, paths[0]);
    // the recipe: what it reads, the loss, the schedule
    if (et.n_feat == 3)
        fprintf(stderr, "recipe: EAGLE-3, fuse (%d -> %d) of the target's rows after blocks "
                "%d, %d and %d, fc (%d -> %d) and one block (%zu parameters); loss: the "
                "cross-entropy against the target's row, summed over %d unrolled steps "
                "(training-time test), no feature regression; %d steps of %d windows of %d "
                "tokens, Adam lr %g, seed %llu; writes %s at the end\n", 3 * et.C, et.C,
                et.low, et.mid, g.config.n_layer, 2 * et.C, et.C,
                (size_t)(3 * et.C + 1) * et.C + (size_t)(2 * et.C + 1) * et.C + et.n, et.steps,
                o.iters, o.batch, et.S, (double)EAGLE_LR, (unsigned long long)o.seed, paths[3]);
    else
        fprintf(stderr, "recipe: EAGLE, fc (%d -> %d) and one block (%zu parameters) on the "
                "target's top features; loss %g x CE against the target's row + %g x SmoothL1 "
                "of the feature; %d steps of %d windows of %d tokens, Adam lr %g, seed %llu; "
                "writes %s at the end\n", 2 * et.C, et.C, (size_t)(2 * et.C + 1) * et.C + et.n,
                (double)EAGLE_W_CE, (double)EAGLE_W_REG, o.iters, o.batch, et.S,
                (double)EAGLE_LR, (unsigned long long)o.seed, paths[3]);
    if (train_eagle(&et, &g, &corpus, &o, err, sizeof(err)) != 0) goto done;
    if (save_eagle_head(&et, &g, paths[3], err, sizeof(err)) != 0) goto done;
    fprintf(stderr, "wrote %s\n", paths[3]);
    t0 = now_seconds();
    eagle_eval_split(&et, &g, corpus.tokens + corpus.n_train, val_tokens(&corpus), &e);
    print_eagle_eval(&e, "trained", now_seconds() - t0, et.n_feat);
    rc = 0;
done:
    if (rc != 0) error_line("%s", err);
    eagle_trainer_free(&et); // safe whatever failed
    free_gpt(&g);
    free_corpus(&corpus);
    return rc;
}

#ifdef TRAIN_MAIN
// The help text of -h.
static void train_usage(void) {
    printf("usage: tinyshakespeare/train [--iters 5000] [--seed 2] [-o " TRAIN_OUT "]\n"
           "           [--layers 4] [--heads 4] [--embd 64] [--block 32] [--batch 16] [-i corpus]\n"
           "           [--teacher PATH]\n"
           "       tinyshakespeare/train --resume [--iters 5000] [-o " TRAIN_OUT "] [-i corpus]\n"
           "  trains the target with the lecture's recipe (AdamW, lr 1e-3); the checkpoint and\n"
           "  PATH.state (optimiser and sampler, for --resume) are written atomically every 500\n"
           "  steps, at the end, and after the step a Ctrl-C interrupts (a second one stops at\n"
           "  once); --resume continues exactly where they were written. Without -o nothing\n"
           "  replaces the shipped model; make train gives -o " DEFAULT_MODEL ".\n"
           "  --teacher PATH distils: the loss is the cross-entropy against that checkpoint's\n"
           "  softmax at every position (same vocabulary and --block); make train-draft writes\n"
           "  " DEFAULT_DRAFT " so. A distillation cannot be resumed.\n"
           "usage: tinyshakespeare/train eval [-m " DEFAULT_MODEL "] [-i corpus]\n"
           "  mean cross-entropy over the whole validation and training splits\n"
           "usage: tinyshakespeare/train init [--seed 1337] -o PATH [-i corpus]\n"
           "  writes the seeded random initialisation as a checkpoint, untrained\n"
           "usage: tinyshakespeare/train medusa [--heads 4] [--iters 5000] [--batch 16] [--seed 2]\n"
           "           [-m " DEFAULT_MODEL "] [-i corpus] [-o " MEDUSA_OUT "]\n"
           "  trains Medusa heads on the model, which stays frozen: head k guesses the token\n"
           "  k+2 places after each position from its last hidden row; writes them at the end\n"
           "  (make train-medusa gives -o " DEFAULT_MEDUSA ")\n"
           "usage: tinyshakespeare/train medusa-eval [-m " DEFAULT_MODEL "] [-M " DEFAULT_MEDUSA "]\n"
           "           [-i corpus]\n"
           "  each head's loss and top-1 on the validation split, and its alpha and top-1\n"
           "  agreement against the model's own distribution at t = 1\n"
           "usage: tinyshakespeare/train exit [--layer 1] [--iters 3000] [--batch 16] [--seed 2]\n"
           "           [-m " DEFAULT_MODEL "] [-i corpus] [-o " EXIT_OUT "]\n"
           "  trains an early exit on the frozen model: a LayerNorm and a Linear of its own on\n"
           "  the residual after its first L blocks, distilled from the model's own rows;\n"
           "  writes it at the end (make train-exit gives -o " DEFAULT_EXIT ")\n"
           "usage: tinyshakespeare/train exit-eval [-m " DEFAULT_MODEL "] [-X " DEFAULT_EXIT "]\n"
           "           [-i corpus]\n"
           "  the exit's loss, alpha and greedy agreement against the model on the validation\n"
           "  split, beside the untrained exit's (the model's ln_f and lm_head)\n"
           "usage: tinyshakespeare/train eagle [--iters 6000] [--batch 16] [--seed 2]\n"
           "           [--eagle3 [--taps 1,2] [--steps 3]]\n"
           "           [-m " DEFAULT_MODEL "] [-i corpus] [-o " EAGLE_OUT "]\n"
           "  trains an EAGLE draft on the frozen model: a Linear and one block that predict its\n"
           "  next top feature from the last one and the next token; writes it at the end\n"
           "  --eagle3: EAGLE-3's draft instead: it reads the model's rows after blocks LOW, MID\n"
           "  (--taps) and the top, fused by a Linear, and learns from its own guesses unrolled\n"
           "  --steps deep, with the cross-entropy alone (make train-eagle gives --eagle3\n"
           "  -o " DEFAULT_EAGLE ")\n"
           "usage: tinyshakespeare/train eagle-eval [-m " DEFAULT_MODEL "] [-E " DEFAULT_EAGLE "]\n"
           "           [-i corpus]\n"
           "  its alpha, greedy agreement, losses and feature error on the validation split, by\n"
           "  depth: depth d feeds back its own predicted feature d-1 times (EAGLE or EAGLE-3,\n"
           "  as the file says)\n");
}

// Training, or one of its subcommands: eval, init, medusa, medusa-eval, exit, exit-eval,
// eagle, eagle-eval.
int main(int argc, char **argv) {
    program_name = "train"; // its messages' first word
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        train_usage();
        return close_stdout(); // a failed write of the usage is one line and exit 1
    }
    if (argc > 1 && !strcmp(argv[1], "eval")) return main_eval(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "init")) return main_init(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "medusa")) return main_medusa(argc, argv, 0);
    if (argc > 1 && !strcmp(argv[1], "medusa-eval")) return main_medusa(argc, argv, 1);
    if (argc > 1 && !strcmp(argv[1], "exit")) return main_exit(argc, argv, 0);
    if (argc > 1 && !strcmp(argv[1], "exit-eval")) return main_exit(argc, argv, 1);
    if (argc > 1 && !strcmp(argv[1], "eagle")) return main_eagle(argc, argv, 0);
    if (argc > 1 && !strcmp(argv[1], "eagle-eval")) return main_eagle(argc, argv, 1);
    return main_train(argc, argv);
}
#endif
