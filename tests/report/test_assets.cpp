// The report pages' assets as ks_embed_files (cmake/KsEmbed.cmake) compiles
// them in: byte for byte the files of lib/report/assets/.
#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <utility>

#include "report/assets.hpp"
#include "support/test_util.hpp"
#include "util/fs.hpp"

namespace assets = ks::report::assets;

TEST_CASE("report assets: the embedded text is each file's bytes") {
  const auto dir = ks::test::source_dir() / "lib" / "report" / "assets";
  const std::pair<std::string_view, const char*> cases[] = {{assets::page_shell, "shell.html"},
                                                            {assets::report_page, "page.html"},
                                                            {assets::report_css, "report.css"},
                                                            {assets::report_js, "report.js"},
                                                            {assets::compare_page, "compare.html"}};
  for (const auto& [embedded, file] : cases) {
    CAPTURE(file);
    const std::string on_disk = ks::util::read_file(dir / file);
    CHECK(!embedded.empty());
    CHECK(embedded.size() == on_disk.size());
    CHECK(embedded == on_disk);
  }
}
