// The CPU build of src/kernels/cuda/denoise_loop.cu (see include/cuda_runtime.h).
#include "kernels/cuda/denoise_loop.cu"
