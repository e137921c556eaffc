#!/usr/bin/env bash
# The command line's own description of itself, checked against its reference
# (docs/cli.md, linked from the README) and against what the parser accepts.
# The option tables (app/cli_*.c, flags.h) make getopt_long's arrays,
# every --help and docs/cli.md's reference (dstrain help --markdown); these
# checks catch the ways they can still part.
# usage: test_reference.sh readme|help|suggest DSTRAIN SOURCE_DIR
#   readme:  docs/cli.md's generated section is `dstrain help --markdown`, byte
#            for byte (else: run scripts/update-readme-reference.sh)
#   help:    every command's --help exits 0 and lists the same options as its
#            reference; every option in the sources' tables is in docs/cli.md
#            and its command's --help; every option listed is accepted by the
#            parser with or without its argument as the table says, and
#            handled by the command
#   suggest: an unknown option or command is refused with exit 2, naming the
#            nearest; a missing argument names the option
set -uo pipefail
mode=${1:?usage: test_reference.sh readme|help|suggest DSTRAIN SOURCE_DIR}
bin=$(realpath "${2:?DSTRAIN}")
src=$(realpath "${3:?SOURCE_DIR}")
source "$src/tests/lib/checks.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# the commands dstrain --help lists (between "commands:" and the blank line)
commands() { "$bin" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'; }
# the options of command $1 in the reference: "name arg" lines (arg: 1 or 0)
md_flags() {
  "$bin" help --markdown "$1" |
    sed -nE 's/^\| `--([a-z0-9-]+)`(, `-h`)? \| ([^|]*)\|.*/\1 \3/p' |
    awk '{ print $1, ($2 != "" ? 1 : 0) }'
}
# the options command $1's --help lists
help_flags() { "$bin" "$1" --help | sed -nE 's/^  --([a-z0-9-]+).*/\1/p'; }

case $mode in
readme)
  if "$src/scripts/update-readme-reference.sh" --check "$bin" "$src/docs/cli.md"; then ok
  else bad "docs/cli.md's option reference is not dstrain help --markdown: run scripts/update-readme-reference.sh"; fi
  ;;

help)
  cmds=$(commands)
  [ -n "$cmds" ] && ok || bad "dstrain --help lists no commands"
  for want in prep train eval transcribe info bench help; do
    grep -qx "$want" <<<"$cmds" && ok || bad "dstrain --help does not list $want"
  done
  # each command's reference section, and its help three ways
  for c in $cmds; do
    if "$bin" "$c" --help >"$c.help" 2>"$c.err" && [ ! -s "$c.err" ]; then ok
    else bad "dstrain $c --help: exit $? or stderr: $(cat "$c.err")"; fi
    head -1 "$c.help" | grep -q "^usage: dstrain $c" && ok || bad "dstrain $c --help does not start with its usage"
    "$bin" "$c" -h >"$c.h" 2>&1 && cmp -s "$c.help" "$c.h" && ok || bad "dstrain $c -h differs from --help"
    "$bin" help "$c" >"$c.h2" 2>&1 && cmp -s "$c.help" "$c.h2" && ok || bad "dstrain help $c differs from --help"
    grep -qx "### dstrain $c" "$src/docs/cli.md" && ok || bad "docs/cli.md has no section for dstrain $c"
    awk -v c="### dstrain $c" '$0 == c { on = 1; next } on && /^### / { exit } on' "$src/docs/cli.md" >"$c.readme"
    md_flags "$c" >"$c.md"
    # the same options in --help and in the reference
    if diff <(cut -d' ' -f1 "$c.md" | sort) <(help_flags "$c" | sort) >"$c.diff"; then ok
    else bad "dstrain $c: --help and help --markdown list different options: $(cat "$c.diff")"; fi
    grep -qx "help 0" "$c.md" && ok || bad "dstrain $c: no --help in its reference"
  done
  # every option in the sources' tables: in its command's --help (hidden ones
  # excepted) and in docs/cli.md's section for that command
  for f in "$src"/app/cli_*.c; do
    names=$( { grep -ohE 'DS_FLAG_(ARG|SWITCH)\([A-Za-z0-9_]+, "[a-z0-9-]+"' "$f" | sed -E 's/.*"(.*)"/\1/'
               grep -ohE '\{\.name = "[a-z0-9-]+", \.has_arg' "$f" | sed -E 's/.*"(.*)".*/\1/'; } )
    for n in $names; do
      if grep -Pzoq "\{\.name = \"$n\"[^}]*\.hidden = 1" "$f"; then continue; fi
      found=
      for c in $cmds; do
        if grep -qx "$n [01]" "$c.md"; then
          found=1
          grep -qE "^  --$n( |,|\$)" "$c.help" || bad "--$n ($(basename "$f")) is in the reference of $c but not its --help"
          # in docs/cli.md, inside the section of that command
          grep -qF "| \`--$n\`" "$c.readme" || bad "--$n ($(basename "$f")) is not in docs/cli.md's dstrain $c section"
        fi
      done
      [ -n "$found" ] && ok || bad "--$n of $(basename "$f") is in no command's --help or reference"
    done
  done
  # every option shown parses as its table says, reaches the command's switch,
  # and is refused when its argument is missing or not wanted; the extra
  # operand makes every command stop after parsing (nothing runs)
  for c in $cmds; do
    while read -r n arg; do
      [ "$n" = help ] && continue
      if [ "$arg" = 1 ]; then with=(--"$n"=1); else with=(--"$n"); fi
      if timeout 60 "$bin" "$c" "${with[@]}" --help >out 2>err && cmp -s out "$c.help"; then ok
      else bad "dstrain $c ${with[*]} --help: not the help ($(head -c 300 err))"; fi
      timeout 60 "$bin" "$c" "${with[@]}" no-such-operand.h5 >out 2>err
      rc=$?
      if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
         ! grep -Eq "unknown option|bad option|not handled|needs an argument|takes no argument" err; then ok
      else bad "dstrain $c ${with[*]} no-such-operand.h5: exit $rc, $(head -c 300 err)"; fi
      if [ "$arg" = 1 ]; then
        "$bin" "$c" --"$n" >out 2>err
        rc=$?
        [ "$rc" = 2 ] && grep -q -- "--$n needs an argument" err && ok ||
          bad "dstrain $c --$n (no argument): exit $rc, $(cat err)"
      else
        "$bin" "$c" --"$n"=1 >out 2>err
        rc=$?
        [ "$rc" = 2 ] && grep -q -- "--$n takes no argument" err && ok ||
          bad "dstrain $c --$n=1: exit $rc, $(cat err)"
      fi
    done <"$c.md"
  done
  ;;

