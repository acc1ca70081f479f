/*
 * test/picture.c — the first round of a run of ./specdec, drawn as an SVG (make picture).
 *
 * It runs round 1 with specdec.c's own calls, in speculative_generate's order and from the
 * same seed: prefill, sample_token, make_room (a refill if the prompt fills the cache),
 * draft_tokens, verify_candidates, accept_reject. So its numbers are the ones that
 * `./specdec --trace` prints for the same options (test/picture_test.sh checks it). Then it
 * draws, for each guess judged, the draft's row q and the target's row p over the likeliest
 * characters with the guess marked, u against min(1, p/q) and the verdict; then the residual
 * max(0, p - q) and the resampled token at a rejection, or the bonus row p_k and its token;
 * then the TRIM, by trim_kv_cache itself: the cache's positions, those cached before the
 * round, those the verify pass wrote and the trim kept or dropped, and where the new
 * current_token goes.
 *
 *   test/picture -n 10 -s 277 -p "To be or not to be, " -o notes/round1.svg
 *
 * It takes ./specdec's -m -i -p -n -k -t -s, and -o PATH (required). The SVG is written to
 * PATH.tmp, then renamed over PATH: a failed run leaves PATH as it was.
 */
#define TESTING             // leaves out specdec.c's main: this file has its own
#include "../specdec.c"

// ----------------------------------------------------------------------------
// Round 1, by specdec.c's own calls

// What round 1 did: the buffers accept_reject filled, and what the round started from.
typedef struct {
    SpecBuffers b;     // candidates, draft_probs, target_probs, u, emitted, rejected_at
    int k;             // guesses drafted (K, or fewer when the run or the cache ends sooner)
    int n_emitted;     // tokens the round emitted: accepted guesses, then a resample or bonus
    int allow_bonus;   // 0 when the round already gives every token still needed
    int current_token; // the prefill's token, which the draft's first guess follows
    int cache_len;     // the cache's length before the verify pass: cache_len_before_verify
    int verified;      // its length after the pass, cache_len + k + 1
    int keep;          // its length after trim_kv_cache: cache_len + n_emitted
    int *window;       // (verified) the token whose key and value sit at each cache position
} Round;

// Runs the prefill and round 1 as speculative_generate does, with the same draws from the
// same seed; fills r. 0, or -1 with err set (no round in the run, a row that is not finite,
// no memory).
static int run_round1(const Options *o, Loaded *ld, const BigramDraft *d, Round *r, char *err,
                      size_t errlen) {
    GPT *g = &ld->g; // the target, loaded and checked by load_inputs
    int V = g->config.vocab_size, S = g->config.block_size;
    if (o->max_new_tokens < 2) // the prefill's token is the first; a round makes the second
        return fail_with(err, errlen, "-n %d makes only the prefill's token, and the run has "
                         "no round to draw; give -n 2 or more", o->max_new_tokens);
    int *seq = malloc(((size_t)ld->prompt.n + 2) * sizeof(int)); // the prompt, then the token
    if (!seq || build_spec_buffers(&r->b, o->K, V) != 0) {
        free(seq);
        return fail_with(err, errlen, "out of memory for a round of %d guesses", o->K);
    }
    Rng rng; // seeded as run_generation seeds it: the same draws in the same order
    rng_seed(&rng, o->seed);
    Stats st = {0}; // the counters prefill and the refill add to (not shown)
    DecodeOptions opt = {.max_new_tokens = o->max_new_tokens, .K = o->K,
                         .temperature = o->temperature, .vocab = &ld->v, .rng = &rng, .st = &st};
    // the prefill, and the first token from its last row (speculative_generate's step 1)
    int n_seq = start_sequence(seq, &ld->prompt); // the encoded -p
    const float *logits = prefill(g, seq, n_seq, S, &st);
    r->current_token = sample_token(logits, V, o->temperature, r->b.prefill_probs, &rng);
    seq[n_seq++] = r->current_token; // the refill reads it, as the last token
    int room = r->current_token >= 0 ? make_room(g, seq, n_seq, &opt) : 0; // the window rule
    // the cache holds the cache_len tokens before current_token (the invariant): record them,
    // then current_token and the guesses, which the verify pass adds at the next positions
    r->cache_len = g->state.cache_len;
    r->window = malloc((size_t)S * sizeof(int)); // S: the pass never runs past the window
    for (int pos = 0; r->window && pos < r->cache_len; pos++)
        r->window[pos] = seq[n_seq - 1 - r->cache_len + pos];
    free(seq);
    if (!r->window)
        return fail_with(err, errlen, "out of memory for a window of %d positions", S);
    if (r->current_token < 0)
        return fail_with(err, errlen, "the prefill's row of logits is not finite: no round "
                         "follows it (see ./specdec -n 2)");
    // round 1: k guesses, as the loop clamps them; then the draft, one pass, the verdicts
    int remaining = o->max_new_tokens - 1;
    r->k = o->K < remaining ? o->K : remaining; // as the blog clamps k
    if (r->k > room) // the guesses must fit the window (a prompt of S-1 tokens leaves none)
        r->k = room;
    r->allow_bonus = r->k < remaining; // never more tokens than -n asks
    draft_tokens(d, r->current_token, r->k, o->temperature, &rng, &r->b); // guesses, rows q
    // rows p: one pass; a row that is not finite stops the loop, and this round too
    if (verify_candidates(g, r->current_token, r->k, o->temperature, &r->b) >= 0)
        return fail_with(err, errlen, "round 1's verify pass gives a row of logits that is not "
                         "finite; the run stops there (see ./specdec --trace)");
    r->n_emitted = accept_reject(&r->b, r->k, r->allow_bonus, &rng); // u, verdicts, last token
    // the trim, by specdec.c's own call: the lengths before and after it are what it drew
    for (int i = 0; i <= r->k; i++)
        r->window[r->cache_len + i] = r->b.all_tokens[i]; // [current_token, c0 .. c(k-1)]
    r->verified = g->state.cache_len;
    trim_kv_cache(g, r->n_emitted, r->cache_len);
    r->keep = g->state.cache_len;
    return 0;
}

