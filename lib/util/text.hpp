// Text that came from elsewhere (a model, a candidate, a run folder someone
// sent): UTF-8 validity, and the form that is safe to print on a terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ks::util {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not
// one (a lone continuation byte, a truncated or overlong sequence, a
// surrogate, a code point above U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i);
bool is_valid_utf8(std::string_view s);
// Appends the UTF-8 sequence starting at s[i] to `out`, or U+FFFD when none
// starts there; returns how many bytes of `s` it took (at least 1).
std::size_t append_utf8_or_replacement(std::string& out, std::string_view s, std::size_t i);

// `text` without what a terminal would act on instead of showing: escape
// sequences (CSI, OSC, DCS and the other ESC forms, whole), C0 controls but
// newline and tab (CR and backspace included, so nothing is overwritten on
// screen), DEL and C1 controls. Invalid UTF-8 bytes become U+FFFD.
std::string terminal_safe(std::string_view text);

// Standard base64 with padding, for bytes that must pass through JSON
// unchanged (JSON strings hold only valid UTF-8). decode returns false on
// anything but canonical base64.
std::string base64_encode(std::string_view bytes);
bool base64_decode(std::string_view text, std::string& out);

// The edit (Levenshtein) distance: insertions, deletions and substitutions
// of single bytes that turn `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The names among `known` that `typed` was probably meant to be, closest
// first, at most `max` of them: within a few edits of the whole name or of
// its last path component ("matmal" -> "examples/matmul"), or holding `typed`
// as a part of three characters or more ("trimul" -> "gpumode/trimul").
// Always whole names from `known`, never a shortened one.
std::vector<std::string> closest_names(std::string_view typed, const std::vector<std::string>& known,
                                       std::size_t max = 3);

}  // namespace ks::util
