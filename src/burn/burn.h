/* `gpuscale burn`: drives one GPU to a target utilisation and memory, steady or following a
 * pattern, through the CUDA driver API loaded at run time. */
#ifndef GS_BURN_H
#define GS_BURN_H

/* Exit statuses (docs/burn.md has the table). */
enum burn_exit {
  BURN_EXIT_OK = 0,        /* --duration reached, or SIGTERM/SIGINT: the GPU was freed */
  BURN_EXIT_ERROR = 1,     /* any other CUDA or system failure */
  BURN_EXIT_USAGE = 2,     /* a bad option */
  BURN_EXIT_NO_DRIVER = 3, /* libcuda cannot be loaded, or the driver does not initialise */
  BURN_EXIT_NO_GPU = 4,    /* no CUDA GPU, no GPU --gpu N, or the GPU is unavailable */
  BURN_EXIT_NO_MEMORY = 5, /* --memory does not fit, or an allocation failed */
  BURN_EXIT_KERNEL = 6,    /* the kernel did not load, or a launch or a kernel failed */
  BURN_EXIT_NO_NVML = 7,   /* --closed-loop without NVML readings of the GPU */
};

/* Runs `gpuscale burn` with argv[0] = "burn". Returns a burn_exit status. */
int burn_main(int argc, char **argv);

#endif