// ----------------------------------------------------------------------------
// The drawing: plain SVG, one <text> element per line (the test reads them)

#define W 960          // the picture's width
#define PANEL 172      // the height of one guess's panel
#define BAR_H 100.0    // the bars' height for a probability of 1
#define SLOT 46        // the width of one character's pair of bars
#define BARS_X 270     // where the bars start
#define GAUGE_X 640    // where the u gauge's 0 is
#define GAUGE_W 280    // its length, 0 to 1
#define TOP 7          // characters shown: the likeliest 6, and the guess if it is not one
#define C_Q "#4c78a8"  // the draft's q: blue
#define C_P "#f58518"  // the target's p: orange
#define C_R "#8e44ad"  // the residual max(0, p - q): purple
#define C_OK "#2e7d32" // ACCEPT
#define C_NO "#c62828" // REJECT

// Writes text with the characters XML gives a meaning to escaped.
static void put_escaped(FILE *f, const char *s) {
    for (; *s; s++)
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else fputc(*s, f);
}

// Writes a token as the trace names it ('h', ' ', '\n'), XML-escaped.
static void put_token(FILE *f, const Vocab *v, int token) {
    char vis[8];
    visible_char(vis, decode(v, token));
    put_escaped(f, vis);
}

// Writes the ./specdec command whose round 1 this is: argv (NULL-terminated, as main gets it)
// after its first word, -o and its path left out (the picture's, not the run's), each word
// quoted as a shell needs it; XML-escaped with xml set.
static void put_command(FILE *f, char *const *argv, int xml) {
    fputs("./specdec --trace", f);
    for (int i = 1; argv[i]; i++) {
        if (!strcmp(argv[i], "-o") && argv[i + 1]) { // skip -o PATH
            i++;
            continue;
        }
        // a word of letters, digits and -_./= stands bare; any other goes in double quotes,
        // with a backslash before the four characters a shell still reads there
        int bare = *argv[i] && strspn(argv[i], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"
                                      "WXYZ0123456789-_./=") == strlen(argv[i]);
        fputs(bare ? " " : " \"", f);
        for (const char *c = argv[i]; *c; c++) {
            char one[2] = {*c, 0};
            if (!bare && strchr("\"$`\\", *c)) fputc('\\', f);
            if (xml) put_escaped(f, one);
            else fputc(*c, f);
        }
        if (!bare) fputc('"', f);
    }
}

