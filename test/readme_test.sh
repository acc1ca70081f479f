#!/usr/bin/env bash
# README figures test, run by test/run_tests.sh (or directly: bash test/readme_test.sh).
# The README states numbers and signatures a reader can check; this keeps them current:
#   1. the parameter count ("209,729 parameters"), against what ./specdec itself counts
#      for its default model (the config line it prints) and against the lecture
#      model's size computed here from its shapes;
#   2. the length of specdec.c ("`specdec.c` (N lines)"), against wc -l;
#   3. the length of beyond.c ("`beyond.c` (N lines)"), against wc -l;
#   4. where specdec.c's reader meets draft_tokens ("meets `draft_tokens` at line N"),
#      against the line its definition starts on;
#   5. where the blog's path ends ("take the first N lines, up to the end of `generate`":
#      the blog's functions, the target model, then plain decoding, the baseline), against
#      the line of the "}" that closes generate's definition;
#   6. the share of specdec.c's lines that carry a comment ("N% of the file's lines
#      carry a comment"), counted the way the project's checks count it (a line with
#      //, /* or a leading *), rounded down;
#   7. the blog->C table (the rows "| `PYTHON` | `C` |" under "## The blog's functions"):
#      its Python column is the blog post's own signatures, each once (BLOG_SIGNATURES
#      below, copied from the post's def lines and its call of the target model), and
#      each C cell is the declaration of that function in specdec.c, from the return
#      type to the "{", joined onto one line with runs of blanks collapsed.
# Each number is read from README.md; a figure the README no longer states is a FAIL,
# not a skip. One PASS/FAIL line per check; exit 1 if any failed.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

if [[ -n ${SPECDEC_BIN:-} ]]; then
    # run_tests.sh's second pass (a sanitizer build): the README is the same file
    echo "PASS README figures: checked in the first pass"
    exit 0
fi

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }
README=${README_FILE:-README.md} # README_FILE: another copy, to show a stale figure fails
# number_in PATTERN: the first number (commas removed) that README's sed pattern captures
number_in() { sed -n "s/$1/\1/p" "$README" | head -n 1 | tr -d ','; }

# 1. The parameter count: README, the program, and the lecture model's shapes
# (per layer: ln1, ln2 (2C each), query/key/value (C*C each), proj (C*C + C),
# ffwd (C*4C + 4C + 4C*C + C); plus token and position embeddings, ln_f and lm_head).
readme_params=$(number_in '.*[^0-9,]\([0-9][0-9,]*\) parameters.*')
program_params=$(./specdec -n 1 --plain 2>&1 >/dev/null |
                 sed -n 's/^config: .* -> \([0-9]*\) parameters$/\1/p')
L=4 C=64 S=32 V=65
shapes=$((V * C + S * C + L * (2 * C + 3 * C * C + C * C + C + 2 * C + C * 4 * C + 4 * C +
         4 * C * C + C) + 2 * C + C * V + V))
if [[ -z $readme_params ]]; then
    fail "README figures: README.md no longer states the parameter count (\"N parameters\")"
elif [[ $readme_params == "$program_params" && $program_params == "$shapes" ]]; then
    pass "README figures: parameter count $readme_params == ./specdec's $program_params == the lecture model's shapes $shapes"
else
    fail "README figures: README says $readme_params parameters, ./specdec counts '${program_params}', the shapes give $shapes (fix README.md or the model)"
fi

# 2. The line count of specdec.c
readme_lines=$(number_in '.*`specdec\.c` (\([0-9][0-9,]*\) lines).*')
actual_lines=$(wc -l <specdec.c | tr -d ' ')
if [[ -z $readme_lines ]]; then
    fail "README figures: README.md no longer states specdec.c's length (\"\`specdec.c\` (N lines)\")"
elif [[ $readme_lines == "$actual_lines" ]]; then
    pass "README figures: specdec.c has $actual_lines lines, as README says"
else
    fail "README figures: README says specdec.c has $readme_lines lines, wc -l counts $actual_lines (update README.md)"
fi

# 3. The line count of beyond.c
readme_beyond=$(number_in '.*`beyond\.c` (\([0-9][0-9,]*\) lines).*')
actual_beyond=$(wc -l <beyond.c | tr -d ' ')
if [[ -z $readme_beyond ]]; then
    fail "README figures: README.md no longer states beyond.c's length (\"\`beyond.c\` (N lines)\")"
elif [[ $readme_beyond == "$actual_beyond" ]]; then
    pass "README figures: beyond.c has $actual_beyond lines, as README says"
else
    fail "README figures: README says beyond.c has $readme_beyond lines, wc -l counts $actual_beyond (update README.md)"
fi

# 4. Where draft_tokens starts
readme_draft=$(number_in '.*meets `draft_tokens` at line \([0-9][0-9,]*\).*')
actual_draft=$(grep -nE '^[a-z].*[ *]draft_tokens\(' specdec.c | head -n 1 | cut -d: -f1)
if [[ -z $readme_draft ]]; then
    fail "README figures: README.md no longer says where draft_tokens starts (\"meets \`draft_tokens\` at line N\")"
elif [[ $readme_draft == "$actual_draft" ]]; then
    pass "README figures: draft_tokens starts at line $actual_draft of specdec.c, as README says"
