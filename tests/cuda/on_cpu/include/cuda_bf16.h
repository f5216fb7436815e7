// See cuda_runtime.h beside this file: the CPU build of the CUDA kernels.
#pragma once

#include "cuda_runtime.h"
