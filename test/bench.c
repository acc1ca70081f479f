/*
 * test/bench.c — how fast speculative decoding is here, and why (make bench).
 *
 * It includes beyond.c whole (and with it specdec.c) and measures, on the model it loads,
 * three drafts (the bigram table, the GPT draft tinyshakespeare/draft.bin, prompt lookup)
 * and the ceiling (the unpadded model drafting for the target, the same function: alpha = 1):
 *   1. c(T): the time of one forward over T new tokens divided by a one-token forward,
 *      for T = 1..9, with the matmuls alone beside it, the refill's cost, and each
 *      draft's c_draft (one guess's time over a one-token forward, measured);
 *   2. the K sweep on this model, K = 1..8 at t = 0 and t = 1, every draft: the counters
 *      (acceptance rate, alpha, tokens per verify pass beside (1 - alpha^(K+1)) / (1 - alpha)),
 *      the measured speedup beside the accounting and the papers' formula, the best K, a
 *      text chart;
 *   3. why the draft is tempered (alpha with and without tempering, at the same positions);
 *   4. --draft-p-min against the best fixed K;
 *   5. trees against chains: tokens per verify pass at the same node count, and wall time;
 *   6. the size sweep at t = 1: the same model with its MLP padded by zeros (widen_ffn)
 *      to 8.76 and 34.1 MB of weights (with --full on to 136 MB, where the weights stop
 *      fitting the caches): the streaming bandwidth, c(T) per size, each draft's best K (and
 *      at 136 MB the GPT draft with --draft-p-min) against plain decoding and the bandwidth
 *      limit, the crossover, a text chart and an SVG;
 *   7. the headline figures, each beside the ./beyond command that makes it, the check
 *      that the accounting lands within 10% of every measured cell, and the issue's
 *      targets at 136 MB.
 *
 * How a figure is measured. Every run decodes ./specdec's default prompt with its default
 * seed, TOKENS = 400 new tokens (the 32-token window restarts about 24 times), so all runs
 * of a cell make the same text with the same passes: only the clock moves. Every run goes
 * through beyond.c's one loop, as ./beyond runs it: speculative decoding is tree_generate
 * with a chain of K (chain_shape(K)), plain decoding the tree of no levels. On the loaded
 * model (bench_rounds), a round runs plain decoding once, then each cell's speculative
 * decoding (each round starting one cell later); a cell's speedup is the median, over
 * PAIRS = 3 timed rounds, of plain's wall time over speculative's in the same round,
 * printed with the pairs' min-max. Beside it, from the same runs, the two figures
 * print_accounting prints (beyond.c): the accounting, every pass that ran at its own
 * measured time (cost_per_token, drafting included), and the papers' E/(c(K+1) + K
 * c_draft). The best K (or K and P) of a draft is chosen on separate selection rounds and
 * reported from the timed rounds: no figure is the best of noisy ones. A run that another
 * process kept off its core for more than 5% of its wall time is made again (measured_run).
 * Each figure worth quoting (a headline) is printed beside the command that makes one such
 * pair, `./beyond --compare -n 400 -t T --draft D -k K [--ffn-width H] [--draft-p-min P]`
 * (speculative, then plain, in a fresh process). The bench runs those commands too, since
 * its own process and a fresh ./beyond measure a few percent apart: on the loaded model,
 * each headline's command 5 times after the K sweep and --draft-p-min (check_commands);
 * at the padded widths, after the selection round, the chosen cells' commands 3 times
 * each, as the timed runs themselves (command_rounds). From there on (the chart, the SVG,
 * the summary, the targets) a headline's figure is its command's; the summary prints the
 * bench's own beside it. Every t = 0 run checks that the speculative text is plain
 * decoding's, byte for byte (exit 1 if not).
 *
 *   test/bench [-m PATH] [-i PATH] [--csv] [--svg PATH] [--commands N] [--quick | --full]
 *     --csv       every cell as CSV on stdout (the report stays on stderr)
 *     --svg       the size sweep's chart as an SVG file (make bench-full: notes/speed.svg)
 *     --commands  runs each headline's ./beyond command N times on the loaded model
 *                 (0..5, default 5); 0: no commands, the bench times every cell itself
 *     --quick     the same report on fewer tokens, rounds and sizes (the tests), no commands
 *     --full      the size sweep on to 136 MB, and the trees' wall time there (make
 *                 bench-full): minutes of runs a second or more each, so not by default
 * notes/speed.md reads the numbers.
 */
#ifndef TESTING
#define TESTING    // leaves out beyond.c's and specdec.c's mains: this file has its own ...
#define BENCH_MAIN // ... unless a test includes this file (with TESTING defined)
#endif
#include "../beyond.c" // the one loop (tree_generate), the drafts, RunStats, --ffn-width

// The alpha of a run: specdec.c's, over the candidates it judged.
static double run_alpha(const RunStats *s) { return stats_alpha(&s->core); }

// ----------------------------------------------------------------------------
// How long the bench runs, and what every run decodes

#define BENCH_MAX_K 8      // the K sweep's longest draft
#define BENCH_MAX_DRAFTS 4 // bigram, gpt and lookup, and the ceiling
#define MAX_PAIRS 5        // timed pairs (or selection runs) a cell keeps
#define MAX_TOKENS 500     // room per run: TOKENS is at most this

// The full measurement, or --quick for the tests (the same code and the same report, on
// fewer tokens, rounds and sizes).
static int TOKENS = 400;          // new tokens per run: 300 at least, several window restarts
static int PAIRS = 3;             // timed rounds: plain/speculative pairs per reported cell
static int SELECT_SMALL = 2;      // selection rounds on this model, where a run takes ms
static int CURVE_REPS = 200;      // calls per timing of c(T), this model
static int TEMPER_TOKENS = 500;   // tokens per prompt in the tempering section (untimed)

// What every run decodes: ./specdec's defaults, so that a cell's command needs neither -p
// nor -s (main reads them from parse_args).
static const char *PROMPT = DEFAULT_PROMPT;
static uint64_t SEED = 42;
static int PROMPT_TOKENS[64], N_PROMPT;
static char CMD_PATHS[600];       // " -m PATH -i PATH" when the bench was given them
static const char *MODEL_PATH;    // the loaded model: the ceiling's --draft in a command

// The headlines' ./beyond commands (check_commands, command_rounds): how many runs of
// each, and the wall time spent in them, which this process's CPU time does not count.
static int COMMAND_RUNS = 5;   // --commands N; --quick: 0 (no commands at all)
static double COMMAND_SECONDS;

// Every t = 0 run's greedy check, over the whole bench: texts compared, and how many differed.
static long GREEDY_RUNS, GREEDY_DIFFER;

// The machine's load average over the last minute, or -1 where /proc/loadavg is missing:
// printed beside the timings, which other processes move.
static double load_average(void) {
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = -1.0;
        fclose(f);
    }
    return l;
}

