/* The burn kernel, as CUDA C. It is compiled once to PTX by gen-ptx.sh (clang, no CUDA toolkit
 * needed) and the PTX is committed in spin_ptx.h, so building gpuscale needs no compiler for GPUs.
 *
 * gs_burn(out, iterations): every thread runs `iterations` rounds of a dependent multiply-add on
 * a register, then stores the result in out[thread], so the loop has an effect and cannot be
 * optimised away. Its run time is proportional to iterations, which is what burn calibrates. */
extern "C" __attribute__((global)) void gs_burn(float *out, unsigned long long iterations) {
  unsigned i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
               __nvvm_read_ptx_sreg_tid_x();
  float f = (float)i;
  for (unsigned long long k = 0; k < iterations; k++)
    f = f * 0.99999988f + 1.0f;
  out[i] = f;
}
