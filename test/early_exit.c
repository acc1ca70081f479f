/*
 * test/early_exit.c — the target's own early exit as a draft: how often would it pass?
 *
 * Self-speculative decoding (Zhang et al. 2023, "Draft & Verify") and LayerSkip
 * (Elhoushi et al. 2024) draft with the target itself: run only its first l blocks, then
 * its own final LayerNorm and head. This program measures, without changing specdec.c,
 * what such a draft would give on the shipped model, and puts the distilled GPT draft
 * (tinyshakespeare/draft.bin) and the blog's bigram table (counted from the training split;
 * its row costs a lookup) beside it, on the same positions:
 *   - alpha at t = 1, the mean over positions of sum_x min(q(x), p(x)), where p is the
 *     full model's row and q the draft's, both softmax(logits) from the same context: the
 *     chance that a guess drawn from q passes specdec's accept_reject;
 *   - greedy agreement, the share of positions where argmax q == argmax p: what a t = 0
 *     round accepts;
 *   - the draft's own validation loss (cross-entropy on the true next character);
 *   - E(alpha, 4) = (1 - alpha^5) / (1 - alpha), the tokens a verify pass of K = 4 yields;
 *   - what one draft pass costs against one pass of the full model, in multiply-adds per
 *     token (the matmuls, lm_head and attention over the context), and the papers'
 *     formula E / (c(K+1) + K c_draft) where verifying is free, c(K+1) = 1, at K = 4 and
 *     at its best K.
 *
 * Two trained drafts join them: the trained exit (tinyshakespeare/exit.bin: the target's
 * first L blocks, then a LayerNorm and head of its own, as `./beyond --draft early-exit`
 * runs it) and EAGLE's first guess (tinyshakespeare/eagle.bin: row t of a window reads the
 * target's feature at t and the embedding of token t+1 and guesses token t+2, judged against
 * the target's row t+1, as `./beyond --draft eagle` drafts; its own cache starts empty with
 * each window, so it scores one position fewer a window; an EAGLE-3 head reads its fused
 * rows there, the target's rows after its low and middle blocks fused with the feature).
 *
 * How the early exit runs. forward() loops over g->config.n_layer blocks, then ln_f and
 * lm_head. Setting n_layer to l for one call runs blocks 0 .. l-1 and then the model's own
 * ln_f and lm_head: the exit after block l, with no copy of any weight. It is set back
 * right after. The pass writes only layers 0 .. l-1 of the cache, and cache_len is reset to 0
 * before every window, so every exit, and the full model, starts from an empty cache.
 * l = 4 is the full model through the same path: its rows must be those of a plain
 * forward() with the config untouched, bit for bit (checked and printed), so its alpha is 1.
 *
 * The positions. The whole validation split (the last 10% of Tiny Shakespeare, as
 * load_corpus splits it), in consecutive windows of block_size tokens from position 0,
 * each from an empty cache, the last one shorter: every next character is scored once,
 * from a context of 1 to 32 characters. These are the windows `tinyshakespeare/train
 * eval` scores, so the l = 4 row's loss is the validation loss it prints. Nothing here
 * is timed or random: every run prints the same report.
 *
 *   test/early_exit [-m model.bin] [-d draft.bin] [-x exit.bin] [-e eagle.bin] [-i corpus]
 * notes/speed.md ("Drafts from the target itself") reads the numbers.
 */
#ifndef TESTING
#define TESTING         // leaves out beyond.c's and specdec.c's mains: this file has its own ...
#define EARLY_EXIT_MAIN // ... unless a test includes this file (with TESTING defined)
#endif
#include "../beyond.c" // specdec.c's model and stats; beyond.c's DEFAULT_DRAFT, --draft gpt's file

// ----------------------------------------------------------------------------
// One row of the report: what a draft's rows give against the full model's

// The K of the papers' formula, as specdec's default, and the largest K searched for the best.
#define EE_K 4
#define EE_MAX_K 8

// What one draft scored over the positions so far.
typedef struct {
    double alpha_sum; // sum over positions of sum_x min(q(x), p(x))
    long agree;       // positions where argmax q == argmax p
    double loss_sum;  // sum over positions of -log q(next character)
    long identical;   // positions whose logits equal the full model's, bit for bit
} ExitScore;

// -log softmax(logits)[target], in double: log sum_x exp(logits[x] - max) - (logits[target] - max),
// as a cross-entropy (the draft's loss on the next character).
static double row_loss(const float *logits, int V, int target) {
    float maxv = logits[argmax(logits, V)];
    double sum = 0.0;
    for (int x = 0; x < V; x++) sum += exp((double)logits[x] - maxv);
    return log(sum) - ((double)logits[target] - maxv);
}

