/* A workload's owner guessed from its pod name (Kubernetes' naming of controller pods), for when
 * the Kubernetes API is not asked (owners.c reads the real one). */
#ifndef GS_RS_OWNER_GUESS_H
#define GS_RS_OWNER_GUESS_H

#include <stddef.h>

#include "rightsize/model.h"

/* Guesses a pod's owner from its name: "<deploy>-<rs hash>-<5>" -> deploy, "<sts>-<N>" -> sts,
 * "<ds or job>-<5>" -> name. Writes the owner into out and the kind of guess into *src. */
void rs_owner_from_pod(const char *pod, char *out, size_t outlen, enum rs_owner_source *src);

#endif
