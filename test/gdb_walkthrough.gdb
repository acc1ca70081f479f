# gdb walkthrough of ONE speculative round of specdec.c
#
# A round (speculative_round) first settles its context, then runs four phases, each a
# function it calls:
#
#   0. CONTEXT            a full cache (kv_len == S) restarts: lag = S/2-1 tokens before
#                         current_token are rerun by the verify pass (plain decoding's
#                         refill, folded in); k is clamped to the room, S-1-cache_len
#   1. draft_tokens       the bigram draft guesses k tokens c0..c(k-1), keeping q
#   2. verify_candidates  one target pass over [the lag tokens, current_token, c0..c(k-1)],
#                         giving p for the k guesses and the bonus row
#   3. accept_reject      candidate i passes when u_i < min(1, p_i(c_i) / q_i(c_i))
#   4. trim_kv_cache      the cache drops the positions of rejected candidates
#
# The run below never fills the cache (S = 32; it reaches 17 positions), so round 1 has
# lag = 0 and k = K = 4; notes/debugging.md shows a round that restarts it.
#
# This file stops in each phase twice: on entry (a breakpoint with a `commands`
# block prints the arguments) and on return (`finish` brings us back to
# speculative_round, where the buffers the phase filled are printed). After the
# first round's trim it stops for good; nothing is printed for later rounds.
#
# Use it (build the debug binary first with `make debug`):
#
#   gdb -x test/gdb_walkthrough.gdb --args ./specdec_debug -n 12 -k 4 -s 62 -t 1 -p "ROMEO:"
#   gdb -batch -x test/gdb_walkthrough.gdb --args ./specdec_debug -n 12 -k 4 -s 62 -t 1 -p "ROMEO:"
#
# The first form leaves you at the (gdb) prompt at the end of round 1, with the
# program still alive: `print *b`, `continue` (stops at round 2's draft_tokens,
# printing only the entry line), or `delete` and `continue` to run to the end.
# test/gdb_test.sh runs the second form and checks the numbers; notes/debugging.md
# explains them.
#
# Every line this file prints starts with "WALK <phase> <when>", so it can be
# found with grep among gdb's own messages:
#
#   WALK draft  enter | WALK draft  return
#   WALK verify enter | WALK verify return (kv_len, then all_tokens, then p_target)
#   WALK accept enter | WALK accept judge | WALK accept emit | WALK accept return
#   WALK trim   enter | WALK trim   return
#
# Probabilities are floats in the program; they are printed with 6 decimals (the
# program's --trace prints 3).
#
# Nothing here calls a function in the program (no `call`, no `print f(x)`, no string
# argument to printf): gdb would have to run code in the inferior for that, which some
# kernels refuse ("Couldn't write extended state status"). test/gdb_test.sh checks it.

# --- gdb settings --------------------------------------------------------------

# No "--Type <RET> for more--" prompts and no "are you sure?" questions.
set pagination off
set confirm off
# No "[New Thread ...]" chatter.
set print thread-events off

# ./specdec_debug is built with AddressSanitizer. At exit, its leak checker
# (LeakSanitizer) cannot run under a debugger: it stops the process with ptrace
# itself, which fails when gdb already traces it, and the program then exits with
# status 1 and "LeakSanitizer has encountered a fatal error". Turning the leak
# check off for the debugged program avoids that; every other ASan check stays on.
set environment ASAN_OPTIONS detect_leaks=0

# --- a helper: print a token as its character --------------------------------

# walk_char TOKEN prints the character of token TOKEN the way specdec's --trace
# does ('a', ' ', '\n', '\''), without a newline. It reads the vocabulary through
# $vocab, which the draft_tokens breakpoint below sets.
define walk_char
  set $walk_c = $vocab->chars[$arg0]
  if $walk_c == 10
    printf "'\\n'"
  else
    if $walk_c == 39
      printf "'\\''"
    else
      printf "'%c'", $walk_c
    end
  end
end
document walk_char
Print token TOKEN as a quoted character, as specdec --trace does ($vocab must be set).
end

# --- breakpoints on the four phases ---------------------------------------------

# 1. DRAFT. On entry: the token the round starts from (the last of the text so far),
# its position b->cache_len (the cache holds the cache_len tokens before it), how many
# tokens to draft, and the temperature the bigram rows are sharpened or flattened with.
break draft_tokens
commands
  # the vocabulary lives in the caller's DecodeOptions: fetch it once for walk_char
  up-silently 1
  set $vocab = o->vocab
  down-silently 1
  printf "WALK draft enter current_token=%d char=", text->tok[text->n - 1]
  walk_char text->tok[text->n-1]
  printf " cache_len=%d k=%d temperature=%g\n", b->cache_len, k, s->temperature
end

