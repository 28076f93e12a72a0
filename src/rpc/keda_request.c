/* ScaledObjectRef -> struct scaler_request: the one conversion between KEDA's message and the
 * policy. */
#include "rpc/keda_request.h"

#include <stdlib.h>

#include "core/err.h"

int rpc_keda_request(const Externalscaler__ScaledObjectRef *ref, struct kv **kv,
                     struct scaler_request *r) {
  static const char empty[] = "";
  size_t n = ref ? ref->n_scalermetadata : 0;
  *kv = calloc(n ? n : 1, sizeof(**kv));
  if (!*kv)
    return GS_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    const Externalscaler__ScaledObjectRef__ScalerMetadataEntry *e = ref->scalermetadata[i];
    (*kv)[i].key = e && e->key ? e->key : empty;
    (*kv)[i].value = e && e->value ? e->value : empty;
  }
  r->name = ref && ref->name ? ref->name : empty;
  r->ns = ref && ref->namespace_ ? ref->namespace_ : empty;
  r->md = *kv;
  r->nmd = n;
  return 0;
}
