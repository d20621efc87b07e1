#pragma once
// How a model is trained, separate from what the model is (docs/model-format.md).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace actmem {

enum class DType { float32, bfloat16 };
enum class Framework { pytorch, jax };
enum class Optimizer { adam, sgd };
// Whose torch.autocast lists a PyTorch bfloat16 run follows: "cuda" (a GPU,
// ROCm's included: LayerNorm runs in float32, so the latents are float32)
// or "cpu" (LayerNorm in bfloat16). docs/pytorch-memory-profile.md.
enum class Autocast { cuda, cpu };

struct RunOptions {
  DType dtype = DType::bfloat16;  // activations; parameters stay float32 masters
  std::int64_t batch = 1;         // samples per device
  std::int64_t rollout = 1;       // autoregressive steps trained through
  Framework framework = Framework::jax;
  Optimizer optimizer = Optimizer::adam;  // adam: two float32 moments; sgd: none
  Autocast autocast = Autocast::cuda;     // PyTorch bfloat16 only; ignored otherwise
  // Memory rules the run does without (actmem/cost/memory_rules.h, by
  // name): what-if runs and the rules' own tests. Sorted, no repeats
  // (add_rule_off keeps it so); checked against the rules by the cost
  // layer (CostGraph::build), not here.
  std::vector<std::string> rules_off;
  void add_rule_off(const std::string& name);
};

// torch.autocast to bfloat16: a PyTorch run in bfloat16.
bool autocasts(const RunOptions& run);

// Bytes per element of an activation of this dtype.
int element_bytes(DType dtype);

std::string to_string(DType dtype);
std::string to_string(Framework framework);
std::string to_string(Optimizer optimizer);
std::string to_string(Autocast autocast);

// Parsers for the command line and plan files; `source` names the option
// or field in errors ("--dtype: expected float32 or bfloat16, got fp8").
DType parse_dtype(std::string_view text, const std::string& source);
Framework parse_framework(std::string_view text, const std::string& source);
Optimizer parse_optimizer(std::string_view text, const std::string& source);
Autocast parse_autocast(std::string_view text, const std::string& source);

// Validates batch (1..65536) and rollout (1..1024), and that rules_off is
// sorted without repeats (at most kMaxRulesOff); throws InputError.
void validate(const RunOptions& run);

nlohmann::json to_json(const RunOptions& run);
RunOptions run_options_from_json(const nlohmann::json& object, const std::string& source, const std::string& pointer);

}  // namespace actmem
