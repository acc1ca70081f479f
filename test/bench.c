/*
 * test/bench.c — how fast speculative decoding is here, and why (make bench).
 *
 * It includes specdec.c whole and measures, on the model it loads, with three drafts
 * (the bigram table, the GPT draft tinyshakespeare/draft.bin, prompt lookup):
 *   1. c(T): the time of one forward over T new tokens divided by a one-token forward,
 *      for T = 1..9, with the matmuls alone beside it, the refill's cost, and each
 *      draft's c_draft (one guess's time over a one-token forward, measured);
 *   2. the K sweep, K = 1..8 at t = 0 and t = 1, per draft: the acceptance rate
 *      (accepted/drafted), alpha (the papers' expected acceptance, E[sum min(p, q)]),
 *      tokens per verify pass beside (1 - alpha^(K+1)) / (1 - alpha), passes per token,
 *      time per token for both decoders and the wall speedup beside the model's
 *      prediction, the best K, then a text chart;
 *   3. the size sweep: the same model with its MLP padded by zeros (widen_ffn) from
 *      0.84 MB to 136 MB of weights: this machine's streaming bandwidth, and per size c(T),
 *      each draft and the ceiling (the unpadded model as the padded one's draft: the same
 *      function, so alpha = 1) at K = 1..4 and t = 0, 1 beside the model, plain
 *      decoding against the bandwidth limit, the best K and the crossover per draft, a
 *      text chart and an SVG.
 * Every t = 0 cell checks that each speculative text is plain decoding's, byte for byte.
 *
 *   test/bench [-m PATH] [-i PATH] [--csv] [--svg PATH] [--quick]
 *     --csv    every cell as CSV on stdout (the report stays on stderr)
 *     --svg    the size sweep's chart as an SVG file (make bench: notes/speed.svg)
 *     --quick  the same report on fewer tokens, repeats and sizes (the tests)
 * notes/speed.md reads the numbers.
 */
#ifndef TESTING
#define TESTING    // leaves out specdec.c's main: this file has its own ...
#define BENCH_MAIN // ... unless a test includes this file (with TESTING defined)
#endif
#include "../specdec.c"

// ----------------------------------------------------------------------------
// The K sweep, the verify-cost curve c(T), the speedup model

// The prompts every cell of the sweep decodes, BENCH_TOKENS new tokens each.
static const char *BENCH_PROMPTS[] = {"To be or not to be, that is the ", "ROMEO:\n",
                                      "First Citizen:\n", "KING RICHARD III:\nNow is the "};
#define BENCH_N_PROMPTS 4
#define BENCH_MAX_TOKENS 500 // room per prompt: BENCH_TOKENS is at most this
#define BENCH_MAX_K 8

// How long the bench runs: the full measurement, or --quick for the tests (the same
// code and the same report, on fewer tokens and fewer repeats).
static int BENCH_TOKENS = 250;              // tokens per prompt and cell: 1,000 per cell
static int BENCH_REPEATS = 2;               // timed runs per cell after one warm-up
static int CURVE_REPS = 1000;               // calls per timing of c(T), this model
static int TEMPER_TOKENS = BENCH_MAX_TOKENS; // tokens per prompt in the tempering section (untimed)

#define BENCH_MAX_DRAFTS 4 // bigram, gpt and lookup, and the ceiling in the size sweep

// Every t = 0 run's greedy check, over the whole bench: texts compared, and how many differed.
static long GREEDY_RUNS, GREEDY_DIFFER;

// One cell of the sweep: a draft, K and t, and what the runs measured.
typedef struct {
    const char *draft;   // the draft's name
    int K;
    float t;
    double c_draft;      // one guess's time over the target's one-token pass (measured)
    long drafted, judged, accepted, resampled, rounds, round_tokens, passes, emitted;
    double alpha_sum;    // sum of sum_x min(p, q) over the judged candidates (Stats)
    long pos_judged[BENCH_MAX_K], pos_accepted[BENCH_MAX_K]; // per draft position
    long draft_passes;   // a model draft's forward passes (Stats.draft_passes)
    double draft_seconds, counted_seconds; // time spent drafting, and in all, in the
                                           // counted (warm-up) pass: the draft's share
    long greedy_runs;    // t = 0: speculative texts compared with plain decoding's
    long greedy_differ;  // ... and how many differed (a bug: greedy must give the same text)
    double sec_spec;     // median wall time of BENCH_N_PROMPTS x BENCH_TOKENS tokens
    double sec_plain;    // the same for plain decoding, timed between the speculative runs
    double speedup;      // median over the timed passes of plain time / speculative time
} BenchCell;

// The cell's alpha, acceptance rate and tokens per verify pass (0 where nothing was judged).
static double cell_alpha(const BenchCell *x) { return x->judged ? x->alpha_sum / x->judged : 0.0; }
static double cell_rate(const BenchCell *x) {
    return x->drafted ? (double)x->accepted / x->drafted : 0.0;
}
static double cell_guesses(const BenchCell *x) { // drafted per round: K, or fewer (lookup)
    return x->rounds ? (double)x->drafted / x->rounds : 0.0;
}
static double cell_tpv(const BenchCell *x) {
    return x->rounds ? (double)x->round_tokens / x->rounds : 0.0;
}

