/* Internal to src/rpc/: grpc_byte_buffer <-> flat bytes with a size cap, and protobuf-c packing. */
#ifndef GS_RPC_WIRE_H
#define GS_RPC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

/* Copies a received message into one malloc'd block (*out, caller frees; never NULL on success,
 * even for 0 bytes). Returns 0, GS_ETOOBIG when longer than max, GS_EPARSE for an unreadable
 * (e.g. compressed and undecodable) buffer, or GS_ENOMEM. */
int rpc_wire_read(grpc_byte_buffer *bb, size_t max, uint8_t **out, size_t *len);
/* A byte buffer holding a copy of p[0..len). Returns NULL on ENOMEM; release with
 * grpc_byte_buffer_destroy. */
grpc_byte_buffer *rpc_wire_buffer(const void *p, size_t len);
/* Packs a protobuf-c message into a malloc'd block (caller frees). Returns NULL on ENOMEM. */
uint8_t *rpc_wire_pack(const ProtobufCMessage *m, size_t *len);

#endif