// The larger of a[x] and b[x] (b may be NULL): how tall x's tallest bar is.
static float tallest(const float *a, const float *b, int x) {
    return b && b[x] > a[x] ? b[x] : a[x];
}

// The (at most TOP) characters to show: the TOP-1 with the largest max(a, b) (b may be NULL),
// largest first, ties to the lower id, then `must` if it is not among them. Returns how many.
static int top_tokens(const float *a, const float *b, int V, int must, int *ids) {
    int n = 0, found = 0; // found: `must` is among them
    for (; n < TOP - 1 && n < V; n++) { // each pick: the tallest not yet picked
        int best = -1; // the tallest not yet picked, so far
        for (int x = 0; x < V; x++) {
            int taken = 0; // x is already in ids
            for (int j = 0; j < n; j++) taken |= ids[j] == x;
            if (!taken && (best < 0 || tallest(a, b, x) > tallest(a, b, best))) best = x;
        }
        ids[n] = best; // V >= TOP-1 was checked by the loop's bound
        found |= best == must;
    }
    if (!found) ids[n++] = must; // the guess always shows, last if it is small
    return n;
}

// Draws bars for ids at (x, base): one or two rows side by side (rows[1] may be NULL), each in
// its colour and named by its class ("q", "p", "pk" for p_k, "r"; the test reads the marked
// q and p), the marked token's slot shaded; with `values`, each bar's value above it.
static void draw_bars(FILE *f, const Vocab *v, const int *ids, int n, const float *const rows[2],
                      const char *const kinds[2], int marked, double x, double base,
                      int values) {
    int two = rows[1] != NULL; // q beside p, or one row alone
    double bw = two ? 16 : 24; // a bar's width: two side by side, or one wider
    // the axis, and dashed lines at 0.5 and 1 to read the bars against
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\"/>\n", x,
            base, x + n * SLOT, base);
    for (int h = 1; h <= 2; h++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\" "
                "stroke-dasharray=\"3 3\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" "
                "fill=\"#999\" text-anchor=\"end\">%s</text>\n", x, base - h * BAR_H / 2,
                x + n * SLOT, base - h * BAR_H / 2, x - 4, base - h * BAR_H / 2 + 3,
                h == 1 ? "0.5" : "1");
    for (int j = 0; j < n; j++) {
        double sx = x + j * SLOT; // this slot's left edge
        int mark = ids[j] == marked; // the guess, or the token drawn
        if (mark) // the guess (or the token drawn): a shaded slot
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"#fff3c4\" "
                    "stroke=\"#e0b000\"/>\n", sx + 2, base - BAR_H - 6, SLOT - 4, BAR_H + 26);
        for (int r = 0; r <= two; r++) { // the rows' bars, left to right
            double h = rows[r][ids[j]] * BAR_H, bx = sx + (SLOT - (two + 1) * bw) / 2 + r * bw;
            fprintf(f, "<rect class=\"%s%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.0f\" height=\"%.1f\" "
                    "fill=\"%s\"/>\n", kinds[r], mark ? " mark" : "", bx, base - h, bw - 1, h,
                    kinds[r][0] == 'q' ? C_Q : kinds[r][0] == 'p' ? C_P : C_R);
            if (values)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">"
                        "%.3f</text>\n", bx + bw / 2, base - h - 3, rows[r][ids[j]]);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\"%s>",
                sx + SLOT / 2.0, base + 16, mark ? " font-weight=\"bold\"" : "");
        put_token(f, v, ids[j]);
        fputs("</text>\n", f);
    }
}

// The text the target's row i follows: the prompt's last characters, the prefill's token and
// guesses 0 .. i-1, as the trace would quote it ("…not to be, th").
static void put_context(FILE *f, const Loaded *ld, const Round *r, int i) {
    int toks[24], n = 0; // its last 24 tokens at most, newest first
    for (int j = i - 1; j >= 0 && n < 24; j--) toks[n++] = r->b.candidates[j];
    if (n < 24) toks[n++] = r->current_token; // the prefill's token
    for (int j = ld->prompt.n - 1; j >= 0 && n < 24; j--) toks[n++] = ld->prompt.tok[j];
    // an ellipsis when the text goes on before them
    fputs(i + 1 + ld->prompt.n > n ? "\"&#8230;" : "\"", f);
    for (int j = n - 1; j >= 0; j--) { // oldest first
        char one[2] = {(char)decode(&ld->v, toks[j]), 0};
        if (one[0] == '\n') fputs("\\n", f);
        else put_escaped(f, one);
    }
    fputc('"', f);
}