// The speedup model for one cell: E[tokens per pass] / (c(K+1) + K c_draft), with c(K+1)
// and c_draft measured on the target the cell ran (K <= 8, so c[K+1] was measured).
static double cell_predicted(const BenchCell *x, const double c[10]) {
    return predicted_speedup(cell_alpha(x), x->K, c[x->K + 1], x->c_draft);
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

// Seconds of plain decoding over every prompt at temperature t; p: (V). texts[i]
// receives prompt i and its decoded tokens, for the greedy check.
static double bench_plain_pass(GPT *g, const Vocab *v, float t, float *p,
                               int (*texts)[64 + BENCH_MAX_TOKENS]) {
    int prompt[64];
    double sec = 0.0;
    DecodeOptions o = {.sampler.temperature = t, .K = 1, .vocab = v};
    for (int i = 0; i < BENCH_N_PROMPTS; i++) {
        int np = (int)strlen(BENCH_PROMPTS[i]);
        encode(v, (const unsigned char *)BENCH_PROMPTS[i], (size_t)np, prompt);
        Stats sp;
        memset(&sp, 0, sizeof(sp));
        Rng r;
        rng_seed(&r, 1000 + (uint64_t)i);
        generate(g, prompt, np, BENCH_TOKENS, &o, &r, texts[i], p, &sp);
        sec += sp.seconds;
    }
    return sec;
}

// Runs one (t, K) cell for each of n drafts: every prompt with plain decoding, then with
// speculative decoding and each draft in turn, one warm-up and BENCH_REPEATS timed passes.
// Plain decoding does not depend on the draft, so one plain pass serves them all. The
// passes alternate, so a machine that speeds up or slows down meanwhile moves every side;
// each draft's speedup is the median of its ratios to the plain pass of the same round.
// The counters come from the warm-up pass. At t = 0 every speculative text (every pass)
// is compared with plain decoding's: greedy decoding must give the same text.
static void bench_group(GPT *g, Draft *drafts, int n, const Vocab *v, BenchCell *cells) {
    int V = g->config.vocab_size, K = cells[0].K, prompt[64], seq[64 + BENCH_MAX_TOKENS];
    float t = cells[0].t;
    SpecBuffers b = {0};
    float *p = malloc((size_t)V * sizeof(float));
    int (*texts)[64 + BENCH_MAX_TOKENS] = malloc(BENCH_N_PROMPTS * sizeof(*texts));
    if (!p || !texts || build_spec_buffers(&b, K, V) != 0) {
        free(p);
        free(texts);
        free_spec_buffers(&b);
        return;
    }
    double plain[6], spec[BENCH_MAX_DRAFTS][6], ratio[BENCH_MAX_DRAFTS][6]; // BENCH_REPEATS <= 5
    for (int rep = 0; rep <= BENCH_REPEATS; rep++) {
        plain[rep] = bench_plain_pass(g, v, t, p, texts);
        for (int j = 0; j < n; j++) {
            BenchCell *c = &cells[j];
            spec[j][rep] = 0.0;
            for (int i = 0; i < BENCH_N_PROMPTS; i++) {
                int np = (int)strlen(BENCH_PROMPTS[i]);
                encode(v, (const unsigned char *)BENCH_PROMPTS[i], (size_t)np, prompt);
                Stats st;
                memset(&st, 0, sizeof(st));
                DecodeOptions o = {.sampler.temperature = t, .K = K, .vocab = v};
                Rng r;
                rng_seed(&r, 1000 + (uint64_t)i);
                speculative_generate(g, &drafts[j], &b, prompt, np, BENCH_TOKENS, &o, &r, seq,
                                     &st);
                spec[j][rep] += st.seconds;
                if (t == 0.0f) { // greedy: the same text as plain decoding, token for token
                    int differ = memcmp(seq, texts[i], (size_t)(np + BENCH_TOKENS) *
                                        sizeof(int)) != 0;
                    c->greedy_runs++;
                    c->greedy_differ += differ;
                    GREEDY_RUNS++;
                    GREEDY_DIFFER += differ;
                }
                if (rep == 0) {
                    c->drafted += st.drafted;
                    c->judged += st.judged;
                    c->alpha_sum += st.alpha_sum;
                    c->accepted += st.accepted;
                    c->resampled += st.resampled;
                    c->rounds += st.rounds;
                    c->round_tokens += st.round_tokens;
                    c->passes += target_passes(&st);
                    c->emitted += st.emitted;
                    c->draft_passes += st.draft_passes;
                    c->draft_seconds += st.draft_seconds;
                    c->counted_seconds += st.seconds;
                    // acceptance by position, from the decoder's own counters
                    for (int q = 0; q < K && q < POSITIONS; q++) {
                        c->pos_judged[q] += st.judged_at[q];
                        c->pos_accepted[q] += st.accepted_at[q];
                    }
                }
            }
            ratio[j][rep] = plain[rep] / spec[j][rep];
        }
    }
    // pass 0 was the warm-up (and ran the hook); the medians of the others, or pass 0
    // itself when there are none (the sweep of wide models, where one pass takes seconds)
    int first = BENCH_REPEATS > 0, m = BENCH_REPEATS > 0 ? BENCH_REPEATS : 1;
    double sec_plain = median(plain + first, m);
    for (int j = 0; j < n; j++) {
        cells[j].sec_spec = median(spec[j] + first, m);
        cells[j].sec_plain = sec_plain;
        cells[j].speedup = median(ratio[j] + first, m);
    }
    free_spec_buffers(&b);
    free(texts);
    free(p);
}

// Seconds per forward over T new tokens on top of a cache of kv tokens, over reps calls.
static double time_forward(GPT *g, const int *tokens, int kv, int T, int reps) {
    double t0 = now_seconds();
    for (int i = 0; i < reps; i++) {
        g->state.kv_len = kv;
        forward(g, tokens, T);
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
    int C = c->n_embd, H = c->ffn_width;
    size_t CC = (size_t)C * C, CH = (size_t)C * H;
    double t0 = now_seconds();
    for (int i = 0; i < reps; i++) {
        for (int l = 0; l < c->n_layer; l++) {
            // the key and value matmuls write into q too: the cache is not touched
            matmul(a->q, a->ln1, w->query + l * CC, NULL, T, C, C);
            matmul(a->q, a->ln1, w->key + l * CC, NULL, T, C, C);
            matmul(a->q, a->ln1, w->value + l * CC, NULL, T, C, C);
            matmul(a->attn, a->att_out, w->proj_weight + l * CC, w->proj_bias + l * C, T, C, C);
            matmul(a->hidden, a->ln2, w->ffwd_up_weight + l * CH, w->ffwd_up_bias + l * H,
                   T, C, H);
            matmul(a->ffwd, a->hidden, w->ffwd_down_weight + l * CH, w->ffwd_down_bias + l * C,
                   T, H, C);
        }
        matmul(g->state.logits, g->state.ln_f, w->lm_head_weight, w->lm_head_bias, T, C,
               c->vocab_size);
    }
    return (now_seconds() - t0) / reps;
}

// Floating-point operations (2 per multiply-add) of the matmuls of one forward over T
// tokens: every weight once per token.
static double matmul_flops(const Config *c, int T) {
    double C = c->n_embd, L = c->n_layer, V = c->vocab_size, H = c->ffn_width;
    return 2.0 * T * (L * (4 * C * C + 2 * C * H) + C * V); // q k v proj, ffwd, lm_head
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
            sec[T][r] = time_forward(g, tokens, kv, T, reps);
            mm[T][r] = time_matmuls(g, T, reps);
        }
        sec[10][r] = keep > 0 ? time_forward(g, tokens, 0, keep, reps) : 0.0;
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

// Seconds one guess of draft d costs, timed like the target's pass in bench_curve
// (medians of 9 timings of reps calls): a model draft's one-token forward at the same
// cache length; for the bigram and prompt lookup, a draft_tokens call for 4 guesses after
// `text` (n_text tokens of the bench's own kind of text), over the guesses it made. What
// a draft costs does not depend on the target, so c_draft at a width is this over the
// width's one-token pass.
static double draft_guess_seconds(Draft *d, const int *text, int n_text, int reps) {
    double sec[9];
    if (d->kind == DRAFT_GPT) {
        int S = d->model.config.block_size, kv = S / 2 - 4 > 0 ? S / 2 - 4 : 0;
        for (int r = 0; r < 9; r++) sec[r] = time_forward(&d->model, text, kv, 1, reps);
        return median(sec, 9);
    }
    float *q = malloc((size_t)4 * d->V * sizeof(float));
    if (!q) return 0.0;
    int candidates[4];
    Sampler s = {1.0f, 0, 0.0f};
    Rng rng;
    rng_seed(&rng, 1);
    for (int r = 0; r < 9; r++) {
        long guesses = 0;
        double t0 = now_seconds();
        for (int i = 0; i < reps; i++)
            guesses += draft_tokens(d, text, n_text, n_text - 1, 4, &s, &rng, candidates, q);
        // lookup may find nothing: then the call's cost is that of one guess
        sec[r] = (now_seconds() - t0) / (guesses > reps ? guesses : reps);
    }
    free(q);
    return median(sec, 9);
}

// What the tempering hook sees: the round's buffers, and the untempered draft's sum.
typedef struct {
    const SpecBuffers *b;
    Draft *d;
    const Stats *st;
    long last_rounds;      // st->rounds at the last call: a new round if it grew
    int last_n_seq;        // the text's length at the last call: seq[last_n_seq-1] was current
    double untempered_sum; // sum over rounds of sum_x min(p(x), table row(x))
    long n;                // rounds counted
} TemperWatch;

// after_step hook: after each K = 1 round, the chance its guess would have passed had the
// draft proposed from the table's own row instead of the tempered one.
static void temper_watch(void *ctx, const GPT *g, const int *seq, int n_seq) {
    TemperWatch *w = ctx;
    (void)g;
    if (w->st->rounds > w->last_rounds) { // a round, not a single target pass
        int current = seq[w->last_n_seq - 1]; // the token the round drafted from
        w->untempered_sum += expected_acceptance(w->b->p_target,
                                                 bigram_get_probs(&w->d->bigram, current), w->d->V);
        w->n++;
    }
    w->last_rounds = w->st->rounds;
    w->last_n_seq = n_seq;
}

// Why specdec.c tempers the draft (draft_probs): alpha of a round's first guess, with the
// draft row raised to 1/t like the target (what specdec.c does) and with the table's row
// as it is, at the same positions: K = 1 rounds over every prompt, at six temperatures.
static void bench_tempering(GPT *g, Draft *d, const Vocab *v) {
    float temps[6] = {0.0f, 0.5f, 0.7f, 1.0f, 1.5f, 2.0f};
    int prompt[64], seq[64 + BENCH_MAX_TOKENS];
    SpecBuffers b;
    if (build_spec_buffers(&b, 1, g->config.vocab_size) != 0) return;
    fprintf(stderr, "\nwhy the draft is tempered: alpha of a round's first guess, K = 1, "
            "%d prompts x %d tokens\n     t  tempered q^(1/t)  untempered q  rounds\n",
            BENCH_N_PROMPTS, TEMPER_TOKENS);
    for (int ti = 0; ti < 6; ti++) {
        Stats st;
        memset(&st, 0, sizeof(st));
        TemperWatch w = {&b, d, &st, 0, 0, 0.0, 0};
        for (int i = 0; i < BENCH_N_PROMPTS; i++) {
            int np = (int)strlen(BENCH_PROMPTS[i]);
            encode(v, (const unsigned char *)BENCH_PROMPTS[i], (size_t)np, prompt);
            DecodeOptions o = {.sampler.temperature = temps[ti], .K = 1, .vocab = v,
                               .after_step = temper_watch, .ctx = &w};
            Rng r;
            rng_seed(&r, 1000 + (uint64_t)i);
            // the counters add up over the prompts: st is not reset between them; the
            // first round drafts from the token the prefill sampled, seq[np]
            w.last_rounds = st.rounds;
            w.last_n_seq = np + 1;
            speculative_generate(g, d, &b, prompt, np, TEMPER_TOKENS, &o, &r, seq, &st);
        }
        fprintf(stderr, "  %4.1f  %16.3f  %12.3f  %6ld\n", temps[ti], stats_alpha(&st),
                w.n ? w.untempered_sum / w.n : 0.0, w.n);
    }
    free_spec_buffers(&b);
}

// A bar of width proportional to x / max, at most `width` characters.
static void bar(double x, double max, int width) {
    int n = max > 0 ? (int)(x / max * width + 0.5) : 0;
    for (int i = 0; i < n && i < width; i++) fputc('#', stderr);
    for (int i = n; i < width; i++) fputc(' ', stderr);
}

// ----------------------------------------------------------------------------
// The memory-bound sweep: the same model with its MLP padded by zeros (--ffn-width)
//
// widen_ffn keeps the function and the text exactly and adds 2 KB of weights per hidden
// unit, so one model, the same drafts and the same acceptance are measured from 0.84 MB of
// weights (they sit in the 1 MB L2) to 136 MB (four times the 32 MB L3): only the bytes
// a pass streams change, and with them c(T) and c_draft. Each size reports c(T), plain
// decoding and each draft side by side at K = 1 .. 4 and t = 0 and 1, the speedup
// model, and plain decoding against the bandwidth limit. One draft joins here: the ceiling,
// the unpadded model drafting for its padded copy. It computes the same function, so every
// guess passes (alpha = 1 at any temperature) and a round yields K+1 tokens for
// c(K+1) + K c_draft passes: no draft that costs as much can do better.

// 2.42 MB (1,024 units) is left out: like 0.84 and 8.76 MB its weights sit in the caches
static int SWEEP_WIDTHS[] = {256, 4096, 16384, 65536};
static int SWEEP_N_WIDTHS = 4;      // --quick: the first 2
static int SWEEP_TOKENS = 24;       // tokens per prompt and cell: 96 per cell
static size_t STREAM_MB = 512;      // the bandwidth probe's buffer, 16x the L3
static int SWEEP_CURVE = 65536;     // c(T)'s calls per timing: SWEEP_CURVE / H, at least 1
// K = 1 .. 4: K = 8 lost to a smaller K at every size in notes/speed.md's sweeps (c(9) is
// about 2 c(5) even at 136 MB), and each K costs a quarter of the sweep's time, so the
// best K and the ceiling here are those over K <= 4; the K sweep above goes to 8
static int SWEEP_K[] = {1, 2, 3, 4};
#define SWEEP_NK 4

// What the sweep measured at one width.
typedef struct {
    int H;              // ffn_width
    double mb;          // weights in MB (10^6 bytes)
    double c[10];       // c[0] = seconds of a one-token pass; c[T] for T = 1..9
    double limit;       // tokens/s at which plain decoding would stream the weights once per token
    BenchCell cell[2][SWEEP_NK][BENCH_MAX_DRAFTS]; // [t = 0, 1][K index][draft]
} SweepRow;

// This machine's single-thread streaming-read bandwidth, bytes/s: the best of 5 sums
// over a buffer far larger than the caches (integer adds, which the compiler may
// vectorise freely: unlike float sums, their order does not change the result).
static double stream_bandwidth(size_t bytes) {
    size_t n = bytes / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof(uint64_t));
    if (!buf) return 0.0;
    for (size_t i = 0; i < n; i++) buf[i] = i; // written: real pages, not the zero page
    double best = 1e30;
    volatile uint64_t sink = 0; // the sums are used, so the loops are not optimised away
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) sum += buf[i];
        double dt = now_seconds() - t0;
        sink += sum;
        if (dt < best) best = dt;
    }
    free(buf);
    return (double)(n * sizeof(uint64_t)) / best;
}