else
    fail "README figures: README says draft_tokens starts at line $readme_draft, specdec.c has it at line '${actual_draft}' (update README.md)"
fi

# 5. Where the blog's path ends: the "}" that closes generate's definition (plain decoding,
# the section after the target model; the first line after the definition's start that is
# just "}"). [ *]generate( does not match speculative_generate(.
readme_end=$(number_in '.*take the first \([0-9][0-9,]*\) lines, up to the end of `generate`.*')
actual_end=$(awk '!on && /^[a-z].*[ *]generate\(/ && !/;[[:space:]]*$/ { on = 1 } on && /^}/ { print NR; exit }' specdec.c)
if [[ -z $readme_end ]]; then
    fail "README figures: README.md no longer says where the blog's path ends (\"take the first N lines, up to the end of \`generate\`\")"
elif [[ $readme_end == "$actual_end" ]]; then
    pass "README figures: generate ends at line $actual_end of specdec.c, where README says the blog's path ends"
else
    fail "README figures: README says the blog's path ends at line $readme_end, specdec.c's generate ends at line '${actual_end}' (update README.md)"
fi

# 6. The comment share
readme_share=$(number_in ".*[^0-9]\([0-9][0-9]*\)% of the file's lines carry a comment.*")
commented=$(grep -cE '//|/\*|^[[:space:]]*\*' specdec.c)
actual_share=$((100 * commented / actual_lines))
if [[ -z $readme_share ]]; then
    fail "README figures: README.md no longer states the share of commented lines (\"N% of the file's lines carry a comment\")"
elif [[ $readme_share == "$actual_share" ]]; then
    pass "README figures: $commented of specdec.c's $actual_lines lines carry a comment ($actual_share%), as README says"
else
    fail "README figures: README says $readme_share% of specdec.c's lines carry a comment, the count gives $actual_share% ($commented of $actual_lines; update README.md)"
fi

# 7. The blog->C table. The blog post's signatures, as the post prints them: its def lines
# (BigramDraftModel's methods, the four phases, the loop) and its call of the target model.
BLOG_SIGNATURES=(
    'BigramDraftModel.__init__(self, train_data, vocab_size, device)'
    'get_probs(self, token_id)'
    'sample(self, token_id)'
    'draft_tokens(draft_model, current_token, K)'
    'verify_candidates(target_model, current_token, candidates, past_kvs)'
    'accept_reject(candidates, draft_probs, target_probs)'
    'trim_kv_cache(new_kvs, num_accepted, cache_len_before_verify)'
    'speculative_generate(target_model, draft_model, prompt_tokens, max_new_tokens, K=4)'
    'target_model(input_ids, pos=positions, past_kvs=past_kvs)'
)
# decl_of NAME: NAME's definition in specdec.c, from the return type to the "{", on one line
decl_of() {
    awk -v name="$1" '
        !on && $0 ~ ("^[A-Za-z].*[ *]" name "\\(") { on = 1; s = "" }
        on {
            s = s " " $0
            if ($0 ~ /;[[:space:]]*(\/\/.*)?$/ && $0 !~ /\{/) { on = 0; next } # a declaration only
            if ($0 ~ /\{/) {
                sub(/[[:space:]]*\{.*$/, "", s)
                gsub(/[[:space:]]+/, " ", s)
                sub(/^ /, "", s)
                print s
                exit
            }
        }' specdec.c
}
table=$(awk '/^## / { in_t = ($0 ~ /^## The blog.s functions/) } in_t && /^\| `/' "$README")
bad=""
nrows=0
seen=" "
while IFS= read -r row; do
    [[ -n $row ]] || continue
    nrows=$((nrows + 1))
    py=$(cut -d'`' -f2 <<<"$row")
    c=$(cut -d'`' -f4 <<<"$row")
    known=
    for sig in "${BLOG_SIGNATURES[@]}"; do
        [[ $py == "$sig" ]] && known=1
    done
    if [[ -z $known ]]; then
        bad+=" [the blog has no '$py']"
    elif [[ $seen == *" $py "* ]]; then
        bad+=" ['$py' twice]"
    fi
    seen+="$py "
    name=$(sed -E 's/^.*[ *]([A-Za-z_][A-Za-z0-9_]*)\(.*/\1/' <<<"$c")
    decl=$(decl_of "$name")
    if [[ -z $decl ]]; then
        bad+=" [specdec.c defines no '$name']"
    elif [[ ${c%;} != "$decl" ]]; then
        bad+=" ['$c' is not specdec.c's '$decl']"
    fi
done <<<"$table"
for sig in "${BLOG_SIGNATURES[@]}"; do
    [[ $seen == *" $sig "* ]] || bad+=" [no row for the blog's '$sig']"
done
if ((nrows == 0)); then
    fail "README figures: README.md has no blog->C table (rows \"| \`PYTHON\` | \`C\` |\" under \"## The blog's functions\")"
elif [[ -z $bad ]]; then
    pass "README figures: the blog->C table's $nrows rows give the blog's own signatures and specdec.c's declarations"
else
    fail "README figures: the blog->C table is stale:$bad (update README.md)"
fi

((nfail == 0))