// Draws guess i's panel from y: its line of numbers (the trace's), q and p over the likeliest
// characters with the guess marked, and u against min(1, p/q) with the verdict.
static void draw_guess(FILE *f, const Loaded *ld, const Round *r, int i, double y) {
    const SpecBuffers *b = &r->b;
    int V = b->V, c = b->candidates[i], rejected = i == b->rejected_at; // c: the guess
    const float *q = b->draft_probs + (size_t)i * V; // the rows that judged it
    const float *p = b->target_probs + (size_t)i * V;
#ifdef BREAK_PICTURE_SWAP // a planted bug (test/picture_test.sh must catch it): p and q swapped
    const float *swap = p;
    p = q;
    q = swap;
#endif
    double ratio = (double)p[c] / q[c], a = fmin(1.0, ratio), u = b->u[i]; // as accept_reject
    const char *verdict = rejected ? "REJECT" : "ACCEPT", *color = rejected ? C_NO : C_OK;
    fprintf(f, "<rect x=\"12\" y=\"%.1f\" width=\"%d\" height=\"%d\" rx=\"8\" fill=\"#f7f7f7\" "
            "stroke=\"#ddd\"/>\n", y, W - 24, PANEL - 10);
    // the line of numbers, as the trace prints it: token, p, q, p/q, min(1, p/q), u, verdict, sum
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"14\"><tspan font-weight=\"bold\">guess "
            "%d</tspan>  ", y + 24, i + 1);
    put_token(f, &ld->v, c);
    fprintf(f, "  p=%.4f q=%.4f p/q=%.3f min(1,p/q)=%.3f u=%.3f -&gt; <tspan font-weight=\"bold\" "
            "fill=\"%s\">%s</tspan>   sum min(p,q)=%.3f</text>\n", p[c], q[c], ratio, a, u, color,
            verdict, expected_acceptance(p, q, V)); // the guess's chance to pass, as the trace
    // the two rows' contexts: the bigram sees one character, the target the whole text
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"" C_Q "\">q: the bigram after "
            "", y + 58);
    put_token(f, &ld->v, i ? b->candidates[i - 1] : r->current_token);
    fprintf(f, "</text>\n<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"" C_P "\">p: the "
            "model after</text>\n<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"" C_P "\">",
            y + 78, y + 94);
    put_context(f, ld, r, i); // the text the target read
    fputs("</text>\n", f);
    // the bars
    int ids[TOP];
    int n = top_tokens(q, p, V, c, ids); // the likeliest under either row
    draw_bars(f, &ld->v, ids, n, (const float *const[2]){q, p}, (const char *const[2]){"q", "p"},
              c, BARS_X, y + 140, 0);
    // the gauge: [0, min(1, p/q)) accepts, the rest rejects; u marked on it
    double gy = y + 84, ax = GAUGE_X + a * GAUGE_W, ux = GAUGE_X + u * GAUGE_W;
    fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"14\" fill=\"#c8e6c9\"/>\n"
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"14\" fill=\"#ffcdd2\"/>\n",
            GAUGE_X, gy, ax - GAUGE_X, ax, gy, GAUGE_X + GAUGE_W - ax);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#555\" text-anchor=\"end\">0"
            "</text><text x=\"%d\" y=\"%.1f\" font-size=\"11\" fill=\"#555\">1</text>\n",
            GAUGE_X - 5, gy + 11, GAUGE_X + GAUGE_W + 5, gy + 11);
    // min(1, p/q) ticked under the gauge, u's arrow above it: the two labels never meet
    fprintf(f, "<path d=\"M%.1f %.1f v7\" stroke=\"#555\"/><text x=\"%.1f\" y=\"%.1f\" "
            "font-size=\"11\" text-anchor=\"%s\" fill=\"#555\">min(1, p/q) = %.3f</text>\n", ax,
            gy + 14, ax, gy + 32, a > 0.5 ? "end" : "start", a);
    fprintf(f, "<path d=\"M%.1f %.1f v22 M%.1f %.1f l-5 -7 h10 z\" stroke=\"black\" "
            "stroke-width=\"2\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
            "text-anchor=\"middle\" font-weight=\"bold\">u = %.3f</text>\n", ux, gy - 4, ux, gy - 4,
            ux, gy - 16, u);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"13\" fill=\"%s\">", GAUGE_X, gy + 58, color);
    if (rejected)
        fprintf(f, "u &#8805; min(1, p/q): reject, and draw again</text>\n");
    else
        fprintf(f, "u &lt; min(1, p/q): keep the guess</text>\n");
}

