// svcmap completion bash|zsh: a shell completion script written from the
// commands' declarations (args.ts), so it completes exactly the commands,
// flags and choices the parser takes. zsh loads the bash function through
// bashcompinit. Pure apart from printing.
import { z } from 'zod';
import { type CommandSpec, allFlags, command, isSwitch, parseFlagsAndArg } from './args.ts';
import { choicesOf } from './usage.ts';

const SHELLS = ['bash', 'zsh'] as const;

export const completionCommand = command({
  name: 'completion',
  summary: 'a shell completion script for bash or zsh',
  description:
    'Prints a completion script for the shell named: commands, their flags, and the values a flag takes when they are a fixed list (directories and files for DIR and PATH). Load it with: source <(svcmap completion bash), or for zsh: source <(svcmap completion zsh).',
  operand: { name: 'SHELL', synopsis: 'bash|zsh', schema: z.enum(SHELLS, { message: 'must be bash or zsh' }) },
  flags: {},
});

/** Words for compgen -W: shell-safe because every name and choice is [A-Za-z0-9_.:-]. */
function words(xs: readonly string[]): string {
  for (const x of xs) if (!/^[A-Za-z0-9_.:-]+$/.test(x)) throw new Error(`cannot complete ${JSON.stringify(x)}: not a plain word`);
  return xs.join(' ');
}

/** The bash function: the command in word 1, then per command the flag before the cursor decides what is offered. */
export function bashScript(specs: readonly CommandSpec[]): string {
  const names = [...specs.map((s) => s.name), 'help'];
  const cases = specs.map((spec) => {
    const flags = Object.entries(allFlags(spec));
    const valued = flags.flatMap(([name, f]) => {
      if (isSwitch(f)) return [];
      const forms = [`--${name}`, ...(f.short ? [`-${f.short}`] : [])].join('|');
      const choices = choicesOf(f);
      const reply = choices
        ? `COMPREPLY=($(compgen -W "${words(choices)}" -- "$cur"))`
        : f.value === 'DIR'
          ? 'COMPREPLY=($(compgen -d -- "$cur"))'
          : f.value === 'PATH'
            ? 'COMPREPLY=($(compgen -f -- "$cur"))'
            : 'COMPREPLY=()';
      return [`        ${forms}) ${reply}; return ;;`];
    });
    const all = words(flags.flatMap(([name, f]) => [`--${name}`, ...(f.short ? [`-${f.short}`] : [])]));
    return [
      `    ${spec.name})`,
      ...(valued.length ? ['      case "$prev" in', ...valued, '      esac'] : []),
      `      COMPREPLY=($(compgen -W "${all}" -- "$cur")) ;;`,
    ].join('\n');
  });
  return `# svcmap completion for bash (svcmap completion bash); generated from svcmap's own flag declarations.
_svcmap() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${words(names)}" -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
    help)
      [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "${words(specs.map((s) => s.name))}" -- "$cur")) ;;
${cases.join('\n')}
  esac
}
complete -F _svcmap svcmap
`;
}

export function completionScript(shell: (typeof SHELLS)[number], specs: readonly CommandSpec[]): string {
  const bash = bashScript(specs);
  return shell === 'bash'
    ? bash
    : `# svcmap completion for zsh: the bash completion, through zsh's bashcompinit.\nautoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n${bash}`;
}

/** `specs`: every command, handed in by commands.ts (which lists this one too). */
export function completion(argv: string[], out: (s: string) => void, specs: readonly CommandSpec[]): void {
  const { arg } = parseFlagsAndArg(completionCommand, argv);
  out(completionScript(arg, specs));
}