suggest)
  # expect CODE PATTERN CMD...: exit CODE, a stderr line matching PATTERN
  expect() {
    local code=$1 pattern=$2; shift 2
    "$@" >out 2>err
    local rc=$?
    if [ "$rc" = "$code" ] && grep -Eq -- "$pattern" err; then ok
    else bad "dstrain ${*:2}: exit $rc (want $code), stderr lacks /$pattern/: $(cat err)"; fi
  }
  expect 2 '^dstrain train: unknown option --bach; did you mean --batch\?$' "$bin" train --bach 8
  expect 2 "^\(dstrain train --help lists its options\)$" "$bin" train --bach 8
  expect 2 'unknown option --bat; did you mean --batch\? \(options are not abbreviated\)' "$bin" train --bat 8
  expect 2 'unknown option --bat; did you mean --batch\?' "$bin" train --bat=8
  expect 2 'did you mean --checkpoint-dir, --checkpoint-every, --checkpoint-write or --checkpoint-error\?' "$bin" train --checkpoint 1
  expect 2 'unknown option --precison; did you mean --precision\?' "$bin" train --precison fp16
  expect 2 'unknown option --batch-size; did you mean --batch\?' "$bin" train --batch-size 8
  expect 2 'unknown option -batch; did you mean --batch\?' "$bin" train -batch 8
  expect 2 'unknown option --warmpu; did you mean --warmup\?' "$bin" bench --warmpu 3
  expect 2 'unknown option --chekpoint; did you mean --checkpoint\?' "$bin" eval --chekpoint c.h5
  expect 2 'unknown option --verfy; did you mean --verify\?' "$bin" prep --verfy f.h5
  expect 2 'unknown option --markdwon; did you mean --markdown\?' "$bin" help --markdwon
  expect 2 'dstrain info: unknown option --foo$' "$bin" info --foo
  expect 2 '^dstrain train: unknown option --zzzzzz$' "$bin" train --zzzzzz
  expect 2 'option --batch needs an argument: --batch B' "$bin" train --synthetic --batch
  expect 2 'option --synthetic takes no argument' "$bin" train --synthetic=yes
  # an option's argument is never taken for an option
  expect 2 '--max-frames --bach: expected a (whole )?number' "$bin" train --max-frames --bach
  expect 2 '^dstrain: unknown command "trian"; did you mean train\?$' "$bin" trian
  expect 2 '^\(dstrain --help lists the commands\)$' "$bin" trian
  expect 2 'unknown command "evl"; did you mean eval\?' "$bin" evl
  expect 2 'unknown command "benhc"; did you mean bench\?' "$bin" benhc
  expect 2 'unknown command "--verison"; did you mean --version\?' "$bin" --verison
  expect 2 'unknown command "trian"; did you mean train\?' "$bin" help trian
  expect 2 '^dstrain: unknown command "frobnicate"$' "$bin" frobnicate
  # every option of every command, two neighbours swapped: refused, the
  # option among the suggestions
  for c in $(commands); do
    for n in $(md_flags "$c" | cut -d' ' -f1); do
      m=$(( ${#n} / 2 ))
      typo=${n:0:m-1}${n:m:1}${n:m-1:1}${n:m+1}
      [ "$typo" = "$n" ] && continue
      "$bin" "$c" --"$typo" >out 2>err
      rc=$?
      if [ "$rc" = 2 ] && grep -q "unknown option --$typo; did you mean .*--$n[,? ]" err; then ok
      else bad "dstrain $c --$typo: exit $rc, no --$n suggested: $(cat err)"; fi
    done
  done
  ;;
*)
  echo "test_reference.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
echo "cli_reference_$mode: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
