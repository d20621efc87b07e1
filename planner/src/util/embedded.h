#pragma once
// Text of the JSON files compiled into the library (cmake/embed_files.cmake):
// the model presets ("graphcast.json", …) and "devices.json".

#include <optional>
#include <string_view>

namespace actmem::detail {

std::optional<std::string_view> embedded_file(std::string_view name);

}  // namespace actmem::detail
