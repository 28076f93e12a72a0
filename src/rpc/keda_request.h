/* A decoded ExternalScaler ScaledObjectRef as the scaler policy's plain request (the server's
 * handlers and the protobuf fuzz target share it). */
#ifndef GS_RPC_KEDA_REQUEST_H
#define GS_RPC_KEDA_REQUEST_H

#include "externalscaler.pb-c.h"
#include "keda/scaler.h"

/* Points r at ref's strings (ref stays owned by the caller and must outlive r); a NULL ref, name,
 * namespace, key or value reads as "". *kv is the metadata array (caller frees, also when
 * empty). Returns 0 or GS_ENOMEM (*kv NULL). */
int rpc_keda_request(const Externalscaler__ScaledObjectRef *ref, struct kv **kv,
                     struct scaler_request *r);

#endif
