#include "actmem/model/device.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/suggest.h"
#include "actmem/util/units.h"
#include "util/embedded.h"
#include "util/json_fields.h"

namespace actmem {
namespace {

const std::vector<std::string> kDeviceFields{
    "id",    "name", "memory_bytes", "reserve_bytes", "peak_bf16_flops", "peak_fp32_flops", "bandwidth_bytes_per_s",
    "source"};

std::vector<Device> parse_catalog() {
  const auto text = detail::embedded_file("devices.json");
  if (!text) throw std::logic_error("devices.json is not embedded");
  const nlohmann::json document = detail::parse_json(*text, "devices.json");
  std::vector<Device> devices;
  const nlohmann::json& list = document.at("devices");
  for (std::size_t i = 0; i < list.size(); ++i)
    devices.push_back(device_from_json(list[i], "devices.json", fmt::format("/devices/{}", i)));
  return devices;
}

}  // namespace

Device device_from_json(const nlohmann::json& object, const std::string& source, const std::string& pointer) {
  const detail::FieldReader in(object, source, pointer);
  in.reject_unknown_fields(kDeviceFields);
  Device d;
  d.id = in.name("id");
  d.name = in.optional_name("name").value_or(d.id);
  d.memory_bytes = in.positive_int("memory_bytes", kMaxDeviceBytes);
  d.reserve_bytes = in.has("reserve_bytes") ? in.non_negative_int("reserve_bytes", kMaxDeviceBytes) : 0;
  if (d.reserve_bytes >= d.memory_bytes)
    in.fail("reserve_bytes",
            fmt::format("expected less than memory_bytes ({}), got {}", d.memory_bytes, d.reserve_bytes));
  if (in.has("peak_bf16_flops") && !in.value("peak_bf16_flops").is_null())
    d.peak_bf16_flops = in.number_in("peak_bf16_flops", kMinDeviceRate, kMaxDeviceRate);
  d.peak_fp32_flops = in.number_in("peak_fp32_flops", kMinDeviceRate, kMaxDeviceRate);
  d.bandwidth_bytes_per_s = in.number_in("bandwidth_bytes_per_s", kMinDeviceRate, kMaxDeviceRate);
  d.source = in.optional_string("source").value_or("");
  return d;
}

const std::vector<Device>& device_catalog() {
  static const std::vector<Device> catalog = parse_catalog();
  return catalog;
}

Device load_device(std::string_view id_or_path) {
  const std::string id{id_or_path};
  std::vector<std::string> ids;
  for (const Device& d : device_catalog()) {
    if (d.id == id) return d;
    ids.push_back(d.id);
  }
  if (!detail::names_regular_file(id))
    throw InputError::argument(
        "device", fmt::format("'{}' is neither a catalog device nor a readable file{}; see 'actmem devices'", id,
                              did_you_mean(id, ids)));
  return device_from_json(detail::read_json_file(id), id, "");
}

std::int64_t budget_within(const Device& device, std::int64_t budget_bytes, const std::string& source) {
  if (budget_bytes < 1 || budget_bytes > device.memory_bytes)
    throw InputError(source, "",
                     fmt::format("expected a budget from 1 B to the memory of {} ({}), got {}; a budget can only "
                                 "lower the memory a plan may use (describe a device with more memory instead)",
                                 device.id, format_bytes(device.memory_bytes), format_bytes(budget_bytes)));
  return budget_bytes;
}

Device device_with_memory(std::int64_t memory_bytes) {
  Device d = *std::find_if(device_catalog().begin(), device_catalog().end(),
                           [](const Device& c) { return c.id == "a100-80gb"; });
  d.id = "custom";
  d.name = "custom device (memory only; A100 speed assumed)";
  if (memory_bytes < 1 || memory_bytes > kMaxDeviceBytes)
    throw InputError::argument(
        "memory", fmt::format("expected a memory size from 1 B to 2^52 bytes (4 PiB), got {}", memory_bytes));
  d.memory_bytes = memory_bytes;
  d.reserve_bytes = 0;
  d.source = "memory as given; no reserve; FLOP/s and bandwidth of a100-80gb assumed";
  return d;
}

nlohmann::json to_json(const Device& d) {
  return nlohmann::json{
      {"id", d.id},
      {"name", d.name},
      {"memory_bytes", d.memory_bytes},
      {"reserve_bytes", d.reserve_bytes},
      {"peak_bf16_flops", d.peak_bf16_flops > 0 ? nlohmann::json(d.peak_bf16_flops) : nlohmann::json()},
      {"peak_fp32_flops", d.peak_fp32_flops},
      {"bandwidth_bytes_per_s", d.bandwidth_bytes_per_s},
      {"source", d.source}};
}

}  // namespace actmem
