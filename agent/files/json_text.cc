#include "agent/files/json_text.h"

namespace ringside::agent {

std::string JsonText(const nlohmann::json& json) {
  return json.dump(2, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ringside::agent
