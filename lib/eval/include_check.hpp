// The check every candidate's sources pass before a compiler sees them: no
// preprocessor or assembler directive may name a file outside the
// candidate's own sources and the toolkit's headers. It gives the model a
// message it can act on; the sandbox is what enforces (an include check can
// be fooled, a mount namespace cannot).
#pragma once

#include <string>
#include <vector>

#include "ksearch/types.hpp"

namespace ks::eval {

// "" when every directive is acceptable; otherwise what is refused and why,
// e.g. `kernel.cu:3: #include "/etc/passwd" names an absolute path; ...`.
//
// Refused: #include, #include_next, #import, #embed, __has_include and
// `#pragma GCC dependency` with an absolute path, a `..` component or a
// macro instead of a literal name; and the assembler's .incbin and .include
// anywhere in the text. Relative names without `..` are fine: they resolve
// among the candidate's files or in the compiler's include folders only.
std::string check_includes(const std::vector<SourceFile>& files);

}  // namespace ks::eval