// A copy of g (parameters and config) widened to H hidden units; 0 on success.
static int widened_copy(const GPT *g, int H, GPT *out) {
    if (build_gpt(out, &g->config) != 0) { free_gpt(out); return -1; }
    memcpy(out->params, g->params, g->n_params * sizeof(float));
    return H > g->config.ffn_width ? widen_ffn(out, H) : 0;
}

// One CSV row: the sweep ("k" or "size"), the target's width and weight size, the cell;
// greedy_same is 1 if every t = 0 text was plain decoding's, empty at t = 1.
static void csv_row(const char *sweep, int H, double mb, const BenchCell *x, const double c[10]) {
    double n = (double)x->emitted, alpha = cell_alpha(x);
    printf("%s,%s,%d,%.2f,%g,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.4f,%.4f,%s", sweep,
           x->draft, H, mb, x->t, x->K, x->c_draft, cell_rate(x), alpha, cell_tpv(x),
           expected_tokens_per_pass(alpha, x->K), (double)x->passes / n, 1e6 * x->sec_plain / n,
           1e6 * x->sec_spec / n, x->speedup, cell_predicted(x, c),
           x->t != 0.0f ? "" : x->greedy_differ ? "0" : "1");
    // the draft's passes and share of the wall time, then acceptance at each position
    printf(",%ld,%.4f", x->draft_passes, x->counted_seconds > 0 ?
           x->draft_seconds / x->counted_seconds : 0.0);
    for (int i = 0; i < BENCH_MAX_K; i++) {
        if (i < x->K && x->pos_judged[i] > 0)
            printf(",%.4f", (double)x->pos_accepted[i] / x->pos_judged[i]);
        else printf(","); // past K, or never reached
    }
    printf("\n");
}

