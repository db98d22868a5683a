#!/usr/bin/env zsh
# What zsh would offer on TAB: capture.zsh COMPLETIONS_DIR 'command line'
# Starts an interactive zsh in a pseudo-terminal (zpty) with the completion functions of
# COMPLETIONS_DIR on $fpath, types the line and TAB, and prints every candidate that the
# completion system adds (compadd is wrapped to print them), one per line.
zmodload zsh/zpty || exit 1
zpty z zsh -f -i
local line init
init=$(mktemp)
cat > $init <<INIT
PROMPT=
fpath=($1 \$fpath)
autoload -U compinit
compinit -u -D
bindkey '^I' complete-word
null-line () { echo -E - \$'\0' }
compprefuncs=( null-line )
comppostfuncs=( null-line exit )
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
compadd () {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "\$@"; return \$?; fi
  typeset -a __hits
  builtin compadd -A __hits "\$@"
  [[ -n \$__hits ]] || return
  local h
  for h in \$__hits; do echo -E - "\$h"; done
}
echo ok
INIT
zpty -w z "source $init"
repeat 4; do
  zpty -r z line
  [[ $line == ok* ]] && break
done
zpty -w z "$2"$'\t'
integer tog=0
while zpty -r z line; do
  line=${line%$'\n'}
  line=${line%$'\r'}
  if [[ $line == *$'\0'* ]]; then
    (( tog++ )) && break || continue
  fi
  (( tog )) && print -r -- "$line"
done
rm -f $init
