// The element type of the activations a Cosmos3 forward hands to its Linears
// (shared spec README: the latent state stays FP32 between steps; the
// transformer input is rounded to the activation dtype).
#pragma once

namespace stepmix {

//  F32:  every activation is float32; Linears run their FP32-activation
//        arithmetic. Matches the float32 goldens (the default).
//  BF16: the transformer input and every Linear input and output are bf16 and
//        Linears run their BF16-activation arithmetic (W8A16 with the bf16
//        weight Ŵ, W8A8 quantizing from bf16), as the reference model runs in
//        production. The residual stream, norms, rotary and softmax stay
//        float32; see docs/performance.md "Activation dtype".
enum class ActivationDType { F32, BF16 };

inline const char* activation_dtype_name(ActivationDType dtype) {
  return dtype == ActivationDType::BF16 ? "bf16" : "f32";
}

}  // namespace stepmix
