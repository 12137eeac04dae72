// What the report's HTML pages share (the run report, the comparison): text
// escaped for HTML, JSON safe inside a <script> block, the page templates'
// {{NAME}} placeholders, and the embedded asset files.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/json.hpp"

namespace ks::report {

// Text for HTML content and attribute values: & < > " ' escaped.
std::string esc(std::string_view s);

// JSON inside <script type="application/json">: '<', '>' and '&' can only
// occur inside JSON strings, where \u escapes mean the same, so no "</script>"
// or "<!--" can end the block early; U+2028/2029 are escaped for old parsers.
std::string script_json(const Json& j);

// Fills {{NAME}} placeholders in one pass: inserted text is never scanned
// again, so data that happens to contain "{{" stays as it is. An unknown
// placeholder is left as it is.
std::string fill(const std::string& page, const std::vector<std::pair<std::string, std::string>>& values);

// A whole page: the shell every report page shares (lib/report/assets/
// shell.html: the head with the report's CSS, the title as heading) around
// `body`. The title is plain text (escaped here); the body is HTML.
std::string html_page(std::string_view title, const std::string& body);

// "1.234 ms" (four significant digits); "-" for a value that is not > 0.
std::string ms(double v);

}  // namespace ks::report
