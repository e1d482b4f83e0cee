import { settings } from '../../app/settings.ts';
import { ConvergeError } from '../../core/errors.ts';
import type { CommandSpec, Run } from '../command.ts';
import { flagsOf } from '../main.ts';
import { commands } from './index.ts';

// `converge completion bash|zsh|fish`: made from the command table (commands/index.ts), so a new
// command, subcommand or flag completes without touching this file. A command completes its own
// flags, -o and --json where it takes them, and the configuration flags of the settings it uses
// (the others are accepted and ignored, so offering them would only be noise).

type Shape = Readonly<{
  name: string;
  summary: string;
  subcommands: readonly string[];
  flags: readonly string[];
  valued: readonly string[];
}>;

const shapeOf = (c: CommandSpec): Shape => {
  const used = new Set<string>(c.settings.map((k) => settings[k].flag));
  const all = flagsOf(c);
  const configFlag = new Set<string>(Object.values(settings).map((s) => s.flag));
  const names = Object.keys(all).filter((f) => !configFlag.has(f) || used.has(f));
  return {
    name: c.name,
    summary: c.summary,
    subcommands: c.subcommands ?? [],
    flags: names.map((f) => `--${f}`).concat(names.filter((f) => all[f]!.short !== undefined).map((f) => `-${all[f]!.short!}`)),
    valued: names
      .filter((f) => all[f]!.type === 'string')
      .map((f) => `--${f}`)
      .concat(names.filter((f) => all[f]!.type === 'string' && all[f]!.short !== undefined).map((f) => `-${all[f]!.short!}`)),
  };
};

const outputValues = 'json yaml wide name';

export function bashScript(): string {
  const shapes = commands.map(shapeOf);
  const valued = [...new Set(shapes.flatMap((s) => s.valued))].sort();
  const cases = shapes.map((s) => `    ${s.name}) flags="${s.flags.join(' ')}"; subs="${s.subcommands.join(' ')}" ;;`).join('\n');
  return `# converge completion for bash (converge completion bash); zsh reads it through bashcompinit.
_converge() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="" sub="" i w skip=""
  # The command and its subcommand: the first words that are neither flags nor a flag's value.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    if [[ -n $skip ]]; then skip=""; continue; fi
    case "$w" in
      ${valued.join('|')}) skip=1 ;;
      -*) ;;
      *) if [[ -z $cmd ]]; then cmd="$w"; elif [[ -z $sub ]]; then sub="$w"; fi ;;
    esac
  done
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "${outputValues}" -- "$cur")); return ;;
  esac
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W "${shapes.map((s) => s.name).join(' ')} --help --version" -- "$cur"))
    return
  fi
  local flags="" subs=""
  case "$cmd" in
${cases}
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [[ -z $sub && -n $subs ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o default -F _converge converge
`;
}

const zshScript = (): string => `#compdef converge
# converge completion for zsh: the bash completion, through zsh's bashcompinit.
autoload -U +X bashcompinit && bashcompinit
${bashScript()}`;

const fishQuote = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

function fishScript(): string {
  const shapes = commands.map(shapeOf);
  const lines = ['# converge completion for fish (converge completion fish | source)', 'complete -c converge -f'];
  lines.push("complete -c converge -n '__fish_use_subcommand' -l version -d 'the version and the commit of the build'");
  for (const s of shapes) {
    lines.push(`complete -c converge -n '__fish_use_subcommand' -a ${s.name} -d ${fishQuote(s.summary)}`);
    if (s.subcommands.length > 0) {
      lines.push(
        `complete -c converge -n '__fish_seen_subcommand_from ${s.name}; and not __fish_seen_subcommand_from ${s.subcommands.join(' ')}' -a ${fishQuote(s.subcommands.join(' '))}`,
      );
    }
    for (const f of s.flags.filter((x) => x.startsWith('--'))) {
      const value = s.valued.includes(f);
      const extra = f === '--output' ? ` -s o -x -a ${fishQuote(outputValues)}` : value ? ' -r' : '';
      lines.push(`complete -c converge -n '__fish_seen_subcommand_from ${s.name}' -l ${f.slice(2)}${extra}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export const run: Run = async ({ io, positionals }) => {
  const shell = positionals[0];
  const script = shell === 'bash' ? bashScript() : shell === 'zsh' ? zshScript() : shell === 'fish' ? fishScript() : null;
  if (script === null) throw new ConvergeError('CONVERGE_ERR_USAGE', `completion takes bash, zsh or fish, not ${JSON.stringify(shell)}`);
  io.stdout(script);
  return 0;
};
