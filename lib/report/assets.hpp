// The report pages' HTML, CSS and JavaScript (lib/report/assets/), compiled
// into the library (CMakeLists.txt embeds them with ks_embed_files).
#pragma once

#include <string_view>

namespace ks::report::assets {

extern const std::string_view page_shell;    // shell.html
extern const std::string_view report_page;   // page.html
extern const std::string_view report_css;    // report.css
extern const std::string_view report_js;     // report.js
extern const std::string_view compare_page;  // compare.html

}  // namespace ks::report::assets
