// The CPU build of src/kernels/cuda/vae.cu (see include/cuda_runtime.h).
#include "kernels/cuda/vae.cu"