// Draws the round's last row from y: the residual max(0, p - q) at the rejection, with the
// resampled token marked; or, if every guess passed, the bonus row p_k and its token; or
// (the run's last round, or no guess) what the trace says there. Returns its height.
static double draw_last(FILE *f, const Loaded *ld, const Round *r, double y) {
    const SpecBuffers *b = &r->b;
    int V = b->V, i = b->rejected_at, k = r->k, last = b->emitted[r->n_emitted - 1]; // last: drawn
    if (i < 0 && r->n_emitted == k) { // all passed, and no bonus: the run needs no more
        fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"14\">(all %d passed; no bonus: the "
                "round already gives every token still needed)</text>\n", y + 20, k);
        return 36; // one line of text
    }
    float row[256]; // the row drawn from (V <= 256: one byte a character)
    const float *p = b->target_probs + (size_t)(i < 0 ? k : i) * V;
    double mass = 0.0; // the residual's total: the chance the guess was rejected
    for (int x = 0; x < V; x++) {
        double w = i < 0 ? p[x] : b->adjusted[x]; // p_k, or max(0, p - q): the weights drawn
        mass += w; // in double, as sample_weights sums them
        row[x] = (float)w;
    }
    for (int x = 0; i >= 0 && x < V; x++) // its shares, the row the resample draws from
        row[x] = mass > 0.0 ? row[x] / mass : p[x]; // (no mass: p == q, and the draw is from p)
    fprintf(f, "<rect x=\"12\" y=\"%.1f\" width=\"%d\" height=\"%d\" rx=\"8\" fill=\"#f7f7f7\" "
            "stroke=\"#ddd\"/>\n<text x=\"24\" y=\"%.1f\" font-size=\"14\"><tspan "
            "font-weight=\"bold\">", y, W - 24, PANEL - 10, y + 24);
    if (i >= 0) // the trace's words
        fprintf(f, "guess %d</tspan>  resample from norm(max(0, p-q)) (mass %.3f) with u=%.3f, "
                "u*mass=%.3f -&gt; ", i + 1, mass, b->u_last, b->u_last * mass);
    else if (k == 0)
        fprintf(f, "STEP</tspan>  one token from target_probs[0] with u=%.3f -&gt; ", b->u_last);
    else
        fprintf(f, "BONUS</tspan>  all %d passed: one more token from target_probs[%d] with "
                "u=%.3f -&gt; ", k, k, b->u_last);
    put_token(f, &ld->v, last);
    double upto = 0.0; // the residual's running sum through the drawn token, as the trace gives it
    for (int x = 0; i >= 0 && x <= last; x++)
        upto += b->adjusted[x];
    // the rest of the trace's line, why u*mass lands on this token, in the panel's right column:
    // three lines of the same <text>, so that its words still read as the trace's one line
    if (i >= 0 && mass > 0.0)
        fprintf(f, ",<tspan x=\"600\" dy=\"28\"> the first in id order whose</tspan><tspan "
                "x=\"600\" dy=\"20\"> running sum passes u*mass:</tspan><tspan x=\"600\" "
                "dy=\"20\"> %.3f before it, %.3f with it</tspan>", upto - b->adjusted[last], upto);
    else if (i >= 0)
        fprintf(f, ",<tspan x=\"600\" dy=\"28\"> drawn from p: adjusted has no mass</tspan>");
    fputs("</text>\n", f);
    // why this row: the residual's mass is the chance of the rejection; p_k came free
    char why[4][48];
    if (i >= 0) {
        snprintf(why[0], sizeof(why[0]), "the residual max(0, p-q)");
        snprintf(why[1], sizeof(why[1]), "sums to %.3f = P(reject);", mass);
        snprintf(why[2], sizeof(why[2]), "the bars: norm(max(0, p-q)),");
        snprintf(why[3], sizeof(why[3]), "walked in token order by u");
    } else {
        snprintf(why[0], sizeof(why[0]), "p: the model's row after");
        snprintf(why[1], sizeof(why[1]), "%s;", k ? "every guess" : "current_token");
        snprintf(why[2], sizeof(why[2]), k ? "the verify pass computed it," : "no guess: the pass");
        snprintf(why[3], sizeof(why[3]), k ? "so the token comes free" : "is one plain step");
    }
    for (int j = 0; j < 4; j++)
        fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"%s\">%s</text>\n",
                y + 58 + 18 * j, i < 0 ? C_P : C_R, why[j]);
    int ids[TOP];
    int n = top_tokens(row, NULL, V, last, ids); // the likeliest, and the token drawn
    for (int a = 1; a < n; a++) // in token-id order: the order the draw walks its running sum
        for (int z = a; z > 0 && ids[z] < ids[z - 1]; z--) {
            int t = ids[z];
            ids[z] = ids[z - 1];
            ids[z - 1] = t;
        }
    draw_bars(f, &ld->v, ids, n, (const float *const[2]){row, NULL},
              (const char *const[2]){i < 0 ? "pk" : "r", NULL}, last, BARS_X, y + 140, 1);
    return PANEL; // the panel's height
}

