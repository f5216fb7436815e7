// The CPU build of src/kernels/cuda/pointwise.cu (see include/cuda_runtime.h).
#include "kernels/cuda/pointwise.cu"
