/* The one trigger the docs recommend for each inference engine, and the profiles they advise
 * against for it. `agent --help`, `gpuscale lint`, the README, docs/engines.md, the chart's NOTES
 * and examples/README.md all follow this table (tests/docs/test_advice.py holds them to it). */
#ifndef GS_ADVICE_H
#define GS_ADVICE_H

#include <stddef.h>
#include <stdio.h>

#define ADVICE_AGAINST_MAX 2

struct engine_advice {
  const char *engine;  /* the gpuscale.io/engine annotation value: "vllm" */
  const char *label;   /* as the docs name it: "vLLM" */
  const char *profile; /* the recommended profile: "vllm-in-flight" */
  const char *keys;    /* the trigger keys it needs besides scalerAddress, ", "-separated */
  /* a second trigger beside it, in the same ScaledObject (NULL: none): the HPA takes the larger */
  const char *beside;
  /* profiles advised against for this engine (NULL-terminated), each with why in a few words */
  const char *against[ADVICE_AGAINST_MAX + 1];
  const char *why[ADVICE_AGAINST_MAX + 1];
};

/* The table, one row per engine, and its length. */
extern const struct engine_advice engine_advice[];
extern const size_t engine_advice_count;

/* The row whose recommended or advised-against profile is `profile`, or NULL. *why is set to why
 * the profile is advised against for that engine, or NULL when it is the recommended one. */
const struct engine_advice *advice_for_profile(const char *profile, const char **why);

/* Prints the "Recommended trigger per engine" block of `agent --help`. */
void advice_print(FILE *f);

#endif