// Draws the TRIM from y: the trace's TRIM line, then the cache's S positions as cells, the
// ones cached before the round, the ones the verify pass wrote and the trim kept or dropped,
// and where the new current_token goes. Returns its height.
static double draw_trim(FILE *f, const Loaded *ld, const Round *r, double y) {
    int S = ld->g.config.block_size, last = r->b.emitted[r->n_emitted - 1];
    double w = (W - 48.0) / S < 28 ? (W - 48.0) / S : 28; // one position's cell
    // 13 px, not 14: the trace's whole TRIM line fits the picture's width
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"13\"><tspan font-weight=\"bold\">TRIM"
            "</tspan>    cache_len %d + %d = %d -&gt; %d (kept the round's current_token + %d, "
            "dropped %d); ", y + 20, r->cache_len, r->verified - r->cache_len, r->verified, r->keep,
            r->n_emitted - 1, r->verified - r->keep);
    put_token(f, &ld->v, last);
    fputs(" is the new current_token</text>\n", f);
    for (int pos = 0; pos < S; pos++) { // a cell per position, coloured by what became of it
        const char *kind = pos < r->cache_len ? "cached" : pos < r->keep ? "kept"
                           : pos < r->verified ? "dropped" : "free";
        const char *fill = kind[0] == 'c' ? "#e8e8e8" : kind[0] == 'k' ? "#c8e6c9"
                           : kind[0] == 'd' ? "#ffcdd2" : "white";
        double x = 24 + pos * w; // the cell's left edge
        fprintf(f, "<rect class=\"cell %s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"26\" "
                "fill=\"%s\" stroke=\"#999\"/>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\" "
                "fill=\"#777\" text-anchor=\"middle\">%d</text>\n", kind, x, y + 36, w, fill,
                x + w / 2, y + 74, pos);
        if (pos >= r->verified) // nothing cached there
            continue;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">", x + w / 2,
                y + 53);
        put_token(f, &ld->v, r->window[pos]);
        fputs("</text>\n", f);
    }
    // where the next round starts: current_token is not cached, its pass writes it at keep
    double ax = 24 + r->keep * w + w / 2; // the arrow, under position keep
    int right = ax > W / 2; // the words go on the arrow's roomier side
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\" "
            "text-anchor=\"middle\">&#8593;</text>\n<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
            "font-weight=\"bold\" text-anchor=\"%s\">", ax, y + 92, right ? ax - 10 : ax + 10,
            y + 92, right ? "end" : "start");
    put_token(f, &ld->v, last);
    fprintf(f, ", the next round's current_token: its verify pass writes position %d"
            "</text>\n", r->keep);
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">grey: cached before "
            "the round; green: kept (current_token and the accepted guesses); red: written by the "
            "verify pass, dropped</text>\n", y + 112);
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">between rounds the "
            "cache holds exactly the tokens before current_token: keep = cache_len + num_accepted "
            "= %d + %d</text>\n", y + 128, r->cache_len, r->n_emitted);
    return 140; // five lines and the cells
}