// The index in SWEEP_K of draft j's best K (the highest wall speedup) at temperature ti.
static int sweep_best_k(const SweepRow *r, int ti, int j) {
    int best = 0;
    for (int k = 1; k < SWEEP_NK; k++)
        if (r->cell[ti][k][j].speedup > r->cell[ti][best][j].speedup) best = k;
    return best;
}

// One width: c(T) and each draft's c_draft, then every (t, K) cell, plain decoding and
// every draft alternating (bench_group), then the table, draft by draft.
static int sweep_width(const GPT *g, Draft *drafts, int n_drafts, const Vocab *v,
                       const int *text, int n_text, double bw, int csv, SweepRow *row) {
    double t0 = now_seconds();
    GPT w;
    if (widened_copy(g, row->H, &w) != 0) return -1;
    row->mb = w.n_params * 4.0 / 1e6;
    row->limit = bw / (w.n_params * 4.0); // one pass streams every weight once
    char what[160];
    snprintf(what, sizeof(what), "ffn_width %d: %.2f MB of weights", row->H, row->mb);
    int reps = SWEEP_CURVE / row->H > 0 ? SWEEP_CURVE / row->H : 1; // 1 at the widest
    bench_curve(&w, what, row->c, reps);
    // a draft costs the same at every width; what changes is the pass it is measured in
    double c_draft[BENCH_MAX_DRAFTS];
    fprintf(stderr, "  c_draft, one guess over this one-token pass:");
    for (int j = 0; j < n_drafts; j++) {
        c_draft[j] = draft_guess_seconds(&drafts[j], text, n_text, CURVE_REPS) / row->c[0];
        fprintf(stderr, "  %s %.4f", drafts[j].name, c_draft[j]);
    }
    fputc('\n', stderr);
    for (int ti = 0; ti < 2; ti++)
        for (int k = 0; k < SWEEP_NK; k++) {
            BenchCell *group = row->cell[ti][k];
            for (int j = 0; j < n_drafts; j++) {
                memset(&group[j], 0, sizeof(group[j]));
                group[j].draft = drafts[j].name;
                group[j].K = SWEEP_K[k];
                group[j].t = (float)ti;
                group[j].c_draft = c_draft[j];
            }
            bench_group(&w, drafts, n_drafts, v, group);
        }
    free_gpt(&w);
    fprintf(stderr, "   t  draft    K  acc.rate  alpha  tok/verify  plain tok/s  spec tok/s  speedup"
            "  model   plain/limit  spec/limit   (limit %.0f tokens/s)\n", row->limit);
    for (int ti = 0; ti < 2; ti++)
        for (int j = 0; j < n_drafts; j++)
            for (int k = 0; k < SWEEP_NK; k++) {
                const BenchCell *x = &row->cell[ti][k][j];
                double n = (double)x->emitted, plain = n / x->sec_plain, spec = n / x->sec_spec;
                fprintf(stderr, "  %2d  %-7s %2d     %.3f  %.3f  %10.3f  %11.1f  %10.1f  %7.2f"
                        "  %5.2f   %10.2f  %10.2f%s\n", ti, x->draft, x->K, cell_rate(x),
                        cell_alpha(x), cell_tpv(x), plain, spec, x->speedup,
                        cell_predicted(x, row->c), plain / row->limit, spec / row->limit,
                        spec > row->limit ? "  above the limit" : "");
                if (csv) csv_row("size", row->H, row->mb, x, row->c);
            }
    fprintf(stderr, "  (ffn_width %d: %.1f s)\n", row->H, now_seconds() - t0);
    return 0;
}

