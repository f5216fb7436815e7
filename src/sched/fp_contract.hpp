// Included first by every scheduler source file whose results must match the
// reference bit for bit: a fused multiply-add rounds once where the reference
// rounds twice, which can move a truncated timestep or a float32 sigma.
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
