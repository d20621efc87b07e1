#pragma once
// How a model is trained, separate from what the model is (docs/model-format.md).

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace actmem {

enum class DType { float32, bfloat16 };
enum class Framework { pytorch, jax };
enum class Optimizer { adam, sgd };

struct RunOptions {
  DType dtype = DType::bfloat16;  // activations; parameters stay float32 masters
  std::int64_t batch = 1;         // samples per device
  std::int64_t rollout = 1;       // autoregressive steps trained through
  Framework framework = Framework::jax;
  Optimizer optimizer = Optimizer::adam;  // adam: two float32 moments; sgd: none
};

// Bytes per element of an activation of this dtype.
int element_bytes(DType dtype);

std::string to_string(DType dtype);
std::string to_string(Framework framework);
std::string to_string(Optimizer optimizer);

// Parsers for the command line and plan files; `source` names the option
// or field in errors ("--dtype: expected float32 or bfloat16, got fp8").
DType parse_dtype(std::string_view text, const std::string& source);
Framework parse_framework(std::string_view text, const std::string& source);
Optimizer parse_optimizer(std::string_view text, const std::string& source);

// Validates batch (1..65536) and rollout (1..1024); throws InputError.
void validate(const RunOptions& run);

nlohmann::json to_json(const RunOptions& run);
RunOptions run_options_from_json(const nlohmann::json& object, const std::string& source, const std::string& pointer);

}  // namespace actmem