// Text chart: one row per draft, its best K's wall speedup at each width, '|' marking 1.0.
static void sweep_chart(const SweepRow *rows, int n, const Draft *drafts, int n_drafts, int ti) {
    fprintf(stderr, "\nwall speedup against weight size at t = %d, each draft at its best K "
            "(each bar 0 .. 2x, '|' = 1.0)\n  draft  ", ti);
    for (int i = 0; i < n; i++) fprintf(stderr, "  %8.2f MB         ", rows[i].mb);
    fputc('\n', stderr);
    for (int j = 0; j < n_drafts; j++) {
        fprintf(stderr, "  %-7s", drafts[j].name);
        for (int i = 0; i < n; i++) {
            int k = sweep_best_k(&rows[i], ti, j);
            double sp = rows[i].cell[ti][k][j].speedup;
            int nb = (int)(sp / 2.0 * 10 + 0.5);
            fputs("  ", stderr);
            for (int b = 0; b < 10; b++) fputc(b == 5 ? '|' : b < nb ? '#' : ' ', stderr);
            fprintf(stderr, " %4.2f K=%d", sp, SWEEP_K[k]);
        }
        fputc('\n', stderr);
    }
}

// The best K of each draft at each width and temperature ti, with what it measured and
// the model beside it, then each draft's crossover.
static void sweep_best(const SweepRow *rows, int n, const Draft *drafts, int n_drafts, int ti) {
    fprintf(stderr, "\nthe best K of each draft at t = %d:\n     weights  draft    K  guesses/round"
            "  alpha  acc.rate  tok/verify  c_draft  plain tok/s  spec tok/s  speedup  model\n", ti);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n_drafts; j++) {
            const BenchCell *x = &rows[i].cell[ti][sweep_best_k(&rows[i], ti, j)][j];
            double tok = (double)x->emitted;
            fprintf(stderr, "  %7.2f MB  %-7s %2d  %13.2f  %.3f     %.3f  %10.3f  %7.4f  %11.1f"
                    "  %10.1f  %7.2f  %5.2f\n", rows[i].mb, x->draft, x->K, cell_guesses(x),
                    cell_alpha(x), cell_rate(x),
                    cell_tpv(x), x->c_draft, tok / x->sec_plain, tok / x->sec_spec, x->speedup,
                    cell_predicted(x, rows[i].c));
        }
    // the crossover: the smallest size from which the best K beats plain decoding at
    // every larger size too (one timed pass per cell moves by about 10%: a lone win
    // between losses is noise, not a crossover)
    for (int j = 0; j < n_drafts; j++) {
        int at = n;
        while (at > 0 && rows[at - 1].cell[ti][sweep_best_k(&rows[at - 1], ti, j)][j].speedup > 1.0)
            at--;
        if (at == n) {
            fprintf(stderr, "crossover at t = %d, %s: none up to %.1f MB (one timed pass per "
                    "cell, about 10%% noise)\n", ti, drafts[j].name, rows[n - 1].mb);
            continue;
        }
        int k = sweep_best_k(&rows[at], ti, j);
        fprintf(stderr, "crossover at t = %d, %s: %.2f MB (ffn_width %d), from where the best "
                "K beats plain decoding at every size; there K = %d runs %.2fx (one timed pass "
                "per cell, about 10%% noise)\n", ti, drafts[j].name, rows[at].mb, rows[at].H,
                SWEEP_K[k], rows[at].cell[ti][k][j].speedup);
    }
}

// Writes the sweep's chart as an SVG file (libc only): the best K's wall speedup against
// weight size on a log scale, one line for the GPT draft and one for the ceiling at each
// temperature (solid t = 1, dashed t = 0), the 1.0 line. Written to PATH.tmp, then renamed
// over PATH: a failed write leaves PATH as it was. 0 on success.
static int write_svg(const char *path, const SweepRow *rows, int n, const Draft *drafts,
                     int n_drafts, char *err, size_t errlen) {
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "--svg path is too long");
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write the chart to '%s': %s (choose a writable --svg "
                 "path)", tmp, strerror(errno));
        return -1;
    }
    // the lines drawn: the GPT draft and the ceiling (the drafts named so), when present
    int line[2], n_lines = 0;
    static const char *label[2] = {"GPT draft (tinyshakespeare/draft.bin)",
                                   "ceiling: the unpadded model as draft (alpha = 1)"};
    static const char *color[2] = {"#d95f02", "#7570b3"};
    const char *names[2] = {"gpt", "ceiling"};
    int which[2];
    for (int l = 0; l < 2; l++)
        for (int j = 0; j < n_drafts; j++)
            if (!strcmp(drafts[j].name, names[l])) {
                line[n_lines] = j;
                which[n_lines++] = l;
            }
    const double W = 640, Hh = 400, x0 = 70, y0 = 340, xw = 520, yh = 290;
    double ymax = 2.0, lx0 = log10(rows[0].mb), lx1 = log10(rows[n - 1].mb);
    for (int i = 0; i < n; i++)
        for (int ti = 0; ti < 2; ti++)
            for (int l = 0; l < n_lines; l++)
                ymax = fmax(ymax, rows[i].cell[ti][sweep_best_k(&rows[i], ti, line[l])][line[l]].speedup);
    ymax = ceil(ymax * 2) / 2; // the y axis runs to the next half
