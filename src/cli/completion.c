/* Shell completion for bash and zsh, generated from the command list and read from --help. */
#include "cli/completion.h"

#include <stdio.h>
#include <string.h>

/* Flags come from `gpuscale CMD --help` (config_help's "  -x, --name METAVAR" lines), and after a
 * flag whose help says "[one of a|b|c", those values; anything else completes file names. */
static const char bash_body[] =
    "_gpuscale() {\n"
    "  local cur prev cmd opts vals pat\n"
    "  cur=${COMP_WORDS[COMP_CWORD]}\n"
    "  prev=${COMP_WORDS[COMP_CWORD-1]}\n"
    "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
    "    COMPREPLY=($(compgen -W \"$_gpuscale_commands\" -- \"$cur\"))\n"
    "    return\n"
    "  fi\n"
    "  cmd=${COMP_WORDS[1]}\n"
    "  if [ \"$cmd\" = completion ]; then\n"
    "    COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\"))\n"
    "    return\n"
    "  fi\n"
    "  case \"$prev\" in\n"
    "    -*)\n"
    "      if [[ \"$prev\" == --* ]]; then pat=\"^ *\\(-., \\)\\{0,1\\}$prev \"; else pat=\"^ "
    "*$prev, \"; fi\n"
    "      vals=$(\"${COMP_WORDS[0]}\" \"$cmd\" --help 2>/dev/null |\n"
    "        sed -n \"/$pat/{n;s/.*\\[one of \\([^];]*\\).*/\\1/p;}\" | tr '|' ' ')\n"
    "      if [ -n \"$vals\" ]; then\n"
    "        COMPREPLY=($(compgen -W \"$vals\" -- \"$cur\"))\n"
    "        return\n"
    "      fi ;;\n"
    "  esac\n"
    "  if [[ \"$cur\" == -* ]]; then\n"
    "    opts=$(\"${COMP_WORDS[0]}\" \"$cmd\" --help 2>/dev/null | grep -oE -- '--[a-z0-9-]+' |\n"
    "      sort -u)\n"
    "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
    "    return\n"
    "  fi\n"
    "  COMPREPLY=($(compgen -f -- \"$cur\"))\n"
    "}\n"
    "complete -o filenames -F _gpuscale gpuscale\n";

int completion_main(int argc, char **argv, const char *commands) {
  const char *shell = argc == 2 ? argv[1] : NULL;
  if (argc == 2 && (!strcmp(shell, "--help") || !strcmp(shell, "-h"))) {
    printf("Usage: gpuscale completion bash|zsh\n\n"
           "Prints the shell completion script for gpuscale's commands, flags and their values.\n"
           "  bash:  source <(gpuscale completion bash)      (or save it in\n"
           "         /etc/bash_completion.d/gpuscale)\n"
           "  zsh:   source <(gpuscale completion zsh)       (in ~/.zshrc)\n");
    return 0;
  }
  if (!shell || (strcmp(shell, "bash") && strcmp(shell, "zsh"))) {
    fprintf(stderr, "gpuscale completion: give the shell, bash or zsh (see --help)\n");
    return 2;
  }
  if (!strcmp(shell, "zsh"))
    printf("#compdef gpuscale\n"
           "# zsh runs the bash completion through bashcompinit.\n"
           "autoload -U +X compinit && compinit\n"
           "autoload -U +X bashcompinit && bashcompinit\n");
  else
    printf("# bash completion for gpuscale: source <(gpuscale completion bash)\n");
  printf("_gpuscale_commands=\"%s\"\n%s", commands, bash_body);
  return 0;
}