// Seconds of CPU time this process has used (one thread: its time on a core).
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// A note on the machine for the report: the load average, and the share of the wall time
// since the last note during which this process had a core (below 100%: other processes
// took it, and the timings since measure them too).
static const char *machine_note(void) {
    static char buf[128];
    static double last_wall, last_cpu;
    // the ./beyond commands run in processes of their own: their time is left out
    double wall = now_seconds() - COMMAND_SECONDS, cpu = cpu_seconds();
    if (last_wall > 0.0 && wall > last_wall + 0.01)
        snprintf(buf, sizeof(buf), "load %.2f, this process on a core %.0f%% of the time since "
                 "the last note", load_average(), 100.0 * (cpu - last_cpu) / (wall - last_wall));
    else
        snprintf(buf, sizeof(buf), "load %.2f", load_average());
    last_wall = wall;
    last_cpu = cpu;
    return buf;
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

// Median, least and greatest of n <= MAX_PAIRS numbers, left in their order.
static double median_of(const double *x, int n) {
    double y[MAX_PAIRS];
    if (n <= 0) return 0.0;
    memcpy(y, x, (size_t)n * sizeof(double));
    return median(y, n);
}
static double min_of(const double *x, int n) {
    double m = n > 0 ? x[0] : 0.0;
    for (int i = 1; i < n; i++) m = fmin(m, x[i]);
    return m;
}
static double max_of(const double *x, int n) {
    double m = n > 0 ? x[0] : 0.0;
    for (int i = 1; i < n; i++) m = fmax(m, x[i]);
    return m;
}

// ----------------------------------------------------------------------------
// A cell, its runs, and the two accounts beside them

// What a run of a cell's ./beyond --compare command printed (print_comparison's wall times,
// print_accounting's figures): the measured speedup, the accounting, the papers' formula (0
// when it printed none), and the two wall times in ms.
enum { CMD_MEASURED, CMD_FULL, CMD_TEXTBOOK, CMD_SPEC_MS, CMD_PLAIN_MS, CMD_FIGS };

// One speculative configuration on one target, and what its runs measured.
typedef struct {
    Draft *d;            // the draft (the ceiling is a model draft too)
    int K;
    float p_min;         // --draft-p-min, 0 = off
    float t;
    int H;               // the target's --ffn-width; 0: the model as loaded
    double mb;           // that target's weights, MB
    const double *curve; // that target's c(T), T = 1..9 (c[0]: a one-token pass, seconds)
    int n_sel;           // selection runs, each plain/speculative in its round
    double sel[MAX_PAIRS];
    int n_pairs;         // timed pairs: each side's counters and times, and what they give
    RunStats spec[MAX_PAIRS], plain[MAX_PAIRS];
    double ratio[MAX_PAIRS];    // plain wall time / speculative wall time
    double full[MAX_PAIRS];     // every pass at its c(T): print_accounting's accounting
    double textbook[MAX_PAIRS]; // the papers' E/(c(K+1) + K c_draft)
    RunStats last_spec, last_plain; // the latest pair of any kind: every run of a cell makes the
                                 // same text and passes, so its counters are every run's
    int by_command;      // its timed pairs are runs of its ./beyond command (command_rounds)
    int n_cmd;           // runs of its command: each one's figures (CMD_*) and stderr
    double cmd[MAX_PAIRS][CMD_FIGS];
    char *cmd_text[MAX_PAIRS];
    long greedy_differ;  // t = 0 runs whose text was not plain decoding's (a bug)
    int same_text;       // the latest speculative text was plain decoding's
    int chosen;          // the draft's best K (or K and P), picked on the selection runs
} Cell;

#define MAX_CELLS 200
static Cell POOL[MAX_CELLS]; // every cell of the bench (about 140)
static int N_CELLS;

// A new cell in the pool, or NULL when it is full.
static Cell *new_cell(Draft *d, int K, float p_min, float t, int H, double mb,
                      const double *curve) {
    if (N_CELLS == MAX_CELLS) return NULL;
    Cell *c = &POOL[N_CELLS++];
    memset(c, 0, sizeof(*c));
    *c = (Cell){.d = d, .K = K, .p_min = p_min, .t = t, .H = H, .mb = mb, .curve = curve};
    return c;
}

// x as "%5.2f", or "    -" when it is 0: the papers' formula when no round drafted K
// guesses to price it by (print_accounting prints none then either). buf: 16 chars.
static const char *or_dash(double x, char *buf) {
    if (x > 0.0) snprintf(buf, 16, "%5.2f", x);
    else snprintf(buf, 16, "    -");
    return buf;
}

// The index of the median of n numbers (the lower middle one of an even count).
static int mid_index(const double *x, int n) {
    int rank[MAX_PAIRS];
    for (int i = 0; i < n; i++) rank[i] = i;
    for (int i = 1; i < n; i++) // insertion sort of a few indices
        for (int j = i; j > 0 && x[rank[j]] < x[rank[j - 1]]; j--) {
            int t = rank[j];
            rank[j] = rank[j - 1];
            rank[j - 1] = t;
        }
    return n > 0 ? rank[(n - 1) / 2] : 0;
}

// The bench's timed pair whose ratio is the median: the run its time table shows.
static int mid_pair(const Cell *c) { return mid_index(c->ratio, c->n_pairs); }

// The run of the cell's command whose measured speedup is the median.
static int mid_run(const Cell *c) {
    double m[MAX_PAIRS];
    for (int i = 0; i < c->n_cmd; i++) m[i] = c->cmd[i][CMD_MEASURED];
    return mid_index(m, c->n_cmd);
}

// A cell's figure to quote, by f (median_of, min_of or max_of) over its runs: those of its
// ./beyond command where the bench ran it, else the bench's own timed pairs. col: the
// measured speedup (CMD_MEASURED), the accounting (CMD_FULL) or the textbook (CMD_TEXTBOOK).
static double figure(const Cell *c, int col, double (*f)(const double *, int)) {
    double x[MAX_PAIRS];
    if (c->n_cmd > 0) {
        for (int i = 0; i < c->n_cmd; i++) x[i] = c->cmd[i][col];
        return f(x, c->n_cmd);
    }
    return f(col == CMD_MEASURED ? c->ratio : col == CMD_FULL ? c->full : c->textbook,
             c->n_pairs);
}
static double cell_speedup(const Cell *c) { return figure(c, CMD_MEASURED, median_of); }
static double cell_lo(const Cell *c) { return figure(c, CMD_MEASURED, min_of); }
static double cell_hi(const Cell *c) { return figure(c, CMD_MEASURED, max_of); }
static double cell_full(const Cell *c) { return figure(c, CMD_FULL, median_of); }
static double cell_textbook(const Cell *c) { return figure(c, CMD_TEXTBOOK, median_of); }
static int cell_runs(const Cell *c) { return c->n_cmd > 0 ? c->n_cmd : c->n_pairs; }
static double cell_select(const Cell *c) { return median_of(c->sel, c->n_sel); }

// The bench's own pair behind a cell's figures: the median timed pair, or the latest run
// (the selection run of a cell timed by its command: the same text and passes).
static const RunStats *cell_spec(const Cell *c) {
    return c->n_pairs && !c->by_command ? &c->spec[mid_pair(c)] : &c->last_spec;
}
static const RunStats *cell_plain(const Cell *c) {
    return c->n_pairs && !c->by_command ? &c->plain[mid_pair(c)] : &c->last_plain;
}

// The two wall times of the median run, in seconds: the command's, where the bench ran it.
static double cell_spec_seconds(const Cell *c) {
    return c->n_cmd > 0 ? c->cmd[mid_run(c)][CMD_SPEC_MS] / 1e3 : cell_spec(c)->core.seconds;
}
static double cell_plain_seconds(const Cell *c) {
    return c->n_cmd > 0 ? c->cmd[mid_run(c)][CMD_PLAIN_MS] / 1e3 : cell_plain(c)->core.seconds;
}

// The counters (the same in every run of the cell): the acceptance rate (accepted /
// drafted), guesses drafted per round, tokens per verify pass, target passes per token.
static double cell_rate(const Cell *c) {
    const RunStats *s = &c->last_spec;
    return s->core.drafted ? (double)s->core.guesses_accepted / s->core.drafted : 0.0;
}
static double cell_guesses(const Cell *c) {
    const RunStats *s = &c->last_spec;
    return s->core.rounds ? (double)s->core.drafted / s->core.rounds : 0.0;
}
static double cell_tpv(const Cell *c) {
    const RunStats *s = &c->last_spec;
    return s->core.rounds ? (double)s->core.round_tokens / s->core.rounds : 0.0;
}

// One one-token pass of plain decoding, in seconds: the unit print_accounting prices every
// pass in (0 when the run made no one-token step).
static double step_unit(const RunStats *plain) {
    const PassTally *step = &plain->pass[PASS_STEP];
    return step->passes > 0 ? step->seconds / step->passes : 0.0;
}

// c_draft as the runs measured it: one guess's drafting time over the unit.
static double cell_c_draft(const Cell *c) {
    const RunStats *s = cell_spec(c);
    double unit = step_unit(cell_plain(c));
    return s->core.drafted > 0 && unit > 0 ? s->draft_seconds / s->core.drafted / unit : 0.0;
}

// The two accounts beside one measured pair, priced as print_accounting prices them. The
// unit is plain decoding's mean one-token pass. The accounting is cost_per_token of
// plain over that of speculative decoding: every pass that ran, each at its own measured
// time, and drafting (it leaves out only the rest: sampling, accept/reject, bookkeeping).
// The textbook is the papers' E/(c(K+1) + K c_draft), with c(K+1) the mean K+1-token
// pass of the speculative run and c_draft its mean guess; where no round drafted K
// guesses (--draft-p-min, or a long K the window cuts), c(K+1) is the curve's, if K < 9.
static void pair_models(const RunStats *spec, const RunStats *plain, int K, const double *curve,
                        double *full, double *textbook) {
    double unit = step_unit(plain), cs[N_PASS_KINDS + 1], cp[N_PASS_KINDS + 1];
    *full = *textbook = 0.0;
    if (unit <= 0.0) return;
    *full = cost_per_token(plain, unit, cp) / cost_per_token(spec, unit, cs);
    const PassTally *kk = &spec->size[K + 1 < PASS_SIZES ? K + 1 : PASS_SIZES - 1];
    double c_verify = kk->passes > 0 ? kk->seconds / kk->passes / unit :
                      K + 1 <= 9 && curve ? curve[K + 1] : 0.0;
    double c_draft = spec->core.drafted > 0 ? spec->draft_seconds / spec->core.drafted / unit : 0.0;
    if (c_verify > 0.0) *textbook = predicted_speedup(run_alpha(spec), K, c_verify, c_draft);
}

// The ./beyond command that makes one of the cell's pairs: --compare runs speculative
// decoding, then plain, from the same default prompt and seed the bench decodes.
static const char *cell_command(const Cell *c) {
    static char buf[1024];
    int n = snprintf(buf, sizeof(buf), "./beyond --compare%s -n %d -t %g --draft %s -k %d",
                     CMD_PATHS, TOKENS, c->t, strcmp(c->d->name, "ceiling") ? c->d->name :
                     MODEL_PATH, c->K);
    if (c->H > 0 && n < (int)sizeof(buf))
        n += snprintf(buf + n, sizeof(buf) - n, " --ffn-width %d", c->H);
    if (c->p_min > 0.0f && n < (int)sizeof(buf))
        snprintf(buf + n, sizeof(buf) - n, " --draft-p-min %g", c->p_min);
    return buf;
}

// ----------------------------------------------------------------------------
// The runs: plain decoding and each cell's speculative decoding, alternating

// One run of the bench's text through beyond.c's one loop (run_tree, as ./beyond runs
// it): plain decoding (c NULL: the tree of no levels, one-token steps) at temperature t, or
// cell c's speculative decoding (a chain of K, chain_shape(K)). 0, or -1 out of memory.
static int bench_run(GPT *g, float t, const Cell *c, int *seq, RunStats *st) {
    TreeShape shape = c ? chain_shape(c->K) : (TreeShape){0};
    memset(st, 0, sizeof(*st));
    if (c) c->d->p_min = c->p_min; // the drafts are shared between cells: each run sets its own
    int rc = run_tree(g, c ? c->d : NULL, &shape, &(Tokens){PROMPT_TOKENS, N_PROMPT},
                      (Sampler){c ? c->t : t, 0, 0.0f}, SEED, TOKENS, seq, st);
    if (c) c->d->p_min = 0.0f;
    return rc;
}

// A run that other processes kept off its core for more than 5% of its wall time measured
// them, not the decoder: it is made once more, while such second runs stay under a tenth
// of all runs (on a busy machine more would only make the bench longer). The counts are
// printed at the end.
#define MIN_CPU_SHARE 0.95
static int MAX_RERUNS = 1;             // --quick: 0, the tests run it beside others
static long RUNS, RERUNS, RUNS_SHARED; // runs kept, runs made again, runs kept though shared

// One run of plain decoding (c NULL) or of cell c's speculative decoding, made again if
// another process took its core (MIN_CPU_SHARE).
static int measured_run(GPT *g, float t, Cell *c, int *seq, RunStats *st) {
    for (int attempt = 0;; attempt++) {
        double cpu0 = cpu_seconds();
        if (bench_run(g, t, c, seq, st) != 0) return -1;
        double share = st->core.seconds > 0.0 ? (cpu_seconds() - cpu0) / st->core.seconds : 1.0;
        if (share >= MIN_CPU_SHARE) break;
        if (attempt >= MAX_RERUNS || RERUNS >= RUNS / 10) { // keep it, and count it
            RUNS_SHARED++;
            break;
        }
        RERUNS++;
    }
    RUNS++;
    return 0;
}

// What a round is for: to warm up (counted nowhere), to choose (a cell's selection
// runs), or to report (its timed pairs).
typedef enum { WARM_UP, SELECT, TIMED } Phase;

// Runs `rounds` rounds over n cells of one temperature on target g: each round one plain
// decoding, then every cell's speculative decoding, starting one cell later each round so
// that no cell always runs right after plain decoding. A cell's ratio in a round is plain's
// wall time over its own. At t = 0 every speculative text is compared with plain
// decoding's (greedy decoding must give the same text). 0 on success, -1 out of memory.
static int bench_rounds(GPT *g, Cell **cells, int n, int rounds, Phase phase) {
    int *seq = malloc((size_t)(N_PROMPT + MAX_TOKENS) * sizeof(int));
    int *seq_plain = malloc((size_t)(N_PROMPT + MAX_TOKENS) * sizeof(int));
    int rc = -1;
    if (!seq || !seq_plain) goto out;
    for (int r = 0; r < rounds; r++) {
        RunStats sp, ss;
        if (measured_run(g, cells[0]->t, NULL, seq_plain, &sp) != 0) goto out;
        for (int j = 0; j < n; j++) {
            Cell *c = cells[(j + r) % n];
            if (measured_run(g, c->t, c, seq, &ss) != 0) goto out;
            c->same_text = memcmp(seq + N_PROMPT, seq_plain + N_PROMPT,
                                  (size_t)TOKENS * sizeof(int)) == 0;
            if (c->t == 0.0f) { // greedy: the same text as plain decoding, token for token
                GREEDY_RUNS++;
                GREEDY_DIFFER += !c->same_text;
                c->greedy_differ += !c->same_text;
            }
            c->last_spec = ss;
            c->last_plain = sp;
            double ratio = ss.core.seconds > 0 ? sp.core.seconds / ss.core.seconds : 0.0;
            if (phase == SELECT && c->n_sel < MAX_PAIRS) c->sel[c->n_sel++] = ratio;
            if (phase == TIMED && c->n_pairs < MAX_PAIRS) {
                int i = c->n_pairs++;
                c->spec[i] = ss;
                c->plain[i] = sp;
                c->ratio[i] = ratio;
                pair_models(&ss, &sp, c->K, c->curve, &c->full[i], &c->textbook[i]);
            }
        }
    }
    rc = 0;
out:
    free(seq_plain);
    free(seq);
    return rc;
}

// Marks, among n cells, the best of those of draft d, temperature t and family (p-min
// off, or on) by their selection runs' median speedup, and returns it (NULL: none ran).
static Cell *choose(Cell **cells, int n, const Draft *d, float t, int p_min_on) {
    Cell *best = NULL;
    for (int j = 0; j < n; j++) {
        Cell *c = cells[j];
        if (c->d != d || c->t != t || (c->p_min > 0.0f) != p_min_on || c->n_sel == 0) continue;
        if (!best || cell_select(c) > cell_select(best)) best = c;
    }
    if (best) best->chosen = 1;
    return best;
}

// ----------------------------------------------------------------------------
// The commands, run as a reader runs them
//
// The bench's own runs are not ./beyond's: another binary, and a process whose memory
// has served hundreds of runs; they measure a few percent apart (more at 136 MB, where the
// layout of the buffers moves the multi-token passes). A reader runs the command in a
// fresh process. So at the padded widths the chosen cells are timed by running their
// commands (command_rounds), and each headline on the loaded model is checked against
// COMMAND_RUNS runs of its command (check_commands). Both need ./beyond, built from the
// same beyond.c (make bench builds it); without it the bench times every cell itself.

// Runs a command and reads what --compare printed on stderr (CMD_*); *text receives all of
// it (malloc'd, the caller frees it). 0 on success.
static int run_command(const char *cmd, double fig[CMD_FIGS], char **text) {
    char line[1200], buf[1024];
    snprintf(line, sizeof(line), "%s 2>&1 >/dev/null", cmd); // stderr to us, the text away
    double t0 = now_seconds();
    FILE *f = popen(line, "r");
    if (!f) return -1;
    size_t len = 0, cap = 0;
    int found = 0;
    *text = NULL;
    for (int i = 0; i < CMD_FIGS; i++) fig[i] = 0.0;
    while (fgets(buf, sizeof(buf), f)) {
        size_t n = strlen(buf);
        if (len + n + 1 > cap) { // keep it all: the time tables are printed from it
            char *t = realloc(*text, cap = 2 * (len + n + 1));
            if (!t) break;
            *text = t;
        }
        memcpy(*text + len, buf, n + 1);
        len += n;
        if (!strncmp(buf, "  wall time (ms)", 16)) // print_comparison's line: spec, plain
            sscanf(buf + 16, "%lf %lf", &fig[CMD_SPEC_MS], &fig[CMD_PLAIN_MS]);
        // print_accounting's three speedup lines: "  speedup   1.234x: ...", "  accounting
        // 1.234x: ...", "  papers' formula   1.234x: ..." (or no number, when unpriced)
        if (!strncmp(buf, "  speedup ", 10))
            found |= sscanf(buf + 10, "%lf", &fig[CMD_MEASURED]) == 1;
        if (!strncmp(buf, "  accounting ", 13))
            found |= (sscanf(buf + 13, "%lf", &fig[CMD_FULL]) == 1) << 1;
        if (!strncmp(buf, "  papers' formula ", 18))
            sscanf(buf + 18, "%lf", &fig[CMD_TEXTBOOK]);
    }
    found = found == 3; // both the measured speedup and the accounting were read
    int rc = pclose(f);
    COMMAND_SECONDS += now_seconds() - t0;
    return rc == 0 && found && fig[CMD_SPEC_MS] > 0.0 ? 0 : -1;
}

// Runs the n cells' commands `rounds` times, every cell once a round (one cell later each
// round, as bench_rounds does), and keeps each run in the cell's cmd and cmd_text. 0 when
// every run succeeded.
static int command_rounds(Cell **cells, int n, int rounds) {
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < n; j++) {
            Cell *c = cells[(j + r) % n];
            if (c->n_cmd == MAX_PAIRS) continue;
            if (run_command(cell_command(c), c->cmd[c->n_cmd], &c->cmd_text[c->n_cmd]) != 0) {
                free(c->cmd_text[c->n_cmd]);
                c->cmd_text[c->n_cmd] = NULL;
                return -1;
            }
            c->n_cmd++;
        }
    return 0;
}