// Scores one position: q is the draft's row (probabilities), p the full model's, logits
// the draft's logits (NULL for the bigram, whose row is a table's) and full the model's.
static void score_row(ExitScore *e, const float *q, const float *p, const float *logits,
                      const float *full, int V, int target) {
    e->alpha_sum += expected_acceptance(p, q, V); // sum_x min(p, q), as specdec's stats count it
    e->agree += argmax(q, V) == argmax(p, V);
    e->loss_sum += logits ? row_loss(logits, V, target) : -log((double)q[target]);
    e->identical += logits && memcmp(logits, full, (size_t)V * sizeof(float)) == 0;
}

// The early exit after block l: blocks 0 .. l-1 of g, then g's own ln_f and lm_head, over T
// tokens from an empty cache. forward() reads the block count from g->config.n_layer, so
// it is lowered for this one call and set back. Returns forward's (T, V) logits buffer.
static const float *exit_forward(GPT *g, const int *tokens, int T, int l) {
    int L = g->config.n_layer;
    g->config.n_layer = l; // forward runs blocks 0 .. l-1, then ln_f and lm_head
    g->state.cache_len = 0; // every window from an empty cache
    const float *logits = forward(g, tokens, T);
    g->config.n_layer = L; // the model is whole again
    g->state.cache_len = 0;
    return logits;
}

// The trained exit (beyond.c's exit.bin) over T tokens from an empty cache: the target's
// blocks 0 .. L-1 (exit_forward leaves their residual rows in g->state.x), then the exit's own
// LayerNorm and head. Returns its (T, V) logits, in out.
static const float *trained_exit_forward(GPT *g, const ExitHead *e, const int *tokens, int T,
                                         float *normed, float *out) {
    exit_forward(g, tokens, T, e->layer);
    Head head = {e->ln_weight, e->ln_bias, {e->head_weight, e->head_bias, e->C, e->V}};
    return apply_head(head, g->state.x, T, normed, out);
}

// EAGLE's first guesses over a window whose target features are feat (T, C), its own cache
// empty: row t reads [feat[t], the embedding of tokens[t+1]] and its logits guess token t+2,
// which the target's row t+1 judges. T-1 rows; returns their (T-1, V) logits.
static const float *eagle_window(Draft *d, const float *feat, const int *tokens, int T,
                                 unsigned char *sees) {
    int S = d->eagle.block.config.block_size;
    for (int t = 0; t + 1 < T; t++) {
        eagle_input(d, t, feat + (size_t)t * d->eagle.C, tokens[t + 1]);
        memset(sees + (size_t)t * S, 0, (size_t)S); // causal: every earlier row, its own too
        memset(sees + (size_t)t * S, 1, (size_t)t + 1);
    }
    d->eagle.block.state.cache_len = 0;
    return eagle_pass(d, T - 1, sees);
}

// EAGLE-3 reads fused rows (beyond.c's eagle_feature): the target's rows after blocks low
// and mid of the window (exit_forward cut there) beside its top feature, through the head's
// fuse Linear, into feat (T, C) in place. An EAGLE head (n_feat 1) reads feat as it is.
static void eagle_fused(Draft *d, GPT *g, const int *tokens, int T, float *feat) {
    const EagleHead *e = &d->eagle;
    int C = e->C, S = g->config.block_size;
    if (e->n_feat == 1) return;
    for (int k = 0; k < 2; k++) { // the taps, where eagle_verify keeps them
        exit_forward(g, tokens, T, e->feat_layer[k]);
        memcpy(d->taps + (size_t)k * S * C, g->state.x, (size_t)T * C * sizeof(float));
    }
    float rows[3 * 4096]; // [low, middle, top] of one position; C <= 4096
    for (int t = 0; t < T; t++) {
        memcpy(rows, d->taps + (size_t)t * C, (size_t)C * sizeof(float));
        memcpy(rows + C, d->taps + (size_t)(S + t) * C, (size_t)C * sizeof(float));
        memcpy(rows + 2 * C, feat + (size_t)t * C, (size_t)C * sizeof(float));
        matmul(feat + (size_t)t * C, rows, (Linear){e->fuse_weight, e->fuse_bias, 3 * C, C}, 1);
    }
}