#define SX(mb) (x0 + (lx1 > lx0 ? (log10(mb) - lx0) / (lx1 - lx0) : 0.5) * xw)
#define SY(s) (y0 - (s) / ymax * yh)
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
            "fill=\"white\"/>\n", W, Hh);
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"14\">Speculative decoding's wall speedup "
            "at the best K against weight size (test/bench)</text>\n", x0);
    // axes, ticks at each measured size and every half on y, the 1.0 line
    fprintf(f, "<path d=\"M%.1f %.1f V%.1f H%.1f\" stroke=\"black\" fill=\"none\"/>\n", x0, y0 - yh, y0, x0 + xw);
    for (int i = 0; i < n; i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.3g</text>\n",
                SX(rows[i].mb), y0 + 18, rows[i].mb);
    for (double s = 0; s <= ymax + 1e-9; s += 0.5)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", x0 - 6, SY(s) + 4, s);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"gray\" "
            "stroke-dasharray=\"2 3\"/>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"gray\">1.0: "
            "break-even</text>\n", x0, SY(1.0), x0 + xw, SY(1.0), x0 + 6, SY(1.0) - 5);
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">weights streamed per pass, MB "
            "(log scale)</text>\n", x0 + xw / 2, Hh - 22);
    fprintf(f, "<text transform=\"translate(18 %.1f) rotate(-90)\" text-anchor=\"middle\">wall "
            "speedup, speculative / plain</text>\n", y0 - yh / 2);
    // one polyline per draft and temperature, each point at that width's best K, and the legend
    for (int ti = 0; ti < 2; ti++)
        for (int l = 0; l < n_lines; l++) {
            int j = line[l];
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
                    color[which[l]], ti == 0 ? " stroke-dasharray=\"6 4\"" : "");
            for (int i = 0; i < n; i++)
                fprintf(f, "%.1f,%.1f ", SX(rows[i].mb),
                        SY(rows[i].cell[ti][sweep_best_k(&rows[i], ti, j)][j].speedup));
            fprintf(f, "\"/>\n");
        }
    for (int l = 0; l < n_lines; l++)
        fprintf(f, "<text x=\"%.0f\" y=\"%d\" fill=\"%s\">%s</text>\n", x0 + 10, 72 + 16 * l,
                color[which[l]], label[which[l]]);
    fprintf(f, "<text x=\"%.0f\" y=\"56\">each point at its best K; solid: t = 1, dashed: "
            "t = 0</text>\n</svg>\n", x0 + 10);
#undef SX
#undef SY
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "writing the chart to '%s' failed: %s (check the disk and the "
                 "--svg path)", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

// The sweep: bandwidth, every width with every draft and the ceiling, the best K and the
// crossover per draft, the charts. drafts has room for one more: the ceiling goes there
// (the caller frees it with the others). 0 on success.
static int run_sweep(const GPT *g, Draft *drafts, int n_drafts, const Vocab *v,
                     const int *text, int n_text, int csv, const char *svg_path, char *err,
                     size_t errlen) {
    // the ceiling: a copy of the unpadded model, with a KV cache of its own, drafting for
    // each padded copy; the same function, so every guess passes
    Draft *ceiling = &drafts[n_drafts];
    memset(ceiling, 0, sizeof(*ceiling));
    ceiling->kind = DRAFT_GPT;
    ceiling->name = "ceiling";
    ceiling->V = g->config.vocab_size;
    if (widened_copy(g, g->config.ffn_width, &ceiling->model) != 0) {
        snprintf(err, errlen, "out of memory for the ceiling's copy of the model");
        return -1;
    }
    n_drafts++;
    double bw = stream_bandwidth(STREAM_MB << 20);
    fprintf(stderr, "\nthe same model, its MLP padded with zeros (--ffn-width): identical text, "
            "more bytes per pass\nstreaming-read bandwidth, one thread, %zu MB buffer: %.2f GB/s"
            "\nthe drafts:", STREAM_MB, bw / 1e9);
    for (int j = 0; j < n_drafts - 1; j++) fprintf(stderr, " %s,", drafts[j].name);
    fprintf(stderr, " and the ceiling (the unpadded model drafting for its padded copy: alpha "
            "= 1, K+1 tokens per pass)\n");
    SweepRow rows[4];
    int saved = BENCH_TOKENS, saved_reps = BENCH_REPEATS;
    BENCH_TOKENS = SWEEP_TOKENS; // a pass of the widest model takes milliseconds per token
    BENCH_REPEATS = 0;           // one timed pass per cell, plain and speculative side by side
    int rc = 0;
    for (int i = 0; i < SWEEP_N_WIDTHS && rc == 0; i++) {
        rows[i].H = SWEEP_WIDTHS[i];
        if (sweep_width(g, drafts, n_drafts, v, text, n_text, bw, csv, &rows[i]) != 0) {
            snprintf(err, errlen, "out of memory for the model padded to %d units", rows[i].H);
            rc = -1;
        }
    }
    BENCH_TOKENS = saved;
    BENCH_REPEATS = saved_reps;
    if (rc) return rc;
    for (int ti = 0; ti < 2; ti++) {
        sweep_chart(rows, SWEEP_N_WIDTHS, drafts, n_drafts, ti);
        sweep_best(rows, SWEEP_N_WIDTHS, drafts, n_drafts, ti);
    }
    if (svg_path && write_svg(svg_path, rows, SWEEP_N_WIDTHS, drafts, n_drafts, err, errlen) != 0)
        return -1;
    if (svg_path) fprintf(stderr, "chart written to %s\n", svg_path);
    return 0;
}