// Makes the command's runs the cell's timed pairs: measured, accounting, textbook. Where
// the command could not price the papers' formula (no round drafted K guesses: the window
// cuts a long K), the bench prices it as pair_models does, with the curve's c(K+1) and
// the selection run's alpha and c_draft.
static void timed_by_command(Cell *c) {
    double full, textbook;
    pair_models(&c->last_spec, &c->last_plain, c->K, c->curve, &full, &textbook);
    c->by_command = 1;
    c->n_pairs = c->n_cmd;
    for (int i = 0; i < c->n_cmd; i++) {
        if (c->cmd[i][CMD_TEXTBOOK] <= 0.0) c->cmd[i][CMD_TEXTBOOK] = textbook;
        c->ratio[i] = c->cmd[i][CMD_MEASURED];
        c->full[i] = c->cmd[i][CMD_FULL];
        c->textbook[i] = c->cmd[i][CMD_TEXTBOOK];
    }
}

// Prints, from what the cell's median command run printed, both decoders' "where the time
// went" tables and, with comparison, the comparison block (print_comparison and
// print_accounting), indented.
static void print_command_text(const Cell *c, int comparison) {
    const char *p = c->cmd_text[mid_run(c)];
    int table = 0, block = 0;
    while (p && *p) {
        const char *e = strchr(p, '\n');
        int len = e ? (int)(e - p + 1) : (int)strlen(p);
        if (!strncmp(p, "  where the time went", 21)) table = 1;
        else if (table && strncmp(p, "    ", 4)) table = 0; // the table's rows are indented 4
        if (!strncmp(p, "comparison", 10)) block = comparison;
        int title = !strncmp(p, "speculative decoding\n", 21) || !strncmp(p, "plain decoding\n", 15);
        if (table || block || title) fprintf(stderr, "      %.*s", len, p);
        p += len;
    }
}

// ----------------------------------------------------------------------------
// Printing a cell: its row, where its time went, its headline

// The columns of a cell's row; limit > 0 adds both decoders against the bandwidth limit.
static void print_cell_header(double limit) {
    fprintf(stderr, "  draft     K  p-min  guesses/round  acc.rate  alpha  tok/verify  E(alpha,K)"
            "  passes/tok  plain tok/s  spec tok/s  c_draft   speedup (min-max)   acct  textbook"
            "  select%s\n", limit > 0 ? "  plain/limit  spec/limit" : "");
}

// One row: the counters, the median pair's tokens/s, the measured speedup (median and the
// pairs' min-max) beside the accounting and the textbook, and the selection runs' median
// ('*': the K chosen on them). A cell with no timed pairs shows its selection run; a cell
// timed by its command shows the command's runs (its counters: the bench's, the same).
static void print_cell(const Cell *c, double limit) {
    const RunStats *s = cell_spec(c), *pl = cell_plain(c);
    double alpha = run_alpha(s), n = (double)s->core.emitted;
    double spec_tps = n / cell_spec_seconds(c), plain_tps = n / cell_plain_seconds(c);
    char pm[16] = "    -";
    (void)pl;
    if (c->p_min > 0.0f) snprintf(pm, sizeof(pm), "%5.2f", c->p_min);
    fprintf(stderr, "  %-8s %2d  %s  %13.2f     %.3f  %.3f  %10.3f  %10.3f  %10.3f  %11.1f"
            "  %10.1f  %7.4f", c->d->name, c->K, pm, cell_guesses(c), cell_rate(c), alpha,
            cell_tpv(c), expected_tokens_per_pass(alpha, c->K),
            (double)s->core.target_passes / n, plain_tps, spec_tps, cell_c_draft(c));
    char tb[16];
    if (c->n_pairs)
        fprintf(stderr, "   %5.2f (%4.2f-%4.2f)  %5.2f     %s", cell_speedup(c), cell_lo(c),
                cell_hi(c), cell_full(c), or_dash(cell_textbook(c), tb));
    else
        fprintf(stderr, "   (selection run only)                ");
    fprintf(stderr, "  %5.2f%s", cell_select(c), c->chosen ? "*" : " ");
    if (limit > 0)
        fprintf(stderr, "  %11.2f  %10.2f%s", plain_tps / limit, spec_tps / limit,
                spec_tps > limit ? "  above the limit" : "");
    fprintf(stderr, "%s\n", c->by_command ? "  (the command's runs)" : "");
}

// Where the median pair's wall time went, as shares (print_time_table's rows, one line
// per decoder): each kind of target pass, drafting, and the rest.
static void print_shares(const Cell *c) {
    const RunStats *side[2] = {cell_spec(c), cell_plain(c)};
    fprintf(stderr, "      time, %% of the wall:");
    for (int k = 0; k < 2; k++) {
        const RunStats *s = side[k];
        double rest = s->core.seconds - s->draft_seconds;
        fprintf(stderr, "%s", k ? "  | plain:" : " speculative:");
        for (int i = 0; i < N_PASS_KINDS; i++) {
            rest -= s->pass[i].seconds;
            if (s->pass[i].passes)
                fprintf(stderr, " %s %.1f", PASS_NAME[i], 100.0 * s->pass[i].seconds / s->core.seconds);
        }
        if (k == 0) fprintf(stderr, ", drafting %.1f", 100.0 * s->draft_seconds / s->core.seconds);
        fprintf(stderr, ", rest %.1f", 100.0 * rest / s->core.seconds);
    }
    fputc('\n', stderr);
}

// The headline figures, gathered as the sections find them and printed again at the end.
typedef struct {
    char label[96];
    char command[300]; // cell_command, kept: it is a static buffer
    Cell *c;
} Headline;
#define MAX_HEADLINES 24
static Headline HEADLINES[MAX_HEADLINES];
static int N_HEADLINES;

// Prints a figure worth quoting, its spread, the accounting and the papers' formula, and the command that makes
// it, and keeps it for the summary.
static void headline(const char *label, Cell *c) {
    if (!c || !c->n_pairs) return;
    char tb[16] = "-"; // the papers' formula, if any round drafted K guesses to price it
    if (cell_textbook(c) > 0.0) snprintf(tb, sizeof(tb), "%.2fx", cell_textbook(c));
    fprintf(stderr, "  %s: %.2fx (%.2f-%.2f over %d %s), accounting %.2fx, textbook %s\n"
            "      %s\n", label, cell_speedup(c), cell_lo(c), cell_hi(c), cell_runs(c),
            c->n_cmd ? "runs of the command" : "pairs", cell_full(c), tb, cell_command(c));
    if (N_HEADLINES < MAX_HEADLINES) {
        Headline *h = &HEADLINES[N_HEADLINES++];
        snprintf(h->label, sizeof(h->label), "%s", label);
        snprintf(h->command, sizeof(h->command), "%s", cell_command(c));
        h->c = c;
    }
}

// --draft-p-min against the best fixed K: both cells ran in the same timed rounds, so their
// speedups' ratio round by round is the ratio of their own wall times, free of plain
// decoding's noise. The pairs are kept for the summary.
typedef struct {
    const Cell *p_min, *fixed;
} PminPair;
static PminPair PMIN_PAIRS[4];
static int N_PMIN_PAIRS;

// Prints (and, keep, keeps) how fast the --draft-p-min cell ran against the fixed K: the
// median and min-max over the rounds of its speedup over the fixed K's.
static void pmin_gain(const Cell *p, const Cell *fixed, int keep) {
    double g[MAX_PAIRS];
    if (!p || !fixed) return;
    int n = p->n_pairs < fixed->n_pairs ? p->n_pairs : fixed->n_pairs;
    if (n == 0) return;
    for (int i = 0; i < n; i++) g[i] = p->ratio[i] / fixed->ratio[i];
    fprintf(stderr, "  --draft-p-min against the best fixed K, %.2f MB, t = %g, %s: K = %d, "
            "P = %g runs at %.2fx the speed of K = %d (%.2f-%.2f over %d rounds, paired)\n",
            p->mb, p->t, p->d->name, p->K, p->p_min, median_of(g, n), fixed->K, min_of(g, n),
            max_of(g, n), n);
    if (keep && N_PMIN_PAIRS < 4) PMIN_PAIRS[N_PMIN_PAIRS++] = (PminPair){p, fixed};
}

// One CSV row: the sweep ("k", "pmin", "size", or "select" for a cell that ran only its
// selection run), the target's width and weight size, the cell. greedy_same is 1 if every
// t = 0 text was plain decoding's, empty at t = 1. The first 27 columns are the old
// bench's; speedup and predicted_speedup (the textbook) are medians of the timed pairs,
// the bench's own or its command's runs (timed_by).
static void csv_header(void) {
    printf("sweep,draft,ffn_width,weight_mb,t,K,c_draft,acceptance_rate,alpha,"
           "tokens_per_verify,predicted_tokens_per_verify,passes_per_token,"
           "us_per_token_plain,us_per_token_spec,speedup,predicted_speedup,"
           "greedy_same,draft_passes,draft_share,accept_pos1,accept_pos2,accept_pos3,"
           "accept_pos4,accept_pos5,accept_pos6,accept_pos7,accept_pos8,speedup_min,"
           "speedup_max,accounting,p_min,pairs,chosen,selection_speedup,load,timed_by\n");
}
static void csv_row(const char *sweep, int H, const Cell *c) {
    const RunStats *s = cell_spec(c), *pl = cell_plain(c);
    double n = (double)s->core.emitted, alpha = run_alpha(s);
    int timed = c->n_pairs > 0;
    double sp = timed ? cell_speedup(c) : cell_select(c);
    double lo = timed ? cell_lo(c) : min_of(c->sel, c->n_sel);
    double hi = timed ? cell_hi(c) : max_of(c->sel, c->n_sel);
    double full = 0.0, textbook = 0.0;
    if (timed) {
        full = cell_full(c);
        textbook = cell_textbook(c);
    } else {
        pair_models(s, pl, c->K, c->curve, &full, &textbook);
    }
    printf("%s,%s,%d,%.2f,%g,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%.3f,%.4f,%.4f,%s",
           timed ? sweep : "select", c->d->name, H, c->mb, c->t, c->K, cell_c_draft(c),
           cell_rate(c), alpha, cell_tpv(c), expected_tokens_per_pass(alpha, c->K),
           (double)s->core.target_passes / n, 1e6 * cell_plain_seconds(c) / n,
           1e6 * cell_spec_seconds(c) / n, sp,
           textbook, c->t != 0.0f ? "" : c->greedy_differ ? "0" : "1");
    // the draft's passes and share of the wall time, then acceptance at each position
    printf(",%ld,%.4f", s->draft_passes, s->core.seconds > 0 ? s->draft_seconds / s->core.seconds : 0.0);
    for (int i = 0; i < BENCH_MAX_K; i++) {
        if (i < c->K && s->judged_at[i] > 0) printf(",%.4f", (double)s->accepted_at[i] / s->judged_at[i]);
        else printf(","); // past K, or never reached
    }
    printf(",%.4f,%.4f,%.4f,%g,%d,%d,%.4f,%.2f,%s\n", lo, hi, full, c->p_min,
           timed ? c->n_pairs : c->n_sel, c->chosen, cell_select(c), load_average(),
           c->by_command ? "command" : "bench");
}

// ----------------------------------------------------------------------------
// The verify-cost curve c(T), and each draft's cost

