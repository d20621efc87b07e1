#pragma once
// Accelerators: how much memory a training step may use and how fast it runs.
//
// The built-in catalog (models/devices.json) lists each device with its
// memory, a default runtime reserve (memory the framework cannot give to
// tensors: runtime context, library workspaces, fragmentation), peak dense
// FLOP/s and memory bandwidth, and the source of each figure. A user can
// also describe a device in a JSON file of the same shape, or give only a
// memory size ("--memory 24GiB"). Memory and reserve lie within
// kMaxDeviceBytes, FLOP/s and bandwidth within [kMinDeviceRate,
// kMaxDeviceRate] (actmem/util/limits.h), so every time is finite.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace actmem {

struct Device {
  std::string id;    // lower-case catalog id, e.g. "tpu-v4"
  std::string name;  // for people
  std::int64_t memory_bytes = 0;
  std::int64_t reserve_bytes = 0;
  double peak_bf16_flops = 0;  // 0: no native bf16; peak_fp32_flops is used
  double peak_fp32_flops = 0;
  double bandwidth_bytes_per_s = 0;
  std::string source;

  // memory_bytes − reserve_bytes: what a training step may use.
  std::int64_t usable_bytes() const { return memory_bytes - reserve_bytes; }
};

// The built-in catalog, in its order.
const std::vector<Device>& device_catalog();

// A catalog id, or else a JSON device file (one object with the fields of
// a catalog entry). An unknown id that is not a file suggests the closest.
Device load_device(std::string_view id_or_path);

// A device known only by its memory (1 B to kMaxDeviceBytes, else
// InputError("--memory", …)): no reserve, the FLOP/s and bandwidth of an
// A100 so that times stay meaningful.
Device device_with_memory(std::int64_t memory_bytes);

// `budget_bytes` if it lies within 1 B and the device's memory; otherwise
// InputError(source, "", …): a budget above the memory would answer "fits"
// for a step the device cannot hold.
std::int64_t budget_within(const Device& device, std::int64_t budget_bytes, const std::string& source);

Device device_from_json(const nlohmann::json& object, const std::string& source, const std::string& pointer);
nlohmann::json to_json(const Device& device);

}  // namespace actmem
