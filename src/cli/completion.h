/* `gpuscale completion bash|zsh`: the shell completion script, on stdout. */
#ifndef GS_COMPLETION_H
#define GS_COMPLETION_H

/* Runs the command; argv[0] is "completion". commands is the space-separated list of gpuscale's
 * commands. The script completes the commands, then each command's flags and their enum values
 * from `gpuscale CMD --help` at completion time, so it never goes out of step with the option
 * tables. Returns 0, or 2 on a usage error. */
int completion_main(int argc, char **argv, const char *commands);

#endif