// Seconds per forward over T new tokens on top of a cache of kv tokens, over reps calls.
static double time_forward(GPT *g, const int *tokens, int kv, int T, int reps) {
    double t0 = now_seconds();
    for (int i = 0; i < reps; i++) {
        g->state.cache_len = kv;
        forward(g, tokens, T);
    }
    g->state.cache_len = 0;
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
            matmul(a->q, a->ln1, (Linear){w->query + l * CC, NULL, C, C}, T);
            matmul(a->q, a->ln1, (Linear){w->key + l * CC, NULL, C, C}, T);
            matmul(a->q, a->ln1, (Linear){w->value + l * CC, NULL, C, C}, T);
            matmul(a->proj_out, a->att_out,
                   (Linear){w->proj_weight + l * CC, w->proj_bias + l * C, C, C}, T);
            matmul(a->hidden, a->ln2,
                   (Linear){w->ffwd_up_weight + l * CH, w->ffwd_up_bias + l * H, C, H}, T);
            matmul(a->ffwd, a->hidden,
                   (Linear){w->ffwd_down_weight + l * CH, w->ffwd_down_bias + l * C, H, C}, T);
        }
        matmul(g->state.logits, g->state.ln_f,
               (Linear){w->lm_head_weight, w->lm_head_bias, C, c->vocab_size}, T);
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
// one-token time in seconds. Also the refill plain decoding makes when the cache is full:
// one pass over S/2 tokens from an empty cache. Each of `rounds` rounds times every pass
// once, so a machine that drifts moves them all alike; the medians are printed with the
// forward's GFLOP/s, and with_matmuls adds the matmuls alone beside each T.
static void bench_curve(GPT *g, const char *what, double c[10], int reps, int rounds,
                        int with_matmuls) {
    const Config *cf = &g->config;
    int S = cf->block_size, kv = S / 2 - 4 > 0 ? S / 2 - 4 : 0, n_T = 9, keep = S / 2;
    int *tokens = malloc((size_t)S * sizeof(int));
    if (!tokens) return;
    for (int i = 0; i < S; i++) tokens[i] = (i * 7 + 3) % cf->vocab_size;
    if (kv + 9 > S) kv = S - 9 > 0 ? S - 9 : 0;
    if (kv + n_T > S) n_T = S - kv;
    double sec[11][9], mm[10][9]; // [T] for T = 1 .. 9, sec[10] the refill; [round]
    if (rounds > 9) rounds = 9;
    for (int r = 0; r < rounds; r++) {
        for (int T = 1; T <= n_T; T++) {
            sec[T][r] = time_forward(g, tokens, kv, T, reps);
            mm[T][r] = with_matmuls ? time_matmuls(g, T, reps) : 0.0;
        }
        sec[10][r] = keep > 0 ? time_forward(g, tokens, 0, keep, reps) : 0.0;
    }
    free(tokens);
    fprintf(stderr, "\nverify cost c(T) = time(one forward over T new tokens) / time(T = 1), "
            "%s, %d tokens cached, medians of %d:\n", what, kv, rounds);
    double mm1 = median(mm[1], rounds);
    for (int T = 1; T <= n_T; T++) {
        double m = median(sec[T], rounds), mt = median(mm[T], rounds);
        if (T == 1) c[0] = m;
        c[T] = m / c[0];
        fprintf(stderr, "  T=%d  %8.1f us  c(T) = %5.2f  %6.1f GFLOP/s", T, 1e6 * m, c[T],
                forward_flops(cf, kv, T) / m * 1e-9);
        if (with_matmuls)
            fprintf(stderr, "    the matmuls alone %8.1f us  c = %5.2f  %6.1f GFLOP/s", 1e6 * mt,
                    mt / mm1, matmul_flops(cf, T) / mt * 1e-9);
        fputc('\n', stderr);
    }
    // a refill re-runs the last S/2 tokens and then makes room for S - S/2 more, so its
    // cost is shared by S - S/2 + 1 tokens (it samples one itself)
    if (keep > 0) {
        double m = median(sec[10], rounds);
        fprintf(stderr, "  refill: T=%d from an empty cache %8.1f us  c = %5.2f,"
                " %.1f us for each of the %d tokens it serves\n", keep, 1e6 * m, m / c[0],
                1e6 * m / (S - keep + 1), S - keep + 1);
    }
}

// Seconds one guess of draft d costs, timed like the target's pass in bench_curve
// (medians of 9 timings of reps calls): a model draft's one-token forward at the same
// cache length; for the bigram and prompt lookup, a draft_tree call for a chain of 4 guesses
// after `text` (n_text tokens of the bench's own kind of text, current_token in slot
// n_text - 1 of a target of block size S), over the guesses it made.
static double draft_guess_seconds(Draft *d, const int *text, int n_text, int S, int reps) {
    double sec[9];
    if (d->kind == find_draft("gpt")) { // a model draft (the ceiling is one too)
        int kv = S / 2 - 4 > 0 ? S / 2 - 4 : 0; // its block size is the target's S
        for (int r = 0; r < 9; r++) sec[r] = time_forward(&d->model, text, kv, 1, reps);
        return median(sec, 9);
    }
    // the draft's half of a round: a chain of 4 as a round builds it, on top of the text
    TreeShape chain = chain_shape(4);
    TreeBuffers tb;
    if (build_tree_buffers(&tb, &chain, d->V, S) != 0) {
        free_tree_buffers(&tb);
        return 0.0;
    }
    tb.room = tb.max_rows; // every guess fits: the root and 4
    tb.limit = 4;
    tb.cache_len = n_text - 1;
    Sampler s = {1.0f, 0, 0.0f};
    Rng rng;
    rng_seed(&rng, 1);
    for (int r = 0; r < 9; r++) {
        long guesses = 0;
        double t0 = now_seconds();
        for (int i = 0; i < reps; i++) {
            draft_tree(d, &tb, &(Tokens){text, n_text}, &s, &rng);
            guesses += tb.rows - 1; // the root is current_token, not a guess
        }
        // lookup may find nothing: then the call's cost is that of one guess
        sec[r] = (now_seconds() - t0) / (guesses > reps ? guesses : reps);
    }
    free_tree_buffers(&tb);
    return median(sec, 9);
}

// A bar of width proportional to x / max, at most `width` characters; one = 1.0 is
// marked with a '|' when one > 0.
static void bar(double x, double max, int width, double one) {
    int n = max > 0 ? (int)(x / max * width + 0.5) : 0;
    int mark = one > 0 && max > 0 ? (int)(one / max * width + 0.5) : -1;
    for (int i = 0; i < width; i++) fputc(i == mark ? '|' : i < n ? '#' : ' ', stderr);
}

// ----------------------------------------------------------------------------
// The K sweep on the loaded model

// The K sweep's text chart at one temperature: tokens per verify pass and the measured
// speedup against K, one row per K and draft.
static void k_chart(Cell *cells[BENCH_MAX_K][BENCH_MAX_DRAFTS], int n_drafts) {
    double max_tpv = 2.5, max_sp = 1.5;
    for (int K = 1; K <= BENCH_MAX_K; K++)
        for (int j = 0; j < n_drafts; j++) {
            max_tpv = fmax(max_tpv, cell_tpv(cells[K - 1][j]));
            max_sp = fmax(max_sp, cell_speedup(cells[K - 1][j]));
        }
    fprintf(stderr, "\n   K  draft    tokens per verify pass            wall speedup ('|' = 1.0)\n");
    for (int K = 1; K <= BENCH_MAX_K; K++)
        for (int j = 0; j < n_drafts; j++) {
            const Cell *x = cells[K - 1][j];
            fprintf(stderr, "  %2d  %-7s ", K, x->d->name);
            bar(cell_tpv(x), max_tpv, 24, 0.0);
            fprintf(stderr, " %5.2f   ", cell_tpv(x));
            bar(cell_speedup(x), max_sp, 24, 1.0);
            fprintf(stderr, " %5.2f\n", cell_speedup(x));
        }
}