// Writes the whole picture to f: the title and the draft, a panel per guess judged, the
// discarded guesses, the last row, what the round emitted, and the command (argv) it is of.
static void draw_round(FILE *f, const Loaded *ld, const Round *r, char *const *argv) {
    const SpecBuffers *b = &r->b;
    int judged = b->rejected_at >= 0 ? b->rejected_at + 1 : r->k; // up to a rejection
    int height = 160 + judged * PANEL + (judged < r->k ? 30 : 0) + PANEL + 210; // every part below
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"monospace\" xml:space=\"preserve\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, height, W, height);
    fprintf(f, "<text x=\"24\" y=\"34\" font-size=\"20\" font-weight=\"bold\" "
            "font-family=\"sans-serif\">One round of speculative decoding, as specdec.c runs it"
            "</text>\n<text x=\"24\" y=\"62\" font-size=\"14\">round 1: current_token ");
    put_token(f, &ld->v, r->current_token);
    if (r->k > 0) { // the draft's chain starts from current_token
        fprintf(f, "; the bigram drafts ");
        put_token(f, &ld->v, r->current_token);
    }
    for (int i = 0; i < r->k; i++) { // the draft's chain, each guess after the one before
        fputs(" -&gt; ", f);
        put_token(f, &ld->v, b->candidates[i]);
    }
    if (r->k == 0) // the cache's last position: the pass is one plain step
        fputs("</text>\n<text x=\"24\" y=\"82\" font-size=\"14\">no room in "
              "the cache for a guess: the round is one step of plain decoding</text>\n", f);
    else
        fprintf(f, "</text>\n<text x=\"24\" y=\"82\" font-size=\"14\">one target pass scores "
                "all %d; each guess is kept when u &lt; min(1, p/q)</text>\n", r->k);
    // the legend
    const char *keys[4][2] = {{C_Q, "q: the draft (bigram)"}, {C_P, "p: the target (GPT)"},
                              {C_R, "max(0, p-q): the residual"},
                              {"#fff3c4", "the guess, or the token drawn"}};
    for (int j = 0; j < 4; j++)
        fprintf(f, "<rect x=\"%d\" y=\"100\" width=\"14\" height=\"14\" fill=\"%s\" "
                "stroke=\"#999\"/><text x=\"%d\" y=\"112\" font-size=\"12\">%s</text>\n",
                24 + 230 * j, keys[j][0], 44 + 230 * j, keys[j][1]);
    double y = 130; // the panels start under the legend
    for (int i = 0; i < judged; i++, y += PANEL) // a panel per guess judged
        draw_guess(f, ld, r, i, y);
    if (judged < r->k) { // the guesses after a rejection: never judged
        fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"13\" fill=\"#777\">discarded, never "
                "judged (drafted after a rejected guess):", y + 16);
        for (int i = judged; i < r->k; i++) {
            fputc(' ', f);
            put_token(f, &ld->v, b->candidates[i]);
        }
        fputs("</text>\n", f);
        y += 30; // the discarded line's height
    }
    y += draw_last(f, ld, r, y); // the residual, bonus or step
    // what the round emitted, as the trace's RESULT line spells it, and the command
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">RESULT  emitted "
            "\"", y + 20);
    for (int i = 0; i < r->n_emitted; i++) { // the text, as a C string literal spells it
        unsigned char ch = decode(&ld->v, b->emitted[i]); // the trace escapes " \\ \\n
        char one[2] = {(char)ch, 0};
        if (ch == '\n') fputs("\\n", f);
        else if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else put_escaped(f, one);
    }
    fprintf(f, "\": %d token%s from 1 target pass</text>\n", r->n_emitted,
            r->n_emitted == 1 ? "" : "s");
    y += draw_trim(f, ld, r, y + 30); // the cache, rolled back to what the round emitted
    fprintf(f, "<text x=\"24\" y=\"%.1f\" font-size=\"12\" fill=\"#555\">drawn by test/picture "
            "(make picture) from round 1 of: ", y + 48);
    put_command(f, argv, 1); // the run this round is of
    fputs("</text>\n</svg>\n", f);
}