// The K sweep's text chart at one temperature: tokens per verify pass and wall speedup
// against K, one row per K and draft.
static void k_chart(BenchCell cells[BENCH_MAX_K][BENCH_MAX_DRAFTS], int n_drafts) {
    double max_tpv = 2.5, max_sp = 1.5;
    for (int K = 1; K <= BENCH_MAX_K; K++)
        for (int j = 0; j < n_drafts; j++) {
            max_tpv = fmax(max_tpv, cell_tpv(&cells[K - 1][j]));
            max_sp = fmax(max_sp, cells[K - 1][j].speedup);
        }
    fprintf(stderr, "\n   K  draft    tokens per verify pass            wall speedup ('|' = 1.0)\n");
    for (int K = 1; K <= BENCH_MAX_K; K++)
        for (int j = 0; j < n_drafts; j++) {
            const BenchCell *x = &cells[K - 1][j];
            double tpv = cell_tpv(x), sp = x->speedup;
            fprintf(stderr, "  %2d  %-7s ", K, x->draft);
            bar(tpv, max_tpv, 24);
            fprintf(stderr, " %5.2f   ", tpv);
            // the speedup bar marks break-even, 1.0, with a '|'
            int one = (int)(1.0 / max_sp * 24 + 0.5), nb = (int)(sp / max_sp * 24 + 0.5);
            for (int i = 0; i < 24; i++) fputc(i == one ? '|' : i < nb ? '#' : ' ', stderr);
            fprintf(stderr, " %5.2f\n", sp);
        }
}

// ./specdec bench: the curve, the K sweep per draft, the predictions beside the
// measurements, a chart, then the same model padded until its weights outgrow the caches
// (run_sweep); csv also writes every cell as CSV on stdout, svg_path the sweep's chart.
// drafts: the n_drafts drafts to measure (the bigram first), with room for one more.
int run_bench(GPT *g, Draft *drafts, int n_drafts, const Vocab *v, int csv,
              const char *svg_path, char *err, size_t errlen) {
    double t_start = now_seconds();
    int V = g->config.vocab_size;
    // 1. the verify-cost curve and each draft's cost, on this model
    double c[10] = {0};
    bench_curve(g, "this model", c, CURVE_REPS);
    // prompt lookup's cost depends on the text it searches: the bench's own kind, the
    // first prompt decoded greedily
    int prompt[64], text[64 + BENCH_MAX_TOKENS];
    int np = (int)strlen(BENCH_PROMPTS[0]), n_text = np + BENCH_TOKENS;
    float *p = malloc((size_t)V * sizeof(float));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    encode(v, (const unsigned char *)BENCH_PROMPTS[0], (size_t)np, prompt);
    DecodeOptions greedy = {.K = 1, .vocab = v};
    Stats st;
    memset(&st, 0, sizeof(st));
    Rng r;
    rng_seed(&r, 1000);
    generate(g, prompt, np, BENCH_TOKENS, &greedy, &r, text, p, &st);
    free(p);
    double c_draft[BENCH_MAX_DRAFTS];
    fprintf(stderr, "  c_draft, one guess over a one-token forward (a model draft: its one-token "
            "forward; bigram: bigram_sample; lookup: its search of the text, per guess):\n   ");
    for (int j = 0; j < n_drafts; j++) {
        c_draft[j] = draft_guess_seconds(&drafts[j], text, n_text, CURVE_REPS) / c[0];
        fprintf(stderr, " %s %.4f", drafts[j].name, c_draft[j]);
    }
    fputc('\n', stderr);
    // 2. the K sweep, every draft beside one plain pass per (t, K)
    static BenchCell cells[2][BENCH_MAX_K][BENCH_MAX_DRAFTS];
    memset(cells, 0, sizeof(cells));
    float temps[2] = {0.0f, 1.0f};
    if (csv) printf("sweep,draft,ffn_width,weight_mb,t,K,c_draft,acceptance_rate,alpha,"
                    "tokens_per_verify,predicted_tokens_per_verify,passes_per_token,"
                    "us_per_token_plain,us_per_token_spec,speedup,predicted_speedup,"
                    "greedy_same,draft_passes,draft_share,accept_pos1,accept_pos2,accept_pos3,"
                    "accept_pos4,accept_pos5,accept_pos6,accept_pos7,accept_pos8\n");
    for (int ti = 0; ti < 2; ti++) {
        fprintf(stderr, "\nK sweep at t = %g: %d prompts x %d tokens per cell, plain decoding and "
                "each draft alternating, medians of %d timed runs after a warm-up\n",
                temps[ti], BENCH_N_PROMPTS, BENCH_TOKENS, BENCH_REPEATS);
        for (int K = 1; K <= BENCH_MAX_K; K++) {
            BenchCell *group = cells[ti][K - 1];
            for (int j = 0; j < n_drafts; j++) {
                group[j].draft = drafts[j].name;
                group[j].K = K;
                group[j].t = temps[ti];
                group[j].c_draft = c_draft[j];
            }
            bench_group(g, drafts, n_drafts, v, group);
        }
        // the acceptance rate is accepted / drafted (vLLM's name); alpha is the papers'
        // expected acceptance E[sum min(p, q)], which the speedup model takes; the model:
        // E[tokens per pass] = (1 - alpha^(K+1)) / (1 - alpha), and the wall speedup that
        // / (c(K+1) + K c_draft)
        // guesses/round is below K where prompt lookup found fewer tokens to copy, or none
        fprintf(stderr, "  draft    K  guesses/round  acc.rate  alpha  tok/verify  model  passes/tok"
                "  us/tok plain  spec  speedup  model  acceptance at draft position 1..K\n");
        for (int j = 0; j < n_drafts; j++)
            for (int K = 1; K <= BENCH_MAX_K; K++) {
                BenchCell *x = &cells[ti][K - 1][j];
                double n = (double)x->emitted, alpha = cell_alpha(x);
                fprintf(stderr, "  %-7s %2d  %13.2f     %.3f  %.3f  %10.3f  %5.3f  %10.3f  %12.2f"
                        " %5.2f  %7.2f  %5.2f ", x->draft, K, cell_guesses(x), cell_rate(x),
                        alpha, cell_tpv(x),
                        expected_tokens_per_pass(alpha, K), (double)x->passes / n,
                        1e6 * x->sec_plain / n, 1e6 * x->sec_spec / n, x->speedup,
                        cell_predicted(x, c));
                for (int i = 0; i < K; i++)
                    fprintf(stderr, " %.2f", x->pos_judged[i] ? (double)x->pos_accepted[i] /
                                                                x->pos_judged[i] : 0.0);
                fputc('\n', stderr);
                if (csv) csv_row("k", g->config.ffn_width, g->n_params * 4.0 / 1e6, x, c);
            }
        fprintf(stderr, "  best K at t = %g:", temps[ti]);
        for (int j = 0; j < n_drafts; j++) {
            int best = 0;
            for (int K = 1; K < BENCH_MAX_K; K++)
                if (cells[ti][K][j].speedup > cells[ti][best][j].speedup) best = K;
            fprintf(stderr, "%s %s K = %d, %.2fx (model %.2f)", j ? ";" : "", drafts[j].name,
                    best + 1, cells[ti][best][j].speedup, cell_predicted(&cells[ti][best][j], c));
        }
        fputc('\n', stderr);
        // 3. the chart: tokens per verify pass and wall speedup against K
        k_chart(cells[ti], n_drafts);
    }
    // 4. why the bigram's row is tempered like the target
    bench_tempering(g, &drafts[0], v);
    // 5. the same model, padded until a one-token pass is bound by memory
    if (run_sweep(g, drafts, n_drafts, v, text, n_text, csv, svg_path, err, errlen) != 0)
        return 1;
    // greedy decoding must give plain decoding's text: every t = 0 run was compared
    if (GREEDY_DIFFER) {
        snprintf(err, errlen, "greedy check: %ld of %ld speculative texts at t = 0 differ from "
                 "plain decoding's (a bug in specdec.c)", GREEDY_DIFFER, GREEDY_RUNS);
        return 1;
    }
    fprintf(stderr, "\ngreedy check: all %ld speculative texts at t = 0 (every draft, K and "
            "size, every pass) are plain decoding's, byte for byte\n", GREEDY_RUNS);
    fprintf(stderr, "\nbench: %.1f s\n", now_seconds() - t_start);
    return 0;
}


