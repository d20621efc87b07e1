#pragma once
// XLA's list scheduler (docs/journal.md J16): the order XLA:TPU gives the
// instructions of a computation, over a graph of instructions and the
// buffers they define and read.
//
// The rules, as measured against XLA's own order with
// integrations/jax/list_scheduler.py (the same algorithm, run over the
// modules XLA prints): of the instructions whose operands are all scheduled,
// take the one of highest (bytes it frees − bytes it defines, number of
// users); among equals the one made ready first; when an instruction leaves a
// buffer with one unscheduled reader, the ready users of its operands are
// ranked anew and count as made ready then.
#include <cstdint>
#include <vector>

namespace actmem::detail {

class InstructionGraph {
 public:
  // A buffer of `bytes`. Without a defining instruction it is live when the
  // computation starts (an input); `live_out` ones outlive it.
  int add_buffer(std::int64_t bytes, bool live_out = false);
  void mark_live_out(int buffer) { buffers_[static_cast<std::size_t>(buffer)].live_out = true; }
  // An instruction that defines `defines` (new buffers, by add_buffer's
  // numbers) and reads `reads`. Its operands are the instructions that
  // define what it reads, and `after` (an instruction whose output it reads
  // through an alias: XLA's optimisation barrier, its tuple elements).
  // Reads through an alias list the buffer but not its definer.
  int add_instruction(std::vector<int> defines, std::vector<int> reads, std::vector<int> after = {},
                      std::vector<int> reads_via_alias = {});

  std::int64_t bytes(int buffer) const { return buffers_[static_cast<std::size_t>(buffer)].bytes; }

  // XLA's order (the rules above); instructions added in the order XLA
  // would create them, which settles ties.
  std::vector<int> schedule() const;

  // When each buffer lives while `order` runs, as positions in it: from the
  // instruction that defines it (an input: from the start) to its last
  // reader (a live-out one: to the end), both included.
  struct Lifetime {
    std::size_t begin = 0, end = 0;
  };
  std::vector<Lifetime> lifetimes(const std::vector<int>& order) const;
  // The bytes in use while each instruction of `order` runs, counting only
  // the buffers `counted` (all when empty) says.
  std::vector<std::int64_t> usage(const std::vector<int>& order, const std::vector<char>& counted = {}) const;

 private:
  struct Buffer {
    std::int64_t bytes = 0;
    bool live_out = false;
    int definer = -1;
  };
  struct Instruction {
    std::vector<int> defines, reads, operands;
  };
  std::vector<int> unscheduled_uses() const;

  std::vector<Buffer> buffers_;
  std::vector<Instruction> instructions_;
};

}  // namespace actmem::detail
