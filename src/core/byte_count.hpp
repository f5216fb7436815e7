// A byte count for a message: "1.50 GiB", "2.50 MiB", "1024 bytes".
#pragma once

#include <cstddef>
#include <string>

namespace stepmix {

std::string format_bytes(std::size_t bytes);

}  // namespace stepmix