// K = 1..8 at t = 0 and 1, every draft beside plain decoding: per (t, K) SELECT_SMALL
// selection rounds and PAIRS timed ones, after one warm-up round per temperature (a run
// takes milliseconds here, so every K is timed). The best K of each draft is chosen on the
// selection rounds; best[ti][j] receives it. 0 on success.
static int k_sweep(GPT *g, Draft *drafts, int n_drafts, const double *curve,
                   int csv, Cell *best[2][BENCH_MAX_DRAFTS]) {
    static Cell *cells[2][BENCH_MAX_K][BENCH_MAX_DRAFTS];
    double mb = g->n_params * 4.0 / 1e6;
    for (int ti = 0; ti < 2; ti++) {
        float t = (float)ti;
        fprintf(stderr, "\nK sweep at t = %d: %d tokens per run; per K, plain decoding and each "
                "draft alternating: %d selection rounds (the best K), then %d timed rounds "
                "(medians, min-max), after one warm-up round; %s\n", ti, TOKENS, SELECT_SMALL,
                PAIRS, machine_note());
        for (int K = 1; K <= BENCH_MAX_K; K++) {
            for (int j = 0; j < n_drafts; j++)
                if (!(cells[ti][K - 1][j] = new_cell(&drafts[j], K, 0.0f, t, 0, mb, curve)))
                    return -1;
            Cell **group = cells[ti][K - 1];
            // one warm-up round before the first group: caches and predictors settle
            if ((K == 1 && bench_rounds(g, group, n_drafts, 1, WARM_UP) != 0) ||
                bench_rounds(g, group, n_drafts, SELECT_SMALL, SELECT) != 0 ||
                bench_rounds(g, group, n_drafts, PAIRS, TIMED) != 0)
                return -1;
        }
        Cell *all[BENCH_MAX_K * BENCH_MAX_DRAFTS];
        for (int K = 0; K < BENCH_MAX_K; K++)
            for (int j = 0; j < n_drafts; j++) all[K * n_drafts + j] = cells[ti][K][j];
        for (int j = 0; j < n_drafts; j++)
            best[ti][j] = choose(all, BENCH_MAX_K * n_drafts, &drafts[j], t, 0);
        // the acceptance rate is accepted / drafted (vLLM's name); alpha is the papers'
        // expected acceptance E[sum min(p, q)], which both formulas take; guesses/round is
        // below K where prompt lookup found fewer tokens to copy, or the window cut a round
        print_cell_header(0.0);
        for (int j = 0; j < n_drafts; j++)
            for (int K = 1; K <= BENCH_MAX_K; K++) {
                print_cell(cells[ti][K - 1][j], 0.0);
                if (csv) csv_row("k", g->config.ffn_width, cells[ti][K - 1][j]);
            }
        fprintf(stderr, "  best K at t = %d:", ti);
        for (int j = 0; j < n_drafts; j++)
            fprintf(stderr, "%s %s K = %d, %.2fx (%.2f-%.2f)", j ? ";" : "", drafts[j].name,
                    best[ti][j]->K, cell_speedup(best[ti][j]), cell_lo(best[ti][j]),
                    cell_hi(best[ti][j]));
        fprintf(stderr, "  (chosen on the selection rounds, reported from the timed ones)\n");
        fprintf(stderr, "  where the time went in each best K's median pair, and its command:\n");
        for (int j = 0; j < n_drafts; j++) {
            char label[96];
            snprintf(label, sizeof(label), "%.2f MB, t = %d, %s at its best K = %d", mb, ti,
                     drafts[j].name, best[ti][j]->K);
            headline(label, best[ti][j]);
            print_shares(best[ti][j]);
        }
        k_chart(cells[ti], n_drafts);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// Why the draft is tempered

// What the tempering section adds up, over the K = 1 rounds that drafted their guess.
typedef struct {
    double untempered_sum; // sum over rounds of sum_x min(p(x), table row(x))
    long n;                // rounds counted
} TemperWatch;

// beyond.c's tree_generate, copied without the output and the trace,
// for a draft with a bigram table: the same prefill, first token and rounds (tree_round),
// and after each round that drafted its guess (none does at the cache's last slot) the
// chance that guess would have passed had the draft proposed from the table's own row
// instead of the tempered one: sum min(p, table row), p the target's row after
// current_token (the round's p[0]). The one loop has no hook; this copy is the bench's.
static void watched_generate(GPT *g, Draft *d, TreeBuffers *tb, const Tokens *prompt,
                             const RunOptions *o, int *seq, TemperWatch *w) {
    int V = g->config.vocab_size, S = g->config.block_size;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, &o->st->core);
    tally_pass(o->st, PASS_PREFILL, g->state.cache_len, now_seconds() - t0);
    if (d->kind->restart) d->kind->restart(d, g, g->state.cache_len, 0);
    if (o->max_new_tokens > 0) {
        served_probs(tb->p, logits, V, &o->sampler); // row 0 is free until the first pass
        seq[n_seq++] = sample_from(tb->p, V, rng_uniform(o->rng));
    }
    while (n_seq - first < o->max_new_tokens) {
        tb->limit = o->max_new_tokens - (n_seq - first);
        int current = seq[n_seq - 1]; // the token the round drafts from
        int n = tree_round(g, d, tb, &(Tokens){seq, n_seq}, o);
        if (tb->rows > 1) { // it drafted its guess
            w->untempered_sum += expected_acceptance(tb->p, bigram_get_probs(&d->bigram, current), V);
            w->n++;
        }
        memcpy(seq + n_seq, tb->emitted, (size_t)n * sizeof(int));
        n_seq += n;
    }
    finish_stats(&o->st->core, n_seq - first, t0);
}

// The prompts the tempering section decodes: more positions than one text gives.
static const char *TEMPER_PROMPTS[] = {"To be or not to be, that is the ", "ROMEO:\n",
                                       "First Citizen:\n", "KING RICHARD III:\nNow is the "};
#define TEMPER_N_PROMPTS 4

// Why specdec.c tempers the draft (tempered_bigram): alpha of a round's first guess, with the
// draft row raised to 1/t like the target (what specdec.c and beyond.c do) and with the
// table's row as it is, at the same positions: K = 1 rounds over every prompt, at six
// temperatures. Untimed; the rounds run in watched_generate, which adds up the second.
static void bench_tempering(GPT *g, Draft *d, const Vocab *v) {
    float temps[6] = {0.0f, 0.5f, 0.7f, 1.0f, 1.5f, 2.0f};
    int prompt[64], seq[64 + MAX_TOKENS];
    TreeShape chain = chain_shape(1);
    TreeBuffers tb;
    if (build_tree_buffers(&tb, &chain, g->config.vocab_size, g->config.block_size) != 0) {
        free_tree_buffers(&tb);
        return;
    }
    fprintf(stderr, "\nwhy the draft is tempered: alpha of a round's first guess, K = 1, "
            "%d prompts x %d tokens\n     t  tempered q^(1/t)  untempered q  rounds\n",
            TEMPER_N_PROMPTS, TEMPER_TOKENS);
    for (int ti = 0; ti < 6; ti++) {
        RunStats st;
        memset(&st, 0, sizeof(st));
        TemperWatch w = {0.0, 0};
        tb.top = temps[ti] == 0.0f; // greedy: the draft's top guess, judged as a sure one
        for (int i = 0; i < TEMPER_N_PROMPTS; i++) {
            int np = (int)strlen(TEMPER_PROMPTS[i]);
            encode(v, (const unsigned char *)TEMPER_PROMPTS[i], (size_t)np, prompt);
            Rng r;
            rng_seed(&r, 1000 + (uint64_t)i);
            // the counters add up over the prompts: st is not reset between them
            RunOptions o = {.max_new_tokens = TEMPER_TOKENS, .sampler = {temps[ti], 0, 0.0f},
                            .vocab = v, .rng = &r, .st = &st};
            watched_generate(g, d, &tb, &(Tokens){prompt, np}, &o, seq, &w);
        }
        fprintf(stderr, "  %4.1f  %16.3f  %12.3f  %6ld\n", temps[ti], run_alpha(&st),
                w.n ? w.untempered_sum / w.n : 0.0, w.n);
    }
    free_tree_buffers(&tb);
}

// ----------------------------------------------------------------------------
// --draft-p-min against the best fixed K, on the loaded model

// The p values and draft lengths tried: a draft stops after a guess it gives less than P.
static const float P_MINS[] = {0.05f, 0.1f, 0.2f, 0.3f, 0.5f};
#define N_P_MINS 5
static const int P_MIN_KS[] = {4, 8};
#define N_P_MIN_KS 2

// For the bigram and the GPT draft at t = 1: the best fixed K of the K sweep, again, beside
// K = 4 and 8 with each P, all in one alternation (a warm-up, SELECT_SMALL selection
// rounds, PAIRS timed ones); the best (K, P) per draft is chosen on the selection rounds.
static int pmin_small(GPT *g, Draft *drafts, int n_drafts, const double *curve,
                      Cell *const best_fixed[BENCH_MAX_DRAFTS], int csv) {
    Cell *cells[BENCH_MAX_DRAFTS * (1 + N_P_MIN_KS * N_P_MINS)];
    Cell *fixed[BENCH_MAX_DRAFTS] = {0};
    int n = 0;
    double mb = g->n_params * 4.0 / 1e6;
    for (int j = 0; j < n_drafts; j++) {
        // lookup's copies have no chance below 1 to compare; the ceiling's every guess passes
        if (drafts[j].kind->sure || !strcmp(drafts[j].name, "ceiling")) continue;
        if (!(cells[n++] = fixed[j] = new_cell(&drafts[j], best_fixed[j]->K, 0.0f, 1.0f, 0, mb,
                                              curve)))
            return -1;
        for (int k = 0; k < N_P_MIN_KS; k++)
            for (int i = 0; i < N_P_MINS; i++)
                if (!(cells[n++] = new_cell(&drafts[j], P_MIN_KS[k], P_MINS[i], 1.0f, 0, mb, curve)))
                    return -1;
    }
    fprintf(stderr, "\n--draft-p-min at t = 1, %.2f MB: each draft's best fixed K (from the K "
            "sweep) beside K = 4 and 8 with a guess below P ending the round; all alternating "
            "with plain decoding: a warm-up round, %d selection rounds, %d timed; %s\n",
            mb, SELECT_SMALL, PAIRS, machine_note());
    if (bench_rounds(g, cells, n, 1, WARM_UP) != 0 ||
        bench_rounds(g, cells, n, SELECT_SMALL, SELECT) != 0 ||
        bench_rounds(g, cells, n, PAIRS, TIMED) != 0)
        return -1;
    print_cell_header(0.0);
    for (int i = 0; i < n; i++) {
        print_cell(cells[i], 0.0);
        if (csv) csv_row("pmin", g->config.ffn_width, cells[i]);
    }
    for (int j = 0; j < n_drafts; j++) {
        if (!fixed[j]) continue;
        Cell *p = choose(cells, n, &drafts[j], 1.0f, 1);
        char label[96];
        snprintf(label, sizeof(label), "%.2f MB, t = 1, %s at its best fixed K = %d", mb,
                 drafts[j].name, fixed[j]->K);
        headline(label, fixed[j]);
        print_shares(fixed[j]);
        snprintf(label, sizeof(label), "%.2f MB, t = 1, %s, --draft-p-min: the best K = %d, "
                 "P = %g", mb, drafts[j].name, p->K, p->p_min);
        headline(label, p);
        print_shares(p);
        pmin_gain(p, fixed[j], 1);
    }
    return 0;
}

// ----------------------------------------------------------------------------
// The memory-bound sweep: the same model with its MLP padded by zeros (--ffn-width)
//
// widen_ffn keeps the function and the text exactly and adds 2 KB of weights per hidden
// unit, so one model, the same drafts and the same acceptance are measured from 0.84 MB of
// weights (they sit in the 1 MB L2) to 136 MB (four times the 32 MB L3): only the bytes a
// pass streams change, and with them c(T) and c_draft. With the same prompt and seed, every
// width makes the same text with the same passes. One draft joins the three: the ceiling,
// the unpadded model drafting for its padded copy. It computes the same function, so every
// guess passes (alpha = 1 at any temperature) and a round yields K+1 tokens for
// c(K+1) + K c_draft passes: no draft that costs as much can do better.
//
// A run at 136 MB takes seconds (a one-token pass about 8 ms), so each width runs what it
// needs: one selection round over the K values (and, at 136 MB, --draft-p-min), then
// PAIRS timed rounds of the chosen cells beside plain decoding.

// What each width runs, at t = 1 (t = 0 only repeats it: alpha barely moves, and the
// tests prove greedy decoding exact on padded models): which drafts, the K values each
// tries, whether the GPT draft tries --draft-p-min, and how many timed rounds.
#define MAX_PLAN_K 4
typedef struct {
    int H;                      // ffn_width
    int all_drafts;             // the bigram and lookup too, not only the GPT draft and the ceiling
    int k_draft[MAX_PLAN_K];    // the K values of the bigram, the GPT draft and lookup (0 ends)
    int k_ceiling[MAX_PLAN_K];  // ... and of the ceiling, which gains to K = 6 or 8
    int p_min;                  // the GPT draft with --draft-p-min (P_MIN_WIDE) too
    int pairs;                  // timed rounds
} WidthPlan;
// At 8.76 MB a run takes 0.2 s: every draft, K = 1..4. Above, a run takes 1 to 4 s: the
// GPT draft (alpha about 0.83; its best K was 2 or 3 at 34.1 MB and 3 or 4 at 136 MB in
// every run of this bench so far) and the ceiling (6 or 8), the issue's targets at 136 MB.
static const WidthPlan SWEEP_PLAN[] = {
    {4096, 1, {1, 2, 3, 4}, {2, 4, 6, 8}, 0, 3},
    {16384, 0, {2, 3, 0, 0}, {6, 8, 0, 0}, 0, 3},
    {65536, 0, {3, 4, 0, 0}, {6, 8, 0, 0}, 1, 3}};
#define N_WIDTHS 3
static int SWEEP_N_WIDTHS = 2;  // to 34.1 MB; --full: all N_WIDTHS (136 MB); --quick: the first
static size_t STREAM_MB = 512;  // the bandwidth probe's buffer, 16x the L3
static int SWEEP_CURVE = 65536; // c(T)'s calls per timing: SWEEP_CURVE / H, at least 1
// --draft-p-min at 136 MB: the (K, P) pairs tried; a wasted guess costs less there than on
// the shipped model, so the small P values (the shipped model tries 0.05 to 0.5)
static const struct { int K; float p; } P_MIN_WIDE[] = {{4, 0.1f}, {8, 0.2f}};
#define N_P_MIN_WIDE 2

// What the sweep measured at one width (the first row: the loaded model, from the K sweep).
#define MAX_ROW_CELLS 48
typedef struct {
    int H;                       // ffn_width
    double mb;                   // weights in MB (10^6 bytes)
    double c[10];                // c[0] = seconds of a one-token pass; c[T] for T = 1..9
    double limit;                // tokens/s at which plain decoding streams the weights once per token
    Cell *cells[MAX_ROW_CELLS];  // every cell it ran
    int n;
} SweepRow;

// The cell of draft d at temperature t a row chose (p-min off), or NULL.
static const Cell *row_best(const SweepRow *r, const Draft *d, float t) {
    for (int i = 0; i < r->n; i++) {
        const Cell *c = r->cells[i];
        if (c->d == d && c->t == t && c->chosen && c->p_min == 0.0f) return c;
    }
    return NULL;
}

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

// One width at t = 1: its c(T), a selection round over every candidate cell, the chosen
// cells' timed rounds, the table, where the time went, and the headlines. drafts:
// n_drafts, the ceiling last. 0 on success, -1 out of memory.
static int sweep_width(const GPT *g, Draft *drafts, int n_drafts,
                       const WidthPlan *plan, double bw, int csv, SweepRow *row) {
    double t0 = now_seconds();
    GPT w;
    if (widened_copy(g, plan->H, &w) != 0) return -1;
    row->H = plan->H;
    row->mb = w.n_params * 4.0 / 1e6;
    row->limit = bw / (w.n_params * 4.0); // one pass streams every weight once
    row->n = 0;
    char what[160];
    snprintf(what, sizeof(what), "ffn_width %d: %.2f MB of weights", row->H, row->mb);
    int reps = SWEEP_CURVE / row->H > 0 ? SWEEP_CURVE / row->H : 1; // 1 at the widest
    bench_curve(&w, what, row->c, reps, 5, 0);
    // the candidates: each draft the plan runs at each of its K values, and --draft-p-min
    int rc = -1, n = 0;
    for (int j = 0; j < n_drafts; j++) {
        int ceiling = !strcmp(drafts[j].name, "ceiling"), gpt = !strcmp(drafts[j].name, "gpt");
        if (!plan->all_drafts && !ceiling && !gpt) continue;
        const int *ks = ceiling ? plan->k_ceiling : plan->k_draft;
        for (int k = 0; k < MAX_PLAN_K && ks[k] > 0 && n < MAX_ROW_CELLS; k++)
            if (!(row->cells[n++] = new_cell(&drafts[j], ks[k], 0.0f, 1.0f, row->H, row->mb,
                                             row->c)))
                goto out;
        for (int i = 0; gpt && plan->p_min && i < N_P_MIN_WIDE && n < MAX_ROW_CELLS; i++)
            if (!(row->cells[n++] = new_cell(&drafts[j], P_MIN_WIDE[i].K, P_MIN_WIDE[i].p, 1.0f,
                                             row->H, row->mb, row->c)))
                goto out;
    }
    row->n = n;
    fprintf(stderr, "  one selection round (plain decoding, then %d cells); %s\n", n,
            machine_note());
    if (bench_rounds(&w, row->cells, n, 1, SELECT) != 0) goto out;
    // the chosen cells: each draft's best K, and the best --draft-p-min cell
    Cell *timed[2 * BENCH_MAX_DRAFTS];
    int n_timed = 0;
    for (int j = 0; j < n_drafts; j++)
        for (int pm = 0; pm < 2; pm++) {
            Cell *c = choose(row->cells, n, &drafts[j], 1.0f, pm);
            if (c) timed[n_timed++] = c;
        }
    // timed: each chosen cell's ./beyond command, run in turn; without ./beyond, the bench
    int by_command = 0;
    if (COMMAND_RUNS > 0) {
        fprintf(stderr, "  %d timed rounds: each chosen cell's ./beyond command in turn (%d "
                "cells); %s\n", plan->pairs, n_timed, machine_note());
        by_command = command_rounds(timed, n_timed, plan->pairs) == 0;
        if (!by_command)
            fprintf(stderr, "  (a command failed: is ./beyond built? the bench times the cells "
                    "itself)\n");
    }
    for (int i = 0; i < n_timed; i++)
        if (by_command) timed_by_command(timed[i]);
        else timed[i]->n_cmd = 0;
    if (!by_command) {
        fprintf(stderr, "  %d timed rounds of plain decoding and the %d chosen cells; %s\n",
                plan->pairs, n_timed, machine_note());
        if (bench_rounds(&w, timed, n_timed, plan->pairs, TIMED) != 0) goto out;
    }
    fprintf(stderr, "  t = 1, the timed cells first, then the selection round's ('*': chosen); "
            "%s:\n", machine_note());
    print_cell_header(row->limit);
    for (int i = 0; i < n_timed; i++) print_cell(timed[i], row->limit);
    for (int i = 0; i < n; i++)
        if (!row->cells[i]->chosen) print_cell(row->cells[i], row->limit);
    for (int i = 0; i < n && csv; i++) csv_row("size", row->H, row->cells[i]);
    fprintf(stderr, "  where the time went in each timed cell's median pair, and its command:\n");
    for (int i = 0; i < n_timed; i++) {
        Cell *c = timed[i];
        char label[96];
        if (c->p_min > 0.0f)
            snprintf(label, sizeof(label), "%.1f MB, t = 1, %s, --draft-p-min: K = %d, P = %g",
                     row->mb, c->d->name, c->K, c->p_min);
        else
            snprintf(label, sizeof(label), "%.1f MB, t = 1, %s at its best K = %d", row->mb,
                     c->d->name, c->K);
        headline(label, c);
        if (c->by_command) print_command_text(c, plan->p_min); // 136 MB: the comparison too
        else print_shares(c);
    }
    for (int i = 0; i < n_timed; i++) // --draft-p-min against its draft's best fixed K
        for (int k = 0; timed[i]->p_min > 0.0f && k < n_timed; k++)
            if (timed[k]->d == timed[i]->d && timed[k]->p_min == 0.0f)
                pmin_gain(timed[i], timed[k], 1);
    // at the widest size, the whole comparison of each timed cell's median pair, as
    // ./beyond --compare prints it for the command beside it
    for (int i = 0; plan->p_min && !by_command && i < n_timed; i++) {
        const Cell *c = timed[i];
        fprintf(stderr, "\n  %s: the median pair, as --compare prints it:\n", cell_command(c));
        print_time_table(cell_spec(c), 1);
        print_time_table(cell_plain(c), 0);
        print_comparison(&cell_spec(c)->core, &cell_plain(c)->core, c->t == 0.0f, c->same_text);
        print_accounting(cell_spec(c), cell_plain(c), c->K);
    }
    rc = 0;
out:
    free_gpt(&w);
    fprintf(stderr, "  (ffn_width %d: %.1f s)\n", row->H, now_seconds() - t0);
    return rc;
}

// The best K of each draft at each width, t = 1 (chosen on the selection runs): what its
// timed pairs measured, the accounting and the textbook beside it, and both decoders against the bandwidth
// limit (a yardstick only where the weights sit in the caches).
static void sweep_best(const SweepRow *rows, int n, const Draft *drafts, int n_drafts) {
    fprintf(stderr, "\nthe best K of each draft at t = 1:\n     weights  draft    K  guesses/round"
            "  alpha  tok/verify  c_draft  plain tok/s  spec tok/s   speedup (min-max)   acct  "
            "textbook  plain/limit  spec/limit\n");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n_drafts; j++) {
            const Cell *c = row_best(&rows[i], &drafts[j], 1.0f);
            if (!c) continue;
            const RunStats *s = cell_spec(c);
            double tok = (double)s->core.emitted, limit = i > 0 ? rows[i].limit : 0.0;
            double spec_s = cell_spec_seconds(c), plain_s = cell_plain_seconds(c);
            char tb[16];
            fprintf(stderr, "  %7.2f MB  %-7s %2d  %13.2f  %.3f  %10.3f  %7.4f  %11.1f  %10.1f"
                    "   %5.2f (%4.2f-%4.2f)  %5.2f     %s", rows[i].mb, c->d->name, c->K,
                    cell_guesses(c), run_alpha(s), cell_tpv(c), cell_c_draft(c),
                    tok / plain_s, tok / spec_s, cell_speedup(c), cell_lo(c), cell_hi(c),
                    cell_full(c), or_dash(cell_textbook(c), tb));
            if (limit > 0)
                fprintf(stderr, "  %11.2f  %10.2f", tok / plain_s / limit, tok / spec_s / limit);
            fprintf(stderr, "%s\n", c->n_cmd ? "  (the command's runs)" : "");
        }
}