# 2. VERIFY. On entry: the cache length before the pass (positions 0..kv_len-1 are
# cached; current_token is NOT among them), b->lag (the tokens before current_token the
# pass reruns first: 0 unless the round restarted a full cache, whose kv_len is then
# 0), current_token (the last of the text), and the k guesses, b->candidates.
# all_tokens is filled by the function itself, so it is printed on return.
break verify_candidates
commands
  set $walk_kv0 = g->state.kv_len
  printf "WALK verify enter kv_len=%d lag=%d current_token=%d k=%d\n", g->state.kv_len, b->lag, text->tok[text->n - 1], k
  set $i = 0
  while $i < k
    printf "WALK verify enter candidates[%d]=%d char=", $i, b->candidates[$i]
    walk_char b->candidates[$i]
    printf "\n"
    set $i = $i + 1
  end
end

# 3. ACCEPT/REJECT. On entry: the draft length, the vocabulary size b->V (the width
# of one q_draft or p_target row), and whether a bonus token may be drawn.
break accept_reject
commands
  printf "WALK accept enter k=%d V=%d allow_bonus=%d\n", k, b->V, allow_bonus
end

# 4. TRIM. On entry: how many tokens the round emitted (num_accepted, which
# counts the resample or bonus token too), cache_len_before (the round's cache_len,
# current_token's position: the cache length before the round, or lag after a
# restart), and the cache length now, which still includes every verified position.
break trim_kv_cache
commands
  printf "WALK trim enter kv_len=%d cache_len_before=%d num_accepted=%d\n", g->state.kv_len, cache_len_before, num_accepted
end

# --- one round, step by step ------------------------------------------------------

# Start the program; it runs the prefill and stops at the first draft_tokens.
run

# Back in speculative_round: b->candidates[i] is the i-th guess and
# b->q_draft[i*V + candidates[i]] the draft probability of that guess (q_draft
# holds k rows of V = b->V floats, row i being the distribution c_i was sampled from).
finish
set $i = 0
while $i < k
  printf "WALK draft return candidates[%d]=%d char=", $i, b->candidates[$i]
  walk_char b->candidates[$i]
  printf " q=%.6f\n", b->q_draft[$i * b->V + b->candidates[$i]]
  set $i = $i + 1
end

# Run to verify_candidates (its entry line is printed by its commands block), then
# let the one forward pass happen. It ran all_tokens = [the lag tokens, current_token,
# c0 .. c(k-1)] at the positions from the entry's kv_len on, so kv_len grew by
# lag+k+1. Row i of p_target is the target's distribution for the token after
# [.., current_token, c0 .. c(i-1)]: p_target[i*V + candidates[i]] is what the target
# thinks of guess i. (Row k, the bonus row, is not printed; nor are the lag tokens'
# rows, which the pass does not keep.)
continue
finish
printf "WALK verify return kv_len=%d lag=%d\n", g->state.kv_len, b->lag
set $i = 0
while $i < b->lag + k + 1
  printf "WALK verify return all_tokens[%d]=%d char=", $i, b->all_tokens[$i]
  walk_char b->all_tokens[$i]
  printf " pos=%d\n", $walk_kv0 + $i
  set $i = $i + 1
end
set $i = 0
while $i < k
  printf "WALK verify return p_target[%d]=%.6f char=", $i, b->p_target[$i * b->V + b->candidates[$i]]
  walk_char b->candidates[$i]
  printf "\n"
  set $i = $i + 1
end

# Run to accept_reject, then let it decide. `finish` shows its return value, the
# number of tokens the round emits (1 .. k+1); $ is that value in gdb's history.
# For each judged candidate: p, q, their ratio, and the uniform draw u[i] that
# decided it. Only candidates up to the first rejection are judged, so u[i] is
# meaningful for i <= rejected_at (or for every i < k when none was rejected).
continue
finish
set $walk_n = $
printf "WALK accept return n=%d rejected_at=%d\n", $walk_n, b->rejected_at
set $i = 0
while $i < k && ($i <= b->rejected_at || b->rejected_at < 0)
  set $walk_p = b->p_target[$i * b->V + b->candidates[$i]]
  set $walk_q = b->q_draft[$i * b->V + b->candidates[$i]]
  printf "WALK accept judge i=%d char=", $i
  walk_char b->candidates[$i]
  printf " p=%.6f q=%.6f p/q=%.6f u=%.6f -> ", $walk_p, $walk_q, (double)$walk_p / $walk_q, b->u[$i]
  # the verdict as two literal formats: a string passed as an argument would make gdb
  # copy it into the program's memory, a call into the program that some kernels refuse
  if $i == b->rejected_at
    printf "REJECT\n"
  else
    printf "ACCEPT\n"
  end
  set $i = $i + 1
end
# The tokens the round emits: the accepted drafts, then the resample (after a
# rejection) or the bonus token (when all k passed).
set $i = 0
while $i < $walk_n
  printf "WALK accept emit accepted[%d]=%d char=", $i, b->accepted[$i]
  walk_char b->accepted[$i]
  printf "\n"
  set $i = $i + 1
end

# Run to trim_kv_cache and let it cut the cache back to cache_len_before +
# num_accepted: current_token and the accepted drafts stay, the last emitted token
# does not (it is the next round's current_token, and is not cached yet).
continue
finish
printf "WALK trim return kv_len=%d\n", g->state.kv_len

# One round is enough: the program stays stopped here, in speculative_round.
# (gdb -batch kills it on exit; at the prompt you may go on exploring.)
printf "WALK end of round 1\n"
