/**
 * `aaas completion bash|zsh`: a shell completion script generated from the commander program
 * itself — every command path with its subcommands and options — so a new command completes
 * without anyone maintaining a list.
 */
import type { Command } from 'commander';

interface Node {
  /** Space-separated command path below the program ('' for the program itself). */
  path: string;
  words: string[];
}

function walk(cmd: Command, path: string, acc: Node[], inherited: string[]): Node[] {
  // long flags only; --version belongs to the program alone
  const own = cmd.options.map((o) => o.long).filter((f): f is string => typeof f === 'string' && f !== '--version');
  const options = [...inherited, ...own];
  const subs = cmd.commands.map((c) => c.name());
  acc.push({ path, words: [...new Set([...subs, ...options, '--help', ...(path === '' ? ['--version'] : [])])] });
  for (const c of cmd.commands) walk(c, path ? `${path} ${c.name()}` : c.name(), acc, path === '' ? own : inherited);
  return acc;
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The completion script of `program` for `shell`. */
export function completionScript(program: Command, shell: 'bash' | 'zsh'): string {
  const name = program.name();
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, '_')}_complete`;
  const nodes = walk(program, '', [], []);
  const cases = nodes.map((n) => `    ${quote(n.path)}) words=${quote(n.words.join(' '))} ;;`).join('\n');
  const paths = nodes.filter((n) => n.path !== '').map((n) => quote(n.path)).join(' ');
  const body = [
    `# ${shell} completion for ${name}, generated from its commands (aaas completion ${shell})`,
    ...(shell === 'zsh' ? ['autoload -U +X bashcompinit && bashcompinit'] : []),
    `${fn}() {`,
    '  local cur path="" candidate known i',
    '  cur="${COMP_WORDS[COMP_CWORD]}"',
    '  # the longest known command path among the words before the cursor',
    '  for ((i = 1; i < COMP_CWORD; i++)); do',
    '    case "${COMP_WORDS[i]}" in -*) continue ;; esac',
    '    candidate="${path:+$path }${COMP_WORDS[i]}"',
    `    for known in ${paths}; do`,
    '      if [[ "$known" == "$candidate" ]]; then path="$candidate"; break; fi',
    '    done',
    '  done',
    '  local words=""',
    '  case "$path" in',
    cases,
    '  esac',
    '  COMPREPLY=($(compgen -W "$words" -- "$cur"))',
    '}',
    `complete -F ${fn} ${name}`,
  ];
  return body.join('\n');
}
