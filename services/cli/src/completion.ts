import type { Command } from "commander";

/**
 * Shell completion scripts generated from the command tree (commander 14 has none built in):
 * for every command path, its subcommands and its options (with the global ones); after `-p` /
 * `--profile`, the profiles of the home. The scripts walk the words typed so far to find the path,
 * then offer what that command takes.
 */

interface Node {
  path: string;
  subcommands: string[];
  options: string[];
}

function optionFlags(c: Command): string[] {
  return c.options.flatMap((o) => [o.short, o.long].filter((f): f is string => typeof f === "string"));
}

function nodes(program: Command): Node[] {
  const globals = [...optionFlags(program), "--help"];
  const out: Node[] = [];
  const walk = (c: Command, path: string[]) => {
    const subs = c.commands.filter((s) => !(s as unknown as { _hidden?: boolean })._hidden);
    out.push({
      path: path.join(" "),
      subcommands: subs.map((s) => s.name()),
      options: [...new Set([...(path.length > 0 ? optionFlags(c) : []), ...globals])],
    });
    for (const s of subs) walk(s, [...path, s.name()]);
  };
  walk(program, []);
  return out;
}

/**
 * The two lookups both scripts use: `_<name>_subcommands PATH` and `_<name>_options PATH`. Words
 * are commander names and flags (letters, digits, `-`), so they go into the script as they are.
 */
function lookups(name: string, list: Node[]): string {
  const arms = (pick: (n: Node) => string[]) => list.map((n) => `    "${n.path}") echo "${pick(n).join(" ")}" ;;`).join("\n");
  // Profile names for -p/--profile: the folders under the home the words name (--home), else
  // HERMES_HOME, else ~/.hermes. Names are validated ([a-z0-9][a-z0-9_-]*), so printing them is safe;
  // hidden folders (staging copies) are not listed.
  return `_${name}_profiles() {
  local home="\${HERMES_HOME:-$HOME/.hermes}" prev="" w d
  for w in "$@"; do
    [[ "$prev" == "--home" ]] && home="$w"
    prev="$w"
  done
  ls -1 "$home/profiles" 2>/dev/null | while read -r d; do
    case "$d" in [a-z0-9]*) echo "$d" ;; esac
  done
}
_${name}_subcommands() {
  case "$1" in
${arms((n) => n.subcommands)}
  esac
}
_${name}_options() {
  case "$1" in
${arms((n) => n.options)}
  esac
}`;
}

export function bashCompletion(program: Command): string {
  const list = nodes(program);
  const name = program.name();
  return `# bash completion for ${name}; load it with: source <(${name} completion bash)
${lookups(name, list)}
_${name}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmdpath="" w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    if [[ " $(_${name}_subcommands "$cmdpath") " == *" $w "* ]]; then cmdpath="\${cmdpath:+$cmdpath }$w"; fi
  done
  local words prev="\${COMP_WORDS[COMP_CWORD-1]}"
  if [[ "$prev" == "-p" || "$prev" == "--profile" ]]; then words="$(_${name}_profiles "\${COMP_WORDS[@]}")"
  elif [[ "$cur" == -* ]]; then words="$(_${name}_options "$cmdpath")"; else words="$(_${name}_subcommands "$cmdpath")"; fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _${name} ${name}
`;
}

export function zshCompletion(program: Command): string {
  const list = nodes(program);
  const name = program.name();
  return `#compdef ${name}
# zsh completion for ${name}; load it with: source <(${name} completion zsh), or save it as _${name} in your $fpath
${lookups(name, list)}
_${name}() {
  local cmdpath="" w i
  local -a subs
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == -* ]] && continue
    subs=(\${=$(_${name}_subcommands "$cmdpath")})
    if (( \${subs[(Ie)$w]} )); then cmdpath="\${cmdpath:+$cmdpath }$w"; fi
  done
  if [[ "\${words[CURRENT-1]}" == "-p" || "\${words[CURRENT-1]}" == "--profile" ]]; then
    compadd -- \${(f)"$(_${name}_profiles "\${words[@]}")"}
  elif [[ "\${words[CURRENT]}" == -* ]]; then
    compadd -- \${=$(_${name}_options "$cmdpath")}
  else
    compadd -- \${=$(_${name}_subcommands "$cmdpath")}
  fi
}
if (( $+functions[compdef] )); then compdef _${name} ${name}; fi
`;
}
