#include <doctest/doctest.h>

#include "util/sha256.hpp"

using ks::util::sha256_hex;

TEST_CASE("sha256: FIPS 180-4 test vectors") {
  CHECK(ks::util::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(ks::util::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(ks::util::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  CHECK(ks::util::sha256_hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: incremental updates equal one-shot") {
  ks::util::Sha256 h;
  h.update("ab");
  h.update("c");
  CHECK(h.hex_digest() == ks::util::sha256_hex("abc"));
}
