// The CPU build of src/kernels/cuda/attention_reference.cu (see include/cuda_runtime.h).
#include "kernels/cuda/attention_reference.cu"