// Text chart at t = 1: one row per draft, its best K's measured speedup at each width,
// '|' marking 1.0; '-' where the draft did not run.
static void sweep_chart(const SweepRow *rows, int n, const Draft *drafts, int n_drafts) {
    fprintf(stderr, "\nwall speedup against weight size at t = 1, each draft at its best K "
            "(medians of the timed pairs; each bar 0 .. 2x, '|' = 1.0)\n  draft  ");
    for (int i = 0; i < n; i++) fprintf(stderr, "  %8.2f MB         ", rows[i].mb);
    fputc('\n', stderr);
    for (int j = 0; j < n_drafts; j++) {
        fprintf(stderr, "  %-7s", drafts[j].name);
        for (int i = 0; i < n; i++) {
            const Cell *c = row_best(&rows[i], &drafts[j], 1.0f);
            fputs("  ", stderr);
            if (!c) {
                fprintf(stderr, "%-19s", "     -");
                continue;
            }
            bar(cell_speedup(c), 2.0, 10, 1.0);
            fprintf(stderr, " %4.2f K=%d", cell_speedup(c), c->K);
        }
        fputc('\n', stderr);
    }
}

// Each draft's crossover at t = 1: the smallest size from which its best K beats plain
// decoding (the median over the timed pairs above 1) at every larger size measured.
static void sweep_crossover(const SweepRow *rows, int n, const Draft *drafts, int n_drafts) {
    for (int j = 0; j < n_drafts; j++) {
        int at = n;
        while (at > 0) {
            const Cell *c = row_best(&rows[at - 1], &drafts[j], 1.0f);
            if (!c || cell_speedup(c) <= 1.0) break;
            at--;
        }
        if (at == n) {
            fprintf(stderr, "crossover at t = 1, %s: none up to %.1f MB\n", drafts[j].name,
                    rows[n - 1].mb);
            continue;
        }
        const Cell *c = row_best(&rows[at], &drafts[j], 1.0f);
        fprintf(stderr, "crossover at t = 1, %s: %.2f MB (ffn_width %d), from where its best K "
                "beats plain decoding at every size measured; there K = %d runs %.2fx (%.2f-%.2f)\n",
                drafts[j].name, rows[at].mb, rows[at].H, c->K, cell_speedup(c), cell_lo(c),
                cell_hi(c));
    }
}

// Writes the sweep's chart as an SVG file (libc only): the best K's measured speedup at
// t = 1 against weight size on a log scale, one line for the GPT draft and one for the
// ceiling, each point the median of the timed pairs with a bar from their min to their
// max, and the 1.0 line. Written to PATH.tmp, then renamed over PATH: a failed write
// leaves PATH as it was. 0 on success.
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
    int line[2], which[2], n_lines = 0;
    static const char *label[2] = {"GPT draft (tinyshakespeare/draft.bin)",
                                   "ceiling: the unpadded model as draft (alpha = 1)"};
    static const char *color[2] = {"#d95f02", "#7570b3"};
    const char *names[2] = {"gpt", "ceiling"};
    for (int l = 0; l < 2; l++)
        for (int j = 0; j < n_drafts; j++)
            if (!strcmp(drafts[j].name, names[l])) {
                line[n_lines] = j;
                which[n_lines++] = l;
            }
    const double W = 640, Hh = 400, x0 = 70, y0 = 340, xw = 520, yh = 290;
    double ymax = 2.0, lx0 = log10(rows[0].mb), lx1 = log10(rows[n - 1].mb);
    for (int i = 0; i < n; i++)
        for (int l = 0; l < n_lines; l++) {
            const Cell *c = row_best(&rows[i], &drafts[line[l]], 1.0f);
            if (c) ymax = fmax(ymax, cell_hi(c));
        }
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
    // one polyline per draft through the medians, a min-max bar at each point, the legend
    for (int l = 0; l < n_lines; l++) {
        int j = line[l];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                color[which[l]]);
        for (int i = 0; i < n; i++) {
            const Cell *c = row_best(&rows[i], &drafts[j], 1.0f);
            if (c) fprintf(f, "%.1f,%.1f ", SX(rows[i].mb), SY(cell_speedup(c)));
        }
        fprintf(f, "\"/>\n");
        for (int i = 0; i < n; i++) {
            const Cell *c = row_best(&rows[i], &drafts[j], 1.0f);
            if (c)
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
                        SX(rows[i].mb), SY(cell_lo(c)), SX(rows[i].mb), SY(cell_hi(c)),
                        color[which[l]]);
        }
    }
    for (int l = 0; l < n_lines; l++)
        fprintf(f, "<text x=\"%.0f\" y=\"%d\" fill=\"%s\">%s</text>\n", x0 + 10, 88 + 16 * l,
                color[which[l]], label[which[l]]);
    fprintf(f, "<text x=\"%.0f\" y=\"56\">t = 1, %d tokens a run; each point at the best K "
            "(chosen on selection runs):</text>\n<text x=\"%.0f\" y=\"72\">the median of its "
            "timed pairs, the bar their min-max</text>\n</svg>\n", x0 + 10, TOKENS, x0 + 10);
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

// The sweep: bandwidth, every width of the plan, then the chart, the crossover and the
// SVG. rows[0] is the loaded model, from the K sweep (best: its chosen cells). drafts:
// n_drafts, the ceiling last. 0 on success.
static int run_sweep(const GPT *g, Draft *drafts, int n_drafts,
                     Cell *const best[2][BENCH_MAX_DRAFTS], int csv, const char *svg_path,
                     char *err, size_t errlen) {
    static SweepRow rows[4];
    rows[0].H = g->config.ffn_width;
    rows[0].mb = g->n_params * 4.0 / 1e6;
    rows[0].n = 0;
    for (int ti = 0; ti < 2; ti++)
        for (int j = 0; j < n_drafts; j++) rows[0].cells[rows[0].n++] = best[ti][j];
    double bw = stream_bandwidth(STREAM_MB << 20);
    fprintf(stderr, "\nthe same model, its MLP padded with zeros (--ffn-width): identical text, "
            "more bytes per pass\nstreaming-read bandwidth, one thread, %zu MB buffer: %.2f GB/s"
            "\n", STREAM_MB, bw / 1e9);
    for (int i = 0; i < SWEEP_N_WIDTHS; i++) {
        const WidthPlan *plan = &SWEEP_PLAN[i];
        fprintf(stderr, "\nffn_width %d, t = 1: %s at K =", plan->H, plan->all_drafts ?
                "bigram, gpt and lookup" : "gpt");
        for (int k = 0; k < MAX_PLAN_K && plan->k_draft[k]; k++) fprintf(stderr, " %d", plan->k_draft[k]);
        fprintf(stderr, ", the ceiling at K =");
        for (int k = 0; k < MAX_PLAN_K && plan->k_ceiling[k]; k++) fprintf(stderr, " %d", plan->k_ceiling[k]);
        for (int q = 0; plan->p_min && q < N_P_MIN_WIDE; q++)
            fprintf(stderr, "%s(K = %d, P = %g)", q ? ", " : ", gpt with --draft-p-min at ",
                    P_MIN_WIDE[q].K, P_MIN_WIDE[q].p);
        fprintf(stderr, "; %d timed rounds\n", plan->pairs);
        if (sweep_width(g, drafts, n_drafts, plan, bw, csv, &rows[i + 1]) != 0) {
            snprintf(err, errlen, "out of memory for the model padded to %d units", plan->H);
            return -1;
        }
    }
    int n = SWEEP_N_WIDTHS + 1;
    sweep_best(rows, n, drafts, n_drafts);
    sweep_chart(rows, n, drafts, n_drafts);
    sweep_crossover(rows, n, drafts, n_drafts);
    // the widths left out: where the GPT draft's crossover has been (136 MB), and the targets
    if (SWEEP_N_WIDTHS < N_WIDTHS)
        fprintf(stderr, "(the sweep stopped at %.1f MB; test/bench --full, make bench-full, "
                "goes on to 136 MB, where the GPT draft has paid in every run so far)\n",
                rows[n - 1].mb);
    if (svg_path && write_svg(svg_path, rows, n, drafts, n_drafts, err, errlen) != 0) return -1;
    if (svg_path) fprintf(stderr, "chart written to %s\n", svg_path);
    return 0;
}