// ----------------------------------------------------------------------------
// The command line

#ifdef BENCH_MAIN
// test/bench [-m PATH] [-i PATH] [--csv] [--svg PATH] [--quick]: see run_bench.
int main(int argc, char **argv) {
    Options o;
    memset(&o, 0, sizeof(o));
    o.corpus_path = DEFAULT_CORPUS;
    int csv = 0;
    const char *svg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: test/bench [-m " DEFAULT_MODEL "] [-i corpus] [--csv] [--svg PATH] "
                   "[--quick]\n  c(T), then K = 1..8 at t = 0 and 1 for the bigram, GPT and "
                   "lookup drafts beside the\n  speedup model, then the model padded to 136 MB "
                   "with the unpadded one as the\n  ceiling draft, against the bandwidth limit "
                   "(see test/bench.c)\n");
            return close_stdout();
        }
        if (!strcmp(a, "--csv")) { csv = 1; continue; }

        if (!strcmp(a, "--quick")) {
            // the same code on less: what the tests run
            BENCH_TOKENS = 60;
            TEMPER_TOKENS = 60;
            BENCH_REPEATS = 1;
            CURVE_REPS = 200;
            SWEEP_N_WIDTHS = 2; // 0.84 and 8.76 MB
            SWEEP_TOKENS = 12;
            SWEEP_CURVE = 8192;
            STREAM_MB = 128;
            continue;
        }
        // what is left must be -m PATH or -i PATH, the model and corpus as ./specdec takes them
        if (strcmp(a, "-m") && strcmp(a, "-i") && strcmp(a, "--svg")) {
            error_line("unknown bench option '%s' (bench takes -m, -i, --csv, --svg and "
                       "--quick)", a);
            return 1;
        }
        if (i + 1 >= argc) {
            error_line("option %s needs a value (see -h)", a);
            return 1;
        }
        const char *val = argv[++i];
        *(!strcmp(a, "--svg") ? &svg : a[1] == 'm' ? &o.model_path : &o.corpus_path) = val;
    }
    char err[512], source[256];
    // the chart's path is checked before minutes of measuring: can its .tmp be created?
    struct stat st;
    if (svg && (!*svg || (stat(svg, &st) == 0 && !S_ISREG(st.st_mode)))) {
        error_line("--svg '%s' is %s; give a file path such as notes/speed.svg", svg,
                   *svg ? "not a regular file" : "empty");
        return 1;
    }
    if (svg) {
        char tmp[4096];
        FILE *f = snprintf(tmp, sizeof(tmp), "%s.tmp", svg) < (int)sizeof(tmp) ? fopen(tmp, "w") : NULL;
        if (!f) {
            error_line("cannot write the chart to '%s': %s (choose a writable --svg path)", tmp,
                       strerror(errno ? errno : ENAMETOOLONG));
            return 1;
        }
        fclose(f);
        remove(tmp); // write_svg makes it again at the end
    }
    GPT g;
    Vocab v;
    Corpus corpus;
    Draft drafts[BENCH_MAX_DRAFTS]; // bigram, gpt, lookup, and room for run_sweep's ceiling
    int n_drafts = 0;
    memset(drafts, 0, sizeof(drafts));
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
    print_config(&g, source);
    // the drafts: the bigram first (the tempering section reads its table), then the GPT
    // draft, which is left out with a note when this model cannot take it (no draft.bin, or
    // another vocabulary or block size), then prompt lookup
    static const char *kinds[3] = {"bigram", "gpt", "lookup"};
    for (int i = 0; i < 3; i++) {
        if (setup_draft(kinds[i], &v, &corpus, g.config.block_size, &drafts[n_drafts], err,
                        sizeof(err)) == 0) {
            n_drafts++;
            continue;
        }
        free_draft(&drafts[n_drafts]);
        memset(&drafts[n_drafts], 0, sizeof(drafts[n_drafts]));
        if (strcmp(kinds[i], "gpt")) goto done;
        fprintf(stderr, "note: the GPT draft is left out: %s\n", err);
    }
    rc = run_bench(&g, drafts, n_drafts, &v, csv, svg, err, sizeof(err));
done:
    if (rc != 0) error_line("%s", err);
    for (int i = 0; i < BENCH_MAX_DRAFTS; i++) free_draft(&drafts[i]);
    free_corpus(&corpus);
    free_gpt(&g);
    // the CSV went to stdout: a failed write of it is one line on stderr and exit 1
    return rc == 0 ? close_stdout() : rc;
}
#endif
