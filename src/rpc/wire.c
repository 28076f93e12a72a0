/* grpc_byte_buffer <-> flat bytes with a size cap, and protobuf-c packing, shared by server and
 * client. */
#include "rpc/wire.h"

#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>

#include "core/err.h"

int rpc_wire_read(grpc_byte_buffer *bb, size_t max, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  if (grpc_byte_buffer_length(bb) > max)
    return GS_ETOOBIG;
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb))
    return GS_EPARSE;
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  size_t n = GRPC_SLICE_LENGTH(s);
  if (n > max) {
    grpc_slice_unref(s);
    return GS_ETOOBIG;
  }
  uint8_t *p = malloc(n ? n : 1);
  if (!p) {
    grpc_slice_unref(s);
    return GS_ENOMEM;
  }
  if (n)
    memcpy(p, GRPC_SLICE_START_PTR(s), n);
  grpc_slice_unref(s);
  *out = p;
  *len = n;
  return 0;
}

grpc_byte_buffer *rpc_wire_buffer(const void *p, size_t len) {
  grpc_slice s = grpc_slice_from_copied_buffer(len ? p : "", len);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

uint8_t *rpc_wire_pack(const ProtobufCMessage *m, size_t *len) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *p = malloc(n ? n : 1);
  if (!p)
    return NULL;
  *len = protobuf_c_message_pack(m, p);
  return p;
}
