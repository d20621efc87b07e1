#pragma once
// What every harness checks of what actmem answered: an InputError's
// message is one printable line; anything else that escapes a harness is a
// finding (libFuzzer reports the uncaught exception).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actmem/cost/cost_graph.h"
#include "actmem/util/error.h"

#include <nlohmann/json.hpp>

namespace actmem::fuzz {

// The fuzzer's bytes as text.
inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Aborts (a finding) unless `condition` holds.
void expect(bool condition, const char* what);

// Checks a message: not empty, one printable line of at most
// kMaxMessageBytes (one_line() leaves it as it is).
void expect_printable(std::string_view message);

// Checks an InputError's what() so.
void expect_clear(const InputError& error);

// A small model (tests/test_models.h's) whose steps simulate in about a
// millisecond; rollout 2, so that the first and last step classes differ.
const CostGraph& tiny_graph();

// True for a model document whose missing counts would be computed from a
// fine geometry (resolution below 2°, mesh level above 5). Those take up to
// seconds by design (docs/reliability.md); the harnesses skip them to keep
// their speed, and tests/geometry_test.cpp covers the geometry.
bool costly_geometry(const nlohmann::json& model);

}  // namespace actmem::fuzz