// ----------------------------------------------------------------------------
// The summary: the headline figures, the accounting's check, the issue's targets

// The headline figures again, each with its command; then whether the accounting lands
// within 10% of the measured median in every timed cell (the misses are listed); then
// the issue's targets at 136 MB, t = 1 (the GPT draft >= 1.4x, the ceiling >= 1.8x).
// Runs the command of every headline the bench timed itself COMMAND_RUNS times, all of
// them in turn each time: from here on those cells' figures are the command's (figure).
static void check_commands(void) {
    Cell *todo[MAX_HEADLINES];
    int n = 0;
    for (int i = 0; i < N_HEADLINES; i++)
        if (HEADLINES[i].c->n_cmd == 0) todo[n++] = HEADLINES[i].c;
    if (COMMAND_RUNS <= 0 || n == 0) return;
    fprintf(stderr, "\nthe command of each headline so far, %d runs each, in turn, in a fresh "
            "process as a reader runs it (%s); the figures to quote from here on are the "
            "command's (the summary prints both)\n", COMMAND_RUNS, machine_note());
    if (command_rounds(todo, n, COMMAND_RUNS) != 0) {
        fprintf(stderr, "  (a command failed: is ./beyond built? the bench's own figures "
                "stand)\n");
        for (int i = 0; i < n; i++) todo[i]->n_cmd = 0;
    }
}

// One line of the summary: a figure's median (min-max) over n runs, the accounting and the
// textbook beside it.
static void summary_line(const char *what, const double *m, const double *full,
                         const double *tb, int n, const char *unit) {
    fprintf(stderr, "      %-8s %5.2fx (%.2f-%.2f, %d %s)  accounting %5.2fx  textbook ", what,
            median_of(m, n), min_of(m, n), max_of(m, n), n, unit, median_of(full, n));
    if (median_of(tb, n) > 0.0) fprintf(stderr, "%5.2fx", median_of(tb, n));
    else fprintf(stderr, "    -"); // no round drafted K guesses to price it by
}

static void print_summary(void) {
    fprintf(stderr, "\nheadline figures (%d tokens, ./specdec's default prompt and seed %llu): "
            "the speedup as the bench measured it, median (min-max) of its timed pairs, and as "
            "the command measured it, fresh each run; the accounting and the textbook beside "
            "each\n", TOKENS, (unsigned long long)SEED);
    int inside = 0, compared = 0, timed = 0, missed = 0;
    double worst = 0.0;
    for (int i = 0; i < N_HEADLINES; i++) {
        const Headline *h = &HEADLINES[i];
        const Cell *c = h->c, *r = h->c;
        fprintf(stderr, "  %s\n", h->label);
        if (!c->by_command) {
            summary_line("bench", c->ratio, c->full, c->textbook, c->n_pairs, "pairs");
            fputc('\n', stderr);
        }
        if (r->n_cmd > 0) {
            double m[MAX_PAIRS], full[MAX_PAIRS], tb[MAX_PAIRS];
            int in = 1;
            for (int k = 0; k < r->n_cmd; k++) {
                m[k] = r->cmd[k][CMD_MEASURED];
                full[k] = r->cmd[k][CMD_FULL];
                tb[k] = r->cmd[k][CMD_TEXTBOOK];
                in &= m[k] >= min_of(c->ratio, c->n_pairs) - 0.005 && // the bench's spread,
                      m[k] <= max_of(c->ratio, c->n_pairs) + 0.005;    // as printed
            }
            summary_line("command", m, full, tb, r->n_cmd, "runs");
            if (!c->by_command) {
                compared++;
                inside += in;
                fprintf(stderr, "  %s", in ? "within the bench's spread" : "OUTSIDE the bench's spread");
            }
            fputc('\n', stderr);
        }
        fprintf(stderr, "      %s\n", h->command);
    }
    for (int i = 0; i < N_PMIN_PAIRS; i++) pmin_gain(PMIN_PAIRS[i].p_min, PMIN_PAIRS[i].fixed, 0);
    if (compared)
        fprintf(stderr, "commands: %d of the %d headlines the bench timed itself came back within "
                "its spread in every run of the command\n", inside, compared);
    // the accounting against the measured speedup: every cell the bench timed (its medians),
    // every run of a command (its own two figures)
    for (int i = 0; i < N_CELLS; i++) {
        const Cell *c = &POOL[i];
        for (int k = c->by_command || c->n_pairs == 0 ? 0 : -1; k < c->n_cmd; k++) {
            double sp = k < 0 ? median_of(c->ratio, c->n_pairs) : c->cmd[k][CMD_MEASURED];
            double full = k < 0 ? median_of(c->full, c->n_pairs) : c->cmd[k][CMD_FULL];
            double gap = full / sp - 1.0;
            timed++;
            worst = fmax(worst, fabs(gap));
            if (fabs(gap) > 0.10) {
                missed++;
                fprintf(stderr, "MISS: the accounting is %+.1f%% off the measured speedup: %s "
                        "(%s: measured %.3f, accounting %.3f)\n", 100.0 * gap, cell_command(c),
                        k < 0 ? "the bench's medians" : "a run of the command", sp, full);
            }
        }
    }
    fprintf(stderr, "accounting against the measured speedup: %d of %d within 10%% (every cell "
            "the bench timed, every run of a command; the largest gap %.1f%%)\n", timed - missed,
            timed, 100.0 * worst);
    fprintf(stderr, "runs: %ld kept; %ld made again because another process took their core "
            "for more than %.0f%% of their wall time; %ld kept although it did (a busy machine: "
            "their cells measure it too)\n", RUNS, RERUNS, 100.0 * (1.0 - MIN_CPU_SHARE),
            RUNS_SHARED);
    // the issue's targets: the headline cells at 136 MB (ffn_width 65536), t = 1
    static const struct { const char *draft; double target, before_lo, before_hi; } targets[2] =
        {{"gpt", 1.4, 1.20, 1.28}, {"ceiling", 1.8, 1.36, 1.62}};
    for (int k = 0; k < 2; k++) {
        const Cell *c = NULL;
        for (int i = 0; i < N_HEADLINES; i++) {
            const Cell *h = HEADLINES[i].c;
            if (h->H == 65536 && h->t == 1.0f && h->p_min == 0.0f &&
                !strcmp(h->d->name, targets[k].draft))
                c = h;
        }
        if (!c) continue; // --quick: no 136 MB
        double sp = cell_speedup(c);
        fprintf(stderr, "target at 136 MB, t = 1, %s: >= %.1fx (before: %.2f-%.2fx): measured "
                "%.2fx (%.2f-%.2f) at K = %d: %s\n", targets[k].draft, targets[k].target,
                targets[k].before_lo, targets[k].before_hi, sp, cell_lo(c), cell_hi(c), c->K,
                sp >= targets[k].target ? "met" : "NOT met");
    }
}

// ----------------------------------------------------------------------------
// The bench
// ----------------------------------------------------------------------------
// Trees: tokens per verify pass, chain against tree at the same node count, and wall time

// Tokens per verify pass of one decoder over the bench's prompt, through the one loop
// (run_tree): a chain of K (shape NULL: chain_shape(K)) or a tree of this shape. Deterministic (seeded), so it is counted, not timed.
static double tokens_per_pass(GPT *g, Draft *d, float t, const char *shape, int K,
                              double *seconds) {
    int V = g->config.vocab_size, S = g->config.block_size;
    RunStats st = {0};
    TreeShape ts = chain_shape(K);
    char err[200];
    int seq[64 + MAX_TOKENS];
    if (shape && parse_tree_shape(shape, V, S, &ts, err, sizeof(err)) != 0) return -1.0;
    if (run_tree(g, d, &ts, &(Tokens){PROMPT_TOKENS, N_PROMPT}, (Sampler){t, 0, 0.0f}, SEED,
                 TOKENS, seq, &st) != 0)
        return -1.0;
    if (seconds) *seconds = st.core.seconds;
    return st.core.rounds ? (double)st.core.round_tokens / st.core.rounds : 0.0;
}

// The tree section: for each model-free and model draft, at t = 0 and 1, the chain of K = 4
// and 8 against every tree of as many nodes in a short list; then wall time at this size
// (in this process, alternated with plain decoding) and, with --full, at 136 MB (the
// command, 3 runs).
static void bench_trees(GPT *g, Draft *drafts, int n_drafts, const Vocab *v) {
    static const char *const SHAPES[2][4] = {{"2,1", "4", "1,3", NULL},
                                              {"2,1,1,1", "4,1", "2,3", "8"}};
    static const int NODES[2] = {4, 8};
    fprintf(stderr, "\ntrees: tokens per verify pass, a chain against trees of as many nodes "
            "(%d tokens, the bench's prompt and seed)\n", TOKENS);
    fprintf(stderr, "  %-8s %-3s %-5s %-7s %s\n", "draft", "t", "nodes", "chain", "trees");
    for (int j = 0; j < n_drafts; j++) {
        if (drafts[j].kind->sure || !strcmp(drafts[j].name, "ceiling")) continue;
        for (int ti = 0; ti < 2; ti++)
            for (int ni = 0; ni < 2; ni++) {
                float t = (float)ti;
                double chain = tokens_per_pass(g, &drafts[j], t, NULL, NODES[ni], NULL);
                fprintf(stderr, "  %-8s %-3d %-5d %-7.3f", drafts[j].name, ti, NODES[ni], chain);
                for (int s = 0; s < 4 && SHAPES[ni][s]; s++)
                    fprintf(stderr, " %s %.3f", SHAPES[ni][s],
                            tokens_per_pass(g, &drafts[j], t, SHAPES[ni][s], 0, NULL));
                fputc('\n', stderr);
            }
    }
    // Medusa's heads (4 levels at most): the chain of 4 is the tree 1,1,1,1 for them
    Draft medusa;
    char err[300];
    DraftInputs in = {.v = v, .block_size = g->config.block_size, .target = g, .depth = 4};
    if (setup_draft("medusa", &in, &medusa, err, sizeof(err)) == 0)
        for (int ti = 0; ti < 2; ti++) {
            float t = (float)ti;
            fprintf(stderr, "  %-8s %-3d %-5d %-7.3f", "medusa", ti, 4,
                    tokens_per_pass(g, &medusa, t, "1,1,1,1", 0, NULL));
            for (int s = 0; s < 3; s++)
                fprintf(stderr, " %s %.3f", SHAPES[0][s],
                        tokens_per_pass(g, &medusa, t, SHAPES[0][s], 0, NULL));
            fputc('\n', stderr);
        }
    else
        fprintf(stderr, "  (no Medusa rows: %s)\n", err);
    free_draft(&medusa);
    // wall time at this size: tree 3,2,1,1, the chain of K = 4 and plain decoding, in turn
    Draft *gpt = NULL;
    for (int j = 0; j < n_drafts; j++)
        if (!strcmp(drafts[j].name, "gpt")) gpt = &drafts[j];
    if (!gpt) return;
    double tree_r[5], chain_r[5];
    int n = PAIRS;
    for (int i = 0; i < n; i++) {
        double ts = 0.0, cs = 0.0, ps;
        tokens_per_pass(g, gpt, 1.0f, "3,2,1,1", 4, &ts);
        tokens_per_pass(g, gpt, 1.0f, NULL, 4, &cs);
        int seq[64 + MAX_TOKENS];
        RunStats st;
        if (bench_run(g, 1.0f, NULL, seq, &st) != 0) return;
        ps = st.core.seconds;
        tree_r[i] = ps / ts;
        chain_r[i] = ps / cs;
    }
    fprintf(stderr, "  wall, this model, gpt, t = 1: tree 3,2,1,1 %.2fx (%.2f-%.2f), chain K=4 "
            "%.2fx (%.2f-%.2f) of plain decoding, medians of %d alternated runs\n",
            median_of(tree_r, n), min_of(tree_r, n), max_of(tree_r, n), median_of(chain_r, n),
            min_of(chain_r, n), max_of(chain_r, n), n);
    if (COMMAND_RUNS == 0 || SWEEP_N_WIDTHS < N_WIDTHS) return; // 136 MB: --full only
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "./beyond%s --compare --tree 3,2,1,1 --draft gpt -t 1 -n %d "
             "--ffn-width 65536", CMD_PATHS, TOKENS);
    double tr[3], cr[3];
    int runs = 0;
    for (int i = 0; i < 3; i++) {
        char line[1200], buf[1024];
        snprintf(line, sizeof(line), "%s 2>&1 >/dev/null", cmd);
        double t0 = now_seconds();
        FILE *f = popen(line, "r");
        if (!f) break;
        double a = 0, b = 0, c = 0;
        while (fgets(buf, sizeof(buf), f)) {
            const char *w = strstr(buf, "; wall time ");
            if (!strncmp(buf, "tree against chain", 18) && w)
                sscanf(w + 12, "%lf, %lf and %lf", &a, &b, &c);
        }
        pclose(f);
        COMMAND_SECONDS += now_seconds() - t0;
        if (a > 0 && b > 0 && c > 0) {
            tr[runs] = c / a;
            cr[runs] = c / b;
            runs++;
        }
    }
    if (runs == 0) return;
    fprintf(stderr, "  wall, 136 MB, gpt, t = 1: tree 3,2,1,1 %.2fx (%.2f-%.2f), chain K=4 %.2fx "
            "(%.2f-%.2f) of plain decoding, medians of %d runs of\n    %s\n", median_of(tr, runs),
            min_of(tr, runs), max_of(tr, runs), median_of(cr, runs), min_of(cr, runs),
            max_of(cr, runs), runs, cmd);
}


