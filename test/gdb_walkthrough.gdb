# gdb walkthrough of ONE speculative round of specdec.c
#
# The blog's four phases stand together in speculative_generate's loop, one call each:
#
#   1. draft_tokens       the bigram draft guesses k tokens c0..c(k-1) after current_token,
#                         keeping each row it drew from in b->draft_probs
#   2. verify_candidates  one target pass over [current_token, c0..c(k-1)] at positions
#                         cache_len .. cache_len+k, giving b->target_probs (k+1 rows)
#   3. accept_reject      candidate i passes when u_i < min(1, p_i(c_i) / q_i(c_i))
#   4. trim_kv_cache      the cache keeps cache_len + num_accepted positions
#
# Before a round, make_room restarts a full cache: it runs the window's first tokens as a pass
# of its own (the trace's REFILL line); the four calls never see it. The run below never
# fills the cache (S = 32; its 4 rounds reach 17 positions); notes/debugging.md shows one
# that does.
#
# This file stops in each phase twice: on entry (a breakpoint with a `commands` block
# prints what the phase is given) and on return (`finish` brings us back to
# speculative_generate, where what the phase wrote into the round's buffers b is printed).
# After the first round's trim it stops for good; nothing is printed for later rounds.
#
# Use it (build the debug binary first with `make debug`):
#
#   gdb -x test/gdb_walkthrough.gdb --args ./specdec_debug -n 12 -k 4 -s 62 -t 1 -p "ROMEO:"
#   gdb -batch -x test/gdb_walkthrough.gdb --args ./specdec_debug -n 12 -k 4 -s 62 -t 1 -p "ROMEO:"
#
# The first form leaves you at the (gdb) prompt at the end of round 1, in
# speculative_generate, with the program still alive. Its locals have the blog's names:
# `p b->emitted[0]@num_accepted` (the round's tokens), `p current_token`, `p cache_len`,
# `p generated[0]@n_generated` (the blog's list; the round's update, generated.extend(accepted)
# and current_token = accepted[-1], has not run yet); then `continue` (stops at round 2's
# draft_tokens), or `delete` and `continue` to run to the end. test/gdb_test.sh runs the second form and checks its numbers against
# ./specdec --trace; notes/debugging.md explains them.
#
# Every line this file prints starts with "WALK <phase> <when>", so it can be found with
# grep among gdb's own messages:
#
#   WALK draft  enter | WALK draft  return
#   WALK verify enter | WALK verify return (cache_len, then all_tokens, then target_probs)
#   WALK accept enter | WALK accept return | WALK accept judge | WALK accept emit
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

# 1. DRAFT: draft_tokens(draft_model, current_token, k, temperature, rng, b). On entry: the
# token the round starts from, the round's cache_len (a local of the caller: the cache
# holds the cache_len tokens before current_token), how many tokens to draft, and the
# temperature the bigram rows are sharpened or flattened with.
break draft_tokens
commands
  # the caller's DecodeOptions holds the vocabulary, and its local cache_len the round's
  up-silently 1
  set $vocab = o->vocab
  set $walk_cache_len = cache_len
  down-silently 1
  printf "WALK draft enter current_token=%d char=", current_token
  walk_char current_token
  printf " cache_len=%d k=%d temperature=%g\n", $walk_cache_len, k, temperature
end

# 2. VERIFY: verify_candidates(target_model, current_token, k, temperature, b). On entry:
# the cache's length before the pass (positions 0..cache_len-1 are cached; current_token
# is NOT among them), current_token and the k guesses, b->candidates. all_tokens is
# filled by the function itself, so it is printed on return.
break verify_candidates
commands
  set $walk_cache0 = target_model->state.cache_len
  printf "WALK verify enter cache_len=%d current_token=%d k=%d\n", target_model->state.cache_len, current_token, k
  set $i = 0
  while $i < k
    printf "WALK verify enter candidates[%d]=%d char=", $i, b->candidates[$i]
    walk_char b->candidates[$i]
    printf "\n"
    set $i = $i + 1
  end
end

# 3. ACCEPT/REJECT: accept_reject(b, k, allow_bonus, rng). On entry: the draft length,
# the vocabulary size b->V (the width of one draft_probs or target_probs row), and
# whether a bonus token may be drawn.
break accept_reject
commands
  printf "WALK accept enter k=%d V=%d allow_bonus=%d\n", k, b->V, allow_bonus
end

# 4. TRIM: trim_kv_cache(target_model, num_accepted, cache_len_before_verify). On entry: how
# many tokens the round emitted (num_accepted, which counts the resample or bonus token too),
# cache_len_before_verify (printed as cache_len, the loop's name for it: the length before the
# verify pass, and current_token's position), and the cache's length now, which still
# includes every verified position.
break trim_kv_cache
commands
  printf "WALK trim enter state.cache_len=%d cache_len=%d num_accepted=%d\n", target_model->state.cache_len, cache_len_before_verify, num_accepted
end

# --- one round, step by step ------------------------------------------------------

# Start the program; it runs the prefill and stops at the first draft_tokens.
run

# Back in speculative_generate: b->candidates[i] is the i-th guess and
# b->draft_probs[i*V + candidates[i]] the draft's probability of that guess (draft_probs
# holds k rows of V = b->V floats, row i being the distribution c_i was sampled from).
finish
set $i = 0
while $i < k
  printf "WALK draft return candidates[%d]=%d char=", $i, b->candidates[$i]
  walk_char b->candidates[$i]
  printf " q=%.6f\n", b->draft_probs[$i * b->V + b->candidates[$i]]
  set $i = $i + 1
end

# Run to verify_candidates (its entry line is printed by its commands block), then let
# the one forward pass happen. It ran all_tokens = [current_token, c0 .. c(k-1)] at the
# positions from the entry's cache_len on, so the cache grew by k+1. Row i of
# target_probs is the target's distribution for the token after [.., current_token,
# c0 .. c(i-1)]: target_probs[i*V + candidates[i]] is what the target thinks of guess i.
# (Row k, the bonus row, is not printed.)
continue
finish
printf "WALK verify return cache_len=%d\n", target_model->state.cache_len
set $i = 0
while $i < k + 1
  printf "WALK verify return all_tokens[%d]=%d char=", $i, b->all_tokens[$i]
  walk_char b->all_tokens[$i]
  printf " pos=%d\n", $walk_cache0 + $i
  set $i = $i + 1
end
set $i = 0
while $i < k
  printf "WALK verify return target_probs[%d]=%.6f char=", $i, b->target_probs[$i * b->V + b->candidates[$i]]
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
  set $walk_p = b->target_probs[$i * b->V + b->candidates[$i]]
  set $walk_q = b->draft_probs[$i * b->V + b->candidates[$i]]
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
  printf "WALK accept emit accepted[%d]=%d char=", $i, b->emitted[$i]
  walk_char b->emitted[$i]
  printf "\n"
  set $i = $i + 1
end

# Run to trim_kv_cache and let it cut the cache back to cache_len_before_verify + num_accepted:
# current_token and the accepted drafts stay, the last emitted token does not (it is
# the next round's current_token, and is not cached yet).
continue
finish
printf "WALK trim return state.cache_len=%d\n", target_model->state.cache_len

# One round is enough: the program stays stopped here, in speculative_generate.
# (gdb -batch kills it on exit; at the prompt you may go on exploring.)
printf "WALK end of round 1\n"