// Multiply-adds of one token's pass through the first `layers` blocks of c, then lm_head,
// at a context of n positions: per block the query, key, value and proj matmuls (4 C*C),
// the MLP's two (2 C*H), and attention's scores and weighted sum over n positions (2 n*C).
// The embedding is a lookup and an add, and the LayerNorms, softmaxes and residual adds are
// O(C) per token: left out, a few percent of a block.
static double pass_macs(const Config *c, int layers, int n) {
    double C = c->n_embd, H = c->ffn_width;
    return layers * (4.0 * C * C + 2.0 * C * H + 2.0 * n * C) + C * c->vocab_size;
}

// E(alpha, K) / (1 + K c): the papers' speedup formula where verifying K+1 tokens costs one
// pass (c(K+1) = 1, the memory-bound regime of the papers) and a draft pass c.
static double free_verify_speedup(double alpha, int K, double c) {
    return expected_tokens_per_pass(alpha, K) / (1.0 + K * c);
}

// Prints one row of the table: the score over n positions and a draft pass's cost c.
static void print_row(const char *name, const ExitScore *e, long n, double c) {
    double alpha = e->alpha_sum / (double)n;
    int best = 1; // the K in 1 .. EE_MAX_K that the formula prefers
    for (int K = 2; K <= EE_MAX_K; K++)
        if (free_verify_speedup(alpha, K, c) > free_verify_speedup(alpha, best, c)) best = K;
    printf("  %-31s %6.4f %6.4f %7.4f %7.3f %6.3f %9.3f   %5.3f at K = %d\n", name, alpha,
           (double)e->agree / (double)n, e->loss_sum / (double)n,
           expected_tokens_per_pass(alpha, EE_K), c, free_verify_speedup(alpha, EE_K, c),
           free_verify_speedup(alpha, best, c), best);
}

// ----------------------------------------------------------------------------
// The command line

