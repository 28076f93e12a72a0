/* Prices MIG and time-slicing recommendations by what a packing frees: the recommended slices of
 * each group (GPUs of one model at one price) are packed onto cards, and a recommendation saves
 * its share of the whole GPUs that the packing frees (GPUs before - cards after). */
#ifndef GS_RS_SHAREPACK_H
#define GS_RS_SHAREPACK_H

#include <stddef.h>

#include "rightsize/model.h"

/* Packs r's RS_REC_MIG recommendations with NVIDIA's valid placements (rs_mig_pack) and its
 * RS_REC_TIMESLICE ones by ways (a card holds at most as many workloads as the smallest
 * share_ways among them), per group, and fills each one's pack_* fields, slots, mates and
 * savings_month (absent when the group has no price). Returns 0, GS_ENOMEM or GS_EINVAL. */
int rs_share_pack(struct rs_report *r);

/* Writes one line on where rec's workload goes: "card 2 of H100-80GB with ml/b (3g.40gb at
 * slice 4); frees 1/2 GPU; the group's 4 GPUs pack onto 2". "" for other kinds. */
void rs_pack_describe(const struct rs_report *r, const struct rs_rec *rec, char *out, size_t len);

#endif