// The curve and each draft's cost, the K sweep, the tempering, --draft-p-min, the sweep of
// sizes, the summary. drafts: the n_drafts drafts to measure (the bigram first), with
// room for one more: the ceiling goes there (the caller frees it with the others). csv
// also writes every cell as CSV on stdout, svg_path the sweep's chart. 0 on success.
int run_bench(GPT *g, Draft *drafts, int n_drafts, const Vocab *v, int csv,
              const char *svg_path, char *err, size_t errlen) {
    double t_start = now_seconds(), cpu_start = cpu_seconds();
    int V = g->config.vocab_size, S = g->config.block_size;
    fprintf(stderr, "every run: ./specdec's default prompt \"%s\" and seed %llu, %d new "
            "tokens; %s\n", PROMPT, (unsigned long long)SEED, TOKENS, machine_note());
    // the ceiling: a copy of the unpadded model, with a KV cache of its own, drafting for
    // the model itself here (the same function, at the same cost) and for each padded copy
    Draft *ceiling = &drafts[n_drafts];
    memset(ceiling, 0, sizeof(*ceiling));
    ceiling->kind = find_draft("gpt");
    ceiling->name = "ceiling";
    ceiling->V = V;
    if (widened_copy(g, g->config.ffn_width, &ceiling->model) != 0) {
        snprintf(err, errlen, "out of memory for the ceiling's copy of the model");
        return 1;
    }
    n_drafts++;
    // 1. the verify-cost curve and each draft's cost, on this model
    static double c[10];
    bench_curve(g, "this model", c, CURVE_REPS, 9, 1);
    // prompt lookup's cost depends on the text it searches: the bench's own, decoded greedily
    int text[64 + MAX_TOKENS], n_text = N_PROMPT + TOKENS;
    RunStats st;
    if (bench_run(g, 0.0f, NULL, text, &st) != 0) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    fprintf(stderr, "  c_draft, one guess over a one-token forward (a model draft: its one-token "
            "forward; bigram: its rows and draws in draft_tree; lookup: its search of the text, per guess):\n   ");
    for (int j = 0; j < n_drafts; j++)
        fprintf(stderr, " %s %.4f", drafts[j].name,
                draft_guess_seconds(&drafts[j], text, n_text, S, CURVE_REPS) / c[0]);
    fputc('\n', stderr);
    if (csv) csv_header();
    fprintf(stderr, "  (%.1f s so far)\n", now_seconds() - t_start);
    // 2. the K sweep, every draft beside plain decoding
    static Cell *best[2][BENCH_MAX_DRAFTS];
    if (k_sweep(g, drafts, n_drafts, c, csv, best) != 0) {
        snprintf(err, errlen, "out of memory in the K sweep");
        return 1;
    }
    fprintf(stderr, "  (%.1f s so far)\n", now_seconds() - t_start);
    // 3. why the bigram's row is tempered like the target
    bench_tempering(g, &drafts[0], v);
    // 4. --draft-p-min against the best fixed K
    if (pmin_small(g, drafts, n_drafts, c, best[1], csv) != 0) {
        snprintf(err, errlen, "out of memory in the --draft-p-min section");
        return 1;
    }
    // the headlines so far, as their commands measure them (the figures to quote)
    check_commands();
    fprintf(stderr, "  (%.1f s so far)\n", now_seconds() - t_start);
    // 5. trees against chains
    bench_trees(g, drafts, n_drafts, v);
    fprintf(stderr, "  (%.1f s so far)\n", now_seconds() - t_start);
    // 6. the same model, padded until a one-token pass is bound by memory
    if (run_sweep(g, drafts, n_drafts, best, csv, svg_path, err, errlen) != 0) return 1;
    // 7. the figures to quote, the accounting's check and the targets
    print_summary();
    // greedy decoding must give plain decoding's text: every t = 0 run was compared
    if (GREEDY_DIFFER) {
        snprintf(err, errlen, "greedy check: %ld of %ld speculative texts at t = 0 differ from "
                 "plain decoding's (a bug in beyond.c or specdec.c)", GREEDY_DIFFER, GREEDY_RUNS);
        return 1;
    }
    fprintf(stderr, "\ngreedy check: all %ld speculative texts at t = 0 (every draft, K and "
            "size, every run) are plain decoding's, byte for byte\n", GREEDY_RUNS);
    double wall = now_seconds() - t_start, cpu = cpu_seconds() - cpu_start;
    fprintf(stderr, "\nbench: %.1f s, %.1f s of them in the ./beyond commands; this process on "
            "a core %.0f%% of the rest; load %.2f at the end\n", wall, COMMAND_SECONDS,
            100.0 * cpu / (wall - COMMAND_SECONDS), load_average());
    return 0;
}


// ----------------------------------------------------------------------------
// The command line

#ifdef BENCH_MAIN
// test/bench [-m PATH] [-i PATH] [--csv] [--svg PATH] [--commands N] [--quick | --full]: see
// run_bench.
int main(int argc, char **argv) {
    program_name = "bench"; // its messages' first word
    Options o;
    char err[512];
    parse_args(1, argv, &o, NULL, err, sizeof(err)); // no words: the defaults; -m, -i below
    int csv = 0, quick = 0, full = 0;
    const char *svg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: test/bench [-m " DEFAULT_MODEL "] [-i corpus] [--csv] [--svg PATH] "
                   "[--commands N] [--quick | --full]\n  c(T), then K = 1..8 at t = 0 and 1 for "
                   "the bigram, GPT and lookup drafts and the\n  ceiling beside the accounting "
                   "and the papers' formula, --draft-p-min, trees, then the model\n  padded to "
                   "34 MB (--full: 136 MB) against the bandwidth limit; medians of alternated\n  "
                   "runs (see test/bench.c); --commands N runs each headline's ./beyond command "
                   "N\n  times beside it (default 5; 0: none, as --quick)\n");
            return close_stdout();
        }
        if (!strcmp(a, "--csv")) { csv = 1; continue; }

        if (!strcmp(a, "--full")) { // the longer sweep, to 136 MB (make bench-full)
            full = 1;
            SWEEP_N_WIDTHS = N_WIDTHS;
            continue;
        }
        if (!strcmp(a, "--quick")) {
            // the same code on less: what the tests run
            quick = 1;
            TOKENS = 200;
            SELECT_SMALL = 1;
            MAX_RERUNS = 0;
            COMMAND_RUNS = 0;
            TEMPER_TOKENS = 60;
            CURVE_REPS = 100;
            SWEEP_N_WIDTHS = 1; // 8.76 MB
            SWEEP_CURVE = 8192;
            STREAM_MB = 128;
            continue;
        }
        // what is left must be -m PATH or -i PATH, the model and corpus as ./specdec takes
        // them, --svg PATH or --commands N
        if (strcmp(a, "-m") && strcmp(a, "-i") && strcmp(a, "--svg") && strcmp(a, "--commands")) {
            error_line("unknown bench option '%s' (bench takes -m, -i, --csv, --svg, --commands, "
                       "--quick and --full)", a);
            return 1;
        }
        if (i + 1 >= argc) {
            error_line("option %s needs a value (see -h)", a);
            return 1;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--commands")) { // after --quick, which sets 0
            uint64_t n;
            if (parse_whole(val, 0, MAX_PAIRS, &n) != 0) {
                error_line("--commands '%s' must be a whole number from 0 to %d", val, MAX_PAIRS);
                return 1;
            }
            COMMAND_RUNS = (int)n;
            continue;
        }
        *(!strcmp(a, "--svg") ? &svg : a[1] == 'm' ? &o.model_path : &o.corpus_path) = val;
    }
    // --quick sets fewer widths than the default, --full more: both at once is no one plan
    if (quick && full) {
        error_line("--quick and --full exclude each other (--quick: what the tests run; "
                   "--full: the sweep to 136 MB)");
        return 1;
    }
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
    // what every run decodes: ./specdec's default prompt and seed, as parse_args set them
    PROMPT = o.prompt;
    SEED = o.seed;
    MODEL_PATH = o.model_path;
    int np = 0;
    if (strcmp(o.model_path, DEFAULT_MODEL)) // a -m given: the commands name it
        np += snprintf(CMD_PATHS + np, sizeof(CMD_PATHS) - np, " -m %s", o.model_path);
    if (strcmp(o.corpus_path, DEFAULT_CORPUS) && np < (int)sizeof(CMD_PATHS))
        snprintf(CMD_PATHS + np, sizeof(CMD_PATHS) - np, " -i %s", o.corpus_path);
    Loaded ld; // the model, its vocabulary and the corpus, as ./specdec loads them
    Draft drafts[BENCH_MAX_DRAFTS]; // bigram, gpt, lookup, and room for run_bench's ceiling
    int n_drafts = 0;
    memset(drafts, 0, sizeof(drafts));
    memset(&ld, 0, sizeof(ld));
    int rc = 1;
    if (load_inputs(&o, &ld, NULL, err, sizeof(err)) != 0)
        goto done;
    // the bench's prompts must be in the vocabulary (they are in Tiny Shakespeare's)
    N_PROMPT = (int)strlen(PROMPT);
    if (N_PROMPT < 1 || N_PROMPT > 64) {
        snprintf(err, sizeof(err), "the default prompt has %d bytes; the bench takes 1..64",
                 N_PROMPT);
        goto done;
    }
    if (encode_prompt(&ld.v, PROMPT, PROMPT_TOKENS, err, sizeof(err)) != 0) goto done;
    for (int i = 0; i < TEMPER_N_PROMPTS; i++) {
        int tokens[64];
        if (encode_prompt(&ld.v, TEMPER_PROMPTS[i], tokens, err, sizeof(err)) != 0) goto done;
    }
    print_config(&ld.g, o.model_path);
    // the drafts: the bigram first (the tempering section reads its table), then the GPT
    // draft, which is left out with a note when this model cannot take it (no draft.bin, or
    // another vocabulary or block size), then prompt lookup
    static const char *kinds[3] = {"bigram", "gpt", "lookup"};
    for (int i = 0; i < 3; i++) {
        DraftInputs in = {&ld.v, &ld.corpus, ld.g.config.block_size, &ld.g, 4, NULL};
        if (setup_draft(kinds[i], &in, &drafts[n_drafts], err, sizeof(err)) == 0) {
            n_drafts++;
            continue;
        }
        free_draft(&drafts[n_drafts]);
        memset(&drafts[n_drafts], 0, sizeof(drafts[n_drafts]));
        if (strcmp(kinds[i], "gpt")) goto done;
        fprintf(stderr, "note: the GPT draft is left out: %s\n", err);
    }
    rc = run_bench(&ld.g, drafts, n_drafts, &ld.v, csv, svg, err, sizeof(err));
done:
    if (rc != 0) error_line("%s", err);
    for (int i = 0; i < BENCH_MAX_DRAFTS; i++) free_draft(&drafts[i]);
    free((int *)ld.prompt.tok); // load_inputs's malloc
    free_corpus(&ld.corpus);
    free_gpt(&ld.g);
    // the CSV went to stdout: a failed write of it is one line on stderr and exit 1
    return rc == 0 ? close_stdout() : rc;
}
#endif