#ifdef EARLY_EXIT_MAIN
// test/early_exit: the report on stdout; exit 1 on a bad input or a failed write.
int main(int argc, char **argv) {
    program_name = "early_exit"; // its messages' first word
    const char *model_path = DEFAULT_MODEL, *draft_path = DEFAULT_DRAFT;
    const char *corpus_path = DEFAULT_CORPUS, *exit_path = DEFAULT_EXIT;
    const char *eagle_path = DEFAULT_EAGLE;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: test/early_exit [-m " DEFAULT_MODEL "] [-d " DEFAULT_DRAFT "]\n"
                   "       [-x " DEFAULT_EXIT "] [-e " DEFAULT_EAGLE "] [-i corpus]\n"
                   "  alpha and greedy agreement of the target's early exits (its first l "
                   "blocks, then\n  ln_f and lm_head, or a trained exit head), of the EAGLE "
                   "head and of the GPT\n  draft against the full model, over the validation "
                   "split (see test/early_exit.c)\n");
            return close_stdout();
        }
        const char **field = !strcmp(a, "-m") ? &model_path : !strcmp(a, "-d") ? &draft_path :
                             !strcmp(a, "-i") ? &corpus_path : !strcmp(a, "-x") ? &exit_path :
                             !strcmp(a, "-e") ? &eagle_path : NULL;
        if (!field) {
            error_line("unknown option '%s' (early_exit takes -m, -d, -x, -e and -i; see -h)", a);
            return 1;
        }
        if (i + 1 >= argc) {
            error_line("%s needs a path after it (see -h)", a);
            return 1;
        }
        *field = argv[i + 1];
    }
    char err[512];
    GPT g, d;
    Vocab v, dv;
    Corpus corpus;
    BigramDraft bigram = {0};
    ExitHead exit_head = {0};
    Draft eagle = {0};
    memset(&g, 0, sizeof(g)); // zeroed, so the frees at the end are safe whatever failed
    memset(&d, 0, sizeof(d));
    memset(&corpus, 0, sizeof(corpus));
    int rc = 1;
    if (load_checkpoint(model_path, &g, &v, err, sizeof(err)) != 0 ||
        load_corpus(&corpus, corpus_path, &v, err, sizeof(err)) != 0 ||
        read_checkpoint(draft_path, (FileRole){"draft checkpoint", "-d takes a model draft; make "
                        "train-draft writes " DEFAULT_DRAFT}, &d, &dv, err, sizeof(err)) != 0) {
        error_line("%s", err);
        goto done;
    }
    DraftInputs in = {&v, &corpus, g.config.block_size, &g, 1, eagle_path};
    if (load_exit(exit_path, &g, &exit_head, err, sizeof(err)) != 0 ||
        setup_kind(find_draft("eagle"), &in, &eagle, err, sizeof(err)) != 0) {
        error_line("%s", err);
        goto done;
    }
    int L = g.config.n_layer, S = g.config.block_size, V = v.size;
    if (dv.size != V || memcmp(dv.chars, v.chars, (size_t)V) != 0 ||
        d.config.block_size != S) {
        error_line("draft '%s' does not match the target '%s': it needs the same vocabulary "
                   "and block size (make train-draft makes one)", draft_path, model_path);
        goto done;
    }
    size_t n_val = corpus.n - corpus.n_train; // the validation split, after the training one
    if (L > 64 || n_val < 2 ||
        BigramDraftModel(&bigram, corpus.tokens, corpus.n_train, V) != 0) {
        error_line("cannot score: the model has %d blocks (at most 64 here) and the corpus a "
                   "validation split of %zu tokens (at least 2; use Tiny Shakespeare)", L,
                   n_val);
        goto done;
    }
    // one score per exit l = 1 .. L, then the GPT draft, the bigram table, the trained exit
    // and EAGLE's first guess
    ExitScore score[64 + 4];
    memset(score, 0, sizeof(score));
    size_t row = (size_t)V * sizeof(float);
    float *full = malloc((size_t)S * row);  // (S, V) the full model's logits of one window
    float *p_full = malloc((size_t)S * row); // (S, V) its rows, softmax(logits) at t = 1
    float q[256];                            // (V) a draft's row
    int C = g.config.n_embd;
    float *feat = malloc((size_t)S * C * sizeof(float)); // (S, C) the target's features
    float *normed = malloc((size_t)S * C * sizeof(float)); // (S, C) the exit's LayerNorm rows
    float *exit_logits = malloc((size_t)S * row); // (S, V) the trained exit's logits
    unsigned char *sees = malloc((size_t)S * S); // (S, S) EAGLE's causal mask
    if (!full || !p_full || !feat || !normed || !exit_logits || !sees) {
        free(full);
        free(p_full);
        free(feat);
        free(normed);
        free(exit_logits);
        free(sees);
        error_line("out of memory");
        goto done;
    }
    const int *val = corpus.tokens + corpus.n_train;
    long positions = 0, windows = 0, eagle_positions = 0;
    double context_sum = 0.0; // sum over positions of the context's length, t + 1
    double macs_full = 0.0, macs_exit[64 + 1] = {0}, macs_draft = 0.0; // summed over positions
    double macs_eagle = 0.0; // EAGLE's Linear (2C -> C), its block and lm_head
    for (size_t start = 0; start + 1 < n_val; start += (size_t)S) {
        // a window of T tokens; row t predicts token start+t+1 from positions 0 .. t
        int T = n_val - 1 - start < (size_t)S ? (int)(n_val - 1 - start) : S;
        // the full model by a plain forward, the config untouched: the rows every draft is
        // judged against (and the exits' last call must have left the model whole)
        g.state.cache_len = 0;
        memcpy(full, forward(&g, val + start, T), (size_t)T * row);
        for (int t = 0; t < T; t++)
            tempered_softmax(p_full + (size_t)t * V, full + (size_t)t * V, V, 1.0f);
        memcpy(feat, g.state.x, (size_t)T * C * sizeof(float)); // the rows ln_f read
        eagle_fused(&eagle, &g, val + start, T, feat); // EAGLE-3: its fused rows instead
        // EAGLE: its row t guesses token t+2, which the target's row t+1 judges
        const float *el = T > 1 ? eagle_window(&eagle, feat, val + start, T, sees) : NULL;
        for (int t = 0; t + 1 < T; t++) {
            tempered_softmax(q, el + (size_t)t * V, V, 1.0f);
            score_row(&score[L + 3], q, p_full + (size_t)(t + 1) * V, el + (size_t)t * V,
                      full + (size_t)(t + 1) * V, V, val[start + t + 2]);
            macs_eagle += 2.0 * C * C + pass_macs(&eagle.eagle.block.config, 1, t + 1) +
                          (eagle.eagle.n_feat == 3 ? 3.0 * C * C : 0.0); // EAGLE-3's fuse
        }
        eagle_positions += T - 1;
        // the trained exit: the target's first blocks, then its own head
        const float *xl = trained_exit_forward(&g, &exit_head, val + start, T, normed,
                                               exit_logits);
        for (int t = 0; t < T; t++) {
            tempered_softmax(q, xl + (size_t)t * V, V, 1.0f);
            score_row(&score[L + 2], q, p_full + (size_t)t * V, xl + (size_t)t * V,
                      full + (size_t)t * V, V, val[start + t + 1]);
        }
        for (int l = 1; l <= L; l++) {
            const float *logits = exit_forward(&g, val + start, T, l);
            for (int t = 0; t < T; t++) {
                tempered_softmax(q, logits + (size_t)t * V, V, 1.0f);
                score_row(&score[l - 1], q, p_full + (size_t)t * V, logits + (size_t)t * V,
                          full + (size_t)t * V, V, val[start + t + 1]);
            }
        }
        // the GPT draft: all of its blocks, from an empty cache of its own
        const float *dl = exit_forward(&d, val + start, T, d.config.n_layer);
        for (int t = 0; t < T; t++) {
            const float *p = p_full + (size_t)t * V;
            tempered_softmax(q, dl + (size_t)t * V, V, 1.0f);
            score_row(&score[L], q, p, dl + (size_t)t * V, full + (size_t)t * V, V,
                      val[start + t + 1]);
            // the blog's table: the row of the token at position t, at t = 1 untempered
            score_row(&score[L + 1], bigram_get_probs(&bigram, val[start + t]), p, NULL, NULL,
                      V, val[start + t + 1]);
            macs_full += pass_macs(&g.config, L, t + 1);
            for (int l = 1; l <= L; l++) macs_exit[l] += pass_macs(&g.config, l, t + 1);
            macs_draft += pass_macs(&d.config, d.config.n_layer, t + 1);
            context_sum += t + 1;
        }
        positions += T;
        windows++;
    }
    free(full);
    free(p_full);
    free(feat);
    free(normed);
    free(exit_logits);
    free(sees);

    printf("Drafts from the target itself: the exit after block l runs the target's first l "
           "of %d\nblocks, then its own ln_f and lm_head. Beside them the distilled GPT draft "
           "and the blog's\nbigram table, each against the full model on the same positions.\n",
           L);
    printf("target %s (%d blocks), GPT draft %s (%d block%s)\n", model_path, L, draft_path,
           d.config.n_layer, d.config.n_layer == 1 ? "" : "s");
    printf("positions: the whole validation split of %s, %ld next characters,\n"
           "in %ld windows of up to %d tokens from an empty cache (contexts of 1 to %d "
           "characters)\n", corpus_path, positions, windows, S, S);
    printf("alpha: mean of sum_x min(q(x), p(x)) at t = 1; greedy: share of argmax q == argmax p\n"
           "loss: the draft's own cross-entropy on the next character\n"
           "E(K=%d): (1 - alpha^%d) / (1 - alpha), the tokens a verify pass yields\n"
           "c: multiply-adds of a draft pass over a full-model pass (mean context %.1f)\n"
           "E/(1+Kc): the papers' formula where verifying is free, c(K+1) = 1; best of "
           "K = 1..%d\n\n",
           EE_K, EE_K + 1, context_sum / (double)positions, EE_MAX_K);
    char e_head[16], f_head[16];
    snprintf(e_head, sizeof(e_head), "E(K=%d)", EE_K);
    snprintf(f_head, sizeof(f_head), "E/(1+%dc)", EE_K);
    printf("  %-31s %6s %6s %7s %7s %6s %9s   %s\n", "draft", "alpha", "greedy", "loss", e_head,
           "c", f_head, "best E/(1+Kc)");
    char name[64];
    for (int l = 1; l <= L; l++) {
        snprintf(name, sizeof(name), "exit after block %d%s", l, l < L ? "" : " (all)");
        print_row(name, &score[l - 1], positions, macs_exit[l] / macs_full);
    }
    print_row("GPT draft (distilled)", &score[L], positions, macs_draft / macs_full);
    print_row("bigram table (a lookup)", &score[L + 1], positions, 0.0);
    snprintf(name, sizeof(name), "trained exit after block %d", exit_head.layer);
    print_row(name, &score[L + 2], positions, macs_exit[exit_head.layer] / macs_full);
    print_row("EAGLE head, first guess", &score[L + 3], eagle_positions, macs_eagle / macs_full);
    printf("\nthe exit after block %d gives the full model's logits at %ld of %ld positions, "
           "bit for bit\n", L, score[L - 1].identical, positions);
    rc = 0;
done:
    free_bigram_draft(&bigram);
    free(exit_head.ln_weight);
    free_draft(&eagle);
    free_gpt(&g);
    free_gpt(&d);
    free_corpus(&corpus);
    return rc ? rc : close_stdout();
}
#endif
