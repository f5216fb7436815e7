// Paths into tests/data (a byte-for-byte copy of the reference goldens).
#pragma once

#include <string>

namespace stepmix::test {

inline std::string data_path(const std::string& rel) { return std::string(STEPMIX_TEST_DATA) + "/" + rel; }
inline std::string golden_path(const std::string& rel) { return data_path("golden/cosmos3-tiny/" + rel); }

}  // namespace stepmix::test