// ----------------------------------------------------------------------------
// The command line

// Writes the picture to path.tmp, then renames it over path. 0, or -1 with err set (and
// path as it was).
static int write_picture(const char *path, const Loaded *ld, const Round *r, char *const *argv,
                         char *err, size_t errlen) {
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return fail_with(err, errlen, "-o path is too long: %zu bytes", strlen(path));
    FILE *f = fopen(tmp, "w"); // PATH itself is untouched until the rename
    if (!f)
        return fail_with(err, errlen, "cannot write the picture to '%s': %s (choose a writable "
                         "-o path)", tmp, strerror(errno));
    draw_round(f, ld, r, argv); // every write of it, checked below at once
    int bad = ferror(f); // a write lost on the way (a full disk) shows here or at fclose
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        int e = errno; // remove may change errno
        remove(tmp); // no half-written file is left
        return fail_with(err, errlen, "writing the picture to '%s' failed: %s (check the disk "
                         "and the -o path)", path, bad ? "a write failed" : strerror(e));
    }
    return 0;
}

// test/picture [./specdec's options] -o PATH: round 1 of that run, drawn into PATH.
int main(int argc, char **argv) {
    program_name = "picture"; // its messages' first word
    Options o; // ./specdec's options, parsed by its own table
    const char *out = NULL; // -o
    const OptionSpec more[] = {{"-o", OPT_TEXT, &out, 0, 0, NULL, 0}, {0}}; // after its rows
    Loaded ld = {0}; // zeroed, as are the draft and the round: done: frees what was made
    BigramDraft draft = {0}; // the blog's bigram table, from -i
    Round r = {0}; // round 1: its buffers, what it drew
    char err[512] = ""; // a refusal's one line
    int rc = 1; // 1 until the picture is written
    if (parse_args(argc, argv, &o, more, err, sizeof(err)) != 0) goto done; // a typo, a bad value
    // the flags of ./specdec's actions have no use here
    const char *flag = o.trace ? "--trace" : o.compare ? "--compare" : o.plain ? "--plain"
                     : o.run_selftest ? "--selftest" : o.no_prompt ? "--no-prompt" : NULL;
    if (flag) {
        fail_with(err, sizeof(err), "%s has no use in test/picture, which draws round 1 of "
                  "./specdec --trace with the same options; drop it", flag);
        goto done;
    }
    if (o.help) {
        printf("usage: test/picture [-m PATH] [-i PATH] [-p TEXT] [-n N] [-k K] [-t T] [-s SEED] "
               "-o PATH\n  round 1 of ./specdec --trace with the same options, drawn as an SVG "
               "into PATH\n  (make picture: notes/round1.svg; see test/picture.c)\n");
        return close_stdout();
    }
    if (!out || !*out) {
        fail_with(err, sizeof(err), "-o PATH is required: where to write the SVG (make picture "
                  "writes notes/round1.svg)");
        goto done;
    }
    // the run's inputs, checked as ./specdec checks them; the draft; round 1; the picture
    if (load_inputs(&o, &ld, &draft, err, sizeof(err)) != 0) goto done;
    if (run_round1(&o, &ld, &draft, &r, err, sizeof(err)) != 0) goto done;
    if (write_picture(out, &ld, &r, argv, err, sizeof(err)) != 0) goto done;
    fputs("round 1 of ", stderr); // what was drawn, and where
    put_command(stderr, argv, 0);
    fprintf(stderr, " drawn in %s\n", out);
    rc = 0; // written and renamed
done:
    if (rc) error_line("%s", err); // "picture: ...", one line
    free_spec_buffers(&r.b);
    free(r.window);
    free_bigram_draft(&draft);
    free((int *)ld.prompt.tok); // load_inputs's malloc
    free_corpus(&ld.corpus);
    free_gpt(&ld.g);
    return rc ? 1 : close_stdout();
}
