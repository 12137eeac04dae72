// Element conversions and the element-wise output comparison shared by the
// backends (the host compares in place; a GPU backend may download and call
// the same code), plus the words the flow uses to describe a mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/elements.hpp"
#include "eval/backend.hpp"
#include "ksearch/types.hpp"

namespace ks::eval {

// Element conversions live in core (tasks' CPU references use them too).
using core::bf16_to_float;
using core::double_to_bf16;
using core::double_to_f16;
using core::double_to_f8e4m3;
using core::double_to_f8e5m2;
using core::f16_to_float;
using core::f8e4m3_to_float;
using core::f8e5m2_to_float;
using core::kInputConversionRules;
using core::load_element;
using core::store_element;

// True when every byte of the element is 0xFF: the poison pattern (a NaN for
// floating types, -1 or the maximum for integers).
bool is_poison_element(const void* data, DType dtype, std::size_t index);

// Whether a finite pair matches under the tolerance's rule; `diff` is |out - ref|.
bool element_matches(double diff, double out, double ref, const Tolerance& tol);

// The rule in words, for failure messages: "atol=0.01 + rtol=0.01*|ref|".
std::string describe_tolerance(const Tolerance& tol);

// Compares out with ref element by element:
//   element_matches (the tolerance's rule) for finite pairs;
//   a NaN or infinity in the output is accepted only under
//   NanPolicy::must_match and only where the reference has the same value
//   (NaN with NaN, +inf with +inf); otherwise it counts as a mismatch and in
//   `nonfinite_outputs`;
//   a finite output where the reference is NaN or infinite counts as a
//   mismatch and in `nonfinite_reference`.
// An output element holding the poison pattern where the reference does not
// counts as a mismatch and as `poisoned` (never written).
CompareStats compare_elements(const void* out, const void* ref, DType dtype, std::size_t count,
                              const Tolerance& tol);

// "C[3, 17]" from a flat index and the tensor's evaluated shape.
std::string format_index(const std::string& tensor, const std::vector<std::int64_t>& shape,
                         std::int64_t flat);

// A value as a model should read it: "1.25", "nan", "-inf", "poison (never written)".
std::string format_value(double v);

}  // namespace ks::eval
