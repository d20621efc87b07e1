#include "actmem/error.h"

namespace actmem {
namespace {

std::string compose(const std::string& source, const std::string& field, const std::string& message) {
  std::string text;
  if (!source.empty()) text += source + ": ";
  if (!field.empty()) text += field + ": ";
  return text + message;
}

}  // namespace

InputError::InputError(std::string source, std::string field, std::string message)
    : std::runtime_error(compose(source, field, message)),
      source_(std::move(source)),
      field_(std::move(field)),
      message_(std::move(message)) {}

}  // namespace actmem
