#include <doctest/doctest.h>

#include "util/text.hpp"

using namespace ks::util;

TEST_CASE("text: terminal_safe removes what a terminal would act on") {
  // A candidate's log that paints "crashed" over with a fake "passed".
  CHECK(terminal_safe("crashed\r\x1b[2K\x1b[32mpassed\x1b[0m\n") == "crashedpassed\n");
  CHECK(terminal_safe("a\bb\x07" "c\x7f" "d") == "abcd");
  CHECK(terminal_safe("keep\ttabs\nand lines") == "keep\ttabs\nand lines");
  // OSC (a title or a hyperlink) ended by BEL or ST, and one never ended.
  CHECK(terminal_safe("x\x1b]0;owned\x07y\x1b]8;;http://e\x1b\\z") == "xyz");
  CHECK(terminal_safe("x\x1b]0;runs to the end") == "x");
  // Other ESC forms and their C1 spellings (U+009B is CSI).
  CHECK(terminal_safe("a\x1b" "cb\x1b(Bc") == "abc");
  CHECK(terminal_safe("a\xC2\x9B" "31mb\xC2\x85" "c") == "abc");
  CHECK(terminal_safe("trailing escape\x1b") == "trailing escape");
  // Invalid UTF-8 is shown as U+FFFD; valid text stays as it is.
  CHECK(terminal_safe("caf\xE9") == "caf\xEF\xBF\xBD");
  CHECK(terminal_safe("\xE2\x80\x98ok\xE2\x80\x99 \xF0\x9F\x98\x80") == "\xE2\x80\x98ok\xE2\x80\x99 \xF0\x9F\x98\x80");
}

TEST_CASE("text: UTF-8 validity") {
  CHECK(is_valid_utf8(""));
  CHECK(is_valid_utf8("plain \xE2\x82\xAC"));
  CHECK_FALSE(is_valid_utf8("cut \xE2\x82"));
  CHECK_FALSE(is_valid_utf8("overlong \xC0\xAF"));
  CHECK_FALSE(is_valid_utf8("surrogate \xED\xA0\x80"));
}

TEST_CASE("text: base64 round-trips every byte and refuses what is not base64") {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (std::size_t n : {0, 1, 2, 3, 4, 5, 256}) {
    std::string in = all.substr(0, n), out;
    REQUIRE(base64_decode(base64_encode(in), out));
    CHECK(out == in);
  }
  CHECK(base64_encode("foob") == "Zm9vYg==");
  std::string out;
  CHECK_FALSE(base64_decode("Zm9vYg=", out));
  CHECK_FALSE(base64_decode("Zm=vYg==", out));
  CHECK_FALSE(base64_decode("Zm9v\nYg==", out));
}

TEST_CASE("edit_distance and closest_names: did-you-mean for names") {
  CHECK(ks::util::edit_distance("", "") == 0);
  CHECK(ks::util::edit_distance("abc", "") == 3);
  CHECK(ks::util::edit_distance("kitten", "sitting") == 3);
  const std::vector<std::string> known{"gpumode/trimul", "gpumode/trimul-upstream", "examples/matmul",
                                       "examples/softmax", "kernelbench/level1/19_ReLU"};
  CHECK(ks::util::closest_names("examples/matmal", known) == std::vector<std::string>{"examples/matmul"});
  // The last component alone finds the whole name, never the shortened one.
  CHECK(ks::util::closest_names("softmx", known) == std::vector<std::string>{"examples/softmax"});
  const auto trimul = ks::util::closest_names("trimul", known);
  REQUIRE(trimul.size() == 2);
  CHECK(trimul[0] == "gpumode/trimul");
  CHECK(ks::util::closest_names("no/such-task", known).empty());
  CHECK(ks::util::closest_names("", known).empty());
  CHECK(ks::util::closest_names("matmul", known, 0).empty());
}
