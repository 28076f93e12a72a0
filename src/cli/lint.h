/* `gpuscale lint FILE.yaml...`: checks the gpuscale triggers of KEDA ScaledObjects offline. */
#ifndef GS_LINT_H
#define GS_LINT_H

/* Runs the command; argv[0] is "lint". Returns the process exit status: 0 when no file has an
 * error (warnings allowed), 1 when one has (or a file cannot be read or parsed), 2 on a usage
 * error. */
int lint_main(int argc, char **argv);

#endif
